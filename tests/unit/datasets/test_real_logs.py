"""Real SWE-bench Verified rows packaged with no configuration, graded again from their saved
logs by the harness itself (swebench 5.0.2, test-only) and by the grading runtime.

tests/unit/data/real/<instance_id>/ holds, per row (rows unedited, from
rese1f/terminal-bench-datasets, datasets/swebench-verified/<id>/tests/config.json): `row.json`
and the test output of the oracle run and the nop run as `packager package` saved them
(benchmarks/swebench_rows.py; docs/datasets.md has the table of all rows tried). The harness's
parser for the row's repository and its grading rules must find the oracle RESOLVED_FULL and,
on the nop, every FAIL_TO_PASS failing and every PASS_TO_PASS passing; the runtime's parser and
`rules.all_pass` must give 1.0 and below 1.0 on the same text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from packager.datasets import harness_parsers
from packager.datasets.harness_specs import tables
from packager.grading import parsers, rules
from tests.unit.datasets.test_harness_parity import Harness, SpecStandIn, _load_harness

DATA = Path(__file__).parents[1] / "data" / "real"
ROWS = sorted(p.name for p in DATA.iterdir() if (p / "row.json").is_file())


@pytest.fixture(scope="module")
def harness() -> Harness:
    return _load_harness()


def _row(instance: str) -> dict[str, Any]:
    row: dict[str, Any] = json.loads((DATA / instance / "row.json").read_text())
    return row


def _lists(row: dict[str, Any]) -> dict[str, list[str]]:
    return {key: json.loads(row[key]) for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}


def test_the_rows_span_the_parsers() -> None:
    repos = {_row(i)["repo"] for i in ROWS}
    assert len(ROWS) >= 5 and len(repos) >= 5, ROWS


@pytest.mark.parametrize("instance", ROWS)
def test_the_harness_agrees_on_the_saved_logs(instance: str, harness: Harness) -> None:
    row = _row(instance)
    name = tables()["parsers"][row["repo"]]
    parse = harness.registry[name]
    stand_in = SpecStandIn(instance_id=instance, repo=row["repo"], version=row["version"])
    gold = _lists(row)
    for run in ("oracle", "nop"):
        output = (DATA / instance / f"{run}.txt").read_text(errors="replace")
        report = harness.grading.get_eval_tests_report(parse(output, stand_in), gold)
        if run == "oracle":
            assert harness.grading.get_resolution_status(report) == "RESOLVED_FULL", report
        else:
            assert report["FAIL_TO_PASS"]["success"] == [], report
            assert report["PASS_TO_PASS"]["failure"] == [], report


@pytest.mark.parametrize("instance", ROWS)
def test_the_runtime_agrees_on_the_saved_logs(instance: str) -> None:
    row = _row(instance)
    runtime = harness_parsers.runtime_parser(tables()["parsers"][row["repo"]])
    gold = _lists(row)
    noise = harness_parsers.not_test_ids(runtime, (*gold["FAIL_TO_PASS"], *gold["PASS_TO_PASS"]))
    f2p = [t for t in gold["FAIL_TO_PASS"] if t not in noise]
    p2p = [t for t in gold["PASS_TO_PASS"] if t not in noise]
    oracle = parsers.parse(runtime, (DATA / instance / "oracle.txt").read_text(errors="replace"))
    nop = parsers.parse(runtime, (DATA / instance / "nop.txt").read_text(errors="replace"))
    assert rules.all_pass(oracle, f2p, p2p)[0] == 1.0
    reward, scores = rules.all_pass(nop, f2p, p2p)
    assert reward < 1.0 and scores["fail_to_pass"] == 0.0
    if p2p:
        assert scores["pass_to_pass"] == 1.0
