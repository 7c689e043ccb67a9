"""Snapshots: the repository cut at `base_commit` that goes into the agent image, and its
deterministic tar.

A snapshot holds one branch, no remotes, no reflog, no stray objects, so `git log --all` inside
the agent image cannot show the fix. With history `full` it holds the history up to
`base_commit` (and the tags of that history); with `base-only` one commit whose tree is
`base_commit`'s tree.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Literal

from packager.errors import RepoSourceError
from packager.repos.git import Git, tail
from packager.repos.missing import (
    base_tree_objects,
    history_missing,
    listing,
    shallow_commits,
    shallow_note,
    source_label,
)
from packager.repos.objects import (
    BASE_ONLY_MESSAGE,
    INLINE_IDENTITY,
    INLINE_MESSAGE,
    INLINE_TIMESTAMP,
    base_only_commit_sha,
)

SHARED_PACK_FORMAT = "1"
"""Bump when what a shared pack holds changes: older ones are then never read again."""

History = Literal["full", "base-only"]
HISTORY_MODES: tuple[History, ...] = ("full", "base-only")


def write_snapshot_repo(
    dest: Path,
    *,
    git_dir: Path | None,
    base_commit: str,
    files: dict[str, bytes] | None = None,
    history: History = "full",
    log_path: Path | None = None,
    task: str = "<snapshot>",
    shared_packs: Path | None = None,
    tags: bool = True,
) -> str:
    """Make `dest` a repository cut at `base_commit`, tree checked out; return its HEAD sha.

    `files` (inline rows) makes one commit of those files with a fixed identity and date.
    Otherwise objects come from `git_dir`, which is only read:

    * `history="full"`: the history up to `base_commit`, with the source's tags that are part
      of it (`past_tags`: on an ancestor, made no later than the base); the returned HEAD is
      `base_commit`.
    * `history="base-only"`: ONE commit whose tree is exactly `base_commit`'s tree (only that
      tree's objects are copied), made with a fixed identity and date, so the same base always
      gives the same commit. Its sha is NOT `base_commit` and `base_commit` does not resolve in
      the snapshot: use the returned sha as the diff base and the expected HEAD.

    `tags=False` keeps none of the source's tags (a submodule's snapshot, `repos.submodules`).

    With `shared_packs` (a folder of the machine cache), a full history is written as two
    packs: the history up to the row's anchor (`_anchor`; written once into that folder for
    every row of the repository after it, and hard-linked in) and the row's own objects since.
    The snapshot holds exactly the same objects either way.

    Every git command and its stderr is appended to `log_path` when given. Any failure raises
    `RepoSourceError(task, field, …)` with git's command and stderr: a missing base commit names
    the sha and the source; missing objects of the base tree are named with their paths; a
    shallow source, or objects missing only from the history, fail at once under `full` and
    point at `--history base-only` when the base tree is complete.
    """
    if history not in HISTORY_MODES:
        raise RepoSourceError(task, "history", f"unknown history mode {history!r}")
    run = Git(task, log_path)
    dest.mkdir(parents=True)
    run("-c", "init.defaultBranch=main", "init", "--quiet", str(dest), problem="git init")
    if files is not None:
        _commit_files(run, dest, files)
        expected: str | None = base_commit
    elif git_dir is None:
        raise RepoSourceError(task, "repo", "no repo source and no inline files")
    else:
        expected = _copy_from_source(
            run, dest, git_dir, base_commit, history, shared_packs, with_tags=tags
        )
    head = run("rev-parse", "HEAD", cwd=dest, field="base_commit").stdout.decode().strip()
    if expected is not None and head != expected:
        raise RepoSourceError(task, "base_commit", f"snapshot HEAD {head} != {expected}")
    # No reflog, no FETCH_HEAD, no hooks or sample files, every object packed and reachable.
    for leftover in ("FETCH_HEAD", "ORIG_HEAD", "logs", "hooks", "description", "info"):
        target = dest / ".git" / leftover
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    if files is not None:
        # An inline commit's objects are loose: pack them. A copy from a source is one pack
        # of exactly the objects its refs reach already (`_pack_history`, `_copy_base_tree`),
        # so a repack would only read and write the whole history once more.
        run(
            "-c",
            "gc.reflogExpire=now",
            "-c",
            "pack.threads=1",
            "gc",
            "--quiet",
            "--prune=now",
            cwd=dest,
            problem="packing the snapshot",
        )
    else:
        run("pack-refs", "--all", cwd=dest, problem="packing the snapshot's refs")
    return head


def _identity_env(date: str) -> dict[str, str]:
    name, email = INLINE_IDENTITY.split(" <")
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email.rstrip(">"),
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email.rstrip(">"),
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }


def _commit_files(run: Git, dest: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    run("add", "-A", cwd=dest, problem="staging the inline files")
    run(
        "-c",
        "commit.gpgsign=false",
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        INLINE_MESSAGE.rstrip("\n"),
        cwd=dest,
        env=_identity_env(INLINE_TIMESTAMP),
        problem="committing the inline files",
    )


def _copy_from_source(
    run: Git,
    dest: Path,
    git_dir: Path,
    base_commit: str,
    history: History,
    shared_packs: Path | None = None,
    *,
    with_tags: bool = True,
) -> str | None:
    """Fill `dest` from the source; returns the HEAD the snapshot must have (None: unknown)."""
    label = source_label(run, git_dir)
    shallow = shallow_commits(run, git_dir)
    commit, objects = _complete_base(run, git_dir, base_commit, label, shallow)
    if history == "base-only":
        return _copy_base_tree(run, dest, git_dir, commit, base_commit, objects)
    if shallow is not None:
        _refuse_cut_history(run, git_dir, commit, base_commit, label, shallow)
    names = past_tags(run, git_dir, git_dir, commit) if with_tags else []
    tags = _tag_targets(run, git_dir, names)
    anchor = _anchor(run, git_dir, commit) if shared_packs is not None else None
    if anchor is not None and shared_packs is not None:
        if not _link_shared_pack(run, dest, git_dir, anchor, shared_packs):
            anchor = None  # one pack then, whose failure names what the source lacks
    _pack_history(run, dest, git_dir, commit, base_commit, label, tags, anchor)
    refs = f"update refs/heads/main {commit}\n"
    refs += "".join(f"update {name} {oid}\n" for name, oid in tags.items())
    run("update-ref", "--stdin", cwd=dest, stdin=refs.encode(), problem="writing the refs")
    run("symbolic-ref", "HEAD", "refs/heads/main", cwd=dest)
    run("reset", "--quiet", "--hard", "refs/heads/main", cwd=dest, problem="checking out")
    return commit


def _complete_base(
    run: Git, git_dir: Path, base_commit: str, label: str, shallow: set[str] | None
) -> tuple[str, bytes]:
    """The full id of `base_commit` and its tree's objects (`base_tree_objects`); raises when
    the source lacks the commit or any object of its tree.
    """
    resolved = run(
        "rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}", cwd=git_dir, check=False
    )
    if resolved.returncode != 0:
        raise RepoSourceError(
            run.task,
            "base_commit",
            f"commit {base_commit} not found in repo source {label}{shallow_note(shallow)}",
        )
    commit = resolved.stdout.decode().strip()
    objects, missing = base_tree_objects(run, git_dir, commit, base_commit)
    if missing:
        raise RepoSourceError(
            run.task,
            "repo",
            f"repo source {label} lacks {len(missing)} object(s) of the tree of {base_commit} "
            f"(mirrors may lack large blobs): {listing(missing)}{shallow_note(shallow)}",
            missing=missing,
        )
    return commit, objects


def _refuse_cut_history(
    run: Git, git_dir: Path, commit: str, base_commit: str, label: str, shallow: set[str]
) -> None:
    """Fail at once when a shallow source cuts the history of `commit` (or cannot tell)."""
    reach = run("rev-list", commit, cwd=git_dir, check=False)
    cut = sorted(set(reach.stdout.decode().split()) & shallow)
    if cut or reach.returncode != 0 or not shallow:
        where = f" at {len(cut)} commit(s) ({', '.join(cut[:5])})" if cut else ""
        raise RepoSourceError(
            run.task,
            "repo",
            f"repo source {label} is a shallow clone: the history of {base_commit} is cut"
            f"{where}, so --history full cannot copy it; the base tree is complete: "
            "pass --history base-only, or use a full clone",
        )


def _pack_history(
    run: Git,
    dest: Path,
    git_dir: Path,
    commit: str,
    base_commit: str,
    label: str,
    tags: dict[str, str],
    anchor: str | None = None,
) -> None:
    """Write into `dest` one pack (and its index) of exactly the objects `commit` and `tags`
    reach (but not `anchor`, an ancestor whose history is in a shared pack linked in
    already); a failure names the history objects the source lacks.

    The pack is made by the source itself (`pack-objects --revs`, reading only): its deltas
    are reused as they are, and the pack comes with its index, so nothing is resolved or
    hashed again on the receiving side (a fetch indexes every object of the history once
    more, and a repack after it reads and writes them all again). Every row of a repository
    thus reads the one store of that repository (the mirror) and writes only its own pack.
    """
    pack_dir = dest / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    wanted = "".join(f"{rev}\n" for rev in (commit, *tags.values())).encode()
    if anchor is not None:
        wanted += f"^{anchor}\n".encode()
    pack = run(
        "pack-objects",
        "--quiet",
        "--revs",
        "--delta-base-offset",
        str(pack_dir / "pack"),
        cwd=git_dir,
        stdin=wanted,
        check=False,
    )
    if pack.returncode == 0:
        return
    lost, complaint = history_missing(run, git_dir, commit)
    problem = f"cannot copy the history of {base_commit} from repo source {label}"
    if lost:
        problem += (
            f": history objects missing ({len(lost)}): {listing(lost)}; "
            "the base tree is complete: pass --history base-only"
        )
    elif complaint:
        problem += (
            f": history objects missing (the walk stopped: {complaint.splitlines()[-1]}); "
            "the base tree is complete: pass --history base-only"
        )
    raise RepoSourceError(
        run.task,
        "repo",
        problem,
        command=[str(a) for a in pack.args],
        stderr=tail(pack.stderr),
        missing=lost,
    )


def past_tags(run: Git, git_dir: Path, repo: Path, commit: str) -> list[str]:
    """The tags of `git_dir` that are history, not future, as of `commit`: each names `commit`
    or one of its ancestors (held in `repo`) and was made no later than `commit` (tagger date,
    or the commit's date for a lightweight tag).

    Tools that version a checkout from `git describe` (setuptools_scm, versioneer) need them:
    without a tag, pytest installs as 0.1.devN and its own `minversion` refuses to run. The
    harness keeps the tags older than the base commit for the same reason.
    """
    listing = run(
        "for-each-ref",
        "--format=%(refname) %(objecttype) %(objectname) %(*objecttype) %(*objectname) "
        "%(creatordate:unix)",
        "refs/tags",
        cwd=git_dir,
    ).stdout.decode()
    if not listing.strip():
        return []
    ancestors = set(run("rev-list", commit, cwd=repo).stdout.decode().split())
    made = int(run("log", "-1", "--format=%ct", commit, cwd=repo).stdout.decode().strip())
    kept = []
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 6:  # annotated: its target one level down
            name, kind, _, target_kind, target, date = parts
        elif len(parts) == 4:  # lightweight
            name, kind, target, date = parts
            target_kind = kind
        else:
            continue
        if target_kind == "commit" and target in ancestors and int(date) <= made:
            kept.append(name)
    return kept


ANCHOR_CANDIDATES = 8
"""How many of the newest tags made before a base commit `_anchor` weighs."""


def _anchor(run: Git, git_dir: Path, commit: str) -> str | None:
    """The newest commit `commit`'s history shares with a release made before it: for each of
    the `ANCHOR_CANDIDATES` newest tags dated no later than `commit`, its merge base with
    `commit` (the tag itself when it is history; else the point its release branch left the
    line `commit` is on), the newest of those by commit date. Every row after that point
    shares its history (`_link_shared_pack`, and the history layer, `repos.layers`). None when
    no tag qualifies. Only a commit of `commit`'s own history is ever chosen, and no tag made
    after it is read.
    """
    when = run("log", "-1", "--format=%ct", commit, cwd=git_dir).stdout.decode().strip()
    listing = run(
        "for-each-ref",
        "--sort=-creatordate",
        "--format=%(creatordate:unix) %(objecttype) %(objectname) %(*objecttype) %(*objectname)",
        "refs/tags",
        cwd=git_dir,
    ).stdout.decode()
    targets: list[str] = []
    for line in listing.splitlines():
        stamp, kind, oid, *peeled = line.split()
        target = peeled[1] if kind == "tag" and len(peeled) == 2 else oid
        if (peeled[0] if kind == "tag" and peeled else kind) != "commit" or int(stamp) > int(when):
            continue
        if target not in targets:
            targets.append(target)
        if len(targets) == ANCHOR_CANDIDATES:
            break
    bases: set[str] = set()
    for target in targets:
        found = run("merge-base", commit, target, cwd=git_dir, check=False)
        base = found.stdout.decode().strip()
        if found.returncode == 0 and base and base != commit:
            bases.add(base)
    if not bases:
        return None
    dated = run("log", "--no-walk", "--format=%ct %H", *sorted(bases), cwd=git_dir)
    return max(
        (int(stamp), oid)
        for stamp, oid in (line.split() for line in dated.stdout.decode().splitlines())
    )[1]


def _link_shared_pack(run: Git, dest: Path, git_dir: Path, anchor: str, folder: Path) -> bool:
    """Hard-link (or copy) into `dest` the pack of everything `anchor` reaches, writing it
    into `folder` first when no row wrote it before; False when the source cannot write it.
    A pack holds objects by their ids, so any source of the repository gives the same
    objects; the folder is written atomically.
    """
    shared = folder / f"{anchor}-{SHARED_PACK_FORMAT}"
    if shared.is_dir() and not _whole_packs(shared):
        shutil.rmtree(shared, ignore_errors=True)  # a part was deleted: write it again
    if not shared.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{anchor}-", dir=folder))
        packed = run(
            "pack-objects",
            "--quiet",
            "--revs",
            "--delta-base-offset",
            str(tmp / "pack"),
            cwd=git_dir,
            stdin=f"{anchor}\n".encode(),
            check=False,
        )
        if packed.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        try:
            tmp.rename(shared)
        except OSError:  # another row wrote it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    pack_dir = dest / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    for part in sorted(shared.iterdir()):
        try:
            os.link(part, pack_dir / part.name)
        except OSError:
            shutil.copyfile(part, pack_dir / part.name)
    return True


def _whole_packs(folder: Path) -> bool:
    """Whether `folder` holds packs each with its index (a machine cache a user trimmed by hand
    can keep an index without its pack: linked in, the snapshot then lacks the history).
    """
    names = [p.name for p in folder.iterdir()]
    packs = {n[: -len(".pack")] for n in names if n.endswith(".pack")}
    indexes = {n[: -len(".idx")] for n in names if n.endswith(".idx")}
    return bool(packs) and packs == indexes


def _tag_targets(run: Git, git_dir: Path, names: list[str]) -> dict[str, str]:
    """Each tag ref of `names` and the object it names in `git_dir` (an annotated tag's own
    object, so the snapshot keeps it with its message).
    """
    if not names:
        return {}
    listing = run(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/tags", cwd=git_dir
    ).stdout.decode()
    wanted = set(names)
    return {
        name: oid
        for line in listing.splitlines()
        for name, _, oid in [line.partition(" ")]
        if name in wanted
    }


def _copy_base_tree(
    run: Git, dest: Path, git_dir: Path, commit: str, base_commit: str, objects: bytes
) -> str:
    """One commit holding exactly `commit`'s tree; returns its sha."""
    tree = run("rev-parse", f"{commit}^{{tree}}", cwd=git_dir).stdout.decode().strip()
    pack_dir = dest / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    run(
        "pack-objects",
        "--quiet",
        str(pack_dir / "pack"),
        cwd=git_dir,
        stdin=objects,
        problem=f"copying the tree of {base_commit}",
    )
    made = run(
        "-c",
        "commit.gpgsign=false",
        "commit-tree",
        tree,
        "-m",
        BASE_ONLY_MESSAGE.format(base=base_commit).rstrip("\n"),
        cwd=dest,
        env=_identity_env(INLINE_TIMESTAMP),
        problem="committing the base tree",
    )
    head = made.stdout.decode().strip()
    run("update-ref", "refs/heads/main", head, cwd=dest)
    run("symbolic-ref", "HEAD", "refs/heads/main", cwd=dest)
    run("reset", "--quiet", "--hard", "refs/heads/main", cwd=dest, problem="checking out")
    got = run("rev-parse", "HEAD^{tree}", cwd=dest).stdout.decode().strip()
    if got != tree:
        raise RepoSourceError(
            run.task, "base_commit", f"snapshot tree {got} != tree {tree} of {base_commit}"
        )
    if head != base_only_commit_sha(tree, base_commit):
        raise RepoSourceError(
            run.task, "base_commit", f"base-only commit {head} differs from the computed id"
        )
    return head


SNAPSHOT_MTIME = 946684800
"""2000-01-01T00:00:00Z, the one modification time of every file of a snapshot: fixed, so the
tar is deterministic, and after 1980, which is the earliest a ZIP (so a wheel, e.g. flit's
editable wheel of the repository) can record."""


def write_snapshot_tar(repo: Path, tar_path: Path, rels: list[str] | None = None) -> None:
    """A deterministic tar of the snapshot (sorted, uid 0, every mtime SNAPSHOT_MTIME); with
    `rels`, of those paths under `repo` alone (a row layer, `repos.layers`).
    """
    tmp = tar_path.with_suffix(".tmp")
    paths = sorted(repo.rglob("*")) if rels is None else [repo / rel for rel in sorted(rels)]
    with (
        tmp.open("wb") as out,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in paths:
            rel = path.relative_to(repo).as_posix()
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = SNAPSHOT_MTIME
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    os.replace(tmp, tar_path)
