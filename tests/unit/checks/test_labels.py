"""Labels checked against what ran (packager/checks/labels.py): seeded cases of each finding."""

from __future__ import annotations

import json
from pathlib import Path

from packager.checks.labels import audit_labels, task_labels
from packager.models.spec import RunResult, TaskResult
from tests.unit.checks.test_quality import _spec

P, F = "passed", "failed"


def test_labels_that_agree_with_the_runs_say_nothing() -> None:
    gold = {"t.py::test_fix": P, "t.py::test_old": P}
    done = audit_labels(["t.py::test_fix"], ["t.py::test_old"], [gold, gold], {"t.py::test_old": P})
    assert done["findings"] == []
    assert done["derived"] == {"fail_to_pass": 1, "pass_to_pass": 1, "unlisted_fail_to_pass": 0}


def test_a_listed_id_that_never_runs_is_label_missing() -> None:
    gold = {"t.py::test_fix": P}
    done = audit_labels(
        ["t.py::test_fix"], ["t.py::test_gone"], [gold, gold], {"t.py::test_fix": F}
    )
    (finding,) = done["findings"]
    assert finding == {
        "kind": "label_missing",
        "group": "PASS_TO_PASS",
        "id": "t.py::test_gone",
        "detail": "not run in oracle-1, oracle-2, nop",
    }


def test_an_id_cut_at_a_space_over_tests_that_end_apart_is_label_ambiguous() -> None:
    """pylint-dev__pylint-8898: `...[foo,` starts two parametrized tests; one fails at base."""
    cut = "tests/config/test_config.py::test_csv_regex_comma_in_quantifier[foo,"
    both = {f"{cut} bar]": P, f"{cut} baz]": P, "t.py::test_fix": P}
    nop = {f"{cut} bar]": P, f"{cut} baz]": F, "t.py::test_fix": F}
    done = audit_labels(["t.py::test_fix"], [cut], [both, both], nop)
    (finding,) = done["findings"]
    assert finding["kind"] == "label_ambiguous" and finding["id"] == cut
    assert finding["detail"] == f"nop: {cut} bar] passed, {cut} baz] failed"
    assert done["derived"]["unlisted_fail_to_pass"] == 0  # the cut id covers its tests


def test_runs_that_contradict_a_label_are_label_differs() -> None:
    gold = {"t.py::test_fix": P, "t.py::test_old": P, "t.py::test_new": P}
    nop = {"t.py::test_fix": P, "t.py::test_old": F, "t.py::test_new": F}
    done = audit_labels(["t.py::test_fix"], ["t.py::test_old"], [gold, gold], nop)
    assert [(f["kind"], f["id"]) for f in done["findings"]] == [
        ("label_differs", "t.py::test_fix"),
        ("label_differs", "t.py::test_old"),
    ]
    assert done["findings"][0]["detail"] == "oracle-1 passed, oracle-2 passed, nop passed"
    assert done["derived"]["unlisted_fail_to_pass"] == 1
    assert done["unlisted_fail_to_pass"] == ["t.py::test_new"]


def test_a_task_reads_its_runs_reports(tmp_path: Path) -> None:
    spec = _spec()
    g = spec.grading
    runs = {}
    for name, tests in (
        ("oracle-1", {**dict.fromkeys(g.fail_to_pass, P), **dict.fromkeys(g.pass_to_pass, P)}),
        ("nop", {**dict.fromkeys(g.fail_to_pass, F), **dict.fromkeys(g.pass_to_pass, P)}),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps({"tests": tests}))
        runs[name] = RunResult(
            kind="oracle" if name != "nop" else "nop", reward=1.0, grade_status="graded",
            duration_sec=1.0, log_dir=str(tmp_path / name),
        )  # fmt: skip
    result = TaskResult(
        task="t", instance_id="t", dataset="d", status="verified", engine="local",
        oracle=(runs["oracle-1"],), nop=runs["nop"],
    )  # fmt: skip
    labels = task_labels(spec, result)
    assert labels is not None and labels["findings"] == []
    (tmp_path / "nop" / "report.json").unlink()
    assert task_labels(spec, result) is None  # a run without parsed tests: no audit


def test_the_report_lists_the_findings() -> None:
    from packager.release.report import make_markdown

    cut = "t.py::test_csv[foo,"
    labels = audit_labels(
        ["t.py::test_fix"], [cut], [{f"{cut} a]": P, "t.py::test_fix": P}] * 2,
        {f"{cut} a]": P, f"{cut} b]": F},
    )  # fmt: skip
    result = TaskResult(
        task="t", instance_id="pylint-like", dataset="d", status="verified", engine="local",
        labels=labels,
    )  # fmt: skip
    text = make_markdown("d", [result])
    assert "## Labels checked against the runs" in text
    assert "1 task(s) checked: 1 label_ambiguous; 0 test(s)" in text
    assert f"- `pylint-like` label_ambiguous (PASS_TO_PASS) `{cut}`: nop: {cut} a] passed" in text
    assert "## Labels checked" not in make_markdown(
        "d", [result.model_copy(update={"labels": None})]
    )
