"""A local git directory for a repo source (a bundle or URL is cloned once into the mirror
cache shared by every task of the repository), and the few reads made on it by commit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from packager.errors import RepoSourceError
from packager.repos.git import git, tail
from packager.repos.sources import RepoSource
from packager.storage import MIRRORS


def default_cache_dir() -> Path:
    """Where bare mirrors live (`storage.MIRRORS`)."""
    return MIRRORS.path()


@lru_cache(maxsize=256)
def git_dir_for(source: RepoSource, cache_dir: Path | None = None) -> Path:
    """A local git directory holding the source's objects (cloned into the mirror cache once)."""
    location = source.location
    path = Path(location)
    if not source.is_url and path.is_dir():
        # Never let discovery climb out of the source into an enclosing repository.
        ceiling = {"GIT_CEILING_DIRECTORIES": str(path.resolve().parent)}
        probe = git("rev-parse", "--git-dir", cwd=path, check=False, env=ceiling)
        if probe.returncode != 0:
            raise RepoSourceError(
                source.name,
                "repo",
                f"{location} is not a git repository",
                stderr=tail(probe.stderr),
            )
        return (path / probe.stdout.decode().strip()).resolve()
    if not source.is_url and not path.is_file():
        raise RepoSourceError(source.name, "repo", f"repo source {location} does not exist")
    cache = cache_dir or default_cache_dir()
    key = hashlib.sha256(f"{location}\0{_stamp(path)}".encode()).hexdigest()[:12]
    mirror = cache / f"{source.name.replace('/', '__')}-{key}.git"
    if not (mirror / "HEAD").exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".clone-"))
        argv = ["clone", "--mirror", "--quiet", location, str(tmp / "m.git")]
        result = git(*argv, check=False)
        if result.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RepoSourceError(
                source.name,
                "repo",
                f"cannot clone {location} (exit {result.returncode})",
                command=["git", *argv],
                stderr=tail(result.stderr),
            )
        try:
            os.replace(tmp / "m.git", mirror)
        except OSError:
            # Another process (a second worker on this host) put the same mirror in place
            # first: theirs is as good as ours.
            if not (mirror / "HEAD").exists():
                raise
        finally:
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
    return git("cat-file", "-e", f"{sha}^{{commit}}", cwd=git_dir, check=False).returncode == 0


@lru_cache(maxsize=1024)
def read_diff(git_dir: Path, base: str, head: str) -> str:
    """`git diff --binary base head` (the SWEeper gold change)."""
    return git("diff", "--binary", "--full-index", base, head, cwd=git_dir).stdout.decode()
