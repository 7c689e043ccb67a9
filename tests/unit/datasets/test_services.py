"""Stand-in services (packager/datasets/services.yaml): which rows get them, and what a task
then carries (the grader's plan and image, never the agent's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from packager.adapters import Context, to_spec
from packager.datasets.services import services_for, unroutable_for, version_matches
from packager.engines.local import make_run_plan
from packager.render.harbor import REFRESH_WHEELS, make_harbor_task
from packager.render.hud import make_hud_files
from packager.storage import OutputPaths


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


def test_the_hud_image_takes_the_stand_in_and_refresh_wheels_from_the_grader_image() -> None:
    """The HUD image (agent and grader in one) copies the stand-in's venv and the refresh wheels
    from the grader image, root-only; without a grader image it refuses to render."""
    spec = to_spec(ROW, Context("verified", "test"))
    spec = spec.model_copy(
        update={
            "grading": spec.grading.model_copy(
                update={"refresh_requirements": ("appdirs",), "refresh_command": "pip -q"}
            )
        }
    )
    task = make_harbor_task(spec)
    hud = make_hud_files(
        spec,
        dataset="verified",
        agent_image=task.agent_image,
        grader_payload=task.grader_payload,
        grader_image=task.grader_image,
    )
    text = hud["Dockerfile.hud"].data.decode()
    venv = spec.grading.services[0].python.rsplit("/bin/", 1)[0]
    assert f"COPY --from={task.grader_image} {venv} {venv}" in text
    assert f"COPY --from={task.grader_image} {REFRESH_WHEELS} {REFRESH_WHEELS}" in text
    assert f"chmod -R go-rwx {venv}" in text and f"chmod -R go-rwx {REFRESH_WHEELS}" in text
    grader = task.files["tests/Dockerfile"].data.decode()
    assert " pip; do" in grader  # the agent image holds no pip (requests is vendored by pip)
    with pytest.raises(ValueError, match="no grader image given"):
        make_hud_files(
            spec,
            dataset="verified",
            agent_image=task.agent_image,
            grader_payload=task.grader_payload,
        )


def test_every_requests_row_routes_the_tarpit_nowhere() -> None:
    """requests' TARPIT (10.255.255.1) must not answer: a grader without a network would refuse
    the connect at once, so the runtime routes it into loopback, with NET_ADMIN in the grader
    only (its own namespace, no network); the agent image and container get nothing."""
    assert unroutable_for("psf/requests", "2.9") == ("10.255.255.1",)
    assert unroutable_for("psf/requests", None) == ("10.255.255.1",)
    assert unroutable_for("pallets/flask", "2.0") == ()
    row = {**ROW, "instance_id": "psf__requests-2931", "version": "2.9"}
    spec = to_spec(row, Context("verified", "test"))
    assert spec.grading.unroutable == ("10.255.255.1",) and spec.grading.services == ()
    assert spec.provenance.metadata["unroutable"] == ["10.255.255.1"]
    task = make_harbor_task(spec)
    assert json.loads(task.files["tests/plan.json"].data)["unroutable"] == ["10.255.255.1"]
    grader = task.files["tests/docker-compose.yaml"].data.decode()
    agent = task.files["environment/docker-compose.yaml"].data.decode()
    assert "network_mode: none" in grader and "NET_ADMIN" in grader
    assert "network_mode: none" in agent and "NET_ADMIN" not in agent
    plan = make_run_plan(spec, OutputPaths(Path("/out"), "verified"), {"agent": "a", "grader": "g"})
    assert plan.grader_caps == ("NET_ADMIN",) and not plan.grader_network
    public = to_spec(row, Context("verified", "test", grader_network="public"))
    assert public.grading.unroutable == ()  # the real network answers nothing there itself
    plain = to_spec({**ROW, "repo": "pallets/flask"}, Context("verified", "test"))
    assert (
        make_run_plan(
            plain, OutputPaths(Path("/out"), "v"), {"agent": "a", "grader": "g"}
        ).grader_caps
        == ()
    )
