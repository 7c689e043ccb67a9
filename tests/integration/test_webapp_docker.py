"""`check_app_answers` on the real engine: a tiny Node app in a local image answers HTTP; a broken
start command, an app that never listens and a wrong workdir fail with the app's own words.

The image (FROM debian:bookworm-slim, nodejs from apt) is tagged by a hash of its build context
and labelled like every image this tool makes, so it is built once and reused afterwards.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from packager.adapters.app_start import detect_start
from packager.checks.app import check_app_answers
from packager.context import RunContext
from packager.errors import RunError
from packager.images.build import build_image
from packager.models.app import AppStart
from packager.render import naming

pytestmark = pytest.mark.docker

TASK = "webapp-test"
WORKDIR = "/app"
APP_FILES = {
    "package.json": json.dumps({"name": "tiny", "version": "1.0.0", "main": "server.js"}).encode(),
    "server.js": b"""const http = require("http");
const port = Number(process.env.PORT || 4321);
http
  .createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain" });
    res.end("ok\\n");
  })
  .listen(port, "0.0.0.0", () => console.log(`listening on ${port}`));
""",
}
DOCKERFILE = f"""FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs \\
    && rm -rf /var/lib/apt/lists/*
COPY app/ {WORKDIR}/
WORKDIR {WORKDIR}
"""


def _context_digest() -> str:
    h = hashlib.sha256(DOCKERFILE.encode())
    for name in sorted(APP_FILES):
        h.update(b"\0" + name.encode() + b"\0" + APP_FILES[name])
    return h.hexdigest()


@pytest.fixture(scope="module")
def node_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    tag = f"packager/webapp-test:node-{_context_digest()[:12]}"
    ctx = tmp_path_factory.mktemp("webapp-ctx")
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    for name, data in APP_FILES.items():
        (ctx / "app" / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx / "app" / name).write_bytes(data)
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


def _left(docker_client: Any) -> list[Any]:
    return list(
        docker_client.containers.list(
            all=True, sparse=True, filters={"label": f"{naming.LABEL_TASK}={TASK}"}
        )
    )


def test_detected_node_app_answers(node_image: str, docker_client: Any, tmp_path: Path) -> None:
    start = detect_start(APP_FILES)
    assert start == AppStart("node server.js", 4321, "package.json main")
    log = tmp_path / "app-check.log"
    began = time.monotonic()
    seconds = check_app_answers(
        docker_client, node_image, start, workdir=WORKDIR, log_path=log, task=TASK, run=RunContext()
    )
    assert 0 < seconds < time.monotonic() - began
    text = log.read_text()
    assert "answer from 127.0.0.1: HTTP/1.1 200 OK" in text
    assert "listening on 4321" in text  # the app log, with PORT set
    assert not _left(docker_client)


def test_slow_start_is_waited_for(node_image: str, docker_client: Any, tmp_path: Path) -> None:
    start = AppStart("sleep 2 && exec node server.js", 4555, "recipe")
    seconds = check_app_answers(
        docker_client,
        node_image,
        start,
        workdir=WORKDIR,
        log_path=tmp_path / "l",
        task=TASK,
        run=RunContext(),
    )
    assert seconds >= 2
    assert "listening on 4555" in (tmp_path / "l").read_text()


def test_broken_start_command_names_command_and_error(
    node_image: str, docker_client: Any, tmp_path: Path
) -> None:
    log = tmp_path / "app-check.log"
    start = AppStart("node missing.js", 4321, "recipe")
    with pytest.raises(RunError) as info:
        check_app_answers(
            docker_client,
            node_image,
            start,
            workdir=WORKDIR,
            log_path=log,
            task=TASK,
            run=RunContext(),
        )
    reason = info.value.reason
    assert "`node missing.js`" in reason
    assert "exited with code 1" in reason
    assert "Error: Cannot find module '/app/missing.js'" in reason
    assert info.value.log_path == log and info.value.task == TASK
    assert "Cannot find module" in log.read_text()
    assert not _left(docker_client)


def test_app_that_never_listens_times_out(
    node_image: str, docker_client: Any, tmp_path: Path
) -> None:
    log = tmp_path / "app-check.log"
    start = AppStart("echo booting; sleep 600", 4321, "recipe")
    began = time.monotonic()
    with pytest.raises(RunError) as info:
        check_app_answers(
            docker_client,
            node_image,
            start,
            workdir=WORKDIR,
            log_path=log,
            timeout_sec=3,
            task=TASK,
            run=RunContext(),
        )
    assert time.monotonic() - began < 20
    reason = info.value.reason
    assert "did not answer HTTP on 127.0.0.1:4321 within 3 s" in reason
    assert "nothing listens there" in reason and "`echo booting; sleep 600`" in reason
    assert "booting" in reason
    assert "Connection refused" in log.read_text()
    assert not _left(docker_client)


def test_listener_that_is_not_http_is_reported(
    node_image: str, docker_client: Any, tmp_path: Path
) -> None:
    raw = (
        "node -e \"require('net').createServer(s => s.end('SSH-2.0-nope\\r\\n'))"
        '.listen(process.env.PORT)"'
    )
    with pytest.raises(RunError) as info:
        check_app_answers(
            docker_client,
            node_image,
            AppStart(raw, 4600, "recipe"),
            workdir=WORKDIR,
            log_path=tmp_path / "l",
            timeout_sec=3,
            task=TASK,
            run=RunContext(),
        )
    assert "accepts connections but got no HTTP status line" in info.value.reason
    assert "SSH-2.0-nope" in info.value.reason


def test_missing_workdir_is_in_the_reason(
    node_image: str, docker_client: Any, tmp_path: Path
) -> None:
    with pytest.raises(RunError) as info:
        check_app_answers(
            docker_client,
            node_image,
            AppStart("node server.js", 4321, "recipe"),
            workdir="/nowhere",
            log_path=tmp_path / "l",
            task=TASK,
            run=RunContext(),
        )
    assert "exited with code 97" in info.value.reason
    assert "/nowhere: No such file or directory" in info.value.reason


def test_missing_image_is_a_run_error(docker_client: Any, tmp_path: Path) -> None:
    with pytest.raises(RunError, match="image packager/webapp-test:absent not found"):
        check_app_answers(
            docker_client,
            "packager/webapp-test:absent",
            AppStart("true", 80, "recipe"),
            workdir=WORKDIR,
            log_path=tmp_path / "l",
            task=TASK,
            run=RunContext(),
        )
    assert (tmp_path / "l").exists()
