"""A published harness image as the agent image's base, with stand-ins built locally.

No registry is reachable here, so the test builds an image under the SWE-rebench harness's
naming (`swerebench/sweb.eval.x86_64.samples_1776_intset-2`, the sample row's `docker_image`)
the way the harness lays them out: the repository at /testbed, and the toolchain reachable only
through the conda env `testbed` (`/opt/miniconda3/bin/activate`).

- Time-safe, as the harness makes them (history cut at the base in the image's own layer): with
  the image present, `--prebuilt auto` uses it; the task must verify (so the tests ran inside the
  activated env), and task.toml says the environment is the image.
- Leaky (a later commit on a branch and a tag inside the image's own layers): a later layer
  cannot take them out of the image, so the leak audit must stop the task as `leak`, naming them.

Each stand-in is removed afterwards, so other tests build the sample from its install_config.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, sample_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "samples__intset-2"
BUNDLE = ROOT / "packager" / "samples" / "repos" / "samples__intset.bundle"
STAND_IN_DOCKERFILE = """\
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends golang-go git ca-certificates \\
    && rm -rf /var/lib/apt/lists/*
# The harness keeps its toolchain in conda env `testbed`: go is reachable only once activated.
RUN mkdir -p /opt/miniconda3/bin /opt/miniconda3/envs/testbed/bin \\
    && ln -s "$(readlink -f /usr/bin/go)" /opt/miniconda3/envs/testbed/bin/go && rm /usr/bin/go \\
    && printf 'export PATH=/opt/miniconda3/envs/testbed/bin:$PATH\\n' > /opt/miniconda3/bin/activate
COPY testbed /testbed
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=h", "-c", "user.email=h@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _build_stand_in(ctx: Path, docker_client: Any, *, leaky: bool) -> str:
    row = next(r for r in sample_rows() if r.get("instance_id") == TASK)
    image = str(row["docker_image"])
    testbed = ctx / "testbed"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(testbed)], check=True)
    _git(testbed, "checkout", "-q", "-B", "main", row["base_commit"])
    _git(testbed, "remote", "remove", "origin")
    if leaky:
        _git(testbed, "checkout", "-q", "-b", "future")
        (testbed / "FUTURE.md").write_text("a commit after the base\n")
        _git(testbed, "add", "-A")
        _git(testbed, "commit", "-q", "-m", "future fix")
        _git(testbed, "tag", "v9-future")
        _git(testbed, "checkout", "-q", "main")
    else:
        # What the harness's time-safe clone leaves: one branch at the base, nothing later.
        for ref in _git(testbed, "for-each-ref", "--format=%(refname)").split():
            if ref != "refs/heads/main":
                _git(testbed, "update-ref", "-d", ref)
        _git(testbed, "reflog", "expire", "--expire=now", "--all")
        _git(testbed, "gc", "-q", "--prune=now")
    (ctx / "Dockerfile").write_text(STAND_IN_DOCKERFILE)
    docker_client.images.build(path=str(ctx), tag=f"{image}:latest", rm=True, labels={
        "packager.tool": "packager", "packager.role": "test-stand-in"})  # fmt: skip
    return image


@pytest.fixture
def stand_in(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[str]:
    image = _build_stand_in(tmp_path_factory.mktemp("stand-in"), docker_client, leaky=False)
    try:
        yield image
    finally:
        docker_client.images.remove(f"{image}:latest", force=True)


@pytest.fixture
def leaky_stand_in(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[str]:
    image = _build_stand_in(tmp_path_factory.mktemp("leaky"), docker_client, leaky=True)
    try:
        yield image
    finally:
        docker_client.images.remove(f"{image}:latest", force=True)


def test_published_image_is_the_agent_base(
    stand_in: str, tmp_path: Path, docker_client: Any
) -> None:
    proc = run_cli("package", TASK, "--out", str(tmp_path), "--oracle-runs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "samples" / "results" / f"{TASK}.json").read_text())
    assert result["status"] == "verified", result
    task_dir = tmp_path / "samples" / "tasks" / TASK
    assert 'environment = "image"' in (task_dir / "task.toml").read_text()
    dockerfile = (task_dir / "environment" / "Dockerfile").read_text()
    assert f"FROM {stand_in}" in dockerfile and "rm -rf /testbed/.git" in dockerfile
    plan = json.loads((task_dir / "tests" / "plan.json").read_text())
    assert "/opt/miniconda3/bin/activate testbed" in plan["test_command"]
    script = "cd /testbed && git rev-list --all && git for-each-ref --format='%(refname)'"
    out = docker_client.containers.run(
        result["images"]["agent"], ["bash", "-c", script], remove=True, network_mode="none"
    ).decode()
    row = next(r for r in sample_rows() if r.get("instance_id") == TASK)
    assert out.split()[0] == row["base_commit"] and out.split()[-1] == "refs/heads/main"


def test_published_image_with_later_history_in_its_layers_is_a_leak(
    leaky_stand_in: str, tmp_path: Path
) -> None:
    proc = run_cli("package", TASK, "--out", str(tmp_path), "--oracle-runs", "1")
    assert proc.returncode == 1
    result = json.loads((tmp_path / "samples" / "results" / f"{TASK}.json").read_text())
    assert result["status"] == "leak", result
    assert "refs/heads/future" in result["reason"] and result["oracle"] == []


def test_without_the_image_the_row_builds_from_install_config(tmp_path: Path) -> None:
    proc = run_cli("render", TASK, "--out", str(tmp_path), "--prebuilt", "never")
    assert proc.returncode == 0, proc.stderr
    toml = (tmp_path / "samples" / "tasks" / TASK / "task.toml").read_text()
    assert 'environment = "recipe"' in toml
