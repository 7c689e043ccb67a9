"""A snapshot as a history layer and a row layer: together exactly the snapshot, the history
layer shared by rows with the same newest past tag and holding nothing after any of them."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from packager.repos.layers import REMOVED_LIST, manifest_of
from packager.repos.stored import write_snapshot
from tests.unit.repos.test_repos import MARSHMALLOW_BUNDLE, git, make_upstream

MARSHMALLOW_ROWS = {  # the two SWE-bench Lite rows of tests/data/realrows
    "1359": "b40a0f4e33823e6d0f341f7e8684e359a99060d1",
    "1343": "2be2d83a1a9a6d3d9b85804f3ab545cecc409bb0",
}


def _assemble(history: Path, row: Path, into: Path) -> Path:
    """What the agent Dockerfile does: add the history layer, the row layer, then delete."""
    into.mkdir(parents=True)
    for layer in (history, row):
        with tarfile.open(layer) as tar:
            for member in tar.getmembers():  # a later layer replaces what is in its way
                target = into / member.name
                if target.is_symlink() or (target.exists() and not target.is_dir()):
                    target.unlink()
                elif target.is_dir() and not member.isdir():
                    subprocess.run(["rm", "-rf", str(target)], check=True)
            tar.extractall(into, filter="tar")
    listed = (into / REMOVED_LIST).read_bytes().split(b"\0")
    for rel in filter(None, listed):
        subprocess.run(["rm", "-rf", "--", str(into / rel.decode())], check=True)
    (into / REMOVED_LIST).unlink()
    return into


def _plain(tmp_path: Path, git_dir: Path, base: str, name: str) -> Path:
    tar_path = tmp_path / f"{name}-plain.tar"
    write_snapshot(tar_path, git_dir=git_dir, base_commit=base, cache_dir=tmp_path / "plain")
    out = tmp_path / f"{name}-plain"
    with tarfile.open(tar_path) as tar:
        tar.extractall(out, filter="tar")
    return out


def _same_tree(a: Path, b: Path) -> None:
    """The same files, and the same objects (a pack's bytes and name may differ between two
    `pack-objects` runs over the same objects)."""
    packs = ".git/objects/pack/"
    left, right = manifest_of(a), manifest_of(b)
    left = {rel: entry for rel, entry in left.items() if not rel.startswith(packs)}
    right = {rel: entry for rel, entry in right.items() if not rel.startswith(packs)}
    assert sorted(left) == sorted(right)
    differ = [rel for rel in left if left[rel] != right[rel] and left[rel][0] != "d"]
    assert differ in ([], [".git/index"])  # its stat data is of the host's checkout
    assert git("ls-files", "--stage", cwd=a) == git("ls-files", "--stage", cwd=b)
    objects = ("cat-file", "--batch-all-objects", "--batch-check")
    assert git(*objects, cwd=a) == git(*objects, cwd=b)


@pytest.fixture(scope="module")
def marshmallow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bare = tmp_path_factory.mktemp("mm") / "marshmallow.git"
    git("clone", "--quiet", "--bare", str(MARSHMALLOW_BUNDLE), str(bare))
    # The bundle carries no tags: a release tag on the two rows' common history, 30 commits
    # before it ends (a lightweight tag is dated by its commit: history for both rows).
    common = git("merge-base", *MARSHMALLOW_ROWS.values(), cwd=bare)
    git("tag", "v-common", f"{common}~30", cwd=bare)
    return bare


@pytest.mark.parametrize("row", sorted(MARSHMALLOW_ROWS))
def test_history_then_row_layer_is_exactly_the_snapshot(
    tmp_path: Path, marshmallow: Path, row: str
) -> None:
    base = MARSHMALLOW_ROWS[row]
    cache = tmp_path / "cache"
    history, tar = tmp_path / "ctx" / "history.tar", tmp_path / "ctx" / "repo.tar"
    done = write_snapshot(
        tar, git_dir=marshmallow, base_commit=base, cache_dir=cache, history_path=history
    )
    assert done.head == base and done.history is not None  # marshmallow tags its releases
    built = _assemble(history, tar, tmp_path / "built")
    _same_tree(built, _plain(tmp_path, marshmallow, base, row))
    assert git("rev-parse", "HEAD", cwd=built) == base
    assert git("status", "--porcelain", cwd=built) == ""
    # The row layer is thinner than the snapshot: the history layer holds the tag's pack and
    # tree (1343 is 30 commits after the tag, 1359 about 1,000).
    plain_tar = tmp_path / f"{row}-plain.tar"
    assert tar.stat().st_size < plain_tar.stat().st_size * (0.35 if row == "1343" else 0.9)
    # Nothing in the history layer is after the base commit: every commit it holds is one of
    # the base's ancestors.
    alone = _assemble_history(history, tmp_path / "history-only")
    commits = _commits(alone)
    assert commits and all(_is_ancestor(marshmallow, c, base) for c in commits)


def _assemble_history(history: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    with tarfile.open(history) as tar:
        names = tar.getnames()
        tar.extractall(into, filter="tar")
    assert not any(n.startswith(("./.git/refs", ".git/refs", ".git/HEAD")) for n in names)
    return into


def _commits(repo: Path) -> list[str]:
    git("init", "--quiet", "--bare", str(repo / "probe.git"))
    packs = sorted((repo / ".git" / "objects" / "pack").glob("*.pack"))
    for pack in packs:
        subprocess.run(
            ["git", "index-pack", "--stdin", "--keep"],
            input=pack.read_bytes(),
            cwd=repo / "probe.git",
            capture_output=True,
            check=True,
        )
    listing = git("cat-file", "--batch-all-objects", "--batch-check", cwd=repo / "probe.git")
    return [line.split()[0] for line in listing.splitlines() if line.split()[1] == "commit"]


def _is_ancestor(git_dir: Path, commit: str, base: str) -> bool:
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", commit, base], cwd=git_dir, capture_output=True
    )
    return done.returncode == 0


def test_rows_after_one_tag_share_its_history_layer_byte_for_byte(tmp_path: Path) -> None:
    upstream = make_upstream(tmp_path / "up")
    path = upstream.path
    git("tag", "v0.1", upstream.first, cwd=path)
    git("tag", "-d", "v1.0", cwd=path)  # (dated as the rows: a release they would branch from)
    git("checkout", "--quiet", "-b", "dev", upstream.base, cwd=path)
    # A later row: a file deleted, a file turned into a folder, a symlink, an executable.
    (path / "README").unlink()
    (path / "big.bin").unlink()
    (path / "big.bin").mkdir()
    (path / "big.bin" / "part").write_text("now a folder\n")
    (path / "link").symlink_to("src/a.py")
    (path / "run.sh").write_text("#!/bin/sh\n")
    (path / "run.sh").chmod(0o755)
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "reshaped", cwd=path)
    later_row = git("rev-parse", "HEAD", cwd=path)
    cache, git_dir = tmp_path / "cache", path / ".git"
    made = {}
    for name, base in (("base", upstream.base), ("later", later_row)):
        ctx = tmp_path / name
        done = write_snapshot(
            ctx / "repo.tar",
            git_dir=git_dir,
            base_commit=base,
            cache_dir=cache,
            history_path=ctx / "history.tar",
        )
        assert done.history == upstream.first
        built = _assemble(ctx / "history.tar", ctx / "repo.tar", tmp_path / f"{name}-built")
        _same_tree(built, _plain(tmp_path, git_dir, base, name))
        made[name] = ctx
    assert (made["base"] / "history.tar").samefile(made["later"] / "history.tar")
    with tarfile.open(made["later"] / "repo.tar") as tar:
        listed = tar.extractfile(REMOVED_LIST).read().split(b"\0")  # type: ignore[union-attr]
    assert b"README" in listed and b"big.bin" not in listed  # replaced, not deleted
    # The row's own objects and files, not the tag's: the first commit's files are not in it.
    with tarfile.open(made["base"] / "repo.tar") as tar:
        assert "src/a.py" not in tar.getnames() and "src/b.py" in tar.getnames()
    # Again from the cache: the same two files.
    again = write_snapshot(
        tmp_path / "again" / "repo.tar",
        git_dir=git_dir,
        base_commit=later_row,
        cache_dir=cache,
        history_path=tmp_path / "again" / "history.tar",
    )
    assert again.reused and again.history == upstream.first
    assert (tmp_path / "again" / "repo.tar").read_bytes() == (
        made["later"] / "repo.tar"
    ).read_bytes()


def test_no_tag_no_history_layer_but_the_git_folder(tmp_path: Path) -> None:
    upstream = make_upstream(tmp_path / "up")
    ctx = tmp_path / "ctx"
    done = write_snapshot(
        ctx / "repo.tar",
        git_dir=upstream.path / ".git",
        base_commit=upstream.base,  # v1.0 is after it
        cache_dir=tmp_path / "cache",
        history_path=ctx / "history.tar",
    )
    assert done.history is None
    with tarfile.open(ctx / "history.tar") as tar:
        assert tar.getnames() == [".git"]  # a member: the engine unpacks it, never copies it
    built = _assemble(ctx / "history.tar", ctx / "repo.tar", tmp_path / "built")
    _same_tree(built, _plain(tmp_path, upstream.path / ".git", upstream.base, "plain"))


def test_a_history_layer_follows_its_shared_pack(tmp_path: Path) -> None:
    """A cache trimmed by hand writes a tag's shared pack again (maybe another pack file): the
    next row written finds its history layer holding other pack files and writes it again, so
    no row carries the tag's pack in its own layer.
    """
    upstream = make_upstream(tmp_path / "up")
    path = upstream.path
    git("tag", "v0.1", upstream.first, cwd=path)
    git("tag", "-d", "v1.0", cwd=path)
    git("checkout", "--quiet", "-b", "dev", upstream.base, cwd=path)
    (path / "src" / "c.py").write_text("C = 3\n")
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "another row", cwd=path)
    second = git("rev-parse", "HEAD", cwd=path)
    cache = tmp_path / "cache"

    def layered(name: str, base: str) -> Path:
        ctx = tmp_path / name
        write_snapshot(
            ctx / "repo.tar",
            git_dir=path / ".git",
            base_commit=base,
            cache_dir=cache,
            history_path=ctx / "history.tar",
        )
        return ctx

    layered("one", upstream.base)
    manifest = next((cache / "history").glob("*.json"))
    manifest.write_text(manifest.read_text().replace("pack-", "pack-gone"))  # not these packs
    two = layered("two", second)
    assert "pack-gone" not in manifest.read_text()
    with tarfile.open(two / "history.tar") as tar:
        shared = {n for n in tar.getnames() if n.startswith(".git/objects/pack/")}
    with tarfile.open(two / "repo.tar") as tar:
        assert shared and not shared & set(tar.getnames())
    built = _assemble(two / "history.tar", two / "repo.tar", tmp_path / "built")
    assert git("rev-parse", "HEAD", cwd=built) == second
    assert git("status", "--porcelain", cwd=built) == ""


def test_a_release_branch_tag_anchors_at_its_branch_point(tmp_path: Path) -> None:
    """A project that tags releases on a branch of their own (sympy): the newest tag made
    before the row is not in its history, so the history layer is the point that release
    branch left the row's line, not an older tag that is history."""
    upstream = make_upstream(tmp_path / "up")
    path = upstream.path
    git("tag", "-d", "v1.0", cwd=path)
    git("tag", "v0.1", upstream.first, cwd=path)  # history, but old
    git("checkout", "--quiet", "-b", "release", upstream.base, cwd=path)
    (path / "RELEASE").write_text("1.0\n")
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "release 1.0", cwd=path)
    git("tag", "-a", "-m", "1.0", "v1.0", cwd=path)
    git("checkout", "--quiet", "main", cwd=path)  # main went on: the fix, then the row
    (path / "src" / "d.py").write_text("D = 4\n")
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "the row's base", cwd=path)
    row = git("rev-parse", "HEAD", cwd=path)
    ctx = tmp_path / "ctx"
    done = write_snapshot(
        ctx / "repo.tar",
        git_dir=path / ".git",
        base_commit=row,
        cache_dir=tmp_path / "cache",
        history_path=ctx / "history.tar",
    )
    assert done.history == upstream.base  # where release left main, not v0.1's commit
    built = _assemble(ctx / "history.tar", ctx / "repo.tar", tmp_path / "built")
    assert git("rev-parse", "HEAD", cwd=built) == row
    assert not (built / "RELEASE").exists()
    assert "v1.0" not in git("tag", cwd=built)  # not history: not kept
