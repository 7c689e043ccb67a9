"""The judge image: a Python virtualenv with browser-use, pinned, that grader images of web-app
tasks copy in (`COPY --from=<judge image> /opt/packager-judge ...`) next to Debian's Chromium.

The virtualenv is built once per machine and lock file, from a wheelhouse that the host
downloads with its own pip configuration (so the build itself needs neither an index nor a CA
bundle, and an air-gapped site can bring the wheelhouse along). It is created with Debian
bookworm's `/usr/bin/python3` (3.11.2), so it runs in any bookworm-based grader image that has
the `python3` package, which the grader Dockerfile installs.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packager.errors import BuildError
from packager.images.build import DockerClient, build_image, image_exists

LOCK = Path(__file__).with_name("requirements.lock")
"""browser-use and its dependencies, every version pinned."""

JUDGE_VENV = "/opt/packager-judge"
"""Where the virtualenv lives, in the judge image and in every grader image that copies it."""

JUDGE_BASE = "debian:bookworm-slim"
"""The judge image's base: the same Debian release the grader images must be based on."""

TARGET_PYTHON = "3.11.2"
"""Debian bookworm's Python: the wheels are chosen for it, whatever Python the host runs."""

PLATFORMS = (
    "manylinux_2_36_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_26_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
    "any",
)
"""Wheel platform tags bookworm (glibc 2.36, x86_64) accepts; pip does not widen `--platform`."""

DOCKERFILE = f"""\
# The browser judge's virtualenv (browser-use, pinned), copied into web-app grader images.
FROM {JUDGE_BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
    && rm -rf /var/lib/apt/lists/*
COPY requirements.lock /tmp/judge/requirements.lock
COPY wheels/ /tmp/judge/wheels/
RUN /usr/bin/python3 -m venv {JUDGE_VENV} \\
    && {JUDGE_VENV}/bin/pip install --no-cache-dir --no-index --find-links /tmp/judge/wheels \\
       -r /tmp/judge/requirements.lock \\
    && {JUDGE_VENV}/bin/python -c "import browser_use" \\
    && rm -rf /tmp/judge
"""


def judge_digest() -> str:
    """What the judge image is made of: its Dockerfile and the lock file."""
    h = hashlib.sha256()
    h.update(DOCKERFILE.encode())
    h.update(b"\0")
    h.update(LOCK.read_bytes())
    return h.hexdigest()


def judge_image_tag() -> str:
    """The judge image's tag (a content hash, so a new lock makes a new image)."""
    return f"packager/judge:{judge_digest()[:12]}"


def wheel_cache() -> Path:
    """Where the downloaded wheelhouse is kept (under `paths.cache_root`)."""
    from packager.run.store import cache_root

    return cache_root() / "judge-wheels" / judge_digest()[:12]


def download_wheels(dest: Path, log_path: Path) -> Path:
    """Fill `dest` with the lock's wheels (skipped when a complete download is there)."""
    done = dest / ".complete"
    if done.is_file():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        TARGET_PYTHON,
        "--implementation",
        "cp",
        *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
        "-d",
        str(dest),
        "-r",
        str(LOCK),
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise BuildError(
            "judge",
            judge_image_tag(),
            f"pip download of the judge's wheels failed (exit {proc.returncode}); "
            "the host's pip must reach a package index (or put the wheels in "
            f"{dest} and create {done.name} there)",
            log_path,
        )
    done.write_text("")
    return dest


def ensure_judge_image(client: DockerClient, log_dir: Path, *, timeout_sec: float = 1800) -> str:
    """The judge image's tag, building it first when the engine lacks it."""
    tag = judge_image_tag()
    if image_exists(client, tag):
        return tag
    wheels = download_wheels(wheel_cache(), log_dir / "judge-wheels.log")
    with tempfile.TemporaryDirectory(prefix="packager-judge-") as tmp:
        ctx = Path(tmp)
        (ctx / "Dockerfile").write_text(DOCKERFILE)
        (ctx / "requirements.lock").write_bytes(LOCK.read_bytes())
        (ctx / "wheels").mkdir()
        for wheel in sorted(wheels.glob("*.whl")):
            shutil.copyfile(wheel, ctx / "wheels" / wheel.name)
        build_image(
            client,
            task="judge",
            role="judge",
            context=ctx,
            tag=tag,
            log_path=log_dir / "judge-image.log",
            timeout_sec=timeout_sec,
        )
    return tag
