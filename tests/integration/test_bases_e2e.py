"""Debian base images seeded from Debian's archive on demand (packager.images.bases), then used:
each gives the Python its release ships. The seeded images stay (they are the machine's cache).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from packager import assumptions as A
from packager.images.bases import ensure_base_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PYTHON_OF_DEBIAN = (
    "apt-get update >/dev/null && apt-cache policy python3 | sed -n 's/ *Candidate: //p'"
)
"""The python3 the release's archive serves (its version is the interpreter's: 3.9.2-3 on
bullseye); asked without installing it, to keep the suite short."""


@pytest.mark.parametrize(("version", "expected"), [("3.9", "3.9."), ("3.13", "3.13.")])
def test_seeded_debian_serves_its_python(
    version: str, expected: str, tmp_path: Path, docker_client: Any
) -> None:
    image = A.debian_base_image(A.DEBIAN_PYTHON_SUITES[version])
    started = time.monotonic()
    ensure_base_image(docker_client, image, log_dir=tmp_path, pull=False)
    seeded = list(tmp_path.glob("seed-*.log"))
    print(f"{image}: present after {time.monotonic() - started:.0f} s (seeded: {bool(seeded)})")
    assert docker_client.images.get(image).attrs["Config"]["Cmd"] == ["bash"]
    box = docker_client.containers.run(
        image,
        ["bash", "-c", PYTHON_OF_DEBIAN],
        detach=True,
        environment={"DEBIAN_FRONTEND": "noninteractive"},
        labels={"packager.test": "bases"},
    )
    try:
        status = box.wait(timeout=900)
        output = box.logs().decode(errors="replace")
    finally:
        box.remove(force=True)
    assert status["StatusCode"] == 0, output
    assert output.strip().splitlines()[-1].startswith(expected), output
