"""A whole generated dataset (20 tasks of one repository) packaged with `-j 2`, interrupted
with Ctrl-C, and packaged again. The rerun finishes every task, and no task that had already
succeeded is built or run again: its result file and its run logs stay exactly as they were.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from packager.samples.generate import generate
from tests.conftest import QUICK_PERTURB, QUICK_RUNS, ROOT, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

N = 20


def _results(out: Path) -> dict[str, dict[str, Any]]:
    return {
        p.stem: json.loads(p.read_text())
        for p in (out / "rows" / "results").glob("gen__calc-*.json")
        if not p.name.endswith(".error.json") and not p.name.endswith(".audit.json")
    }


def _run_logs(out: Path, task: str) -> dict[str, float]:
    """mtime of every reward.json of the task's runs (rewritten by any new run)."""
    return {
        str(p.relative_to(out)): p.stat().st_mtime
        for p in (out / "rows" / "logs" / task).glob("*/reward.json")
    }


def test_interrupted_dataset_resumes_without_running_finished_tasks(
    tmp_path: Path, docker_client: Any
) -> None:
    data = generate(tmp_path / "ds", N)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "packager", "package", "--all", "-j", "2"]
    command += [*QUICK_RUNS, *QUICK_PERTURB]
    command += ["--dataset", str(data), "--out", str(out)]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 900
        while len([r for r in _results(out).values() if r["status"] == "verified"]) < 4:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no task verified within 15 minutes"
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    done = {t: r for t, r in _results(out).items() if r["status"] == "verified"}
    assert 4 <= len(done) < N, sorted(done)
    before = {t: (out / "rows" / "results" / f"{t}.json").read_bytes() for t in done}
    logs_before = {t: _run_logs(out, t) for t in done}
    left = docker_client.containers.list(
        all=True, filters={"label": ["packager.task", "packager.run"]}
    )
    assert not [c for c in left if "gen__calc" in (c.labels.get("packager.task") or "")]

    rerun = run_cli("package", "--all", "-j", "2", "--dataset", str(data), "--out", str(out))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    results = _results(out)
    assert len(results) == N and all(r["status"] == "verified" for r in results.values())
    assert f"to do: {N - len(done)} task(s)" in rerun.stdout
    assert f"{N} verified" in rerun.stdout and f"({len(done)} cached" in rerun.stdout
    for task in done:  # finished before the interruption: neither built nor run again
        assert f"{task}: verified (cached" in rerun.stdout or len(done) > 20
        assert (out / "rows" / "results" / f"{task}.json").read_bytes() == before[task]
        assert _run_logs(out, task) == logs_before[task]

    # Unchanged: nothing to do at all.
    started = time.monotonic()
    again = run_cli("package", "--all", "-j", "2", "--dataset", str(data), "--out", str(out))
    assert again.returncode == 0
    assert f"cached: {N} of {N} task(s)" in again.stdout
    assert f"({N} cached, 0 built or run now)" in again.stdout
    assert time.monotonic() - started < 30
