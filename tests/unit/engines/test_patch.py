"""The one patch-grading path (packager/engines/patch.py): `grade_patch` assembles the task's run
plan and one local-engine run, with a stand-in for `run_once` (no Docker here).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from packager.engines.containers import RunPlan
from packager.engines.local import make_run_plan
from packager.engines.patch import grade_patch
from packager.models.spec import RunResult, TaskSpec
from packager.settings import VerifyConfig
from packager.storage import OutputPaths

IMAGES = {"agent": "packager/samples.t:agent-1", "grader": "packager/samples.t:grader-1"}
MB512 = VerifyConfig(memory_mb=512)
ENDPOINT = {"PACKAGER_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "PACKAGER_JUDGE_MODEL": "m"}


def _sample(task: str) -> TaskSpec:
    from packager.datasets.sources import open_dataset
    from packager.run.select import Selection, iter_specs

    return next(iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=(task,))))


@dataclass
class Call:
    plan: RunPlan
    kind: str
    log_dir: Path
    patch: bytes | None


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every `run_once` grade_patch makes, answered with a graded 1.0 run."""
    made: list[Call] = []

    def run_once(
        client: Any, plan: RunPlan, kind: str, log_dir: Path, patch: bytes | None = None
    ) -> RunResult:
        made.append(Call(plan, kind, log_dir, patch))
        return RunResult(
            kind=kind,  # type: ignore[arg-type]
            reward=1.0,
            grade_status="graded",
            duration_sec=0.1,
            log_dir=str(log_dir),
        )

    monkeypatch.setattr("packager.engines.containers.run_once", run_once)
    return made


def test_a_patch_is_graded_with_the_tasks_own_plan(calls: list[Call], tmp_path: Path) -> None:
    spec = _sample("samples__textkit-1")
    paths = OutputPaths(tmp_path, "samples")
    run = grade_patch(object(), spec, paths, IMAGES, b"diff --git a/x b/x\n", config=MB512)  # type: ignore[arg-type]
    [call] = calls
    assert (call.kind, call.patch) == ("patch", b"diff --git a/x b/x\n")
    assert call.plan == make_run_plan(spec, paths, IMAGES, config=MB512)
    assert call.plan.task == "samples/samples__textkit-1" and call.plan.memory_mb == 512
    assert call.log_dir == paths.log_dir("samples__textkit-1") / "patch"
    assert (run.kind, run.reward, run.log_dir) == ("patch", 1.0, str(call.log_dir))


def test_a_judged_task_gets_its_endpoint_and_network(calls: list[Call], tmp_path: Path) -> None:
    spec = _sample("samples__todo-web-5")
    paths = OutputPaths(tmp_path, "samples")
    where = tmp_path / "elsewhere"
    grade_patch(object(), spec, paths, IMAGES, b"", log_dir=where, judge_env=ENDPOINT)  # type: ignore[arg-type]
    [call] = calls
    assert call.log_dir == where and call.patch == b""
    assert call.plan.grader_network is True
    assert dict(call.plan.grader_env)["PACKAGER_JUDGE_MODEL"] == "m"
    assert call.plan == make_run_plan(spec, paths, IMAGES, judge_env=ENDPOINT)


def test_an_agent_phase_leaves_the_candidate(calls: list[Call], tmp_path: Path) -> None:
    """What the benchmarks time: the oracle or the nop agent, then the grader, own labels."""
    spec = _sample("samples__textkit-1")
    paths = OutputPaths(tmp_path, "samples")
    grade_patch(object(), spec, paths, IMAGES, "oracle", label="bench/samples__textkit-1")  # type: ignore[arg-type]
    grade_patch(object(), spec, paths, IMAGES, "nop", log_dir=tmp_path / "nop-1")  # type: ignore[arg-type]
    oracle, nop = calls
    assert (oracle.kind, oracle.patch, nop.kind, nop.patch) == ("oracle", None, "nop", None)
    assert oracle.log_dir == paths.log_dir("samples__textkit-1") / "oracle"
    assert nop.log_dir == tmp_path / "nop-1"
    assert oracle.plan.task == "bench/samples__textkit-1"
    assert nop.plan.task == "samples/samples__textkit-1"
    assert oracle.plan.agent_image == IMAGES["agent"] and oracle.plan.collect == nop.plan.collect


def test_import_stays_cheap() -> None:
    """The engines (and docker) load when a run starts, not with the module."""
    code = (
        "import sys, packager.engines.patch; "
        "print(any(m.split('.')[0] == 'docker' for m in sys.modules), "
        "'packager.engines.containers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
