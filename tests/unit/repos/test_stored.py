"""Snapshot tars kept in the machine cache: written once per repository state, reused after."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from packager.repos.stored import write_snapshot
from tests.unit.repos.test_repos import ENV, Upstream, git, make_upstream


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return make_upstream(tmp_path / "upstream")


def _names(tar_path: Path) -> list[str]:
    with tarfile.open(tar_path) as tar:
        return tar.getnames()


def test_a_second_row_at_the_same_commit_reuses_the_tar(tmp_path: Path, upstream: Upstream) -> None:
    cache, git_dir = tmp_path / "cache", upstream.path / ".git"
    first, second = tmp_path / "a" / "repo.tar", tmp_path / "b" / "repo.tar"
    log = tmp_path / "logs" / "snapshot.log"
    one = write_snapshot(first, git_dir=git_dir, base_commit=upstream.base, cache_dir=cache)
    two = write_snapshot(
        second, git_dir=git_dir, base_commit=upstream.base, cache_dir=cache, log_path=log
    )
    assert not one.reused and two.reused
    assert one.head == two.head == upstream.base
    assert first.read_bytes() == second.read_bytes()
    assert "$ git pack-objects" not in log.read_text()  # nothing was cut again
    assert ".git/HEAD" in _names(second) and "src/b.py" in _names(second)
    # Replacing a task's tar (as every writer does) leaves the cached bytes alone.
    kept = next(cache.glob("*.tar")).read_bytes()
    replacement = second.with_suffix(".new")
    replacement.write_bytes(b"not a snapshot")
    replacement.replace(second)
    assert next(cache.glob("*.tar")).read_bytes() == kept


def test_another_commit_history_mode_or_tag_is_not_reused(
    tmp_path: Path, upstream: Upstream
) -> None:
    cache, git_dir = tmp_path / "cache", upstream.path / ".git"

    def write(name: str, base: str, **kwargs: object) -> bool:
        out = tmp_path / name / "repo.tar"
        done = write_snapshot(out, git_dir=git_dir, base_commit=base, cache_dir=cache, **kwargs)  # type: ignore[arg-type]
        return done.reused

    assert not write("base", upstream.base)
    assert not write("first", upstream.first)
    assert not write("base-only", upstream.base, history="base-only")
    assert write("base-only-again", upstream.base, history="base-only")
    # A tag added to the source (on an ancestor: the snapshot would keep it) is a new state.
    subprocess.run(["git", "tag", "v0.1", upstream.first], cwd=upstream.path, env=ENV, check=True)
    assert not write("tagged", upstream.base)
    tar = tmp_path / "tagged" / "repo.tar"
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tar) as t:
        t.extractall(unpacked, filter="tar")
    assert git("tag", cwd=unpacked) == "v0.1"


def test_inline_files_are_not_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    files = {"a.txt": b"A\n"}
    from packager.repos.objects import inline_commit_sha

    sha = inline_commit_sha(files)
    done = write_snapshot(
        tmp_path / "t" / "repo.tar", git_dir=None, base_commit=sha, files=files, cache_dir=cache
    )
    assert done.head == sha and not done.reused
    assert not cache.exists()


def test_rows_after_one_tag_share_the_pack_of_its_history(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Two rows after tag v0.1 hold the tag's history as one pack, written once, plus their own
    objects; each holds exactly what its base reaches (and the tag), as one pack would.
    """
    cache, git_dir = tmp_path / "cache", upstream.path / ".git"
    subprocess.run(["git", "tag", "v0.1", upstream.first], cwd=upstream.path, env=ENV, check=True)
    # v1.0 is dated as the rows are: a release made no later than them, whose branch point
    # (the base) the following row would share instead.
    git("tag", "-d", "v1.0", cwd=upstream.path)
    git("checkout", "--quiet", "-b", "next", upstream.base, cwd=upstream.path)
    (upstream.path / "src" / "c.py").write_text("C = 3\n")
    git("add", "-A", cwd=upstream.path)
    git("commit", "--quiet", "-m", "next", cwd=upstream.path)
    following = git("rev-parse", "HEAD", cwd=upstream.path)
    held, logs = {}, {}
    for base in (upstream.base, following):
        tar, logs[base] = tmp_path / base / "repo.tar", tmp_path / f"{base}.log"
        done = write_snapshot(
            tar, git_dir=git_dir, base_commit=base, cache_dir=cache, log_path=logs[base]
        )
        assert not done.reused
        unpacked = tmp_path / f"unpacked-{base}"
        with tarfile.open(tar) as t:
            t.extractall(unpacked, filter="tar")
        packs = sorted(p.name for p in (unpacked / ".git" / "objects" / "pack").glob("*.pack"))
        assert len(packs) == 2
        batch = "--batch-check=%(objectname)"
        objects = git("cat-file", "--batch-all-objects", batch, cwd=unpacked)
        reached = git("rev-list", "--objects", base, "v0.1", cwd=upstream.path)
        assert sorted(objects.split()) == sorted(line.split()[0] for line in reached.splitlines())
        assert git("rev-parse", "HEAD", cwd=unpacked) == base
        assert git("tag", cwd=unpacked) == "v0.1"
        held[base] = set(packs)
    assert len(held[upstream.base] & held[following]) == 1  # the history up to v0.1
    (folder,) = (cache / "packs").iterdir()
    assert folder.name.startswith(upstream.first)
    shared_write = f"packs/.{upstream.first}-"
    assert shared_write in logs[upstream.base].read_text()
    assert shared_write not in logs[following].read_text()  # written once, then linked


def test_a_shared_pack_trimmed_by_hand_is_written_again(tmp_path: Path, upstream: Upstream) -> None:
    """A shared pack folder whose pack was deleted (its index kept) is not linked in as it is:
    the snapshot would lack the history before the tag. It is written again."""
    cache, git_dir = tmp_path / "cache", upstream.path / ".git"
    subprocess.run(["git", "tag", "v0.1", upstream.first], cwd=upstream.path, env=ENV, check=True)
    first = write_snapshot(
        tmp_path / "a" / "repo.tar", git_dir=git_dir, base_commit=upstream.base, cache_dir=cache
    )
    assert not first.reused
    (folder,) = (cache / "packs").iterdir()
    for pack in folder.glob("*.pack"):
        pack.unlink()
    for stored in cache.glob("*.tar"):  # the row's own snapshot too, so it is written again
        stored.unlink()
    tar = tmp_path / "b" / "repo.tar"
    write_snapshot(tar, git_dir=git_dir, base_commit=upstream.base, cache_dir=cache)
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tar) as t:
        t.extractall(unpacked, filter="tar")
    assert git("rev-parse", "HEAD", cwd=unpacked) == upstream.base
    git("fsck", "--connectivity-only", cwd=unpacked)
    assert git("tag", cwd=unpacked) == "v0.1"
    assert sorted(p.suffix for p in folder.iterdir() if p.suffix in (".pack", ".idx")) == [
        ".idx",
        ".pack",
    ]


def test_a_source_missing_history_under_a_tag_still_names_what_it_lacks(
    tmp_path: Path, upstream: Upstream
) -> None:
    from packager.errors import RepoSourceError
    from tests.unit.repos.test_repos import drop_object

    git_dir = upstream.path / ".git"
    subprocess.run(["git", "tag", "v0.1", upstream.first], cwd=upstream.path, env=ENV, check=True)
    old = git("rev-parse", f"{upstream.first}:big.bin", cwd=upstream.path)
    drop_object(git_dir, old)
    with pytest.raises(RepoSourceError) as err:
        write_snapshot(
            tmp_path / "t" / "repo.tar",
            git_dir=git_dir,
            base_commit=upstream.base,
            cache_dir=tmp_path / "cache",
        )
    assert err.value.missing == ((old, "big.bin"),)
    assert "pass --history base-only" in str(err.value)
    assert not list((tmp_path / "cache").glob("*.tar"))  # nothing kept of a failed cut
    assert not list((tmp_path / "cache" / "packs").iterdir())  # no half-written shared pack
