"""`packager clean` on the real engine, limited to this test's own task label, so the images
other tests share are never touched."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from packager.images.build import build_image
from tests.conftest import run_cli

pytestmark = pytest.mark.docker


def test_clean_keeps_the_newest_per_task_and_role(tmp_path: Path, docker_client: Any) -> None:
    task = f"cleantest-{uuid.uuid4().hex[:8]}/t"
    tags = []
    for i in range(3):
        ctx = tmp_path / f"ctx{i}"
        ctx.mkdir()
        (ctx / "Dockerfile").write_text(f"FROM debian:bookworm-slim\nLABEL n={i}\n")
        tag = f"packager/cleantest:{task.split('/')[0]}-{i}"
        build_image(
            docker_client,
            task=task,
            role="agent",
            context=ctx,
            tag=tag,
            log_path=tmp_path / f"build{i}.log",
            timeout_sec=300,
        )
        tags.append(tag)
        time.sleep(1.1)  # distinct creation times (seconds resolution)
    container = docker_client.containers.create(
        tags[0], ["true"], labels={"packager.tool": "packager", "packager.task": task}
    )
    dry = run_cli("clean", "--task", task, "--keep-newest", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would remove 1 container(s), 2 image tag(s)" in dry.stdout
    assert all(docker_client.images.list(name=t) for t in tags)

    proc = run_cli("clean", "--task", task, "--keep-newest", "1")
    assert proc.returncode == 0, proc.stderr
    assert "removed 1 container(s), 2 image tag(s)" in proc.stdout
    assert "packager images on this engine:" in proc.stdout
    assert not docker_client.images.list(name=tags[0]) and not docker_client.images.list(
        name=tags[1]
    )
    assert docker_client.images.list(name=tags[2])  # the newest stays
    assert not docker_client.containers.list(all=True, filters={"id": container.id})
    assert docker_client.images.get("debian:bookworm-slim")  # never a base image

    proc = run_cli("clean", "--task", task)
    assert "removed 0 container(s), 1 image tag(s)" in proc.stdout
    assert not docker_client.images.list(name=tags[2])


def test_clean_keeps_the_untagged_steps_of_a_build_running_beside_it(
    tmp_path: Path, docker_client: Any
) -> None:
    """A build's finished steps are untagged images carrying the tool's label (inherited from
    the image it is built FROM); a clean beside it must not prune them, or the build fails on
    an "unknown parent image ID". Only untagged images older than DANGLING_KEPT_FOR go."""
    marker = uuid.uuid4().hex
    (tmp_path / "Dockerfile").write_text(
        f"FROM debian:bookworm-slim\nLABEL packager.tool=packager\nLABEL step={marker}\n"
    )
    image, _ = docker_client.images.build(path=str(tmp_path), rm=True)  # no tag: dangling
    try:
        proc = run_cli("clean", "--task", f"cleantest-{marker[:8]}/none")
        assert proc.returncode == 0, proc.stderr
        assert docker_client.images.get(image.id).labels.get("step") == marker
    finally:
        docker_client.images.remove(image.id, force=True)
