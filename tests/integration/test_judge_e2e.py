"""The SWEeper sample verified by its browser judge, end to end on the real engine.

Real: the Docker engine, the agent and grader images, the Node app, Debian's Chromium and the
pinned browser-use driving it. Replayed: the model's turns (packager/samples/replays/), served
by the replay server that `--judge replay` starts and stops. The replayed verdicts branch on
the page the browser really shows, so the fixed app passes and the untouched one fails its
target workflow.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from packager.judge.endpoint import JUDGE_ENV, REPLAY_MODEL
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "samples__todo-web-5"


@pytest.fixture(autouse=True)
def no_judge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests decide where the model is; a developer's own endpoint must not leak in."""
    for name in JUDGE_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("judge")


def _result(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "samples" / "results" / f"{TASK}.json").read_text())
    return data


def _check_judged_runs(result: dict[str, Any], model: str) -> None:
    oracle, nop = result["oracle"], result["nop"]
    assert [r["reward"] for r in oracle] == [1.0, 1.0]
    for run in oracle:
        assert run["subscores"] == {"target": 1.0, "preservation": 1.0}
    assert nop["reward"] < 1.0
    assert nop["subscores"] == {"target": 0.0, "preservation": 1.0}
    assert "target:blank-title-rejected" in nop["reason"]
    for run in [*oracle, nop]:
        judge = run["judge"]
        assert judge["model"] == model
        workflows = judge["workflows"]
        assert [w["category"] for w in workflows] == ["target", "preservation"]
        for w in workflows:
            assert w["calls"] >= 3 and w["prompt_tokens"] > 0 and w["seconds"] > 0
            assert [s["step"] for s in w["steps"]] == [1, 2, 3, 4]
            assert w["reason"]
            shot = Path(w["screenshot"])
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
        assert judge["calls"] == sum(w["calls"] for w in workflows)
    assert nop["judge"]["workflows"][0]["outcome"] == "fail"
    assert nop["judge"]["workflows"][1]["outcome"] == "pass"


def test_unset_model_variables_give_needs_judge(out: Path) -> None:
    proc = run_cli("package", TASK, "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(out)
    assert result["status"] == "needs_judge"
    assert "PACKAGER_JUDGE_BASE_URL" in result["reason"]
    assert "PACKAGER_JUDGE_MODEL" in result["reason"]
    assert "answers HTTP on port 3000" in result["reason"]
    assert result["oracle"] == [] and result["nop"] is None


def test_replay_judge_verifies_the_sample(out: Path, docker_client: Any) -> None:
    proc = run_cli("package", TASK, "--out", str(out), "--judge", "replay")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(out)
    assert result["status"] == "verified", result["reason"]
    assert result["engine"] == "local"
    _check_judged_runs(result, REPLAY_MODEL)
    left = docker_client.containers.list(
        all=True, filters={"label": [f"packager.task=samples/{TASK}", "packager.run"]}
    )
    assert left == [], "containers left behind"


def test_verify_patch_grades_a_candidate_through_the_replay_judge(
    out: Path, tmp_path: Path
) -> None:
    """`verify --patch FILE --judge replay`: the candidate's grader gets the replay endpoint and a
    network, like oracle and nop runs (the gold patch passes both workflows, an empty one fails
    the target and keeps the app's other behaviour).
    """
    gold = out / "samples" / "tasks" / TASK / "solution" / "gold.patch"
    empty = tmp_path / "empty.patch"
    empty.write_text("")
    said = {}
    for name, patch in (("gold", gold), ("empty", empty)):
        proc = run_cli(
            "verify", TASK, "--out", str(out), "--patch", str(patch), "--judge", "replay"
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        said[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert said["gold"]["reward"] == 1.0, said["gold"]
    assert said["gold"]["subscores"] == {"target": 1.0, "preservation": 1.0}
    assert said["empty"]["reward"] == 0.0, said["empty"]
    assert said["empty"]["subscores"] == {"target": 0.0, "preservation": 1.0}


def test_agent_image_has_nothing_of_the_judge(out: Path, docker_client: Any) -> None:
    """Chromium, browser-use and the workflows are in the grader image only."""
    result = _result(out)
    if not result.get("images"):
        assert run_cli("build", TASK, "--out", str(out)).returncode == 0
        result = _result(out)
    script = (
        "test ! -e /opt/packager-judge && ! command -v chromium && test ! -e /tests && "
        "! grep -rqs -e blank-title-rejected -e 'Title is required' /app /opt /root /tmp /srv && "
        "echo clean"
    )
    agent = docker_client.containers.run(
        result["images"]["agent"], ["bash", "-c", script], remove=True, network_mode="none"
    )
    assert agent.decode().strip() == "clean"
    grader = docker_client.containers.run(
        result["images"]["grader"],
        [
            "bash",
            "-c",
            "chromium --version && /opt/packager-judge/bin/python -c 'import browser_use'",
        ],
        remove=True,
        network_mode="none",
    )
    assert b"Chromium" in grader


def test_app_that_cannot_start_is_infra_error(out: Path, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes.yaml"
    recipes.write_text(f"{TASK}:\n  start_command: node missing-server.js\n  port: 3000\n")
    proc = run_cli(
        "package",
        TASK,
        "--out",
        str(tmp_path / "out"),
        "--recipes",
        str(recipes),
        "--judge",
        "replay",
    )
    assert proc.returncode == 1
    data = json.loads((tmp_path / "out" / "samples" / "results" / f"{TASK}.json").read_text())
    assert data["status"] == "infra_error"
    assert "node missing-server.js" in data["reason"]
    assert "Cannot find module" in data["reason"]  # the app's own last log lines


def test_replay_judge_verifies_the_sample_under_harbor(
    tmp_path: Path, harbor_python: Path, docker_client: Any
) -> None:
    proc = run_cli(
        "package", TASK, "--out", str(tmp_path), "--judge", "replay", "--engine", "harbor"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(tmp_path)
    assert result["status"] == "verified", result["reason"]
    assert result["engine"] == "harbor"
    _check_judged_runs(result, REPLAY_MODEL)
    assert os.environ.get("PACKAGER_JUDGE_BASE_URL") is None
