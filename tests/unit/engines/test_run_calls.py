"""The engine calls of one local run (packager/engines/containers.py), with a fake Docker
client: the agent phase is the container's main process (no exec), its outputs come back in
one archive, and containers are removed in the background but always removed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from packager.engines import containers
from packager.engines.containers import AGENT_SCRIPT, RunPlan, agent_phase
from packager.errors import RunError
from packager.images.tar import make_tar


class FakeBox:
    def __init__(self, calls: list[str], outputs: dict[str, bytes], code: int) -> None:
        self.calls, self.outputs, self.code = calls, outputs, code
        self.removed = threading.Event()

    def put_archive(self, path: str, data: bytes) -> None:
        self.calls.append(f"put_archive {path}")

    def start(self) -> None:
        self.calls.append("start")

    def wait(self, timeout: float) -> dict[str, int]:
        self.calls.append(f"wait {timeout}")
        return {"StatusCode": self.code}

    def logs(self, **_: Any) -> bytes:
        self.calls.append("logs")
        return b"mkdir: cannot create directory '/logs': Permission denied\n"

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        self.calls.append(f"get_archive {path}")
        return [make_tar(self.outputs)], {}

    def exec_run(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("the agent phase runs no exec")

    def remove(self, force: bool = False) -> None:
        self.calls.append("remove")
        self.removed.set()


class FakeClient:
    def __init__(self, outputs: dict[str, bytes], code: int = 0) -> None:
        self.calls: list[str] = []
        self.created: list[dict[str, Any]] = []
        self.box = FakeBox(self.calls, outputs, code)
        outer = self

        class Containers:
            def create(self, image: str, **kwargs: Any) -> FakeBox:
                outer.calls.append("create")
                outer.created.append(kwargs)
                return outer.box

        self.containers = Containers()


def _plan(tmp_path: Path) -> RunPlan:
    solution = tmp_path / "solution"
    solution.mkdir()
    (solution / "solve.sh").write_text("#!/bin/bash\ngit apply /solution/gold.patch\n")
    return RunPlan(
        task="t/x",
        agent_image="agent:1",
        grader_image="grader:1",
        workdir="/testbed",
        collect="git diff > /logs/artifacts/model.patch",
        solution_dir=solution,
        grade_timeout_sec=60,
        agent_timeout_sec=300,
    )


OUTPUTS = {
    "logs/agent/solve.txt": b"applied\n",
    "logs/agent/solve.exit": b"0\n",
    "logs/agent/collect.txt": b"",
    "logs/agent/collect.exit": b"0\n",
    "logs/artifacts/model.patch": b"diff --git a/x b/x\n",
}


def test_the_oracle_phase_is_the_containers_main_process(tmp_path: Path) -> None:
    client = FakeClient(OUTPUTS)
    plan = _plan(tmp_path)
    outcome = agent_phase(client, plan, "oracle", tmp_path)  # type: ignore[arg-type]
    # The solution goes in before the start; one wait and one archive read; no exec.
    assert client.calls == [
        "create",
        "put_archive /",
        "start",
        f"wait {300 + 150}",
        "get_archive /logs",
        "remove",
    ]
    command = client.created[0]["command"]
    assert command == ["bash", "-c", AGENT_SCRIPT, "agent", "oracle", "300", plan.collect]
    assert outcome.patch == b"diff --git a/x b/x\n" and outcome.solve_exit == 0
    assert (tmp_path / "agent.txt").read_text() == "exit code 0\napplied\n"
    assert not (tmp_path / "collect.txt").exists()


def test_the_nop_phase_collects_only_and_reports_a_failed_collect(tmp_path: Path) -> None:
    outputs = {
        "logs/agent/collect.txt": b"fatal: not a git repository\n",
        "logs/agent/collect.exit": b"128\n",
    }
    client = FakeClient(outputs)
    outcome = agent_phase(client, _plan(tmp_path), "nop", tmp_path)  # type: ignore[arg-type]
    assert client.calls == ["create", "start", "wait 150", "get_archive /logs", "remove"]
    assert outcome.patch == b"" and outcome.solve_exit is None
    assert "not a git repository" in (tmp_path / "collect.txt").read_text()


def test_an_agent_that_cannot_write_its_outputs_is_a_run_error(tmp_path: Path) -> None:
    client = FakeClient({}, code=125)
    with pytest.raises(RunError, match="Permission denied"):
        agent_phase(client, _plan(tmp_path), "nop", tmp_path)  # type: ignore[arg-type]
    assert client.calls[-1] == "remove"


def test_background_removal_is_waited_for_and_never_a_daemon(tmp_path: Path) -> None:
    client = FakeClient(OUTPUTS)
    release = threading.Event()
    real_remove = client.box.remove

    def slow_remove(force: bool = False) -> None:
        release.wait(10)
        real_remove(force)

    client.box.remove = slow_remove  # type: ignore[method-assign]
    agent_phase(client, _plan(tmp_path), "nop", tmp_path, background=True)  # type: ignore[arg-type]
    assert not client.box.removed.is_set()  # the phase returned before the removal ended
    pending = [t for t in threading.enumerate() if t.name == "remove"]
    assert pending and not any(t.daemon for t in pending)  # the interpreter waits for them
    release.set()
    containers.wait_for_removals()
    assert client.box.removed.is_set()


class _Stubborn:
    """A container whose forced removal fails `refusals` times with `error`, then succeeds."""

    def __init__(self, refusals: int, error: Exception) -> None:
        self.refusals, self.error, self.calls = refusals, error, 0

    def remove(self, force: bool = False) -> None:
        assert force
        self.calls += 1
        if self.calls <= self.refusals:
            raise self.error


def test_a_refused_removal_is_tried_again_until_the_container_is_gone() -> None:
    import docker.errors
    import requests

    from packager.engines.containers import _remove_container

    busy = docker.errors.APIError("driver overlay2 failed to remove root filesystem: busy")
    box = _Stubborn(2, busy)
    assert _remove_container(box, pauses=(0, 0, 0)) and box.calls == 3
    box = _Stubborn(9, busy)
    assert not _remove_container(box, pauses=(0, 0)) and box.calls == 3
    gone = _Stubborn(1, docker.errors.NotFound("no such container"))
    assert _remove_container(gone, pauses=(0, 0)) and gone.calls == 1
    away = _Stubborn(9, requests.exceptions.ConnectionError("connection refused"))
    assert not _remove_container(away, pauses=(0, 0)) and away.calls == 1
