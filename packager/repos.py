"""Repo sources and snapshots: where a repository comes from, and the cut copy that goes into
the agent image.

A repo source is a bare repo, a working copy, a git bundle or a URL (default
`https://github.com/<owner>/<name>.git`). Bundles and URLs are cloned once into a bare mirror
cache shared by every task of that repository. Nothing here ever runs inside `docker build`.

A snapshot is a fresh repository holding the history up to `base_commit` and nothing after it:
one branch, no tags, no remotes, no reflog, no stray objects, so `git log --all` inside the
agent image cannot show the fix.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packager.errors import RepoSourceError
from packager.gitobj import INLINE_IDENTITY, INLINE_MESSAGE, INLINE_TIMESTAMP

_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "LC_ALL": "C",
}


def _git(
    *args: str, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **_GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, check=check, timeout=600
    )


def default_cache_dir() -> Path:
    """Where bare mirrors live (`PACKAGER_CACHE` overrides)."""
    root = os.environ.get("PACKAGER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "packager"
    )
    return Path(root) / "mirrors"


@dataclass(frozen=True)
class RepoSource:
    """Where one repository's objects come from."""

    name: str
    location: str

    @property
    def is_url(self) -> bool:
        return "://" in self.location or self.location.startswith("git@")


def parse_repo_source_options(values: list[str]) -> dict[str, str]:
    """`--repo-source NAME=LOCATION` options → mapping."""
    mapping: dict[str, str] = {}
    for value in values:
        name, sep, location = value.partition("=")
        if not sep or "/" not in name or not location:
            raise RepoSourceError(
                "<cli>", "--repo-source", f"expected OWNER/NAME=LOCATION, got {value!r}"
            )
        mapping[name] = location
    return mapping


def source_for(name: str, overrides: dict[str, str]) -> RepoSource:
    """The override for `name`, else its GitHub URL."""
    return RepoSource(name, overrides.get(name) or f"https://github.com/{name}.git")


@lru_cache(maxsize=256)
def git_dir_for(source: RepoSource, cache_dir: Path | None = None) -> Path:
    """A local git directory holding the source's objects (cloned into the mirror cache once)."""
    location = source.location
    path = Path(location)
    if not source.is_url and path.is_dir():
        probe = _git("rev-parse", "--git-dir", cwd=path, check=False)
        if probe.returncode != 0:
            raise RepoSourceError(source.name, "repo", f"{location} is not a git repository")
        return (path / probe.stdout.decode().strip()).resolve()
    if not source.is_url and not path.is_file():
        raise RepoSourceError(source.name, "repo", f"repo source {location} does not exist")
    cache = cache_dir or default_cache_dir()
    key = hashlib.sha256(f"{location}\0{_stamp(path)}".encode()).hexdigest()[:12]
    mirror = cache / f"{source.name.replace('/', '__')}-{key}.git"
    if not (mirror / "HEAD").exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".clone-"))
        result = _git("clone", "--mirror", "--quiet", location, str(tmp / "m.git"), check=False)
        if result.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RepoSourceError(
                source.name,
                "repo",
                f"cannot clone {location}: {result.stderr.decode().strip()[-300:]}",
            )
        os.replace(tmp / "m.git", mirror)
        shutil.rmtree(tmp, ignore_errors=True)
    return mirror


def _stamp(path: Path) -> str:
    """A bundle's identity: its size and mtime, so a regenerated bundle gets a new mirror."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return f"{st.st_size}-{st.st_mtime_ns}"


@lru_cache(maxsize=4096)
def has_commit(git_dir: Path, sha: str) -> bool:
    """Whether the repository has the commit."""
    return _git("cat-file", "-e", f"{sha}^{{commit}}", cwd=git_dir, check=False).returncode == 0


@lru_cache(maxsize=1024)
def read_diff(git_dir: Path, base: str, head: str) -> str:
    """`git diff --binary base head` (the SWEeper gold change)."""
    return _git("diff", "--binary", "--full-index", base, head, cwd=git_dir).stdout.decode()


def write_snapshot_repo(
    dest: Path, *, git_dir: Path | None, base_commit: str, files: dict[str, bytes] | None = None
) -> None:
    """Make `dest` a repository whose only history ends at `base_commit`, tree checked out."""
    dest.mkdir(parents=True)
    _git("-c", "init.defaultBranch=main", "init", "--quiet", str(dest))
    if files is not None:
        for rel, data in files.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        env_ident = INLINE_IDENTITY.split(" <")
        name, email = env_ident[0], env_ident[1].rstrip(">")
        _git("add", "-A", cwd=dest)
        subprocess.run(
            [
                "git",
                "-c",
                "commit.gpgsign=false",
                "commit",
                "--quiet",
                "--no-verify",
                "-m",
                INLINE_MESSAGE.rstrip("\n"),
            ],
            cwd=dest,
            check=True,
            capture_output=True,
            timeout=120,
            env={
                **os.environ,
                **_GIT_ENV,
                "GIT_AUTHOR_NAME": name,
                "GIT_AUTHOR_EMAIL": email,
                "GIT_COMMITTER_NAME": name,
                "GIT_COMMITTER_EMAIL": email,
                "GIT_AUTHOR_DATE": INLINE_TIMESTAMP,
                "GIT_COMMITTER_DATE": INLINE_TIMESTAMP,
            },
        )
    else:
        assert git_dir is not None
        # Fetch only what base_commit reaches (protocol v2 serves any reachable commit id);
        # the source repository is never modified.
        _git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--update-head-ok",
            str(git_dir),
            f"{base_commit}:refs/heads/main",
            cwd=dest,
        )
        _git("symbolic-ref", "HEAD", "refs/heads/main", cwd=dest)
        _git("reset", "--quiet", "--hard", "refs/heads/main", cwd=dest)
    head = _git("rev-parse", "HEAD", cwd=dest).stdout.decode().strip()
    if head != base_commit:
        raise RepoSourceError("<snapshot>", "base_commit", f"snapshot HEAD {head} != {base_commit}")
    # No reflog, no FETCH_HEAD, no hooks or sample files, every object packed and reachable.
    for leftover in ("FETCH_HEAD", "ORIG_HEAD", "logs", "hooks", "description", "info"):
        target = dest / ".git" / leftover
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    _git(
        "-c",
        "gc.reflogExpire=now",
        "-c",
        "pack.threads=1",
        "gc",
        "--quiet",
        "--prune=now",
        cwd=dest,
    )


def write_snapshot_tar(repo: Path, tar_path: Path) -> None:
    """A deterministic tar of the snapshot (sorted, uid 0, mtime 0)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(repo.rglob("*")):
            rel = path.relative_to(repo).as_posix()
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    tmp = tar_path.with_suffix(".tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, tar_path)
