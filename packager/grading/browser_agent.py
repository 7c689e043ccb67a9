"""One workflow, followed in headless Chromium by browser-use and judged by the model it drives.

``/opt/packager-judge/bin/python -m browser_agent WORKDIR`` (the grading runtime's zipapp on
PYTHONPATH) reads ``WORKDIR/request.json`` (written by judge.py: the app's URL, the workflow,
the step budget, where to write) and always writes ``verdict.json``: the outcome
(``pass``/``fail`` are verdicts; ``blocked`` means the steps could not be carried out, ``error``
that no verdict came back), the judge's reason, one entry per step, the number of model calls,
tokens and seconds, plus a screenshot of the final page.

The model is named by PACKAGER_JUDGE_BASE_URL, PACKAGER_JUDGE_MODEL and (optionally)
PACKAGER_JUDGE_API_KEY: any OpenAI-compatible chat-completions endpoint. Runs only in the judge's
virtualenv (Python 3.11, browser-use pinned in packager/judge/requirements.lock); nothing here is
imported by the packager itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Literal

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
]
"""Headless Chromium in a container: no GPU, small /dev/shm, nothing fetched in the background."""

QUIET_ENV = {
    "ANONYMIZED_TELEMETRY": "false",
    "BROWSER_USE_CLOUD_SYNC": "false",
    "BROWSER_USE_DISABLE_EXTENSIONS": "1",
    "BROWSER_USE_SETUP_LOGGING": "true",
    "BROWSER_USE_LOGGING_LEVEL": "info",
}
"""browser-use without telemetry, cloud sync or extension downloads (no network but the app and
the model endpoint)."""


def task_text(url: str, test: dict[str, Any]) -> str:
    """The agent's task: the workflow's steps, and how to report the verdict."""
    steps = "\n".join(f"{i}. {str(step).strip()}" for i, step in enumerate(test["steps"], 1))
    return (
        "You are verifying a web application for a software benchmark, as a user would, using "
        f"only the browser. The application runs at {url} (its home page).\n\n"
        f'Behaviour test "{test["id"]}" ({test["category"]}): {str(test["purpose"]).strip()}\n\n'
        f"Follow these steps in order, exactly as written:\n{steps}\n\n"
        'Then finish with your verdict. outcome is "pass" when every PASS condition in the '
        'steps holds, "fail" when a FAIL condition holds or a PASS condition does not. Use '
        '"blocked" only when you could not carry out the steps for a reason that is not the '
        "behaviour under test (the application does not load, a login never succeeds, the "
        "browser breaks). Judge only what the page shows. Give one entry per step: its number, "
        '"done" for an action you carried out or "pass"/"fail" for a check, and a short note.'
    )


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


async def run(request: dict[str, Any], verdict: dict[str, Any]) -> None:
    from browser_use import Agent, BrowserProfile, BrowserSession
    from browser_use.llm.openai.chat import ChatOpenAI
    from pydantic import BaseModel, Field

    class StepVerdict(BaseModel):
        step: int = Field(description="the step's number")
        verdict: Literal["done", "pass", "fail"]
        note: str

    class Verdict(BaseModel):
        outcome: Literal["pass", "fail", "blocked"]
        reason: str = Field(description="why, citing what the page showed")
        steps: list[StepVerdict]

    llm = ChatOpenAI(
        model=os.environ["PACKAGER_JUDGE_MODEL"],
        base_url=os.environ["PACKAGER_JUDGE_BASE_URL"],
        api_key=os.environ.get("PACKAGER_JUDGE_API_KEY") or "none",
        max_retries=2,
        timeout=120,
    )
    profile = BrowserProfile(
        executable_path=CHROMIUM,
        headless=True,
        chromium_sandbox=False,
        enable_default_extensions=False,
        user_data_dir=tempfile.mkdtemp(prefix="packager-chromium-"),
        args=CHROMIUM_ARGS,
        keep_alive=True,
    )
    session = BrowserSession(browser_profile=profile)
    agent = Agent(
        task=task_text(str(request["url"]), request["test"]),
        llm=llm,
        browser_session=session,
        output_model_schema=Verdict,
        use_judge=False,
        enable_planning=False,
        message_compaction=False,
        final_response_after_failure=False,
        max_failures=3,
        calculate_cost=False,
        enable_signal_handler=False,
    )
    try:
        history = await agent.run(max_steps=int(request.get("max_steps") or 25))
        usage = history.usage
        if usage is not None:
            verdict["calls"] = usage.entry_count
            verdict["prompt_tokens"] = usage.total_prompt_tokens
            verdict["completion_tokens"] = usage.total_completion_tokens
        verdict["agent_steps"] = history.number_of_steps()
        verdict["errors"] = [e for e in history.errors() if e][-3:]
        try:
            await session.take_screenshot(path=str(request["screenshot"]), full_page=True)
        except Exception as exc:  # noqa: BLE001 - a screenshot is evidence, not the verdict
            verdict["screenshot_error"] = f"{type(exc).__name__}: {exc}"
        result = history.structured_output if history.is_done() else None
        if result is None:
            why = "; ".join(str(e) for e in verdict["errors"]) or "the step budget ran out"
            verdict.update(outcome="error", reason=f"the agent finished without a verdict: {why}")
            return
        verdict.update(
            outcome=result.outcome,
            reason=result.reason,
            steps=[s.model_dump() for s in result.steps],
        )
    finally:
        try:
            await session.kill()
        except Exception:  # noqa: BLE001 - the process is about to exit anyway
            pass


def main(argv: list[str]) -> int:
    work = Path(argv[1])
    request = json.loads((work / "request.json").read_text(encoding="utf-8"))
    out = Path(request["verdict"])
    verdict: dict[str, Any] = {"outcome": "error", "reason": "the browser agent did not finish"}
    write_json(out, verdict)  # fail closed: a crash leaves "error", never a verdict
    os.environ.update(QUIET_ENV)
    os.environ.setdefault("BROWSER_USE_CONFIG_DIR", str(work / ".browseruse"))
    started = time.monotonic()
    try:
        asyncio.run(run(request, verdict))
    except BaseException as exc:  # noqa: BLE001 - any failure is reported, never a verdict
        verdict.update(outcome="error", reason=f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
    verdict["seconds"] = round(time.monotonic() - started, 3)
    write_json(out, verdict)
    print(f"browser agent: outcome={verdict['outcome']} reason={verdict.get('reason')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
