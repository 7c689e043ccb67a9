"""Closed history packs (`checks.audit.packs`) with real git: what a store reads through them
equals the full walk, and nothing is taken as reachable that base_commit does not reach.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from packager.checks.audit import git as audit_git
from packager.checks.audit import packs

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=ENV, input=stdin, capture_output=True, check=True
    )
    return done.stdout.decode().strip()


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository of 6 commits (ids oldest first), each adding and changing files."""
    repo = tmp_path / "src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for n in range(6):
        (repo / f"f{n}.txt").write_text(f"file {n}\n" * (n + 1))
        (repo / "shared.txt").write_text(f"version {n}\n")
        git(repo, "add", "-A")
        env_date = f"2020-01-0{n + 1}T00:00:00"
        subprocess.run(
            ["git", "commit", "-q", "-m", f"c{n}"],
            cwd=repo,
            env={**ENV, "GIT_AUTHOR_DATE": env_date, "GIT_COMMITTER_DATE": env_date},
            check=True,
        )
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def pack_of(repo: Path, out: Path, wanted: str) -> Path:
    """A pack (with its index) of `pack-objects --revs` fed `wanted`; returns the .pack path."""
    out.mkdir(parents=True, exist_ok=True)
    name = git(repo, "pack-objects", "--quiet", "--revs", str(out / "pack"), stdin=wanted.encode())
    return out / f"pack-{name}.pack"


def store_with(tmp: Path, *packs_in: Path) -> Path:
    """A bare repository holding exactly the given packs."""
    store = tmp / "store"
    for sub in ("refs/heads", "objects/pack", "objects/info"):
        (store / sub).mkdir(parents=True, exist_ok=True)
    (store / "HEAD").write_text("ref: refs/heads/main\n")
    (store / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    for pack in packs_in:
        for part in (pack, pack.with_suffix(".idx")):
            shutil.copyfile(part, store / "objects" / "pack" / part.name)
    return store


@pytest.fixture(autouse=True)
def _small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packs, "MIN_PACK_BYTES", 0)
    monkeypatch.setattr(audit_git, "MIN_PACK_BYTES", 0)


def full_walk(store: Path, base: str) -> tuple[dict[str, str], set[str]]:
    check = "--batch-check=%(objectname) %(objecttype)"
    listed = git(store, "cat-file", "--batch-all-objects", check)
    objects = dict(line.split() for line in listed.splitlines())
    reached = {line.split()[0] for line in git(store, "rev-list", "--objects", base).splitlines()}
    return objects, reached


def test_history_pack_is_proved_closed_once_and_kept(
    source: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, commits = source
    pack = pack_of(repo, tmp_path / "h", f"{commits[2]}\n")
    root = tmp_path / "cache"
    closed = packs.closed_pack(pack, root)
    assert closed is not None and closed.tip == commits[2]
    assert set(closed.times) == set(commits[:3])
    place = root / "packs" / packs.file_sha256(pack)[:2] / packs.file_sha256(pack)
    assert (place / "listing").is_file()
    # The kept verdict is read back, not proved again (its index is the one kept).
    again = packs.closed_pack(pack, root)
    assert again is not None and again.objects == closed.objects and again.idx == place / "pack.idx"


def test_packs_that_are_not_closed_are_refused(
    source: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, commits = source
    root = tmp_path / "cache"
    # Two tips (a side branch): not one commit's history.
    git(repo, "checkout", "-q", "-b", "side", commits[3])
    (repo / "side.txt").write_text("side\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "side")
    side = git(repo, "rev-parse", "HEAD")
    two_tips = pack_of(repo, tmp_path / "two", f"{side}\n{commits[5]}\n")
    assert packs.closed_pack(two_tips, root) is None
    # A range without its start: objects its tip reaches are missing from the pack.
    partial = pack_of(repo, tmp_path / "partial", f"{commits[5]}\n^{commits[2]}\n")
    assert packs.closed_pack(partial, root) is None
    # A pack holding the base commit is a row's own: not proved at all (nothing kept).
    own = pack_of(repo, tmp_path / "own", f"{commits[4]}\n")
    assert packs.closed_pack(own, root, base=commits[4]) is None
    assert not (root / "packs" / packs.file_sha256(own)[:2] / packs.file_sha256(own)).exists()


def test_store_view_equals_the_full_walk(source: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, commits = source
    history = pack_of(repo, tmp_path / "h", f"{commits[2]}\n")
    own = pack_of(repo, tmp_path / "o", f"{commits[4]}\n^{commits[2]}\n")
    future = pack_of(repo, tmp_path / "f", f"{commits[5]}\n^{commits[4]}\n")
    store = store_with(tmp_path, history, own, future)
    base = commits[4]
    closed = [c for p in (history, own, future) if (c := packs.closed_pack(p, tmp_path / "c"))]
    assert [c.tip for c in closed] == [commits[2]]
    everything = full_walk(store, base)[0]
    view = packs.store_view(store, base, closed, everything)
    assert view is not None
    objects, reached = full_walk(store, base)
    assert view.objects == objects
    assert view.reachable == reached
    assert commits[5] in view.objects and commits[5] not in view.reachable
    log = git(store, "log", "--format=%H %ct", base)
    assert view.ancestor_times == {h: int(t) for h, t in (r.split() for r in log.splitlines())}


def test_a_closed_pack_of_later_history_is_never_taken_as_reached(
    source: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The history pack of a *later* commit than base (future commits, closed under its own
    tip) must not make its objects count as reachable: the view is refused, the full walk runs.
    """
    repo, commits = source
    later = pack_of(repo, tmp_path / "later", f"{commits[5]}\n")
    store = store_with(tmp_path, later)
    closed = packs.closed_pack(later, tmp_path / "c")
    assert closed is not None and closed.tip == commits[5]
    assert packs.store_view(store, commits[2], [closed], []) is None


def test_open_store_reads_a_closed_pack_through_the_index_git_wrote(
    source: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A gathered store (as the audit lays it out) with a closed pack whose image-side index was
    tampered with: the objects are listed from the pack's own bytes and git reads the index
    host git wrote, so a future commit hidden in the pack cannot be dropped from the listing.
    """
    repo, commits = source
    history = pack_of(repo, tmp_path / "h", f"{commits[3]}\n")
    root = tmp_path / "gathered"
    pack_dir = root / "objects" / "pack"
    pack_dir.mkdir(parents=True)
    (root / "origin").mkdir()
    (root / "where").write_text("/testbed/.git/objects")
    for part in (history, history.with_suffix(".idx")):
        shutil.copyfile(part, pack_dir / part.name)
        (root / "origin" / f"pack_{part.name}").write_text("2:layer")
    (pack_dir / history.with_suffix(".idx").name).write_bytes(b"not an index")
    store = audit_git.open_store(root, tmp_path / "cache", commits[5])
    assert [c.tip for c in store.closed] == [commits[3]]
    assert set(store.origin) == set(store.closed[0].objects)
    objects, reached = full_walk(root, commits[3])
    assert set(objects) == set(store.closed[0].objects) == reached
