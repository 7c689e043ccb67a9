"""The `judge` rule's runtime (packager/grading/judge.py) with a real app and a fake agent.

Everything but the browser agent is real: `judge_rule` copies a small repository, starts its
app (a Python HTTP server) with `bash -c` on a free loopback port, waits until it answers, runs
the "agent" as a subprocess and reads its verdict. The agent is a small executable script put
in place of the judge's Python (`judge.JUDGE_PYTHON`); it fetches the app's URL (proof that the
app is up), records what it saw and writes the verdict that the test asked for.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from packager.grading import judge, processes
from tests.unit.grading.test_grading_runtime import Task

PY = shlex.quote(sys.executable)
JUDGE_VARS = (judge.ENV_BASE_URL, judge.ENV_MODEL, judge.ENV_API_KEY)
ENV = {
    judge.ENV_BASE_URL: "http://127.0.0.1:9/v1",
    judge.ENV_MODEL: "fake-model",
    judge.ENV_API_KEY: "secret-key",
}
TARGET: dict[str, Any] = {
    "id": "blank-title-rejected",
    "category": "target",
    "purpose": "A blank title is refused.",
    "steps": ["Open the home page.", "Click Add. PASS if 'Title is required' is shown."],
}
PRESERVATION: dict[str, Any] = {
    "id": "add-and-complete",
    "category": "preservation",
    "purpose": "Adding and completing a todo still works.",
    "steps": ["Add 'milk'.", "Tick it. PASS if '0 items left' is shown."],
}

# The app: answers every GET with what it found when it started (whether an earlier copy's
# marker was in its working directory, which PACKAGER_JUDGE_* variables it sees), after
# leaving its own marker there.
APP = """\
import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer

state = {
    "cwd": os.getcwd(),
    "saw_marker": os.path.exists("marker.txt"),
    "judge_env": sorted(k for k in os.environ if k.startswith("PACKAGER_JUDGE_")),
    "port": os.environ["PORT"],
}
with open("marker.txt", "w") as f:
    f.write("started\\n")
print("app: serving on", os.environ["PORT"], flush=True)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(state).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""

# The agent: `JUDGE_PYTHON -m browser_agent WORKDIR`. BEHAVIOUR maps a test id to what it does.
AGENT = """\
#!{python}
import json, os, sys, time, urllib.request
from pathlib import Path

work = Path(sys.argv[-1])
request = json.loads((work / "request.json").read_text())
behaviour = json.loads(Path({behaviour!r}).read_text()).get(request["test"]["id"], "pass")
with urllib.request.urlopen(request["url"], timeout=5) as response:
    app = json.loads(response.read())
seen = {{
    "argv": sys.argv,
    "cwd": os.getcwd(),
    "pythonpath": os.environ.get("PYTHONPATH"),
    "app": app,
    "judge_env": {{k: v for k, v in os.environ.items() if k.startswith("PACKAGER_JUDGE_")}},
}}
(work / "agent-seen.json").write_text(json.dumps(seen))
print("agent: workflow", request["test"]["id"], "->", behaviour, flush=True)
verdict_path = Path(request["verdict"])
if behaviour == "sleep":
    time.sleep(60)
elif behaviour == "none":
    print("agent: crashed before writing a verdict", flush=True)
    sys.exit(1)
elif behaviour == "garbage":
    verdict_path.write_text("{{not json")
elif behaviour == "list":
    verdict_path.write_text("[]")
else:
    verdict = {{
        "outcome": behaviour,
        "reason": "the page showed what step 2 asks for" if behaviour == "pass" else "no luck",
        "steps": [{{"step": 1, "verdict": "done", "note": "opened the home page"}}],
        "calls": 3,
        "prompt_tokens": 100,
        "completion_tokens": 10,
    }}
    verdict_path.write_text(json.dumps(verdict))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_answers(port: int) -> bool:
    return judge.answers(f"http://127.0.0.1:{port}/", timeout=0.5)


def processes_with(token: str) -> list[int]:
    """Live processes whose command line holds `token`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(name))
    return found


class Runtime:
    """A repository holding the app, a task folder, and the fake agent in place."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.repo = root / "repo"
        self.out = root / "logs"
        self.repo.mkdir()
        (self.repo / "app.py").write_text(APP)
        self.behaviour_file = root / "behaviour.json"
        self.behave()
        agent = root / "fake-judge-python"
        agent.write_text(AGENT.format(python=sys.executable, behaviour=str(self.behaviour_file)))
        agent.chmod(0o755)
        monkeypatch.setattr(judge, "JUDGE_PYTHON", str(agent))
        for name in JUDGE_VARS:
            monkeypatch.delenv(name, raising=False)
        self.port = free_port()

    def behave(self, by_test: Mapping[str, str] | None = None) -> None:
        """What the agent does per test id (pass by default)."""
        self.behaviour_file.write_text(json.dumps(dict(by_test or {})))

    def plan(
        self, tests: list[dict[str, Any]] | None = None, **judge_fields: Any
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "tests": [TARGET, PRESERVATION] if tests is None else tests,
            "start_command": f"{PY} app.py",
            "port": self.port,
            "start_timeout_sec": 20,
            "workflow_timeout_sec": 30,
            "max_steps": 7,
        }
        spec.update(judge_fields)
        return {"version": 1, "rule": "judge", "judge": spec}

    def run(
        self,
        plan: dict[str, Any],
        env: Mapping[str, str] | None = ENV,
        sweep: Callable[[], int] = lambda: 0,
    ) -> tuple[float, dict[str, float], dict[str, Any]]:
        report: dict[str, Any] = {}
        self.report = report
        reward, subscores = judge.judge_rule(plan, self.repo, self.out, report, sweep, env=env)
        return reward, subscores, report

    def halt(self, plan: dict[str, Any], **kwargs: Any) -> judge.Halt:
        with pytest.raises(judge.Halt) as caught:
            self.run(plan, **kwargs)
        return caught.value

    def seen(self, index: int, test: Mapping[str, Any]) -> dict[str, Any]:
        """What the agent of workflow `index` (0-based) saw."""
        path = self.out / "judge" / f"{index + 1}-{test['id']}" / "agent-seen.json"
        return dict(json.loads(path.read_text()))


@pytest.fixture
def rt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    return Runtime(tmp_path, monkeypatch)


def scratch() -> Path:
    return Path("/tmp") / f"packager-judge-{os.getpid()}"


# ------------------------------------------------------------------------------------ verdicts


def test_every_workflow_passes(rt: Runtime) -> None:
    reward, subscores, report = rt.run(rt.plan())
    assert reward == 1.0
    assert subscores == {"target": 1.0, "preservation": 1.0}
    assert report["failed_workflows"] == []
    summary = report["judge"]
    assert summary["model"] == "fake-model"
    records = summary["workflows"]
    assert [(r["id"], r["category"], r["outcome"]) for r in records] == [
        (TARGET["id"], "target", "pass"),
        (PRESERVATION["id"], "preservation", "pass"),
    ]
    for index, (record, test) in enumerate(zip(records, [TARGET, PRESERVATION], strict=True)):
        assert record["calls"] == 3
        assert record["prompt_tokens"] == 100
        assert record["completion_tokens"] == 10
        assert record["agent_exit"] == 0
        assert record["reason"] == "the page showed what step 2 asks for"
        assert record["steps"] == [{"step": 1, "verdict": "done", "note": "opened the home page"}]
        assert 0 < record["seconds"] < 30
        assert 0 <= record["app_ready_sec"] <= record["seconds"]
        work = rt.out / "judge" / f"{index + 1}-{test['id']}"
        assert record["log_dir"] == str(work)
        request = json.loads((work / "request.json").read_text())
        assert request == {
            "url": f"http://127.0.0.1:{rt.port}/",
            "test": test,
            "max_steps": 7,
            "screenshot": str(work / "screenshot.png"),
            "verdict": str(work / "verdict.json"),
        }
        seen = rt.seen(index, test)
        assert seen["app"]["port"] == str(rt.port)  # the agent reached the real app
        assert seen["argv"][1:] == ["-m", "browser_agent", str(work)]
        assert seen["pythonpath"] == judge.RUNTIME_PATH  # where browser_agent is found
        assert (Path(judge.RUNTIME_PATH) / "browser_agent.py").is_file()
        assert seen["cwd"] == str(work)
        assert "app: serving on" in (work / "app.log").read_text()
        assert "agent: workflow" in (work / "agent.log").read_text()
    assert summary["calls"] == 6
    assert summary["prompt_tokens"] == 200
    assert summary["completion_tokens"] == 20
    assert summary["seconds"] == pytest.approx(sum(r["seconds"] for r in records), abs=0.002)
    assert not port_answers(rt.port)  # the last app was stopped
    assert not scratch().exists()


def test_a_failed_target_scores_zero(rt: Runtime) -> None:
    rt.behave({TARGET["id"]: "fail"})
    reward, subscores, report = rt.run(rt.plan())
    assert reward == 0.0
    assert subscores == {"target": 0.0, "preservation": 1.0}
    assert report["failed_workflows"] == [f"target:{TARGET['id']}"]
    outcomes = [r["outcome"] for r in report["judge"]["workflows"]]
    assert outcomes == ["fail", "pass"]  # a failed workflow does not stop the others
    assert report["judge"]["calls"] == 6


def test_a_category_scores_its_worst_workflow(rt: Runtime) -> None:
    second = dict(PRESERVATION, id="filter-still-works")
    rt.behave({"filter-still-works": "fail"})
    reward, subscores, report = rt.run(rt.plan([TARGET, PRESERVATION, second]))
    assert reward == 0.0
    assert subscores == {"target": 1.0, "preservation": 0.0}
    assert report["failed_workflows"] == ["preservation:filter-still-works"]


# ------------------------------------------------------------------------------------- halts


def test_no_model_configured_needs_judge(rt: Runtime) -> None:
    halt = rt.halt(rt.plan(), env={judge.ENV_API_KEY: "k", judge.ENV_MODEL: "  "})
    assert halt.status == "needs_judge"
    assert judge.ENV_BASE_URL in halt.reason and judge.ENV_MODEL in halt.reason
    assert not (rt.out / "judge").exists()  # nothing was started


def test_the_api_key_is_optional(rt: Runtime) -> None:
    env = {k: v for k, v in ENV.items() if k != judge.ENV_API_KEY}
    reward, _, _ = rt.run(rt.plan(), env=env)
    assert reward == 1.0
    assert rt.seen(0, TARGET)["judge_env"] == env


def test_missing_judge_python_is_an_infra_error(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(judge, "JUDGE_PYTHON", str(rt.root / "nowhere" / "python"))
    halt = rt.halt(rt.plan())
    assert halt.status == "infra_error"
    assert "not in this image" in halt.reason


@pytest.mark.parametrize(
    "judge_fields",
    [{"tests": []}, {"tests": [{"id": "x", "category": "target"}]}],
    ids=["no-tests", "incomplete-test"],
)
def test_a_malformed_judge_object_is_refused(rt: Runtime, judge_fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="judge.tests"):
        rt.run(rt.plan(**judge_fields))
    with pytest.raises(ValueError, match="judge object"):
        rt.run({"rule": "judge"})


def test_an_app_that_exits_at_once(rt: Runtime) -> None:
    command = "echo starting; echo boom >&2; exit 3"
    halt = rt.halt(rt.plan(start_command=command))
    assert halt.status == "infra_error"
    assert "exited with status 3" in halt.reason
    assert f"start command: {command}" in halt.reason
    assert "starting | boom" in halt.reason  # its last log lines
    (record,) = rt.report["judge"]["workflows"]  # the record shows how far it got
    assert record["id"] == TARGET["id"] and "outcome" not in record
    assert record["seconds"] >= 0
    assert not scratch().exists()


def test_an_app_that_never_answers_is_stopped(rt: Runtime) -> None:
    token = f"{secrets.randbelow(10**6):06d}"
    # A child in the app's process group and a daemon that left it (setsid): both must go.
    command = f"setsid sleep 60.{token}1 & echo waiting; sleep 60.{token}2"
    halt = rt.halt(
        rt.plan(start_command=command, start_timeout_sec=1), sweep=processes.sweep_descendants
    )
    assert halt.status == "infra_error"
    assert f"port {rt.port}" in halt.reason
    assert "within 1 s" in halt.reason
    assert f"start command: {command}" in halt.reason
    assert "waiting" in halt.reason
    assert processes_with(f"60.{token}") == []


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("blocked", "the judge could not carry out the steps (no luck)"),
        ("error", "the judge gave no verdict (no luck)"),
        ("none", "the browser agent wrote no verdict; its last log lines: agent: workflow"),
        ("garbage", "the browser agent wrote no verdict"),
        ("list", "the verdict is not a JSON object"),
    ],
)
def test_an_agent_without_a_verdict_is_an_infra_error(
    rt: Runtime, behaviour: str, message: str
) -> None:
    rt.behave({TARGET["id"]: behaviour})
    halt = rt.halt(rt.plan())
    assert halt.status == "infra_error"
    assert halt.reason.startswith(f"workflow {TARGET['id']}: ")
    assert message in halt.reason
    records = rt.report["judge"]["workflows"]
    assert len(records) == 1  # judging stopped at the first workflow
    assert records[0]["seconds"] > 0
    assert rt.report["judge"]["seconds"] == records[0]["seconds"]
    assert not port_answers(rt.port)
    assert not scratch().exists()


def test_an_agent_that_runs_too_long_is_killed(rt: Runtime) -> None:
    rt.behave({TARGET["id"]: "sleep"})
    halt = rt.halt(rt.plan(workflow_timeout_sec=1))
    assert halt.status == "infra_error"
    assert halt.reason == f"workflow {TARGET['id']}: the browser agent ran past 1 s"
    (record,) = rt.report["judge"]["workflows"]
    assert 1 <= record["seconds"] < 15
    assert processes_with(rt.root.name) == []  # the agent's command line holds its path
    assert not port_answers(rt.port)


# ------------------------------------------------------------------------------- isolation


def test_each_workflow_gets_a_fresh_copy_of_the_app(rt: Runtime) -> None:
    reward, _, _ = rt.run(rt.plan())
    assert reward == 1.0
    first, second = rt.seen(0, TARGET)["app"], rt.seen(1, PRESERVATION)["app"]
    assert first["saw_marker"] is False
    assert second["saw_marker"] is False  # the first copy's marker is not in the second
    assert first["cwd"] != second["cwd"]
    assert str(rt.repo) not in (first["cwd"], second["cwd"])
    assert sorted(p.name for p in rt.repo.iterdir()) == ["app.py"]  # the original untouched
    assert not Path(first["cwd"]).exists() and not Path(second["cwd"]).exists()


def test_only_the_agent_sees_the_judge_variables(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    reward, _, report = rt.run(rt.plan(), env=None)  # as grade.py calls it: os.environ
    assert reward == 1.0
    assert report["judge"]["model"] == "fake-model"
    for index, test in enumerate([TARGET, PRESERVATION]):
        seen = rt.seen(index, test)
        assert seen["app"]["judge_env"] == []
        assert seen["judge_env"] == ENV


# ------------------------------------------------------------------------ through grade.py


def test_grade_py_without_a_model_needs_judge(tmp_path: Path) -> None:
    task = Task(tmp_path)
    plan_judge = {
        "tests": [TARGET, PRESERVATION],
        "start_command": f"{PY} app.py",
        "port": free_port(),
        "start_timeout_sec": 5,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("PACKAGER_JUDGE_")}
    env[judge.ENV_API_KEY] = "a key alone is not enough"
    reward, report = task.grade("", rule="judge", judge=plan_judge, proc_env=env)
    assert reward == {"reward": 0.0}
    assert report["status"] == "needs_judge"
    assert judge.ENV_BASE_URL in report["reason"] and judge.ENV_MODEL in report["reason"]
