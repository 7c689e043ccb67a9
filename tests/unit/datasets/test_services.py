"""Stand-in services (packager/datasets/services.yaml): which rows get them, and what a task
then carries (the grader's plan and image, never the agent's)."""

from __future__ import annotations

import json

import pytest

from packager.adapters import Context, to_spec
from packager.datasets.services import services_for, version_matches
from packager.render.harbor import make_harbor_task


@pytest.mark.parametrize(
    ("version", "rule", "expected"),
    [
        ("2.0", "<2.9", True),
        ("2.8", "<2.9", True),
        ("2.9", "<2.9", False),
        ("2.26", "<2.9", False),
        ("1.1", ">=1.0,<2", True),
        ("0.14", ">=1.0,<2", False),
        (None, "<2.9", False),
        ("main", "<2.9", False),
        (None, "*", True),
    ],
)
def test_version_rules(version: str | None, rule: str, expected: bool) -> None:
    assert version_matches(version, rule) is expected


def test_old_requests_rows_get_httpbin_and_later_ones_do_not() -> None:
    (httpbin,) = services_for("psf/requests", "2.0")
    assert httpbin.name == "httpbin" and httpbin.env == {"HTTPBIN_URL": "http://127.0.0.1:8765/"}
    assert httpbin.command.startswith(httpbin.python + " -m httpbin.core")
    assert services_for("psf/requests", "2.9") == ()
    assert services_for("pallets/flask", "2.0") == ()


def _diff(path: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"


ROW = {
    "repo": "psf/requests",
    "instance_id": "psf__requests-1724",
    "base_commit": "1ba83c47ce7b177efe90d5f51f7760680f72eda0",
    "environment_setup_commit": "4bceb312f1b99d36a25f2985b5606e98b6f0d8cd",
    "version": "2.0",
    "created_at": "2013-11-04T18:15:13Z",
    "patch": _diff("requests/x.py"),
    "test_patch": _diff("test_requests.py"),
    "problem_statement": "p",
    "hints_text": "",
    "FAIL_TO_PASS": json.dumps(["test_requests.py::RequestsTestCase::test_a"]),
    "PASS_TO_PASS": json.dumps([]),
}  # fmt: skip


def test_a_task_with_a_stand_in_serves_it_from_the_grader_only() -> None:
    spec = to_spec(ROW, Context("verified", "test"))
    assert [s.name for s in spec.grading.services] == ["httpbin"]
    assert spec.grading.env["HTTPBIN_URL"] == "http://127.0.0.1:8765/"
    assert spec.provenance.metadata["stand_in_services"] == ["httpbin"]
    task = make_harbor_task(spec)
    plan = json.loads(task.files["tests/plan.json"].data)
    assert plan["services"][0]["port"] == 8765
    assert plan["env"]["HTTPBIN_URL"] == "http://127.0.0.1:8765/"
    assert "httpbin==0.10.4" in task.files["tests/Dockerfile"].data.decode()
    agent = b"".join(f.data for p, f in task.files.items() if p.startswith("environment/"))
    assert b"httpbin" not in agent.lower() and b"8765" not in agent


def test_a_grader_with_the_network_gets_no_stand_in() -> None:
    """`--grader-network public` grades as the harness does: the tests reach the real service."""
    spec = to_spec(ROW, Context("verified", "test", grader_network="public"))
    assert spec.grading.services == () and "HTTPBIN_URL" not in spec.grading.env
    assert spec.grading.network and "stand_in_services" not in spec.provenance.metadata
