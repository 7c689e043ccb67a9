"""Two real SWE-bench Lite rows, exactly as published (tests/data/realrows/), packaged with no
configuration and no edits to the rows: both verified, with verdicts that agree with the
harness rule.

The rows (marshmallow-code__marshmallow-1343, version 2.20; -1359, version 3.0) carry no
environment and no `--recipes` is given: the SWE-bench harness's own spec for
`marshmallow-code/marshmallow@<version>` (shipped in packager/datasets/harness_specs.json) serves
them, with the Python it names (3.9, Debian bullseye's python3). Their repository comes from the
upstream bundle beside the rows, cut to their history. Builds install with pip, which needs the
host's CA bundle inside builds here (`--ca-bundle`).
The harness rule, checked with swebench's own parser and grading functions on the very test
output each run saved: every FAIL_TO_PASS fails before and passes after the gold patch, and
every PASS_TO_PASS passes both times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALROWS_BUNDLE as BUNDLE
from tests.conftest import REALROWS_ROWS as ROWS
from tests.conftest import run_cli
from tests.unit.datasets.test_harness_parity import SpecStandIn, _load_harness

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TASKS = ["marshmallow-code__marshmallow-1343", "marshmallow-code__marshmallow-1359"]
DATASET = "swe-bench-lite-dev-marshmallow"


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Path:
    if not ROWS.is_file() or not BUNDLE.is_file():
        pytest.fail(
            f"the real rows are missing: expected {ROWS} and {BUNDLE} (tests/data/realrows)"
        )
    out = tmp_path_factory.mktemp("realrows")
    before = ROWS.read_bytes()
    args = [
        "package",
        "--all",
        "--dataset",
        str(ROWS),
        "--repo-source",
        f"marshmallow-code/marshmallow={BUNDLE}",
        "--out",
        str(out),
    ]
    if CA_BUNDLE.is_file():
        args += ["--ca-bundle", str(CA_BUNDLE)]
    proc = run_cli(*args, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ROWS.read_bytes() == before
    return out


def _rows() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
    return {r["instance_id"]: r for r in rows}


@pytest.mark.parametrize("task", TASKS)
def test_real_row_verifies_from_the_harness_spec(task: str, packaged: Path) -> None:
    result = json.loads((packaged / DATASET / "results" / f"{task}.json").read_text())
    assert result["status"] == "verified", result["reason"]
    assert [r["reward"] for r in result["oracle"]] == [1.0, 1.0]
    assert result["nop"]["reward"] == 0.0
    source = f"harness spec marshmallow-code/marshmallow@{_rows()[task]['version']}"
    assert result["environment"]["source"].startswith(source)
    assert result["environment"]["python_requested"] == "3.9"
    assert result["environment"]["python_used"] == "3.9"
    toml = (packaged / DATASET / "tasks" / task / "task.toml").read_text()
    assert 'environment = "recipe"' in toml and "recipe =" not in toml
    assert f'environment_source = "{source} (swebench==4.1.0)"' in toml
    dockerfile = (packaged / DATASET / "tasks" / task / "environment" / "Dockerfile").read_text()
    assert "FROM debian:bullseye-slim" in dockerfile


@pytest.mark.parametrize("task", TASKS)
def test_real_row_verdicts_follow_the_harness_rule(task: str, packaged: Path) -> None:
    """Each saved test output, read by swebench's parser and graded by swebench's rule."""
    harness = _load_harness()
    parse = harness.registry["parse_log_pytest"]
    grading = harness.grading
    row = _rows()[task]
    gold = {
        "FAIL_TO_PASS": json.loads(row["FAIL_TO_PASS"]),
        "PASS_TO_PASS": json.loads(row["PASS_TO_PASS"]),
    }
    logs = packaged / DATASET / "logs" / task
    for run in ("oracle-1", "oracle-2", "nop"):
        output = (logs / run / "test-output.txt").read_text()
        status_map = parse(output, SpecStandIn())
        report = grading.get_eval_tests_report(status_map, gold)
        ours = json.loads((logs / run / "report.json").read_text())
        if run.startswith("oracle"):
            assert grading.get_resolution_status(report) == "RESOLVED_FULL", report
            assert ours["status"] == "graded" and ours["reward"] == 1.0
        else:
            # Before the fix: every FAIL_TO_PASS fails, every PASS_TO_PASS still passes.
            assert report["FAIL_TO_PASS"]["success"] == [], report
            assert sorted(report["FAIL_TO_PASS"]["failure"]) == sorted(gold["FAIL_TO_PASS"])
            assert report["PASS_TO_PASS"]["failure"] == [], report
            assert ours["failed_counts"]["fail_to_pass"] == len(gold["FAIL_TO_PASS"])
            assert ours["failed_counts"]["pass_to_pass"] == 0


def test_truncated_ids_of_a_real_row_are_matched(packaged: Path) -> None:
    """-1359 lists ids cut at their first space (`test_make_error[required-Missing`)."""
    task = "marshmallow-code__marshmallow-1359"
    cut = [i for i in json.loads(_rows()[task]["PASS_TO_PASS"]) if i.count("[") > i.count("]")]
    assert cut, "the row no longer has truncated ids"
    report = json.loads(
        (packaged / DATASET / "logs" / task / "oracle-1" / "report.json").read_text()
    )
    assert report["failed_counts"] == {"fail_to_pass": 0, "pass_to_pass": 0}
    for test_id in cut:
        assert any(k.startswith(test_id) and v == "passed" for k, v in report["tests"].items())
