"""Tasks that did not verify, grouped by a cause a maintainer can act on (report.md/html)."""

from __future__ import annotations

import pytest

from packager.images.failures import CA_HINT
from packager.models.spec import TaskResult
from packager.release.causes import by_cause, cause
from packager.release.report import make_html, make_markdown


def _result(task: str, status: str, reason: str | None = None, **env: str) -> TaskResult:
    return TaskResult(
        task=task, instance_id=task, dataset="d", status=status, engine="local",  # type: ignore[arg-type]
        reason=reason, environment=env,
    )  # fmt: skip


CASES = [
    (_result("a", "verified"), None),
    (
        _result(
            "x1", "build_failed",
            "the environment's packages (environment.yml: ci/requirements/environment.yml, as pip"
            " requirements) step failed: package cdms2 could not be installed; last lines: …",
        ),
        "environment: packages (environment.yml: ci/requirements/environment.yml, as pip "
        "requirements) step, package cdms2",
    ),
    (
        _result(
            "s1", "build_failed",
            "the environment's test command step failed: it reported no test (exit 2) in any run;"
            " module roman is missing; first error: E   ModuleNotFoundError: No module named",
        ),
        "environment: module roman missing at test time",
    ),
    (
        _result(
            "p1", "build_failed", "the environment's install[0] step failed (x)",
            python_requested="3.6", python_used="3.9",
        ),
        "environment: install[0] step (Python 3.6 -> 3.9)",
    ),
    (
        _result("c1", "build_failed", f"the environment's install[0] step failed ({CA_HINT})"),
        "environment: index certificate not trusted (--ca-bundle)",
    ),
    (
        _result("m1", "build_failed", "repo source r lacks 1 object(s) of the tree of abc: f"),
        "mirror incomplete",
    ),
    (
        _result("v1", "build_failed", "Python 3.5: no image serves it (no --base-image ...)"),
        "Python not served",
    ),
    (
        _result(
            "r1", "needs_network",
            "the gold run's tests tried to reach the network, which grading does not give "
            "(httpbin.org); oracle reward 0.0 (graded: x)",
        ),
        "network: httpbin.org",
    ),
    (
        _result(
            "r3", "needs_network",
            "the gold run's tests tried to reach the network, which grading does not give "
            "(10.255.255.1 (a tarpit), httpbin over https: its stand-in serves plain http); "
            "oracle reward 0.0 (graded: x (failed))",
        ),
        "network: 10.255.255.1 (a tarpit), httpbin over https: its stand-in serves plain http",
    ),
    (_result("g1", "gold_failed", "oracle reward 0.0 (graded: F2P: 1 not passed)"), "gold failing"),
    (
        _result(
            "x1", "gold_failed",
            "oracle reward 0.0 (graded: pass_to_pass: 1 not passed: t::test_cdms2 (missing)) "
            "(tests named after a package dropped from the environment, which pip could not "
            "install: cdms2 (packages (environment.yml: x)))",
        ),
        "environment: dropped cdms2 (pip could not install it)",
    ),
    (_result("i1", "infra_error", "lost the engine"), "infra_error"),
]  # fmt: skip


@pytest.mark.parametrize(("result", "expected"), CASES, ids=[r.task for r, _ in CASES])
def test_each_failure_has_a_cause_a_maintainer_can_act_on(
    result: TaskResult, expected: str | None
) -> None:
    assert cause(result) == expected


def test_reports_group_tasks_by_cause_with_counts() -> None:
    results = [r for r, _ in CASES] + [
        _result("r2", "needs_network", "… which grading does not give (httpbin.org); …"),
        _result("r3", "needs_network", "… which grading does not give (httpbin.org); …"),
    ]
    groups = by_cause(results)
    assert groups[0] == ("network: httpbin.org", ["r1", "r2", "r3"])  # most tasks first
    assert sum(len(ids) for _, ids in groups) == len(results) - 1  # all but the verified one
    md = make_markdown("d", results)
    assert "## Not verified, by cause" in md
    assert "| network: httpbin.org | 3 | r1, r2, r3 |" in md
    page = make_html("d", results)
    assert '<table id="causes">' in page and "<td>network: httpbin.org</td>" in page
    assert "by cause" not in make_markdown("d", [_result("a", "verified")])


def test_reports_list_what_environments_dropped() -> None:
    kept = _result("x", "verified", dropped="cdms2 (packages (environment.yml: e.yml))")
    md = make_markdown("d", [kept, _result("y", "verified")])
    assert "## Dropped from environments" in md
    assert "- `x`: cdms2 (packages (environment.yml: e.yml))" in md and "`y`:" not in md
    assert "dropped from the environment: cdms2 (packages" in make_html("d", [kept])


def test_reports_list_gold_patches_the_scan_flagged_for_review() -> None:
    from packager.models.spec import RunResult

    def oracle(*flags: str) -> RunResult:
        return RunResult(
            kind="oracle", reward=1.0, grade_status="graded", duration_sec=1.0, log_dir="l",
            suspicious=list(flags) or None,
        )  # fmt: skip

    flagged = _result("p", "verified").model_copy(
        update={"oracle": (oracle("src/_pytest/reports.py:6 imports pytest's internals"),) * 2}
    )
    plain = _result("q", "verified").model_copy(update={"oracle": (oracle(),)})
    md = make_markdown("d", [flagged, plain])
    assert "## For review: the gold patch reaches into a test runner's names" in md
    assert "- `p`: src/_pytest/reports.py:6 imports pytest's internals\n" in md + "\n"
    assert "`q`" not in md.split("## For review", 1)[1]
    assert "## For review" not in make_markdown("d", [plain])
    html = make_html("d", [flagged, plain])
    assert "for review, the gold patch reaches into a test runner: src/_pytest/reports.py:6" in html
