"""Shared fixtures. Docker tests never skip: without an engine they fail with the fix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.services import ServiceError, start_registry

ROOT = Path(__file__).resolve().parent.parent
SAMPLES_ROWS = ROOT / "packager" / "samples" / "rows.jsonl"
HARBOR_PYTHON = ROOT / ".harbor" / "venv" / "bin" / "python"
# Two real SWE-bench Lite rows and the cut upstream bundle serving them (their README says how)
REALROWS = ROOT / "tests" / "data" / "realrows"
REALROWS_ROWS = REALROWS / "swe-bench-lite-dev-marshmallow.jsonl"
REALROWS_BUNDLE = REALROWS / "marshmallow-code__marshmallow.bundle"


def pytest_configure(config: pytest.Config) -> None:
    """Give Ctrl-C back to the commands the tests start. A shell runs a background job (`make
    test &`, `nohup`) with SIGINT ignored, and an ignored signal stays ignored across exec: the
    tests that send SIGINT to a `packager` run would see it finish instead of stop. A handler
    (not SIG_IGN) here is reset to the default in each child, where Python installs its own.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def sample_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLES_ROWS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    from packager.errors import EngineUnavailableError
    from packager.images.build import connect

    try:
        client = connect()
    except EngineUnavailableError as exc:
        pytest.fail(
            f"{exc}. Fix: `make docker` (or `bash scripts/ensure-docker.sh`)", pytrace=False
        )
    yield client


@pytest.fixture(scope="session")
def harbor_python() -> Path:
    if not HARBOR_PYTHON.exists():
        pytest.fail("the pinned Harbor environment is missing. Fix: `make harbor`", pytrace=False)
    return HARBOR_PYTHON


QUICK_RUNS = ("--runs", "2,1")
QUICK_PERTURB = ("--perturb", "none")
"""The runs a test's `package` or `verify` asks for unless it names its own: two gold runs and a
nop run, no perturbation. The defaults (six gold runs and three perturbed ones) cost three
times the runs; tests/integration/test_stability_e2e.py runs them as a user would."""


def quick(args: tuple[str, ...]) -> tuple[str, ...]:
    """`args` with `QUICK_RUNS` / `QUICK_PERTURB` added to a `package` or `verify` (not of a
    candidate patch) that names no run count / no perturbation.
    """
    if not args or args[0] not in ("package", "verify"):
        return args
    named = {a.split("=", 1)[0] for a in args}
    if "--patch" in named:
        return args
    if not named & {"--runs", "--oracle-runs", "--nop-runs"}:
        args = (*args, *QUICK_RUNS)
    if "--perturb" not in named:
        args = (*args, *QUICK_PERTURB)
    return args


def run_cli(
    *args: str, cwd: Path | None = None, timeout: int = 1800, defaults: bool = False
) -> subprocess.CompletedProcess[str]:
    """The real `packager` command, as a user runs it (with `QUICK_RUNS` unless `defaults`)."""
    env = {**os.environ, "COLUMNS": "200"}
    args = args if defaults else quick(args)
    return subprocess.run(
        [sys.executable, "-m", "packager", *args],
        cwd=cwd or ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on loopback (Debian's docker-registry), for this module; yields HOST:PORT."""
    try:
        host, stop = start_registry(tmp_path_factory.mktemp("registry"))
    except ServiceError as exc:
        pytest.fail(str(exc))
    try:
        yield host
    finally:
        stop()
