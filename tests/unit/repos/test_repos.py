"""Repo sources (URL keys, folders of mirrors) and snapshots, with real git repositories."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from packager import repos
from packager.errors import RepoSourceError
from packager.repos.objects import base_only_commit_sha, inline_commit_sha
from tests.conftest import REALROWS_BUNDLE as MARSHMALLOW_BUNDLE

MARSHMALLOW_BASE = "2be2d83a1a9a6d3d9b85804f3ab545cecc409bb0"

ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "1600000000 +0000",
    "GIT_COMMITTER_DATE": "1600000000 +0000",
    "LC_ALL": "C",
}


def git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=ENV, capture_output=True, check=True)
    return proc.stdout.decode().strip()


@dataclass
class Upstream:
    path: Path  # a working copy
    first: str  # first commit
    base: str  # the row's base commit
    later: str  # the fix, after base (tagged)


def make_upstream(path: Path) -> Upstream:
    path.mkdir(parents=True)
    git("-c", "init.defaultBranch=main", "init", "--quiet", cwd=path)
    (path / "README").write_text("hello\n")
    (path / "big.bin").write_bytes(b"version one\n" * 50)
    (path / "src").mkdir()
    (path / "src" / "a.py").write_text("A = 1\n")
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "first", cwd=path)
    first = git("rev-parse", "HEAD", cwd=path)
    (path / "big.bin").write_bytes(b"version two\n" * 50)
    (path / "src" / "b.py").write_text("B = 2\n")
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "base", cwd=path)
    base = git("rev-parse", "HEAD", cwd=path)
    git("branch", "base", cwd=path)
    (path / "src" / "a.py").write_text("A = 'the fix'\n")
    git("add", "-A", cwd=path)
    git("commit", "--quiet", "-m", "the fix", cwd=path)
    later = git("rev-parse", "HEAD", cwd=path)
    git("tag", "v1.0", cwd=path)
    return Upstream(path, first, base, later)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return make_upstream(tmp_path / "upstream")


def drop_object(git_dir: Path, oid: str) -> None:
    """Delete one loose object: the source now lacks it."""
    (git_dir / "objects" / oid[:2] / oid[2:]).unlink()


def snapshot(tmp_path: Path, git_dir: Path, base: str, **kwargs: object) -> tuple[Path, str]:
    dest = tmp_path / f"snap-{len(list(tmp_path.glob('snap-*')))}"
    head = repos.write_snapshot_repo(dest, git_dir=git_dir, base_commit=base, **kwargs)  # type: ignore[arg-type]
    return dest, head


# --- names and sources -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        "owner/name",
        "owner/name.git",
        "https://github.com/owner/name",
        "https://github.com/owner/name.git",
        "https://github.com/owner/name/",
        "http://github.com/owner/name",
        "https://github.com/owner/name/tree/main",
        "git@github.com:owner/name.git",
        "ssh://git@github.com/owner/name.git",
        "github.com/owner/name",
        "  https://github.com/owner/name.git  ",
    ],
)
def test_canonical_repo_name(given: str) -> None:
    assert repos.canonical_repo_name(given) == "owner/name"


def test_canonical_repo_name_keeps_case_and_dots() -> None:
    assert repos.canonical_repo_name("https://github.com/Psf/Requests.py") == "Psf/Requests.py"


@pytest.mark.parametrize("bad", ["name", "a/b/c", "/abs/path", "https://github.com/owner", ""])
def test_canonical_repo_name_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        repos.canonical_repo_name(bad)


def test_url_keys_and_name_keys_are_one_form(tmp_path: Path) -> None:
    sources = repos.parse_repo_sources(
        ["https://github.com/a/one.git=/x/one", "b/two=/x/two", "https://github.com/c/three=/x/3"]
    )
    assert sources.explicit == {"a/one": "/x/one", "b/two": "/x/two", "c/three": "/x/3"}
    assert sources.mirror_dirs == ()
    assert sources.location_for("a/one") == "/x/one"
    assert sources.location_for("https://github.com/b/two") == "/x/two"
    assert sources.location_for("C/Three") == "/x/3"  # GitHub names are case-insensitive
    assert sources.location_for("d/four") is None
    assert "a/one" in sources and "d/four" not in sources
    # plain dicts keep working, with URL row names
    assert repos.source_for("https://github.com/b/two", {"b/two": "/x/two"}).location == "/x/two"
    src = repos.source_for("https://github.com/a/one", sources)
    assert src == repos.RepoSource("a/one", "/x/one")
    assert repos.parse_repo_source_options(["https://github.com/a/one=/x/one"]) == {
        "a/one": "/x/one"
    }


def test_default_locations() -> None:
    assert repos.source_for("o/n", {}).location == "https://github.com/o/n.git"
    by_url = repos.source_for("https://github.com/o/n", {})
    assert by_url == repos.RepoSource("o/n", "https://github.com/o/n")


@pytest.mark.parametrize("bad", ["noslash=/x", "o/n=", "/no/such/folder"])
def test_bad_repo_source_values(bad: str) -> None:
    with pytest.raises(RepoSourceError) as err:
        repos.parse_repo_sources([bad])
    assert err.value.field == "--repo-source"


def _bare(upstream: Upstream, dest: Path) -> None:
    git("clone", "--quiet", "--bare", str(upstream.path), str(dest))


def _work(upstream: Upstream, dest: Path) -> None:
    git("clone", "--quiet", str(upstream.path), str(dest))


def _bundle(upstream: Upstream, dest: Path) -> None:
    git("bundle", "create", "--quiet", str(dest), "--all", cwd=upstream.path)


LAYOUTS = [
    ("{o}/{n}.git", _bare),
    ("{o}/{n}", _bare),
    ("{o}/{n}", _work),
    ("{o}+{n}", _work),
    ("{o}+{n}.git", _bare),
    ("{o}__{n}.bundle", _bundle),
    ("{o}__{n}.git", _bare),
]


@pytest.mark.parametrize(("layout", "make"), LAYOUTS, ids=[f"{x}-{m.__name__}" for x, m in LAYOUTS])
def test_each_mirror_folder_layout(
    tmp_path: Path, upstream: Upstream, layout: str, make: object
) -> None:
    mirrors = tmp_path / "mirrors"
    target = mirrors / layout.format(o="acme", n="widget")
    target.parent.mkdir(parents=True, exist_ok=True)
    make(upstream, target)  # type: ignore[operator]
    (mirrors / "acme" / "unrelated").mkdir(parents=True, exist_ok=True)  # not a repository

    sources = repos.parse_repo_sources([str(mirrors)])
    assert sources.mirror_dirs == (str(mirrors),)
    assert sources.location_for("acme/widget") == str(target)
    assert sources.location_for("https://github.com/ACME/Widget.git") == str(target)
    assert sources.location_for("acme/unrelated") is None
    assert repos.parse_repo_source_options([str(mirrors)]) == {"acme/widget": str(target)}
    assert repos.source_for("acme/widget", {}, mirror_dirs=[str(mirrors)]).location == str(target)

    src = repos.source_for("https://github.com/acme/widget", sources)
    git_dir = repos.git_dir_for(src, tmp_path / "cache")
    dest, head = snapshot(tmp_path, git_dir, upstream.base)
    assert head == upstream.base
    assert git("log", "--all", "--format=%H", cwd=dest).split() == [upstream.base, upstream.first]
    assert git("tag", cwd=dest) == ""
    assert (dest / "src" / "b.py").read_text() == "B = 2\n"
    assert (dest / "src" / "a.py").read_text() == "A = 1\n"


def test_explicit_beats_mirrors_and_earlier_folders_win(tmp_path: Path, upstream: Upstream) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    _bare(upstream, one / "o+n.git")
    _bare(upstream, two / "o__n.git")
    _bare(upstream, two / "p+q.git")
    sources = repos.parse_repo_sources([str(one), str(two), "o/n=/elsewhere"])
    assert sources.location_for("o/n") == "/elsewhere"
    assert repos.parse_repo_sources([str(one), str(two)]).location_for("o/n") == str(
        one / "o+n.git"
    )
    assert repos.parse_repo_source_options([str(two), str(one), "p/q=/pq"]) == {
        "o/n": str(two / "o__n.git"),
        "p/q": "/pq",
    }
    merged = repos.parse_repo_sources([str(one)]).with_defaults({"x/y": "/xy", "o/n": "/dflt"})
    assert merged.location_for("x/y") == "/xy"
    assert merged.location_for("o/n") == "/dflt"  # explicit defaults come before mirror folders


def test_a_plain_folder_inside_a_repository_is_not_a_source(
    tmp_path: Path, upstream: Upstream
) -> None:
    plain = upstream.path / "src"
    with pytest.raises(RepoSourceError, match="not a git repository"):
        repos.git_dir_for(repos.RepoSource("o/n", str(plain)), tmp_path / "cache")


# --- snapshots: failures ---------------------------------------------------------------------


def test_source_lacking_the_base_commit(tmp_path: Path, upstream: Upstream) -> None:
    missing = "1234567890abcdef1234567890abcdef12345678"
    git_dir = upstream.path / ".git"
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, git_dir, missing, task="demo-1")
    text = str(err.value)
    assert err.value.task == "demo-1" and err.value.field == "base_commit"
    assert missing in text and str(git_dir) in text


def test_bundle_lacking_the_base_commit_names_the_bundle(
    tmp_path: Path, upstream: Upstream
) -> None:
    bundle = tmp_path / "o__n.bundle"
    git("bundle", "create", "--quiet", str(bundle), "base", cwd=upstream.path)
    git_dir = repos.git_dir_for(repos.RepoSource("o/n", str(bundle)), tmp_path / "cache")
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, git_dir, upstream.later)
    assert upstream.later in str(err.value) and str(bundle) in str(err.value)


@pytest.mark.parametrize("history", ["full", "base-only"])
def test_missing_blob_of_the_base_tree_is_named_with_its_path(
    tmp_path: Path, upstream: Upstream, history: str
) -> None:
    git_dir = upstream.path / ".git"
    blob = git("rev-parse", f"{upstream.base}:big.bin", cwd=upstream.path)
    drop_object(git_dir, blob)
    log = tmp_path / "logs" / "snapshot.log"
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, git_dir, upstream.base, history=history, log_path=log, task="t-1")
    text = str(err.value)
    assert "big.bin" in text and blob in text and "lacks 1 object" in text
    assert err.value.missing == ((blob, "big.bin"),)
    assert "$ git rev-list --objects --missing=print --no-walk" in log.read_text()


def test_missing_tree_of_the_base_is_named_with_its_path(
    tmp_path: Path, upstream: Upstream
) -> None:
    git_dir = upstream.path / ".git"
    tree = git("rev-parse", f"{upstream.base}:src", cwd=upstream.path)
    drop_object(git_dir, tree)
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, git_dir, upstream.base, history="base-only")
    assert err.value.missing == ((tree, "src"),)


def test_history_blob_missing_full_fails_and_points_at_base_only(
    tmp_path: Path, upstream: Upstream
) -> None:
    git_dir = upstream.path / ".git"
    old = git("rev-parse", f"{upstream.first}:big.bin", cwd=upstream.path)
    drop_object(git_dir, old)
    log = tmp_path / "logs" / "snapshot.log"
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, git_dir, upstream.base, log_path=log)
    text = str(err.value)
    assert "history objects missing (1)" in text
    assert "the base tree is complete: pass --history base-only" in text
    assert err.value.missing == ((old, "big.bin"),)
    assert err.value.command is not None and err.value.command[:2] == ("git", "pack-objects")
    assert err.value.stderr  # git's own words are kept
    assert "git said:" in text
    logged = log.read_text()
    assert "$ git pack-objects" in logged and "[exit 128]" in logged
    assert err.value.stderr.splitlines()[-1] in logged

    dest, head = snapshot(tmp_path, git_dir, upstream.base, history="base-only", log_path=log)
    assert git("rev-parse", "HEAD^{tree}", cwd=dest) == git(
        "rev-parse", f"{upstream.base}^{{tree}}", cwd=upstream.path
    )
    assert head == git("rev-parse", "HEAD", cwd=dest)


def test_shallow_source_fails_at_once_under_full(tmp_path: Path, upstream: Upstream) -> None:
    shallow = tmp_path / "shallow"
    git(
        "clone",
        "--quiet",
        "--depth",
        "1",
        "--branch",
        "base",
        f"file://{upstream.path}",
        str(shallow),
    )
    assert (shallow / ".git" / "shallow").exists()
    log = tmp_path / "snap.log"
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, shallow / ".git", upstream.base, log_path=log)
    text = str(err.value)
    assert "shallow clone" in text and "pass --history base-only" in text
    assert upstream.base in text
    assert "$ git fetch" not in log.read_text()  # refused before copying anything

    dest, head = snapshot(tmp_path, shallow / ".git", upstream.base, history="base-only")
    assert git("rev-parse", "HEAD^{tree}", cwd=dest) == git(
        "rev-parse", f"{upstream.base}^{{tree}}", cwd=upstream.path
    )


def test_shallow_source_without_the_base_says_it_is_shallow(
    tmp_path: Path, upstream: Upstream
) -> None:
    shallow = tmp_path / "shallow"
    git("clone", "--quiet", "--depth", "1", f"file://{upstream.path}", str(shallow))
    with pytest.raises(RepoSourceError) as err:
        snapshot(tmp_path, shallow / ".git", upstream.base, history="base-only")
    assert "not found" in str(err.value) and "shallow clone" in str(err.value)


def test_unknown_history_mode(tmp_path: Path, upstream: Upstream) -> None:
    with pytest.raises(RepoSourceError, match="history"):
        snapshot(tmp_path, upstream.path / ".git", upstream.base, history="some")


# --- snapshots: success ----------------------------------------------------------------------


def test_full_cuts_history_at_base_and_logs_commands(tmp_path: Path, upstream: Upstream) -> None:
    log = tmp_path / "logs" / "snapshot.log"
    dest, head = snapshot(tmp_path, upstream.path / ".git", upstream.base, log_path=log)
    assert head == upstream.base
    assert git("log", "--all", "--format=%H", cwd=dest).split() == [upstream.base, upstream.first]
    assert git("tag", cwd=dest) == "" and git("remote", cwd=dest) == ""
    assert not (dest / ".git" / "logs").exists() and not (dest / ".git" / "FETCH_HEAD").exists()
    probe = subprocess.run(
        ["git", "cat-file", "-e", upstream.later], cwd=dest, env=ENV, capture_output=True
    )
    assert probe.returncode != 0
    logged = log.read_text()
    for command in (
        "$ git -c init.defaultBranch=main init",
        "$ git pack-objects",
        "$ git reset",
        "$ git pack-refs",
    ):
        assert command in logged
    # One pack of exactly what the base reaches, written by the source: no loose objects.
    loose = [p for p in (dest / ".git" / "objects").glob("??/*")]
    assert loose == [] and len(list((dest / ".git" / "objects" / "pack").glob("*.pack"))) == 1
    held = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=dest)
    reached = git("rev-list", "--objects", upstream.base, cwd=upstream.path)
    assert sorted(held.split()) == sorted(line.split()[0] for line in reached.splitlines())


def test_base_only_is_one_reproducible_commit_with_the_base_tree(
    tmp_path: Path, upstream: Upstream
) -> None:
    git_dir = upstream.path / ".git"
    dest, head = snapshot(tmp_path, git_dir, upstream.base, history="base-only")
    assert head != upstream.base
    assert git("rev-parse", "HEAD", cwd=dest) == head
    base_tree = git("rev-parse", f"{upstream.base}^{{tree}}", cwd=upstream.path)
    assert head == base_only_commit_sha(base_tree, upstream.base)  # known before the snapshot
    assert git("rev-list", "--all", cwd=dest).split() == [head]
    assert git("rev-parse", "HEAD^{tree}", cwd=dest) == git(
        "rev-parse", f"{upstream.base}^{{tree}}", cwd=upstream.path
    )
    assert git("symbolic-ref", "HEAD", cwd=dest) == "refs/heads/main"
    assert git("status", "--porcelain", cwd=dest) == ""
    assert (dest / "big.bin").read_bytes() == b"version two\n" * 50
    for sha in (upstream.first, upstream.base, upstream.later):
        probe = subprocess.run(
            ["git", "cat-file", "-e", sha], cwd=dest, env=ENV, capture_output=True
        )
        assert probe.returncode != 0
    # the first commit's blob is not copied: only the base tree's objects are
    old_blob = git("rev-parse", f"{upstream.first}:big.bin", cwd=upstream.path)
    probe = subprocess.run(
        ["git", "cat-file", "-e", old_blob], cwd=dest, env=ENV, capture_output=True
    )
    assert probe.returncode != 0
    # same base, same commit; the diff base inside the image is the returned HEAD
    _, again = snapshot(tmp_path, git_dir, upstream.base, history="base-only")
    assert again == head
    (dest / "src" / "a.py").write_text("changed\n")
    git("add", "-A", cwd=dest)
    assert "src/a.py" in git("diff", "--cached", "--stat", head, cwd=dest)


def test_inline_files_still_make_the_inline_commit(tmp_path: Path) -> None:
    files = {"a.txt": b"x\n", "d/b.txt": b"y\n"}
    dest = tmp_path / "inline"
    sha = inline_commit_sha(files)
    head = repos.write_snapshot_repo(dest, git_dir=None, base_commit=sha, files=files)
    assert head == sha


def test_real_upstream_bundle_base_only(tmp_path: Path) -> None:
    if not MARSHMALLOW_BUNDLE.exists():
        pytest.fail(f"missing {MARSHMALLOW_BUNDLE}", pytrace=False)
    src = repos.source_for(
        "https://github.com/marshmallow-code/marshmallow",
        repos.parse_repo_sources([f"marshmallow-code/marshmallow={MARSHMALLOW_BUNDLE}"]),
    )
    git_dir = repos.git_dir_for(src, tmp_path / "cache")
    log = tmp_path / "snap.log"
    dest, head = snapshot(tmp_path, git_dir, MARSHMALLOW_BASE, history="base-only", log_path=log)
    assert git("rev-parse", "HEAD^{tree}", cwd=dest) == git(
        "rev-parse", f"{MARSHMALLOW_BASE}^{{tree}}", cwd=git_dir
    )
    assert git("rev-list", "--all", cwd=dest).split() == [head]
    assert "$ git pack-objects" in log.read_text()


def test_errors_keep_the_old_constructor() -> None:
    err = RepoSourceError("t", "repo", "gone")
    assert str(err) == "t: field 'repo': gone"
    assert err.command is None and err.stderr == "" and err.missing == ()


def test_the_snapshot_keeps_the_tags_that_are_history(tmp_path: Path, upstream: Upstream) -> None:
    """Tags on the base or an ancestor, made no later than the base, come along (setuptools_scm
    versions a checkout from them); a tag on the fix, or one made after the base, does not."""
    later = {**ENV, "GIT_COMMITTER_DATE": "1600000999 +0000"}

    def tag(*args: str, env: dict[str, str] = ENV) -> None:
        subprocess.run(["git", "tag", *args], cwd=upstream.path, env=env, check=True)

    tag("-a", "-m", "release 0.9", "v0.9", upstream.first)  # annotated, on an ancestor
    tag("v0.9.1", upstream.base)  # lightweight, on the base
    tag("-a", "-m", "made later", "retro", upstream.first, env=later)  # after the base
    dest, head = snapshot(tmp_path, upstream.path / ".git", upstream.base)
    assert head == upstream.base
    assert git("tag", cwd=dest).split() == ["v0.9", "v0.9.1"]  # not v1.0 (the fix), not retro
    assert git("describe", "--tags", cwd=dest) == "v0.9.1"
    assert git("cat-file", "-t", "v0.9", cwd=dest) == "tag"
    everything = git("log", "--all", "--format=%H", cwd=dest).split()
    assert everything == [upstream.base, upstream.first]
    objects = git("cat-file", "--batch-all-objects", "--batch-check=%(objecttype)", cwd=dest)
    assert objects.split().count("tag") == 1  # only v0.9's tag object


def test_two_processes_cloning_one_mirror_both_get_it(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers on one host miss the mirror cache at once: the one whose clone lands second
    finds the mirror in place (os.replace refuses a non-empty folder) and uses it."""
    from packager.repos import fetch

    bundle = tmp_path / "o__n.bundle"
    _bundle(upstream, bundle)
    cache = tmp_path / "cache"
    real_git = fetch.git

    identity = f"{bundle}\0{fetch._stamp(bundle)}".encode()
    mirror = cache / f"o__n-{fetch.hashlib.sha256(identity).hexdigest()[:12]}.git"

    def racing_git(*args: str, **kwargs: object) -> object:
        result = real_git(*args, **kwargs)  # type: ignore[arg-type]
        if args[:1] == ("clone",):  # the other worker's clone lands while ours ran
            real_git("clone", "--mirror", "--quiet", str(bundle), str(mirror))
        return result

    monkeypatch.setattr(fetch, "git", racing_git)
    fetch.git_dir_for.cache_clear()
    git_dir = fetch.git_dir_for(repos.RepoSource("o/n", str(bundle)), cache)
    assert (git_dir / "HEAD").exists()
    assert git("rev-parse", "--verify", f"{upstream.later}^{{commit}}", cwd=git_dir).strip()
    assert not list(cache.glob(".clone-*"))  # our copy is gone
