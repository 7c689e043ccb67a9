"""Stability on the real engine: a generated row whose PASS_TO_PASS holds an order-dependent
test, a test that needs two CPUs and a test that needs the clock in UTC. Every plain run (two
gold, two nop) passes them; each perturbed gold run breaks exactly its own test, and the task
is `flaky`, naming each test with the perturbation that changed it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from packager.samples.generate import generate
from packager.samples.make_samples import new_file_diff
from tests.conftest import run_cli

ORDER = "".join(f"def test_a_{i}():\n    STATE.append({i})\n\n\n" for i in range(6))
SEEDED = {
    "tests/test_order.py": f"STATE = []\n\n\n{ORDER}def test_zz_after_the_others():\n"
    "    assert STATE == [0, 1, 2, 3, 4, 5]\n",
    "tests/test_cpus.py": "import os\n\n\ndef test_two_cpus():\n"
    "    assert len(os.sched_getaffinity(0)) >= 2\n",
    "tests/test_clock.py": "import time\n\n\ndef test_in_utc_before_2027():\n"
    "    assert time.timezone == 0 and time.localtime().tm_year < 2027\n",
}
EXPECTED = {
    "tests/test_order.py::test_zz_after_the_others": ["shuffle"],
    "tests/test_cpus.py::test_two_cpus": ["cpus"],
    "tests/test_clock.py::test_in_utc_before_2027": ["clock"],
}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stability")
    data = generate(folder / "ds", 1)
    row = json.loads(data.read_text().splitlines()[0])
    row["test_patch"] += "".join(new_file_diff(p, t) for p, t in SEEDED.items())
    row["PASS_TO_PASS"] = json.dumps([*json.loads(row["PASS_TO_PASS"]), *EXPECTED])
    data.write_text(json.dumps(row) + "\n")
    return data


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stability-out")


def _package(seeded: Path, out: Path, *flags: str) -> tuple[Any, dict[str, Any]]:
    done = run_cli(
        "package", "--all", "--dataset", str(seeded), "--out", str(out),
        "--runs", "2,2", "--perturb", "all", *flags, timeout=1800,
    )  # fmt: skip
    result = json.loads((out / "rows" / "results" / "gen__calc-0.json").read_text())
    return done, result


def test_each_perturbation_catches_its_own_seeded_test(
    seeded: Path, out: Path, docker_client: Any
) -> None:
    done = run_cli(
        "package", "--all", "--dataset", str(seeded), "--out", str(out),
        "--runs", "2,2", "--perturb", "all", timeout=1800,
    )  # fmt: skip
    result = json.loads((out / "rows" / "results" / "gen__calc-0.json").read_text())
    assert done.returncode == 1, done.stdout + done.stderr  # a flaky task fails the run
    assert result["status"] == "flaky", result
    assert [r["reward"] for r in result["oracle"]] == [1.0, 1.0]
    assert [r["reward"] for r in [result["nop"], *result["more_nops"]]] == [0.0, 0.0]
    assert [(r["perturbation"], r["reward"]) for r in result["perturbed"]] == [
        ("shuffle", 0.0),
        ("cpus", 0.0),
        ("clock", 0.0),
    ]
    stability = result["stability"]
    assert stability["runs"] == {"gold": 2, "nop": 2, "perturbed": ["shuffle", "cpus", "clock"]}
    assert stability["not_applied"] == {}
    assert {f["id"]: f["changed_by"] for f in stability["flaky"]} == EXPECTED
    for flaky in stability["flaky"]:
        outcomes = flaky["outcomes"]
        broken = f"oracle-{flaky['changed_by'][0]}"
        assert outcomes[broken] == "failed"
        assert {k for k, v in outcomes.items() if v == "passed"} == set(outcomes) - {broken}
    assert stability["added_sec"] > 0
    for test_id in EXPECTED:
        assert test_id in result["reason"]
    assert "--quarantine" in result["reason"]


def test_quarantine_grades_without_the_flipping_tests(
    seeded: Path, out: Path, docker_client: Any
) -> None:
    """After the flaky run, `--quarantine` takes its three flipping tests out of the labels:
    the grader grades without them, the task verifies under every perturbation, and task.toml
    names each with its flip count (one perturbed run in seven)."""
    done, result = _package(seeded, out, "--quarantine")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["status"] == "verified", result["reason"]
    assert [(r["perturbation"], r["reward"]) for r in result["perturbed"]] == [
        ("shuffle", 1.0),
        ("cpus", 1.0),
        ("clock", 1.0),
    ]
    task = out / "rows" / "tasks" / "gen__calc-0"
    metadata = tomllib.loads((task / "task.toml").read_text())["metadata"]
    assert metadata["labels"] == "dataset"
    assert metadata["quarantined"] == {test_id: 1 for test_id in EXPECTED}
    plan = json.loads((task / "tests" / "plan.json").read_text())
    assert not set(EXPECTED) & set(plan["fail_to_pass"] + plan["pass_to_pass"])
    assert "tests/test_mod_0.py::test_documented_0" in plan["pass_to_pass"]


def test_derived_labels_are_what_every_run_showed(
    seeded: Path, out: Path, docker_client: Any
) -> None:
    """`--labels derived`: the task grades with what the runs showed: the seeded tests that
    flip under a perturbation are in neither list, the six tests that set the order's state pass
    everywhere and are PASS_TO_PASS, the fix's test is FAIL_TO_PASS."""
    done, result = _package(seeded, out, "--labels", "derived")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["status"] == "verified", result["reason"]
    task = out / "rows" / "tasks" / "gen__calc-0"
    assert tomllib.loads((task / "task.toml").read_text())["metadata"]["labels"] == "derived"
    plan = json.loads((task / "tests" / "plan.json").read_text())
    assert plan["fail_to_pass"] == ["tests/test_mod_0.py::test_value_0"]
    assert {f"tests/test_order.py::test_a_{i}" for i in range(6)} <= set(plan["pass_to_pass"])
    assert not set(EXPECTED) & set(plan["pass_to_pass"])


def test_the_default_runs_catch_the_seeded_tests(
    seeded: Path, tmp_path: Path, docker_client: Any
) -> None:
    """No run flag: six gold runs, one nop run and every perturbation (docs/grading.md)."""
    out = tmp_path / "defaults"
    done = run_cli(
        "package", "--all", "--dataset", str(seeded), "--out", str(out), defaults=True,
        timeout=1800,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((out / "rows" / "results" / "gen__calc-0.json").read_text())
    assert result["status"] == "flaky"
    assert result["stability"]["runs"] == {
        "gold": 6,
        "nop": 1,
        "perturbed": ["shuffle", "cpus", "clock"],
    }
    assert {f["id"]: f["changed_by"] for f in result["stability"]["flaky"]} == EXPECTED
