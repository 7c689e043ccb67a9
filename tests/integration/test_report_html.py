"""report.html in a real browser (issue 10): headless Chromium, with no network, renders the page
from a read-only folder; the DOM holds every task and every status count, and a screenshot is
not blank.

The Chromium image (FROM debian:bookworm-slim, chromium from apt) is tagged by a hash of its
Dockerfile and labelled like every image this tool makes, so it is built once and reused.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from packager.context import RunContext
from packager.images.build import build_image, labels_for
from packager.models.spec import RunResult, Status, TaskResult
from packager.release.report import make_html

pytestmark = [pytest.mark.docker]

TASK = "report-html-test"
DOCKERFILE = """FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends chromium fonts-dejavu-core \\
    && rm -rf /var/lib/apt/lists/*
"""
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
STATUSES: list[Status] = ["verified", "verified", "leak", "build_failed", "flaky", "infra_error"]


@pytest.fixture(scope="module")
def chromium_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    tag = (
        f"packager/report-html-test:chromium-{hashlib.sha256(DOCKERFILE.encode()).hexdigest()[:12]}"
    )
    ctx = tmp_path_factory.mktemp("chromium-ctx")
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    build_image(
        docker_client,
        task=TASK,
        role="test",
        context=ctx,
        tag=tag,
        log_path=ctx / "build.log",
        timeout_sec=900,
    )
    return tag


def _run(kind: str, reward: float | None, seconds: float) -> RunResult:
    return RunResult.model_validate(
        {
            "kind": kind,
            "reward": reward,
            "grade_status": "graded",
            "duration_sec": seconds,
            "log_dir": f"logs/{kind}",
        }
    )


def _results() -> list[TaskResult]:
    """~30 generated results plus a few shaped like real ones (reasons, missing runs)."""
    made = [
        TaskResult(
            task=f"swe__proj-{i:03d}",
            instance_id=f"org__proj-{i:03d}",
            dataset="swe",
            status=STATUSES[i % len(STATUSES)],
            reason=None if i % 3 else f"oracle reward 0.0 < 1.0 <see log> & retry {i}",
            engine="local",
            oracle=(_run("oracle", 1.0, 20 + i), _run("oracle", 1.0, 18 + i)),
            nop=_run("nop", 0.0, 5 + i % 4),
            durations={"build": 30.0 + 7 * (i % 5), "audit": 1.5, "app_check": float(i % 2)},
            logs={"dir": f"build/swe/logs/swe__proj-{i:03d}"},
        )
        for i in range(30)
    ]
    made += [
        TaskResult(
            task="swe__django__django-11099",
            instance_id="django__django-11099",
            dataset="swe",
            status="build_failed",
            reason="pip install -r requirements.txt exited 1: <ERROR: No matching distribution>",
            engine="local",
            durations={"build": 412.3},
            logs={"dir": "build/swe/logs/swe__django__django-11099"},
        ),
        TaskResult(
            task="swe__astropy__astropy-12907",
            instance_id="astropy__astropy-12907",
            dataset="swe",
            status="leak",
            reason='the agent image holds "tests/test_separable.py" from the gold commit',
            engine="local",
            oracle=(_run("oracle", 1.0, 64.0),),
            durations={"build": 250.0, "audit": 3.2},
            logs={"dir": "build/swe/logs/swe__astropy__astropy-12907"},
        ),
    ]
    return made


def _chromium(docker_client: Any, image: str, args: list[str], **mounts: Path) -> str:
    """Run Chromium with the folders mounted (`r` read-only) and no network; its stdout."""
    volumes = {
        str(path): {"bind": f"/{name}", "mode": "ro" if name == "r" else "rw"}
        for name, path in mounts.items()
    }
    box = docker_client.containers.run(
        image,
        [*CHROMIUM, *args],
        detach=True,
        network_mode="none",
        volumes=volumes,
        user=f"{os.getuid()}:{os.getgid()}",
        environment={"HOME": "/tmp"},
        labels=labels_for(TASK, "test", RunContext()),
    )
    try:
        code = box.wait(timeout=180)["StatusCode"]
        out = box.logs(stdout=True, stderr=False).decode()
        err = box.logs(stdout=False, stderr=True).decode()
    finally:
        box.remove(force=True)
    assert code == 0, err[-3000:]
    return str(out)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    disk = {"images": 12, "size_bytes": 9_876_000_000, "unique_bytes": 1_230_000_000}
    (folder / "report.html").write_text(make_html("swe", _results(), disk), encoding="utf-8")
    return folder


def test_dom_has_every_task_and_status_count(
    chromium_image: str, docker_client: Any, report_dir: Path
) -> None:
    dom = _chromium(
        docker_client, chromium_image, ["--dump-dom", "file:///r/report.html"], r=report_dir
    )
    results = _results()
    for r in results:
        assert f'id="task-{r.instance_id}"' in dom, r.instance_id
    counts = Counter(r.status for r in results)
    for status, n in counts.items():
        assert f"<title>{status}: {n} task(s)" in dom, status
    assert f"swe: {len(results)} task(s): " in dom
    assert "Docker disk use: 12 images, 9.9 GB (1.2 GB not shared)" in dom
    assert "&lt;ERROR: No matching distribution&gt;" in dom  # escaped text, not markup


def _png_size_and_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the inflated (still filtered) scanlines of a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_screenshot_is_not_blank(
    chromium_image: str, docker_client: Any, report_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    _chromium(
        docker_client,
        chromium_image,
        ["--screenshot=/out/shot.png", "--window-size=1280,2000", "file:///r/report.html"],
        r=report_dir,
        out=out,
    )
    data = (out / "shot.png").read_bytes()
    width, height, pixels = _png_size_and_pixels(data)
    assert (width, height) == (1280, 2000)
    assert len(data) > 20_000, len(data)  # a blank page compresses to a few kB
    # Bars, badges and text in several colours: a blank page has only a handful of byte values.
    assert len(set(pixels)) > 64
