"""The audit's git side, with host `git` on scratch bare repositories: object stores gathered
from the layers opened and mapped to their layers, what base_commit reaches, the base tree's
content, the patched files, past tags, and the findings in the workdir repository's refs,
reflogs, remotes and alternates.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path

from packager.checks.audit.evidence import is_binary, norm_lines, parse_patch, sha256_hex
from packager.checks.audit.layers import Layer
from packager.checks.audit.packs import MIN_PACK_BYTES, ClosedPack, closed_pack
from packager.checks.audit.report import Finding, FindingKind
from packager.repos.git import run_git


def git_at(
    git_dir: Path, *args: str, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """Host `git` on the scratch repository `git_dir` (`repos.git.run_git`'s environment)."""
    return run_git(f"--git-dir={git_dir}", *args, stdin=stdin, check=check, timeout=1800)


def cat_batch(git_dir: Path, oids: Sequence[str]) -> Iterator[tuple[str, str, bytes]]:
    """(oid, type, content) of each object, through one `git cat-file --batch`."""
    if not oids:
        return
    out = git_at(git_dir, "cat-file", "--batch", stdin=("\n".join(oids) + "\n").encode()).stdout
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) < 3:  # "<oid> missing"
            continue
        size = int(header[2])
        yield header[0].decode(), header[1].decode(), out[pos : pos + size]
        pos += size + 1


@dataclass
class Store:
    """A scratch bare repository around one object store found in the image."""

    where: str
    git_dir: Path
    origin: dict[str, str]
    """object id → layer key it came from."""
    closed: list[ClosedPack] = field(default_factory=list)
    """Its packs proved closed (`packs`), when asked for."""


def open_store(root: Path, packs_root: Path | None = None, base: str | None = None) -> Store:
    """Make a bare repository around a gathered objects folder; map objects to layers. With
    `packs_root`, each big pack is looked up among (or proved) closed packs (`packs`): its
    objects are then listed from there and git reads the index host git wrote for it.
    """
    where = (root / "where").read_text()
    origin: dict[str, str] = {}
    for marker in sorted((root / "origin").iterdir()) if (root / "origin").is_dir() else []:
        origin[marker.name] = marker.read_text()
    git_dir = root
    for sub in ("refs/heads", "refs/tags", "objects/info"):
        (git_dir / sub).mkdir(parents=True, exist_ok=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    oid_origin: dict[str, str] = {}
    closed: list[ClosedPack] = []
    pack_dir = git_dir / "objects" / "pack"
    for name, layer in origin.items():
        if name.endswith(".pack"):
            pack = pack_dir / name.removeprefix("pack_")
            idx = pack.with_suffix(".idx")
            found = None
            if packs_root is not None and pack.stat().st_size >= MIN_PACK_BYTES:
                found = closed_pack(pack, packs_root, base)
            if found is not None:
                idx.unlink(missing_ok=True)
                shutil.copyfile(found.idx, idx)  # git reads the index host git wrote
                closed.append(found)
                mapped = dict.fromkeys(found.objects, layer)
                mapped.update(oid_origin)  # the first layer of an object wins
                oid_origin = mapped
                continue
            if not idx.exists():
                git_at(git_dir, "index-pack", str(pack), check=False)
            if idx.exists():
                listing = git_at(git_dir, "show-index", stdin=idx.read_bytes(), check=False).stdout
                for row in listing.decode().splitlines():
                    parts = row.split()
                    if len(parts) >= 2:
                        oid_origin.setdefault(parts[1], layer)
        elif not name.endswith(".idx"):
            oid_origin.setdefault(name.replace("_", ""), layer)
    return Store(where, git_dir, oid_origin, closed)


def all_objects(store: Store) -> dict[str, str]:
    """Every object of the store: id → type."""
    out = git_at(
        store.git_dir,
        "cat-file",
        "--batch-all-objects",
        "--unordered",
        "--batch-check=%(objectname) %(objecttype)",
        check=False,
    ).stdout
    pairs = (line.split() for line in out.decode().splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def has_commit(store: Store, base: str) -> bool:
    """Whether the store holds `base` as a commit."""
    probe = git_at(store.git_dir, "cat-file", "-e", f"{base}^{{commit}}", check=False)
    return probe.returncode == 0


def reachable_from(store: Store, base: str) -> set[str] | None:
    """The objects `base` reaches (None when the store lacks it)."""
    if not has_commit(store, base):
        return None
    out = git_at(store.git_dir, "rev-list", "--objects", base).stdout
    return {line.split(b" ", 1)[0].decode() for line in out.splitlines() if line}


def gitlinks(store: Store, base: str) -> dict[str, str]:
    """The submodules the base tree records: path -> the commit its gitlink names."""
    listing = git_at(store.git_dir, "ls-tree", "-r", "-z", base, check=False).stdout
    found = {}
    for entry in listing.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] == b"160000":
            found[path.decode("utf-8", "replace")] = parts[2].decode()
    return found


def base_content(store: Store, base: str) -> tuple[set[bytes], set[str]]:
    """Lines and sha256 digests of every file of the base tree."""
    listing = git_at(store.git_dir, "ls-tree", "-r", "-z", base).stdout
    oids = []
    for entry in listing.split(b"\0"):
        meta, _, _ = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == b"blob":
            oids.append(parts[2].decode())
    lines: set[bytes] = set()
    digests: set[str] = set()
    for _, _, data in cat_batch(store.git_dir, sorted(set(oids))):
        digests.add(sha256_hex(data))
        if not is_binary(data):
            lines |= norm_lines(data)
    return lines, digests


def patched_files(store: Store, base: str, patch: str | None) -> dict[str, bytes]:
    """The files a patch changes, as it leaves them (applied to the base tree on the host)."""
    files = parse_patch(patch)
    if not patch or not files:
        return {}
    with tempfile.TemporaryDirectory(prefix="packager-audit-apply-") as tmp:
        root = Path(tmp)
        for pf in files:
            if pf.old_path is None:
                continue
            blob = git_at(store.git_dir, "cat-file", "blob", f"{base}:{pf.old_path}", check=False)
            if blob.returncode == 0:
                target = root / pf.old_path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob.stdout)
        applied = run_git(
            "apply",
            "--whitespace=nowarn",
            "-",
            cwd=root,
            stdin=patch.encode(),
            env={"GIT_CEILING_DIRECTORIES": tmp},
            timeout=300,
        )
        if applied.returncode != 0:
            return {}
        return {
            pf.path: (root / pf.path).read_bytes() for pf in files if (root / pf.path).is_file()
        }


def past_tag_values(
    store: Store,
    base: str,
    ancestors: set[str],
    objects: dict[str, str] | None = None,
    times: dict[str, int] | None = None,
) -> set[str]:
    """Ids a past tag may hold in `store`: annotated tag objects naming `base` or an ancestor,
    tagged no later than `base` was committed; and those ancestors themselves (a lightweight
    tag names the commit), committed no later than `base`. `times`, when given, holds the
    commit time of every ancestor of `base` (read through closed packs: `packs.store_view`).
    """
    dates = git_at(store.git_dir, "log", "-1", "--format=%ct", base, check=False).stdout.split()
    if not dates:
        return set()
    made = int(dates[0])
    allowed: set[str] = set()
    listed = all_objects(store) if objects is None else objects
    tags = [oid for oid, kind in listed.items() if kind == "tag"]
    for oid, _, data in cat_batch(store.git_dir, tags):
        header = data.split(b"\n\n", 1)[0].decode("utf-8", "replace").splitlines()
        fields = {line.split(" ", 1)[0]: line.partition(" ")[2] for line in header}
        tagged = fields.get("tagger", "").rsplit(" ", 2)
        when = int(tagged[1]) if len(tagged) == 3 and tagged[1].isdigit() else None
        if (
            fields.get("type") == "commit"
            and fields.get("object") in ancestors
            and when is not None
            and when <= made
        ):
            allowed.add(oid)
    if times is not None:
        allowed.update(sha for sha, when in times.items() if when <= made)
        return allowed
    listing = git_at(store.git_dir, "log", "--format=%H %ct", base, check=False).stdout
    for row in listing.decode().splitlines():
        sha, _, when_text = row.partition(" ")
        if when_text.isdigit() and int(when_text) <= made:
            allowed.add(sha)
    return allowed


def ref_findings(
    layer: Layer, workdir_git: str, base: str, past_tags: Set[str] = frozenset()
) -> list[Finding]:
    """Refs, reflogs, remotes and alternates in one layer's copy of the workdir repository;
    a tag holding one of `past_tags` is history, not a finding.
    """
    out: list[Finding] = []
    meta = layer.git_meta

    def add(kind: FindingKind, rel: str, detail: str, oid: str | None = None) -> None:
        out.append(Finding(kind, layer.key, f"{workdir_git}/{rel}", oid, detail))

    refs: list[tuple[str, str, str]] = []  # (file, refname, value)
    for rel, data in sorted(meta.items()):
        text = data.decode("utf-8", "replace").strip()
        if rel.startswith("refs/"):
            refs.append((rel, rel, text))
        elif rel == "packed-refs":
            for row in text.splitlines():
                if row and not row.startswith(("#", "^")) and " " in row:
                    sha, name = row.split(" ", 1)
                    refs.append((rel, name.strip(), sha))
        elif rel.startswith("logs/"):
            if text:
                entries = text.splitlines()
                new = entries[-1].split(" ")[1] if len(entries[-1].split(" ")) > 1 else None
                add("reflog", rel, f"reflog with {len(entries)} entries", new)
        elif rel == "HEAD":
            if not text.startswith("ref: refs/heads/") and text != base:
                add("ref", rel, f"detached HEAD at {text[:40]}", text[:40])
        elif rel.endswith("_HEAD"):
            sha = text.split()[0] if text else ""
            if rel == "FETCH_HEAD" or sha != base:
                add("ref", rel, f"{rel} present", sha[:40] or None)
        elif rel == "config":
            for remote in sorted(set(re.findall(r'^\s*\[remote\s+"([^"]*)"\]', text, re.M))):
                add("remote", rel, f"remote {remote!r} configured")
        elif rel.startswith("objects/info/") and text:
            add("alternates", rel, f"objects borrowed from {text.splitlines()[0]}")
    for rel, name, value in refs:
        if value.startswith("ref: "):
            if not name.startswith("refs/heads/"):
                kind: FindingKind = "remote" if name.startswith("refs/remotes/") else "ref"
                add(kind, rel, f"symbolic ref {name} -> {value[5:]}")
            continue
        if name.startswith("refs/tags/"):
            if value[:40] not in past_tags:
                add("tag", rel, f"tag {name[10:]} -> {value[:12]}", value[:40])
        elif name.startswith("refs/remotes/"):
            add("remote", rel, f"remote-tracking ref {name[13:]} -> {value[:12]}", value[:40])
        elif not name.startswith("refs/heads/") or value != base:
            add(
                "ref",
                rel,
                f"ref {name} -> {value[:12]} (only a branch at base_commit is allowed)",
                value[:40],
            )
    return out
