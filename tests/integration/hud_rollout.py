"""One HUD rollout of a rendered task through HUD's own runtime; prints one JSON object.

Run with the pinned HUD interpreter (`.hud/venv/bin/python`; the project venv has no hud):

    hud_rollout.py --source build/<dataset>/sources/<task> --image <hud image> \
        --agent gold --patch build/<dataset>/tasks/<task>/solution/gold.patch --workdir /testbed

`Taskset.from_file(<source>/tasks.py).run(agent, runtime=DockerRuntime(image))` is the real
rollout engine (no model, no key): a scripted `Agent` drives the env's ssh "shell" capability,
then HUD grades. Agents: `nop` does nothing; `gold` applies the gold patch with `git apply` in
the agent shell (as the agent uid, in the sandbox). `--probe` also records what the agent uid
gets when it tries to read the grader payload: through the agent shell, and with
`docker exec -u <uid>` in the same container (found by the probe label given to `docker run`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("HUD_CLI_ANALYTICS_ENABLED", "0")
os.environ.setdefault("HUD_SKIP_VERSION_CHECK", "1")
os.environ.setdefault("HUD_TELEMETRY_ENABLED", "0")

from hud.agents.base import Agent  # noqa: E402
from hud.eval.run import Run  # noqa: E402
from hud.eval.runtime.docker import DockerRuntime  # noqa: E402
from hud.eval.taskset import Taskset  # noqa: E402

PROBE_LABEL = "packager.hud-probe"
SECRET = "/hud/grader/plan.json"


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


class ScriptedAgent(Agent):
    """No model: runs fixed shell steps over the env's `shell` capability."""

    def __init__(
        self, *, patch: str | None, workdir: str, probe_id: str | None, agent_uid: int
    ) -> None:
        super().__init__()
        self.patch = patch
        self.workdir = workdir
        self.probe_id = probe_id
        self.agent_uid = agent_uid
        self.steps: list[dict[str, Any]] = []
        self.probe: dict[str, Any] = {}

    async def _sh(self, shell: Any, command: str, stdin: str | None = None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"timeout": 300}
        if stdin is not None:
            kwargs["input"] = stdin
        done = await shell.run(command, **kwargs)
        step = {
            "command": command,
            "exit": done.exit_status,
            "stdout": _text(done.stdout)[-4000:],
            "stderr": _text(done.stderr)[-4000:],
        }
        self.steps.append(step)
        return step

    async def __call__(self, run: Run) -> None:
        shell = await run.client.open("shell")
        self.probe["whoami"] = await self._sh(shell, "id -u; pwd")
        if self.patch is not None:
            applied = await self._sh(
                shell, f"cd {self.workdir} && git apply --whitespace=nowarn -", self.patch
            )
            if applied["exit"] != 0:
                raise RuntimeError(f"gold patch did not apply: {applied['stderr']}")
        if self.probe_id is not None:
            self.probe["shell_cat"] = await self._sh(shell, f"cat {SECRET}")
            self.probe["shell_ls"] = await self._sh(shell, "ls -ld /hud")
            self.probe["docker_exec"] = await asyncio.to_thread(self._docker_exec)
        run.trace.content = "done"

    def _docker_exec(self) -> dict[str, Any]:
        """The agent uid in the env container itself, outside any sandbox: `cat` the payload."""
        found = subprocess.run(
            ["docker", "ps", "-q", "--filter", f"label={PROBE_LABEL}={self.probe_id}"],
            capture_output=True,
            text=True,
            check=True,
        )
        ids = found.stdout.split()
        if len(ids) != 1:
            return {"error": f"expected one probe container, found {ids}"}
        argv = ["docker", "exec", "-u", str(self.agent_uid), ids[0], "cat", SECRET]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return {
            "command": " ".join(argv[:2] + argv[2:4] + ["<container>"] + argv[5:]),
            "exit": done.returncode,
            "stdout": done.stdout[-2000:],
            "stderr": done.stderr.strip()[-2000:],
        }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    tasks_py = Path(args.source).resolve() / "tasks.py"
    taskset = Taskset.from_file(tasks_py)
    probe_id = uuid.uuid4().hex if args.probe else None
    labels = list(args.label)
    if probe_id is not None:
        labels.append(f"{PROBE_LABEL}={probe_id}")
    run_args: list[str] = []
    for label in labels:
        run_args += ["--label", label]
    for host in args.add_host:
        run_args += ["--add-host", host]
    env_vars = dict(item.split("=", 1) for item in args.env)
    runtime = DockerRuntime(args.image, run_args=run_args, env_vars=env_vars)
    patch = Path(args.patch).read_text(encoding="utf-8") if args.patch else None
    if args.agent == "gold" and patch is None:
        raise SystemExit("--agent gold needs --patch")
    agent = ScriptedAgent(
        patch=patch if args.agent == "gold" else None,
        workdir=args.workdir,
        probe_id=probe_id,
        agent_uid=args.agent_uid,
    )
    job = await taskset.run(agent, runtime=runtime, rollout_timeout=args.timeout)
    [run] = job.runs
    errors = [step.error for step in run.trace.steps if getattr(step, "error", None)]
    return {
        "slugs": [slug for slug, _ in taskset.items()],
        "envs": sorted(taskset.environment_names()),
        "slug": run.slug,
        "agent": args.agent,
        "reward": run.grade.reward,
        "is_error": run.grade.is_error,
        "content": run.grade.content,
        "info": run.grade.info,
        "subscores": run.grade.raw.get("subscores"),
        "status": run.trace.status,
        "errors": errors,
        "steps": agent.steps,
        "probe": agent.probe,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="rendered HUD env folder (has tasks.py)")
    parser.add_argument("--image", required=True, help="the Dockerfile.hud image")
    parser.add_argument("--agent", choices=["nop", "gold"], required=True)
    parser.add_argument("--patch", help="the gold patch (for --agent gold)")
    parser.add_argument("--workdir", default="/testbed", help="the repository in the image")
    parser.add_argument("--agent-uid", type=int, default=1000)
    parser.add_argument("--probe", action="store_true", help="try to read the grader payload")
    parser.add_argument("--label", action="append", default=[], help="docker run label k=v")
    parser.add_argument("--env", action="append", default=[], help="container env K=V")
    parser.add_argument("--add-host", action="append", default=[], help="docker run host:ip")
    parser.add_argument(
        "--timeout", type=float, help="rollout cap, s (above the row's agent timeout)"
    )
    args = parser.parse_args()
    # DockerRuntime streams the container's log to sys.stdout: keep stdout for the JSON alone.
    with contextlib.redirect_stdout(sys.stderr):
        result = asyncio.run(_main(args))
    json.dump(result, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
