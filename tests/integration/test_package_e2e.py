"""`packager package` end to end on the real Docker engine, for every sample row.

Each gradeable sample must come out `verified`: every oracle run 1.0, the nop run below 1.0
and equal to the row's own base reward where it gives one. The SWEeper sample, judged in a
browser, has its own tests (test_judge_e2e.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from packager.grading.rules import evaluate_formula, normalize_expression
from tests.conftest import run_cli, sample_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GRADEABLE = [
    "samples__textkit-1",
    "samples__intset-2",
    "samples__kvstore-3",
    "samples__inventory-4",
]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package")


def _result(out: Path, task: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "samples" / "results" / f"{task}.json").read_text())
    return data


def _row(task: str) -> dict[str, Any]:
    return next(r for r in sample_rows() if task in (r.get("instance_id"), r.get("case_id")))


def _expected_nop(task: str) -> float | None:
    row = _row(task)
    if "base_reward" in row:
        return float(row["base_reward"])
    if "reward_formula" in row:
        # The PDL floor: the untouched repo passes its public tests and collects, fails hidden
        # ones.
        return evaluate_formula(
            normalize_expression(row["reward_formula"]),
            {"hidden_pass_fraction": 0.0, "public_regression": 1.0, "build_health": 1.0},
        )
    return None


@pytest.mark.parametrize("task", GRADEABLE)
def test_package_verifies_sample(task: str, out: Path, docker_client: Any) -> None:
    proc = run_cli("package", task, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified" in proc.stdout
    result = _result(out, task)
    assert result["status"] == "verified"
    assert result["engine"] == "local"
    assert [run["reward"] for run in result["oracle"]] == [1.0, 1.0]
    nop = result["nop"]["reward"]
    assert nop < 1.0
    expected = _expected_nop(task)
    if expected is not None:
        assert result["expected_nop"] == pytest.approx(expected)
        assert nop == pytest.approx(expected)
    for run in [*result["oracle"], result["nop"]]:
        assert Path(run["log_dir"], "reward.json").is_file()
        assert run["duration_sec"] > 0
        # What the grader's container used, read from its cgroup by the runtime.
        assert run["resources"]["memory_peak_mb"] > 0 and run["resources"]["cpu_sec"] > 0
    measured = result["resources"]
    assert measured["runs"] == 2 and measured["memory_limit_mb"] >= measured["memory_peak_mb"]
    assert set(result["images"]) == {"agent", "grader"}
    left = docker_client.containers.list(
        all=True, filters={"label": [f"packager.task=samples/{task}", "packager.run"]}
    )
    assert left == [], "containers left behind"


@pytest.mark.parametrize("task", GRADEABLE)
def test_rebuild_builds_nothing_and_agent_history_is_clean(
    task: str, out: Path, docker_client: Any
) -> None:
    proc = run_cli("build", task, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = _result(out, task)
    assert result["status"] == "built"
    # Build logs are named in the result only for images that were actually built.
    assert "agent_log" not in result["logs"] and "grader_log" not in result["logs"]
    agent = result["images"]["agent"]
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", agent],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rendered = out / "samples" / "tasks" / task
    secrets = ["gold.patch", "test.patch", "/tests", "payload", "grading.pyz", "grade.py", "hidden"]
    for word in secrets:
        assert word not in history, f"{word!r} appears in the agent image history"
    assert not any(
        p.name in ("gold.patch", "test.patch") for p in (rendered / "environment").rglob("*")
    )


RUNTIME_MODULES = (
    "grade",
    "parsers",
    "parsers_js",
    "parsers_native",
    "patching",
    "processes",
    "rules",
    "tripwires",
)
NOP_GRADE = (
    "mkdir -p /logs/artifacts && : > /logs/artifacts/model.patch && "
    "bash /tests/test.sh > /dev/null 2>&1; cat /logs/verifier/reward.json"
)


@pytest.mark.parametrize("task", GRADEABLE)
def test_grader_runs_its_byte_compiled_runtime(task: str, out: Path, docker_client: Any) -> None:
    """The grader image's build unpacked and byte-compiled the runtime (/tests/.runtime):
    python3 loads every module from its cached byte code, compiling none; the nop run grades
    the same from there as from the archive (test.sh's fallback when the folder is missing).
    """
    if not (out / "samples" / "results" / f"{task}.json").exists():
        assert run_cli("build", task, "--out", str(out)).returncode == 0
    grader = _result(out, task)["images"]["grader"]

    def run(script: str) -> str:
        raw: bytes = docker_client.containers.run(
            grader, ["bash", "-c", script], remove=True, network_mode="none", stderr=True
        )
        return raw.decode()

    verbose = run(
        "python3 -I -S -v -c 'import sys; sys.path[0:0] = [\"/tests/.runtime\"]; import grade' 2>&1"
    )
    for module in RUNTIME_MODULES:
        assert f"code object from '/tests/.runtime/__pycache__/{module}." in verbose, module
    assert "matches /tests/.runtime/" in verbose  # each module found there
    assert "code object from /tests/.runtime/" not in verbose  # compiled from source: none
    modes = run("stat -c '%a %U' /tests/.runtime /tests/.runtime/__pycache__ /tests/.runtime/*.py")
    assert {line.split()[0][1:] for line in modes.splitlines()} <= {"55", "44"}, modes
    from_compiled = json.loads(run(NOP_GRADE))
    from_archive = json.loads(run("rm -rf /tests/.runtime && " + NOP_GRADE))
    assert from_compiled == from_archive
    assert from_compiled["reward"] < 1.0
    expected = _expected_nop(task)
    if expected is not None:
        assert from_compiled["reward"] == pytest.approx(expected)


def test_agent_image_history_is_cut_at_base(out: Path, docker_client: Any) -> None:
    """The textkit bundle has a later fix commit and a tag; neither may reach the image."""
    task = "samples__textkit-1"
    if not (out / "samples" / "results" / f"{task}.json").exists():
        assert run_cli("build", task, "--out", str(out)).returncode == 0
    agent = _result(out, task)["images"]["agent"]
    row = _row(task)
    script = (
        "git log --all --format=%H; echo refs:; git for-each-ref; echo remotes:; git remote; "
        "ls .git/logs 2>/dev/null || true"
    )
    logs = docker_client.containers.run(
        agent, ["bash", "-c", script], remove=True, network_mode="none"
    ).decode()
    commits = logs.split("refs:")[0].split()
    assert commits[0] == row["base_commit"]
    refs = logs.split("refs:")[1].split("remotes:")[0]
    assert "refs/tags" not in refs and refs.count("\n") == 2  # only refs/heads/main
    assert logs.split("remotes:")[1].strip() == ""


def test_verify_patch_scores_a_candidate(out: Path, docker_client: Any, tmp_path: Path) -> None:
    task = "samples__kvstore-3"
    gold = out / "samples" / "tasks" / task / "solution" / "gold.patch"
    if not gold.exists():
        assert run_cli("render", task, "--out", str(out)).returncode == 0
    proc = run_cli("verify", task, "--out", str(out), "--patch", str(gold))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["reward"] == 1.0 and data["subscores"]
    empty = tmp_path / "empty.patch"
    empty.write_text("")
    data = json.loads(
        run_cli("verify", task, "--out", str(out), "--patch", str(empty))
        .stdout.strip()
        .splitlines()[-1]
    )
    base = _row(task)["base_reward"]
    assert data["reward"] == pytest.approx(base)


def test_verify_patch_grades_on_the_images_package_built_with_a_ca_bundle(
    tmp_path: Path, docker_client: Any
) -> None:
    """`verify --patch` with the build options `package` had (here --ca-bundle) grades on the
    very agent image that was verified: nothing is rebuilt."""
    task = "samples__textkit-1"
    out = tmp_path / "out"
    bundle = tmp_path / "extra-ca.pem"  # any PEM: builds trust it in a base of their own
    bundle.write_bytes(Path("/etc/ssl/certs/ca-certificates.crt").read_bytes()[:4096])
    ca = ["--ca-bundle", str(bundle)]
    assert run_cli("package", task, "--out", str(out), *ca).returncode == 0
    result = json.loads((out / "samples" / "results" / f"{task}.json").read_text())
    agent = result["images"]["agent"]
    created = docker_client.images.get(agent).attrs["Created"]
    gold = out / "samples" / "tasks" / task / "solution" / "gold.patch"
    proc = run_cli("verify", task, "--out", str(out), "--patch", str(gold), *ca)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["reward"] == 1.0
    assert docker_client.images.get(agent).attrs["Created"] == created  # not rebuilt
