"""Where the browser judge's model is: the host's PACKAGER_JUDGE_* variables (`--judge env`),
or the replay server with a task's recorded turns (`--judge replay`).

The grader container reaches the host as `host.docker.internal` (Docker's `host-gateway`), so
an endpoint on the host's loopback (`http://localhost:8000/v1`) is rewritten to that name for
the container; any other URL is passed unchanged.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from packager.errors import PackagerError
from packager.judge.replay import ReplayScript, ReplayServer
from packager.models.spec import TaskSpec
from packager.registry import JudgeMode

ENV_BASE_URL = "PACKAGER_JUDGE_BASE_URL"
ENV_MODEL = "PACKAGER_JUDGE_MODEL"
ENV_API_KEY = "PACKAGER_JUDGE_API_KEY"
JUDGE_ENV = (ENV_BASE_URL, ENV_MODEL, ENV_API_KEY)
REQUIRED = (ENV_BASE_URL, ENV_MODEL)
HOST_ALIAS = "host.docker.internal"
JUDGE_MODES = tuple(JudgeMode)
REPLAY_DIR = Path(__file__).resolve().parent.parent / "samples" / "replays"
"""Recorded judge turns of the sample tasks: `<instance_id>.yaml`."""
REPLAY_MODEL = "packager-replay"


def host_judge_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The PACKAGER_JUDGE_* variables that are set (and not empty) in this process."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in JUDGE_ENV if env.get(name, "").strip()}


def missing_judge_env(env: Mapping[str, str] | None) -> list[str]:
    """The required variables `env` lacks."""
    env = env or {}
    return [name for name in REQUIRED if not str(env.get(name, "")).strip()]


def container_url(url: str) -> str:
    """`url` as a container with a network sees it: the host's loopback becomes the alias."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname in ("localhost", "127.0.0.1", "::1", "0.0.0.0"):
        netloc = HOST_ALIAS + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def judge_grader_env(env: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """The grader container's judge variables (sorted pairs; the URL made reachable)."""
    out = {k: str(v) for k, v in (env or {}).items() if k in JUDGE_ENV}
    if ENV_BASE_URL in out:
        out[ENV_BASE_URL] = container_url(out[ENV_BASE_URL])
    return tuple(sorted(out.items()))


def replay_files(specs: Sequence[TaskSpec], replay_dir: Path) -> list[Path]:
    """The replay file of every judge task among `specs`; an error names the missing ones."""
    judged = [s for s in specs if s.grading.browser_judged]
    files = [replay_dir / f"{s.task_id}.yaml" for s in judged]
    missing = [s.task_id for s, f in zip(judged, files, strict=True) if not f.is_file()]
    if missing:
        raise PackagerError(
            f"--judge replay: no recorded turns for {', '.join(missing)} in {replay_dir} "
            "(expected <instance_id>.yaml; docs/sweeper.md says how to record them)"
        )
    return files


@contextmanager
def judge_endpoint(
    mode: str, specs: Sequence[TaskSpec], *, replay_dir: Path | None = None
) -> Iterator[dict[str, str]]:
    """The judge variables for this run; with `replay`, a replay server serving the recorded
    turns of the selected judge tasks runs on all interfaces until the block ends.
    """
    if mode not in JUDGE_MODES:
        raise PackagerError(f"unknown --judge {mode!r} (available: {', '.join(JUDGE_MODES)})")
    if mode == "env" or not any(s.grading.browser_judged for s in specs):
        yield host_judge_env()
        return

    scripts = []
    for path in replay_files(specs, replay_dir or REPLAY_DIR):
        try:
            scripts.append(ReplayScript.load(path))
        except ValueError as exc:
            raise PackagerError(str(exc)) from None
    merged = replace(
        scripts[0],
        conversations=tuple(c for s in scripts for c in s.conversations),
        source=", ".join(s.source for s in scripts),
    )
    server = ReplayServer(merged, host="0.0.0.0", port=0)
    server.start()
    try:
        yield {
            ENV_BASE_URL: f"http://127.0.0.1:{server.port}/v1",
            ENV_MODEL: REPLAY_MODEL,
            ENV_API_KEY: "packager-replay-key",
        }
    finally:
        server.stop()
