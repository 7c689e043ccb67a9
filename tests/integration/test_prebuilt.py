"""A published harness image as the agent image's base, with stand-ins built locally.

No registry is reachable here, so the test builds an image under the SWE-rebench harness's
naming (`swerebench/sweb.eval.x86_64.samples_1776_intset-2`, the sample row's `docker_image`)
the way the harness lays them out: the repository at /testbed, and the toolchain reachable only
through the conda env `testbed` (`/opt/miniconda3/bin/activate`).

- Time-safe, as the harness makes them (history cut at the base in the image's own layer): with
  the image present, `--prebuilt auto` uses it; the task must verify (so the tests ran inside the
  activated env), and task.toml says the environment is the image.
- Leaky (inside the image's own layers: a later commit on a branch, an annotated tag on it, and
  a later commit reset away but not garbage-collected): a later layer cannot take them out of
  the image, so the build flattens it first (its file system without /testbed/.git, in one
  layer) and the agent image is built FROM that; the task must verify with a clean audit, and
  none of those objects or refs may be in the agent image.

Both go through flattening. Each stand-in and the flat image made from it are removed
afterwards, so other tests build the sample from its install_config.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
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


@dataclass
class StandIn:
    """A stand-in harness image, and the later git objects its own layers hold (leaky)."""

    image: str
    later_objects: dict[str, str] = field(default_factory=dict)
    """What each later object is -> its id, collected from the repository on the host."""


def _build_stand_in(ctx: Path, docker_client: Any, *, leaky: bool) -> StandIn:
    row = next(r for r in sample_rows() if r.get("instance_id") == TASK)
    stand_in = StandIn(str(row["docker_image"]))
    testbed = ctx / "testbed"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(testbed)], check=True)
    _git(testbed, "checkout", "-q", "-B", "main", row["base_commit"])
    _git(testbed, "remote", "remove", "origin")
    if leaky:
        later = stand_in.later_objects
        # A later commit on a branch, with an annotated tag (a tag object) on it.
        _git(testbed, "checkout", "-q", "-b", "future")
        (testbed / "FUTURE.md").write_text("a commit after the base\n")
        _git(testbed, "add", "-A")
        _git(testbed, "commit", "-q", "-m", "future fix")
        later["future commit"] = _git(testbed, "rev-parse", "HEAD")
        later["future blob"] = _git(testbed, "rev-parse", "HEAD:FUTURE.md")
        _git(testbed, "tag", "-a", "-m", "the future release", "v9-future")
        later["tag object"] = _git(testbed, "rev-parse", "refs/tags/v9-future")
        _git(testbed, "checkout", "-q", "main")
        # A later commit reset away: no ref or reflog reaches it, yet it stays (no gc).
        (testbed / "DANGLING.md").write_text("a commit nobody can reach any more\n")
        _git(testbed, "add", "-A")
        _git(testbed, "commit", "-q", "-m", "dangling fix")
        later["unreachable commit"] = _git(testbed, "rev-parse", "HEAD")
        later["unreachable blob"] = _git(testbed, "rev-parse", "HEAD:DANGLING.md")
        _git(testbed, "reset", "-q", "--hard", row["base_commit"])
        _git(testbed, "reflog", "expire", "--expire-unreachable=now", "--all")
        for what, oid in later.items():
            assert _git(testbed, "cat-file", "-t", oid), what  # still in the object store
        assert later["unreachable commit"] not in _git(testbed, "rev-list", "--all", "--reflog")
    else:
        # What the harness's time-safe clone leaves: one branch at the base, nothing later.
        for ref in _git(testbed, "for-each-ref", "--format=%(refname)").split():
            if ref != "refs/heads/main":
                _git(testbed, "update-ref", "-d", ref)
        _git(testbed, "reflog", "expire", "--expire=now", "--all")
        _git(testbed, "gc", "-q", "--prune=now")
    (ctx / "Dockerfile").write_text(STAND_IN_DOCKERFILE)
    docker_client.images.build(path=str(ctx), tag=f"{stand_in.image}:latest", rm=True, labels={
        "packager.tool": "packager", "packager.role": "test-stand-in"})  # fmt: skip
    return stand_in


def _remove_stand_in(docker_client: Any, image: str) -> None:
    """The stand-in, the flat images made from it (they name it in a label) and the images
    of the flatten builds' first stage on it (build cache: they would keep its layers).
    """
    stand_in_id = docker_client.images.get(f"{image}:latest").id
    for flat in docker_client.images.list(filters={"label": "packager.role=flat"}):
        if flat.labels.get("packager.flattened_from", "").startswith(f"{image}@"):
            for tag in flat.tags:
                docker_client.images.remove(tag, force=True)
    stages = docker_client.images.list(
        filters={"dangling": True, "label": "packager.role=flat-stage"}
    )
    for stage in stages:
        parent = stage.attrs.get("Parent") or ""
        while parent and parent != stand_in_id:
            parent = docker_client.images.get(parent).attrs.get("Parent") or ""
        if parent == stand_in_id:
            docker_client.images.remove(stage.id)
    docker_client.images.remove(f"{image}:latest", force=True)


@pytest.fixture
def stand_in(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[StandIn]:
    made = _build_stand_in(tmp_path_factory.mktemp("stand-in"), docker_client, leaky=False)
    try:
        yield made
    finally:
        _remove_stand_in(docker_client, made.image)


@pytest.fixture
def leaky_stand_in(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any
) -> Iterator[StandIn]:
    made = _build_stand_in(tmp_path_factory.mktemp("leaky"), docker_client, leaky=True)
    try:
        yield made
    finally:
        _remove_stand_in(docker_client, made.image)


def _check_flattened(docker_client: Any, result: dict[str, Any], image: str) -> None:
    """The agent image stands on the flat image of `image`, and on none of its layers."""
    published = docker_client.images.get(f"{image}:latest")
    assert result["environment"]["flattened_from"] == f"{image}@{published.id}", result
    assert result["durations"]["flatten"] >= 0, result["durations"]
    agent = docker_client.images.get(result["images"]["agent"])
    flat = docker_client.images.get(agent.labels["packager.flat_base"])
    assert flat.labels["packager.flattened_from"] == f"{image}@{published.id}"
    flat_layers = flat.attrs["RootFS"]["Layers"]
    agent_layers = agent.attrs["RootFS"]["Layers"]
    assert len(flat_layers) == 1 and agent_layers[0] == flat_layers[0]
    assert set(agent_layers).isdisjoint(published.attrs["RootFS"]["Layers"])
    # The flat image runs as the published one does.
    for key in ("Env", "WorkingDir", "User", "Entrypoint", "Cmd"):
        assert flat.attrs["Config"].get(key) == published.attrs["Config"].get(key), key


def test_published_image_is_the_agent_base(
    stand_in: StandIn, tmp_path: Path, docker_client: Any
) -> None:
    proc = run_cli("package", TASK, "--out", str(tmp_path), "--oracle-runs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "samples" / "results" / f"{TASK}.json").read_text())
    assert result["status"] == "verified", result
    task_dir = tmp_path / "samples" / "tasks" / TASK
    assert 'environment = "image"' in (task_dir / "task.toml").read_text()
    dockerfile = (task_dir / "environment" / "Dockerfile").read_text()
    assert f"FROM {stand_in.image}" in dockerfile and "rm -rf /testbed/.git" in dockerfile
    plan = json.loads((task_dir / "tests" / "plan.json").read_text())
    assert "/opt/miniconda3/bin/activate testbed" in plan["test_command"]
    script = "cd /testbed && git rev-list --all && git for-each-ref --format='%(refname)'"
    out = docker_client.containers.run(
        result["images"]["agent"], ["bash", "-c", script], remove=True, network_mode="none"
    ).decode()
    row = next(r for r in sample_rows() if r.get("instance_id") == TASK)
    assert out.split()[0] == row["base_commit"] and out.split()[-1] == "refs/heads/main"
    _check_flattened(docker_client, result, stand_in.image)


def test_published_image_with_later_history_is_flattened_and_verified(
    leaky_stand_in: StandIn, tmp_path: Path, docker_client: Any
) -> None:
    later = leaky_stand_in.later_objects
    assert set(later) == {
        "future commit",
        "future blob",
        "tag object",
        "unreachable commit",
        "unreachable blob",
    }
    proc = run_cli("package", TASK, "--out", str(tmp_path), "--oracle-runs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = tmp_path / "samples" / "results"
    result = json.loads((results / f"{TASK}.json").read_text())
    assert result["status"] == "verified", result
    audit = json.loads((results / f"{TASK}.audit.json").read_text())
    assert audit["clean"] is True and audit["status"] == "clean", audit
    assert audit["findings"] == [] and audit["image"] == result["images"]["agent"]
    _check_flattened(docker_client, result, leaky_stand_in.image)
    script = (
        "git -C /testbed cat-file --batch-all-objects --batch-check && echo REFS "
        "&& git -C /testbed for-each-ref --format='%(refname)'"
    )
    out = docker_client.containers.run(
        result["images"]["agent"], ["bash", "-c", script], remove=True, network_mode="none"
    ).decode()
    objects, refs = out.split("REFS")
    ids = {line.split()[0] for line in objects.splitlines() if line.strip()}
    assert ids, out
    assert not {what for what, oid in later.items() if oid in ids}, out
    assert refs.split() == ["refs/heads/main"], refs


def test_without_the_image_the_row_builds_from_install_config(tmp_path: Path) -> None:
    proc = run_cli("render", TASK, "--out", str(tmp_path), "--prebuilt", "never")
    assert proc.returncode == 0, proc.stderr
    toml = (tmp_path / "samples" / "tasks" / TASK / "task.toml").read_text()
    assert 'environment = "recipe"' in toml
