"""The one host git environment and runner (packager.repos.git)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from packager.errors import RepoSourceError
from packager.repos.git import GIT_ENV, Git, git_env, run_git, tail


def test_the_environment_holds_every_variable_the_former_copies_set() -> None:
    # The union of the copies repos, repos/read, checks/audit and checks/quality defined.
    assert GIT_ENV == {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_NO_REPLACE_OBJECTS": "1",
        "LC_ALL": "C",
    }


def test_git_env_lays_the_environment_and_then_extra_over_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("PACKAGER_TEST_KEPT", "yes")
    env = git_env({"GIT_CEILING_DIRECTORIES": "/tmp", "GIT_TERMINAL_PROMPT": "1"})
    assert env["LC_ALL"] == "C"
    assert env["PACKAGER_TEST_KEPT"] == "yes"
    assert env["GIT_CEILING_DIRECTORIES"] == "/tmp"
    assert env["GIT_TERMINAL_PROMPT"] == "1"


def test_run_git_keeps_subprocess_semantics(tmp_path: Path) -> None:
    outside = {"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}
    done = run_git("rev-parse", "--is-inside-work-tree", cwd=tmp_path, env=outside)
    assert done.returncode != 0 and done.stderr
    with pytest.raises(subprocess.CalledProcessError):
        run_git("rev-parse", "--is-inside-work-tree", cwd=tmp_path, env=outside, check=True)
    assert run_git("version").stdout.startswith(b"git version")


def test_the_runner_logs_and_raises_with_gits_words(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "git.log"
    run = Git("org/repo#1", log)
    outside = {"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}
    with pytest.raises(RepoSourceError) as err:
        run(
            "rev-parse",
            "HEAD",
            cwd=tmp_path,
            env=outside,
            field="base_commit",
            problem="reading HEAD",
        )
    assert err.value.task == "org/repo#1" and err.value.field == "base_commit"
    assert "reading HEAD (exit" in str(err.value)
    assert err.value.command == ("git", "rev-parse", "HEAD")
    text = log.read_text()
    assert text.startswith(f"$ git rev-parse HEAD  [in {tmp_path}]\n") and "[exit " in text
    assert run("rev-parse", "HEAD", cwd=tmp_path, env=outside, check=False).returncode != 0


def test_tail_keeps_the_last_lines() -> None:
    assert tail(b"a\nb\nc\n", lines=2) == "b\nc"
    assert tail(None) == ""
