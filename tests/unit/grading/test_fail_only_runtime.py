"""grade.py end to end with a fail-only parser (marked's jasmine failures): a listed test the
log does not name passes once the run shows it happened, as the harness's FAIL_ONLY grading
counts it; a failure, a run that never started or an unexplained non-zero exit scores 0."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.unit.grading.test_grading_runtime import Task

CLEAN = "Started\n....\n\n4 specs, 0 failures\nFinished in 0.02 seconds\n"
FAILED = (
    "Started\n.F..\n\nFailures:\n1) Lexer paragraph should lex two paragraphs\n"
    "  Message:\n    Expected 1 to be 2.\n\n4 specs, 1 failure\n"
)
LISTED = ["Lexer paragraph should lex two paragraphs"]


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return Task(tmp_path)


def _grade(task: Task, log: str, code: int) -> tuple[float, dict[str, object]]:
    out = task.root / "runner-output.txt"
    out.write_text(log)
    command = f"cat {shlex.quote(str(out))}; exit {code}"
    reward, report = task.grade(
        "", parser="marked", test_command=command, fail_to_pass=LISTED, pass_to_pass=[]
    )
    return float(reward["reward"]), report


def test_a_clean_run_passes_the_listed_tests(task: Task) -> None:
    reward, report = _grade(task, CLEAN, 0)
    assert reward == 1.0
    assert report["tests"] == {LISTED[0]: "passed"}
    notes = report["notes"]
    assert isinstance(notes, list) and any("fail-only parser: 1 listed" in n for n in notes)


@pytest.mark.parametrize(
    ("log", "code"),
    [(FAILED, 1), ("", 0), ("karma: no browser\n", 1), (CLEAN, 1)],
    ids=["listed-test-failed", "nothing-ran", "never-started", "unexplained-exit"],
)
def test_anything_else_scores_zero(task: Task, log: str, code: int) -> None:
    reward, _ = _grade(task, log, code)
    assert reward == 0.0
