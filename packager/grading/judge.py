"""The `judge` rule: a web app's behaviour tests, followed in a real browser by an agent that
a model drives, and judged by that model (SWEeper-Bench).

For each workflow of the plan, in order: copy the patched repository (a fresh copy of the app
per workflow), start the app with its start command and `PORT`, wait until it answers HTTP,
run the browser agent (`-m browser_agent` from this runtime, in the judge's virtualenv, Chromium
headless, a new profile) on the workflow's steps, read its verdict, stop the app and everything
it started.
The reward is 1.0 only when every workflow passes; each workflow's category is a subscore.

Setup failures are never verdicts: no model configured (`needs_judge`), an app that does not
start or answer, a browser or agent that crashes, a judge that returns no verdict, or one that
reports the steps could not be carried out (`blocked`: a login that never succeeds) all end
grading with `infra_error` and the reason.

Standard library only (it runs inside grade.py's process); the browser agent is a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

if TYPE_CHECKING or __package__:
    from . import processes
else:  # run from the zipapp or the runtime's folder: sys.path[0] holds the siblings
    import processes

JUDGE_PYTHON = "/opt/packager-judge/bin/python"
RUNTIME_PATH = os.path.dirname(os.path.abspath(__file__))
"""Where this runtime's modules are found: the zipapp (`/tests/grading.pyz`) in a grader
image, `packager/grading/` in the source tree. Taken at import, before anything changes the
working directory; the judge's Python finds `browser_agent` there (on its PYTHONPATH)."""
ENV_BASE_URL = "PACKAGER_JUDGE_BASE_URL"
ENV_MODEL = "PACKAGER_JUDGE_MODEL"
ENV_API_KEY = "PACKAGER_JUDGE_API_KEY"
REQUIRED_ENV = (ENV_BASE_URL, ENV_MODEL)
"""Without these the task cannot be judged (`needs_judge`); the key is optional (local
endpoints often need none)."""
DEFAULT_START_TIMEOUT = 120.0
DEFAULT_WORKFLOW_TIMEOUT = 900.0
DEFAULT_MAX_STEPS = 25
APP_LOG_LINES = 15
VERDICTS = ("pass", "fail")


class Halt(Exception):
    """Judging ends with a final status other than a verdict (needs_judge, infra_error)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def missing_env(env: Mapping[str, str]) -> List[str]:
    """The model variables that are unset or empty."""
    return [name for name in REQUIRED_ENV if not env.get(name, "").strip()]


def _count(value: Any) -> int:
    """A count the agent reported (anything else counts as 0: it never hides a Halt)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and value > 0 else default


def last_lines(path: Path, count: int = APP_LOG_LINES) -> str:
    """The last `count` non-empty lines of a log, joined with ' | ' (empty when none)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether something answers HTTP at `url` (any status counts: the app is up)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read(1)
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


class App:
    """One started copy of the app: a process group, its log, and how to stop it."""

    def __init__(self, command: str, cwd: Path, port: int, log_path: Path) -> None:
        self.command = command
        self.port = port
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{port}/"
        env = dict(os.environ, PORT=str(port), HOST="0.0.0.0")
        for name in (ENV_BASE_URL, ENV_MODEL, ENV_API_KEY):
            env.pop(name, None)  # the app under test never sees the judge's credentials
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_until_answers(self, timeout: float) -> float:
        """Seconds until the app answered; Halt(infra_error) naming the command and the app's
        last log lines when it exits or stays silent.
        """
        started = time.monotonic()
        while True:
            if answers(self.url):
                return round(time.monotonic() - started, 3)
            code = self.proc.poll()
            if code is not None:
                raise Halt(
                    "infra_error",
                    f"the app exited with status {code} before answering on port {self.port} "
                    f"(start command: {self.command}); its last log lines: "
                    f"{last_lines(self.log_path) or '(no output)'}",
                )
            if time.monotonic() - started > timeout:
                raise Halt(
                    "infra_error",
                    f"the app did not answer HTTP on port {self.port} within {timeout:.0f} s "
                    f"(start command: {self.command}); its last log lines: "
                    f"{last_lines(self.log_path) or '(no output)'}",
                )
            time.sleep(0.25)

    def stop(self, sweep: Callable[[], int]) -> None:
        """Kill the app's process group, then anything else it left behind."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        sweep()
        deadline = time.monotonic() + 10
        while answers(self.url, timeout=0.5):
            if time.monotonic() > deadline:
                # The next workflow's fresh copy would be answered by this one.
                raise Halt("infra_error", f"the app on port {self.port} did not stop")
            time.sleep(0.2)


def _tests(judge: Mapping[str, Any]) -> List[Dict[str, Any]]:
    tests = judge.get("tests")
    if not isinstance(tests, list) or not tests:
        raise ValueError("plan: judge.tests must be a non-empty list")
    for i, test in enumerate(tests):
        if not isinstance(test, dict) or not all(
            k in test for k in ("id", "category", "purpose", "steps")
        ):
            raise ValueError(f"plan: judge.tests[{i}] needs id, category, purpose and steps")
    return tests


def _read_verdict(path: Path, test_id: str, log_path: Path) -> Dict[str, Any]:
    """The agent's verdict file, or Halt(infra_error) when it is missing or holds no verdict."""
    try:
        verdict = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise Halt(
            "infra_error",
            f"workflow {test_id}: the browser agent wrote no verdict; its last log lines: "
            f"{last_lines(log_path) or '(no output)'}",
        ) from None
    if not isinstance(verdict, dict):
        raise Halt("infra_error", f"workflow {test_id}: the verdict is not a JSON object")
    return verdict


def _run_agent(
    work: Path, env: Mapping[str, str], agent_log: Path, timeout: float, test_id: str
) -> int:
    """Run the browser agent on `work` (its request.json) in the judge's Python; its exit code.
    Past `timeout` its whole session is killed and judging halts (infra_error).
    """
    agent_env = dict(os.environ)
    agent_env.update({k: v for k, v in env.items() if k.startswith("PACKAGER_JUDGE_")})
    # Only the runtime: the image's own PYTHONPATH is for the code under test.
    agent_env["PYTHONPATH"] = RUNTIME_PATH
    with agent_log.open("wb") as log:
        agent = subprocess.Popen(
            [JUDGE_PYTHON, "-m", "browser_agent", str(work)],
            cwd=str(work),
            env=agent_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return agent.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
            raise Halt(
                "infra_error",
                f"workflow {test_id}: the browser agent ran past {timeout:.0f} s",
            ) from None


def run_workflow(
    test: Mapping[str, Any],
    *,
    index: int,
    judge: Mapping[str, Any],
    repo: Path,
    out_dir: Path,
    scratch: Path,
    env: Mapping[str, str],
    sweep: Callable[[], int],
    records: List[Dict[str, Any]],
) -> None:
    """One workflow on a fresh copy of the app; its record is appended to `records` first, so
    the report shows how far it got even when it ends in a Halt.
    """
    test_id = str(test["id"])
    work = out_dir / "judge" / f"{index + 1}-{test_id}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    app_dir = scratch / f"app-{index + 1}"
    shutil.copytree(repo, app_dir, symlinks=True)
    command = str(judge["start_command"])
    port = int(judge["port"])
    record: Dict[str, Any] = {"id": test_id, "category": test["category"], "log_dir": str(work)}
    records.append(record)
    started = time.monotonic()
    app = App(command, app_dir, port, work / "app.log")
    try:
        record["app_ready_sec"] = app.wait_until_answers(
            _number(judge.get("start_timeout_sec"), DEFAULT_START_TIMEOUT)
        )
        request = {
            "url": app.url,
            "test": dict(test),
            "max_steps": int(_number(judge.get("max_steps"), DEFAULT_MAX_STEPS)),
            "screenshot": str(work / "screenshot.png"),
            "verdict": str(work / "verdict.json"),
        }
        (work / "request.json").write_text(json.dumps(request, indent=2) + "\n", "utf-8")
        agent_log = work / "agent.log"
        timeout = _number(judge.get("workflow_timeout_sec"), DEFAULT_WORKFLOW_TIMEOUT)
        code = _run_agent(work, env, agent_log, timeout, test_id)
        verdict = _read_verdict(work / "verdict.json", test_id, agent_log)
        record.update(
            {
                k: verdict.get(k)
                for k in ("outcome", "reason", "steps", "calls", "prompt_tokens")
                if k in verdict
            }
        )
        record["completion_tokens"] = verdict.get("completion_tokens")
        record["agent_exit"] = code
        if (work / "screenshot.png").is_file():
            record["screenshot"] = str(work / "screenshot.png")
        outcome = verdict.get("outcome")
        if outcome not in VERDICTS:
            why = verdict.get("reason") or "no reason given"
            kind = "could not carry out the steps" if outcome == "blocked" else "gave no verdict"
            raise Halt("infra_error", f"workflow {test_id}: the judge {kind} ({why})")
    finally:
        app.stop(sweep)
        record["seconds"] = round(time.monotonic() - started, 3)
        shutil.rmtree(app_dir, ignore_errors=True)


def judge_rule(
    plan: Mapping[str, Any],
    repo: Path,
    out_dir: Path,
    report: Dict[str, Any],
    sweep: Callable[[], int],
    env: Optional[Mapping[str, str]] = None,
) -> Tuple[float, Dict[str, float]]:
    """Run every workflow; the reward (1.0 only when all pass) and a subscore per category."""
    env = dict(os.environ if env is None else env)
    judge = plan.get("judge")
    if not isinstance(judge, dict):
        raise ValueError("plan: rule judge needs a judge object")
    tests = _tests(judge)
    missing = missing_env(env)
    if missing:
        raise Halt(
            "needs_judge",
            f"no model endpoint for the browser judge: set {' and '.join(missing)} "
            f"(and {ENV_API_KEY} if the endpoint needs a key)",
        )
    if not Path(JUDGE_PYTHON).is_file():
        raise Halt("infra_error", f"the judge's Python {JUDGE_PYTHON} is not in this image")
    # An app that daemonizes (`setsid`, a double fork) is re-parented to us, not to init, so the
    # caller's sweep still finds and kills it before the next workflow starts on the same port.
    processes.set_subreaper()
    records: List[Dict[str, Any]] = []
    report["judge"] = {"model": env.get(ENV_MODEL), "workflows": records}
    scratch = Path("/tmp") / f"packager-judge-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for index, test in enumerate(tests):
            run_workflow(
                test,
                index=index,
                judge=judge,
                repo=repo,
                out_dir=out_dir,
                scratch=scratch,
                env=env,
                sweep=sweep,
                records=records,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        totals = report["judge"]
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            totals[key] = sum(_count(r.get(key)) for r in records)
        totals["seconds"] = round(sum(float(r.get("seconds") or 0) for r in records), 3)
    subscores: Dict[str, float] = {}
    for record in records:
        key = str(record["category"])
        passed = 1.0 if record.get("outcome") == "pass" else 0.0
        subscores[key] = min(subscores.get(key, 1.0), passed)
    reward = 1.0 if records and all(r.get("outcome") == "pass" for r in records) else 0.0
    failed = [f"{r['category']}:{r['id']}" for r in records if r.get("outcome") != "pass"]
    report["failed_workflows"] = failed
    return reward, subscores
