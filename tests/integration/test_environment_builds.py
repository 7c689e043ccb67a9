"""Two tasks sharing a cold environment, built at once (`packager build -j 2`), on the real
engine: the environment (the agent Dockerfile's steps before the snapshot) is built once, by
one of them; both agent builds take every one of those steps from the engine's cache.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from packager.samples.generate import generate
from packager.stages.environment import ENVIRONMENT_REPOSITORY
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _steps(log: str) -> list[tuple[str, str]]:
    """(instruction, what the builder did) per step of a classic-builder log."""
    parts = re.split(r"^Step \d+/\d+ : ", log, flags=re.M)[1:]
    return [(part.splitlines()[0], part) for part in parts]


def test_a_shared_cold_environment_is_built_once(tmp_path: Path, docker_client: Any) -> None:
    data = generate(tmp_path / "ds", 2)
    recipes = tmp_path / "ds" / "recipes.yaml"
    run = uuid.uuid4().hex
    recipes.write_text(recipes.read_text() + f"  env_vars:\n    ENVTEST_RUN: {run}\n")
    out = tmp_path / "out"
    built = run_cli("build", "--all", "--dataset", str(data), "--out", str(out), "-j", "2")
    assert built.returncode == 0, built.stdout + built.stderr

    results = {
        p.stem: json.loads(p.read_text())
        for p in sorted((out / "rows" / "results").glob("*.json"))
        if p.name.count(".") == 1
    }
    assert sorted(results) == ["gen__calc-0", "gen__calc-1"]
    builders = [t for t, r in results.items() if r["durations"].get("environment_build")]
    assert len(builders) == 1, {t: r["durations"] for t, r in results.items()}
    env_logs = sorted(out.glob("rows/logs/*/build-environment.log"))
    assert [p.parent.name for p in env_logs] == builders
    env_steps = _steps(env_logs[0].read_text())
    assert any(f"ENVTEST_RUN={run}" in s or f'ENVTEST_RUN="{run}"' in s for s, _ in env_steps)
    # Cold from the unique variable on: its later steps ran in the environment build.
    after = [done for s, done in env_steps[[run in s for s, _ in env_steps].index(True) :]]
    assert any("Running in" in done for done in after[1:]), after

    for task in results:
        steps = _steps((out / "rows" / "logs" / task / "build-agent.log").read_text())
        cut = next(i for i, (s, _) in enumerate(steps) if s.startswith("ADD history.tar"))
        for instruction, done in steps[1:cut]:  # FROM says nothing about the cache
            assert "Using cache" in done and "Running in" not in done, (task, instruction)
        assert any("Running in" in done for _, done in steps[cut + 1 :]), task  # its own steps

    tags = [
        t
        for image in docker_client.images.list(name=ENVIRONMENT_REPOSITORY)
        for t in image.tags
        if image.labels.get("packager.role") == "environment"
    ]
    assert tags, "no environment image"


def test_a_failing_environment_fails_once_per_run(tmp_path: Path, docker_client: Any) -> None:
    """Rows sharing an environment whose build fails: one build, the others fail at once with
    its log and reason (the step and the package named); a rerun tries again."""
    data = generate(tmp_path / "ds", 3)
    recipes = tmp_path / "ds" / "recipes.yaml"
    missing = f"packager-no-such-package-{uuid.uuid4().hex[:8]}"
    recipes.write_text(recipes.read_text().replace("- python3-pytest", f"- {missing}"))
    out = tmp_path / "out"
    for attempt in (1, 2):
        built = run_cli("build", "--all", "--dataset", str(data), "--out", str(out), "-j", "2")
        assert built.returncode == 1, built.stdout + built.stderr
        results = [json.loads(p.read_text()) for p in sorted(out.glob("rows/results/*.json"))]
        assert len(results) == 3 and {r["status"] for r in results} == {"build_failed"}
        reasons = [r["reason"] for r in results]
        for reason in reasons:
            assert "apt-pkgs (Debian packages) step failed" in reason, reason
            assert f"package {missing} could not be installed" in reason, reason
        again = [r for r in reasons if "built once in this run, for rows/gen__calc-" in r]
        assert len(again) == 2, reasons  # the third row built it (this run, not the last)
        logs = {r["logs"].get("build") for r in results}
        assert len(logs) == 1 and all(str(log).endswith("build-environment.log") for log in logs)
        assert "Unable to locate package" in Path(str(logs.pop())).read_text()
        assert attempt == 2 or len(list(out.glob("rows/logs/*/build-environment.log"))) == 1


def test_a_conda_package_pip_cannot_install_is_dropped_and_recorded(
    tmp_path: Path, docker_client: Any
) -> None:
    """A recipe's conda list naming a package the index lacks: the build drops it (the helper
    says so), every row of the environment records it, the tests decide; with
    --strict-environment the build fails naming the package and the spec key."""
    data = generate(tmp_path / "ds", 2)
    recipes = tmp_path / "ds" / "recipes.yaml"
    missing = f"packager-no-such-dist-{uuid.uuid4().hex[:8]}"
    recipes.write_text(recipes.read_text() + f'  packages: "six=1.16 {missing}"\n')
    key = "packages (the conda package list, as pip requirements)"
    out = tmp_path / "out"
    ca_bundle = "/etc/ssl/certs/ca-certificates.crt"  # pip inside builds reaches the index
    base = ["--all", "--dataset", str(data), "--ca-bundle", ca_bundle, "-j", "2"]
    done = run_cli("package", *base, "--out", str(out), "--oracle-runs", "1", timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    paths = [p for p in sorted(out.glob("rows/results/*.json")) if p.name.count(".") == 1]
    results = [json.loads(p.read_text()) for p in paths]
    assert [r["status"] for r in results] == ["verified", "verified"]
    for result in results:  # the row that built the environment and the one that reused it
        assert result["environment"]["dropped"] == f"{missing} ({key})", result["environment"]
    env_log = next(out.glob("rows/logs/*/build-environment.log")).read_text()
    assert f"packager-pip: dropped {missing} from conda-packages.txt" in env_log
    assert re.search(r"Successfully installed .*six-1\.16", env_log), env_log[-2000:]
    report = (out / "rows" / "report.md").read_text()
    assert f"- `gen__calc-0`: {missing} ({key})" in report, report

    strict = tmp_path / "strict"
    failed = run_cli("build", *base, "--out", str(strict), "--strict-environment", timeout=1200)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    for path in [p for p in sorted(strict.glob("rows/results/*.json")) if p.name.count(".") == 1]:
        reason = json.loads(path.read_text())["reason"]
        assert f"{key} step failed: package {missing} could not be installed" in reason, reason
