"""Running git on the host: the one environment every host-side git command gets, and the one
runner that logs commands and turns failures into `RepoSourceError`.

`GIT_ENV` makes git deterministic and non-interactive: no credential prompt, no system or user
configuration, replace refs ignored, C locale (messages and sorting do not depend on the
machine). The in-container runtime (`packager.grading.patching`) keeps its own copy: it ships
without the rest of the package.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from packager.errors import RepoSourceError

GIT_ENV: dict[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_NO_REPLACE_OBJECTS": "1",
    "LC_ALL": "C",
}
TIMEOUT = 600
"""Seconds a git command may take (`run_git`'s default)."""
_STDERR_LINES = 12  # how much of git's stderr an error carries


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment with `GIT_ENV` (and then `extra`) laid over it."""
    return {**os.environ, **GIT_ENV, **(extra or {})}


def run_git(
    *args: str,
    cwd: Path | str | None = None,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = TIMEOUT,
    check: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """`git *args` with `git_env(env)`, output captured: plain `subprocess.run` semantics
    (`CalledProcessError` when `check`, `TimeoutExpired`, `OSError` when git cannot start).
    """
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=git_env(env),
        input=stdin,
        capture_output=True,
        check=check,
        timeout=timeout,
    )


def tail(data: bytes | str | None, lines: int = _STDERR_LINES) -> str:
    """The last `lines` lines of git's output, decoded."""
    if data is None:
        return ""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    return "\n".join(text.rstrip().splitlines()[-lines:])


class Git:
    """Runs git for one task: logs every command with its stderr, raises `RepoSourceError`."""

    def __init__(self, task: str = "<git>", log_path: Path | None = None) -> None:
        self.task = task
        self.log_path = log_path
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return git_env(extra)

    def log(
        self, argv: Sequence[str], cwd: Path | None, stderr: bytes | str | None, end: str
    ) -> None:
        if self.log_path is None:
            return
        where = f"  [in {cwd}]" if cwd is not None else ""
        text = tail(stderr, lines=200)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"$ {shlex.join(argv)}{where}\n")
            if text:
                fh.write(text + "\n")
            fh.write(f"[{end}]\n")

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        check: bool = True,
        field: str = "repo",
        problem: str | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = ["git", *args]
        what = problem or "git command"
        try:
            proc = run_git(*args, cwd=cwd, stdin=stdin, env=env)
        except subprocess.TimeoutExpired as exc:
            self.log(argv, cwd, exc.stderr, f"timed out after {TIMEOUT}s")
            raise RepoSourceError(
                self.task,
                field,
                f"{what}: timed out after {TIMEOUT}s",
                command=argv,
                stderr=tail(exc.stderr),
            ) from None
        except OSError as exc:
            self.log(argv, cwd, str(exc), "could not start")
            raise RepoSourceError(
                self.task, field, f"{what}: cannot run git: {exc}", command=argv
            ) from None
        self.log(argv, cwd, proc.stderr, f"exit {proc.returncode}")
        if check and proc.returncode != 0:
            raise RepoSourceError(
                self.task,
                field,
                f"{problem or 'git command failed'} (exit {proc.returncode})",
                command=argv,
                stderr=tail(proc.stderr),
            )
        return proc


def git(
    *args: str, cwd: Path | None = None, check: bool = True, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """One git command, unlogged; a failure (when `check`) is a `RepoSourceError`."""
    return Git()(*args, cwd=cwd, check=check, env=env)
