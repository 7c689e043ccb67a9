"""Run folders on the real engine (packager/engines/mounts.py): a run's agent and grader
containers each get a host folder at /logs; the gold patch still scores 1.0 through them and
through the archive calls (folders off), and an agent that plants symbolic links in its /logs
reads nothing of this host into the run's logs or the patch.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import pytest

from packager.engines import containers, mounts
from packager.engines.containers import run_once, wait_for_removals
from tests.conftest import run_cli
from tests.integration.test_adversarial import run_plan

pytestmark = [pytest.mark.docker]

TASK = "samples__textkit-1"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Path:
    out = tmp_path_factory.mktemp("run-folders")
    proc = run_cli("build", TASK, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _refuse(name: str) -> Any:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError(f"{name} was called")

    return refuse


def test_gold_scores_through_folders_and_through_archives(
    built: Path, docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, _ = run_plan(built, "samples", TASK)
    assert mounts.mounts_usable(docker_client), "this host's engine should share its files"
    with monkeypatch.context() as m:
        # Folders: no archive is read, none is put once the first run proved the folders.
        m.setattr(containers, "read_tar_member", _refuse("read_tar_member"))
        first = run_once(docker_client, plan, "oracle", tmp_path / "folders-1")
        assert mounts.mounts_proven(docker_client)
        m.setattr(containers, "make_tar", _refuse("make_tar"))
        second = run_once(docker_client, plan, "oracle", tmp_path / "folders-2")
        nop = run_once(docker_client, plan, "nop", tmp_path / "folders-nop")
    with monkeypatch.context() as m:
        m.setenv(mounts.MOUNTS_ENV, "0")
        m.setattr(containers, "read_confined", _refuse("read_confined"))
        archived = run_once(docker_client, plan, "oracle", tmp_path / "archives")
        archived_nop = run_once(docker_client, plan, "nop", tmp_path / "archives-nop")
    wait_for_removals()
    assert [r.reward for r in (first, second, archived)] == [1.0, 1.0, 1.0]
    assert nop.reward == archived_nop.reward == 0.0
    assert nop.tests_run == archived_nop.tests_run and nop.tests_run
    for name in ("reward.json", "report.json", "test-output.txt", "grader.txt"):
        assert (tmp_path / "folders-2" / name).is_file(), name
        assert (tmp_path / "archives" / name).is_file(), name
    left = list(Path(tempfile.gettempdir()).glob(f"{mounts.FOLDER_PREFIX}{os.getpid()}-*"))
    assert not left, "run folders left behind"


def test_links_planted_by_the_agent_read_nothing_of_this_host(
    built: Path, docker_client: Any, tmp_path: Path
) -> None:
    token = secrets.token_hex(16)
    secret = Path("/tmp") / f"packager-host-secret-{token}"
    secret.write_text(f"host secret {token}\n")
    try:
        plan, _ = run_plan(built, "samples", TASK)
        solution = tmp_path / "solution"
        solution.mkdir()
        (solution / "solve.sh").write_text(
            "#!/bin/bash\n"
            "echo visible\n"
            # solve.txt (already open for this script's output) and the patch the collect hook
            # writes become links to a path that only this host holds.
            f"rm -f /logs/agent/solve.txt && ln -s {secret} /logs/agent/solve.txt\n"
            f"mkdir -p /logs/artifacts && ln -s {secret} /logs/artifacts/model.patch\n"
        )
        from dataclasses import replace

        attack = replace(plan, solution_dir=solution)
        run = run_once(docker_client, attack, "oracle", tmp_path / "attack")
        wait_for_removals()
    finally:
        secret.unlink()
    logs = tmp_path / "attack"
    for path in logs.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path
    assert (logs / "model.patch").read_bytes() == b""
    assert run.reward is not None and run.reward < 1.0


class _NoGraderFolder:
    """`client.containers` that drops the /logs folder of every grader container (an engine
    whose mounts a container does not see)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create(self, image: str, **kwargs: Any) -> Any:
        if str(kwargs.get("labels", {}).get("packager.role", "")).startswith("grader"):
            kwargs.pop("volumes", None)
        return self.inner.create(image, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Client:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.containers = _NoGraderFolder(inner.containers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_grader_that_does_not_see_its_folder_grades_through_archives(
    built: Path, docker_client: Any, tmp_path: Path
) -> None:
    plan, _ = run_plan(built, "samples", TASK)
    client = _Client(docker_client)
    assert mounts.mounts_usable(client)
    first = run_once(client, plan, "oracle", tmp_path / "first")  # proves the agent's folder
    second = run_once(client, plan, "oracle", tmp_path / "second")
    wait_for_removals()
    assert [first.reward, second.reward] == [1.0, 1.0], (first.reason, second.reason)
    assert second.duration_sec < 60
    assert not mounts.mounts_usable(client)  # later runs of this client: archive calls only


def test_a_patch_graded_before_any_proof_goes_in_as_an_archive(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.images.build import connect

    client = connect()  # a client no run has proven yet
    plan, _ = run_plan(built, "samples", TASK)
    gold = (built / "samples" / "tasks" / TASK / "solution" / "gold.patch").read_bytes()
    assert mounts.mounts_usable(client) and not mounts.mounts_proven(client)
    # The patch is put into the grader's folder through the engine; the results are read
    # from the folder.
    monkeypatch.setattr(containers, "read_tar_member", _refuse("read_tar_member"))
    run = run_once(client, plan, "patch", tmp_path / "patch", patch=gold)
    wait_for_removals()
    assert run.reward == 1.0, run.reason
    assert (tmp_path / "patch" / "model.patch").read_bytes() == gold


def test_the_readme_command_with_a_relative_out_folder(docker_client: Any, tmp_path: Path) -> None:
    # `make package` passes `--out build`: the solution is rendered under a relative path, and
    # the engine takes a relative bind source for a volume's name (an infra_error once). The
    # second oracle run of the process is the one that mounts the solution.
    proc = run_cli("package", TASK, "--out", "build", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified" in proc.stdout, proc.stdout
