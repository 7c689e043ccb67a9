"""Reading from a repository source without checking it out: a file at a commit, the paths of a
commit's tree, a tree id. Used at render time (requirement files, app start detection, the
base-only commit id); the source is never modified.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from packager.repos.git import run_git


def _git(git_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_git(f"--git-dir={git_dir}", *args, timeout=300)


@lru_cache(maxsize=4096)
def read_file(git_dir: Path, commit: str, path: str) -> bytes | None:
    """The bytes of `path` at `commit`, or None when the commit has no such file."""
    done = _git(git_dir, "cat-file", "blob", f"{commit}:{path}")
    return done.stdout if done.returncode == 0 else None


@lru_cache(maxsize=256)
def list_files(git_dir: Path, commit: str) -> tuple[str, ...]:
    """Every file path of `commit`'s tree (empty when the commit cannot be read)."""
    done = _git(git_dir, "ls-tree", "-r", "--name-only", "-z", commit)
    if done.returncode != 0:
        return ()
    return tuple(p.decode("utf-8", "surrogateescape") for p in done.stdout.split(b"\0") if p)


def tree_sha(git_dir: Path, commit: str) -> str | None:
    """The id of `commit`'s root tree."""
    done = _git(git_dir, "rev-parse", f"{commit}^{{tree}}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


@lru_cache(maxsize=256)
def commit_date(git_dir: Path, commit: str) -> str | None:
    """A commit's committer date (ISO 8601 with its offset), None when it cannot be read."""
    done = _git(git_dir, "log", "-1", "--format=%cI", commit, "--")
    out = done.stdout.decode().strip()
    return out if done.returncode == 0 and out else None
