"""A task's labels checked against what ran: every listed FAIL_TO_PASS and PASS_TO_PASS id,
looked up in each run's parsed tests the way the grading rule looks it up
(`grading.rules.resolve`: the exact id, else every test an id cut at a space starts).

- `label_missing`: in some run no test answers the id (the rule counts it failed there); a
  FAIL_TO_PASS id absent from the nop run only fails there (its file may not even collect).
- `label_ambiguous`: an id cut at a space that several tests start, and they do not all end
  the same way in some run (the rule then counts it missing: the label cannot say which).
- `label_differs`: the runs disagree with the label: a FAIL_TO_PASS test that passes on the nop
  run, or one that does not pass on every gold run; a PASS_TO_PASS test that does not pass on
  every run.

Labels derived from the runs (failing or absent on nop and passing on every gold run; passing
on every run) are counted beside them, with how many tests the runs show flipping that the
dataset does not list. The findings never change a verdict: the task grades with the dataset's
labels, as the harness does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packager.grading.rules import PASSED
from packager.models.spec import TaskResult, TaskSpec

MAX_NAMED = 10
"""How many unlisted flipping tests a result names (the count covers all)."""


def matching(tests: Mapping[str, str], test_id: str) -> dict[str, str]:
    """The tests of one run that answer listed `test_id`: itself, or, for an id cut at a space
    (more `[` than `]`), every test it starts.
    """
    if test_id in tests:
        return {test_id: tests[test_id]}
    if test_id.count("[") > test_id.count("]"):
        return {key: status for key, status in tests.items() if key.startswith(test_id)}
    return {}


def joint_outcome(found: Mapping[str, str]) -> str | None:
    """The id's outcome in one run: None when nothing answers it or its tests disagree."""
    passed = {status == PASSED for status in found.values()}
    if not found or len(passed) > 1:
        return None
    return PASSED if passed == {True} else "failed"


def audit_labels(
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    gold: Sequence[Mapping[str, str]],
    nop: Mapping[str, str],
) -> dict[str, Any]:
    """Findings and derived-label counts for one task from its gold runs' and nop run's tests."""
    runs = [(f"oracle-{i}", tests) for i, tests in enumerate(gold, 1)] + [("nop", nop)]
    findings: list[dict[str, Any]] = []
    for group, ids in (("FAIL_TO_PASS", fail_to_pass), ("PASS_TO_PASS", pass_to_pass)):
        for test_id in dict.fromkeys(ids):
            found = {name: matching(tests, test_id) for name, tests in runs}
            if group == "FAIL_TO_PASS" and not found["nop"]:
                found["nop"] = {test_id: "absent"}  # not collected at base: it fails there
            absent = [name for name, hits in found.items() if not hits]
            if absent:
                where = "not run in " + ", ".join(absent)
                findings.append(_finding("label_missing", group, test_id, where))
                continue
            split = {name: hits for name, hits in found.items() if joint_outcome(hits) is None}
            if split:
                name, hits = next(iter(split.items()))
                tests = ", ".join(f"{key} {status}" for key, status in sorted(hits.items()))
                findings.append(_finding("label_ambiguous", group, test_id, f"{name}: {tests}"))
                continue
            outcome = {name: joint_outcome(hits) for name, hits in found.items()}
            gold_pass = all(outcome[name] == PASSED for name, _ in runs[:-1])
            want_nop = "failed" if group == "FAIL_TO_PASS" else PASSED
            if not gold_pass or outcome["nop"] != want_nop:
                said = ", ".join(f"{name} {value}" for name, value in outcome.items())
                findings.append(_finding("label_differs", group, test_id, said))
    listed = set(fail_to_pass) | set(pass_to_pass)
    cut = tuple(i for i in listed if i.count("[") > i.count("]"))
    every = set(nop).union(*gold) if gold else set(nop)
    always = [t for t in every if all(tests.get(t) == PASSED for tests in gold)]
    flips = sorted(t for t in always if nop.get(t) != PASSED)
    unlisted = [t for t in flips if t not in listed and not t.startswith(cut or ("\0",))]
    return {
        "findings": findings,
        "derived": {
            "fail_to_pass": len(flips),
            "pass_to_pass": sum(1 for t in always if nop.get(t) == PASSED),
            "unlisted_fail_to_pass": len(unlisted),
        },
        "unlisted_fail_to_pass": unlisted[:MAX_NAMED],
    }


def derived_labels(
    gold: Sequence[Mapping[str, str]], nops: Sequence[Mapping[str, str]]
) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) the runs show: passing on every gold run and failing or
    absent on every nop run; passing on every run. Sorted.
    """
    if not gold or not nops:
        return [], []
    steady = set.intersection(*({t for t, v in run.items() if v == PASSED} for run in gold))
    f2p = sorted(t for t in steady if all(run.get(t) != PASSED for run in nops))
    p2p = sorted(t for t in steady if all(run.get(t) == PASSED for run in nops))
    return f2p, p2p


def read_tests(log_dir: str | Path) -> dict[str, str] | None:
    """A run's parsed tests (its report.json's `tests`), None when the run left none."""
    try:
        report = json.loads((Path(log_dir) / "report.json").read_text())
    except (OSError, ValueError):
        return None
    tests = report.get("tests") if isinstance(report, dict) else None
    return {str(k): str(v) for k, v in tests.items()} if isinstance(tests, dict) else None


def task_labels(spec: TaskSpec, result: TaskResult) -> dict[str, Any] | None:
    """The label audit of a task whose gold and nop runs all left parsed tests; None for a task
    graded by another rule, or whose runs did not all report tests.
    """
    g = spec.grading
    if g.rule != "all_pass" or result.nop is None or not result.oracle:
        return None
    gold = [read_tests(run.log_dir) for run in result.oracle]
    nop = read_tests(result.nop.log_dir)
    if nop is None or any(tests is None for tests in gold):
        return None
    return audit_labels(g.fail_to_pass, g.pass_to_pass, [t for t in gold if t is not None], nop)


def _finding(kind: str, group: str, test_id: str, detail: str) -> dict[str, Any]:
    return {"kind": kind, "group": group, "id": test_id, "detail": detail}
