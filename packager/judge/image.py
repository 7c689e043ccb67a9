"""The judge image: a Python virtualenv with browser-use, pinned, that grader images of web-app
tasks copy in (`COPY --from=<judge image> /opt/packager-judge ...`) next to Debian's Chromium.

The virtualenv is built once per machine and lock file, from a wheelhouse that the host
downloads with its own pip configuration (so the build itself needs neither an index nor a CA
bundle, and an air-gapped site can bring the wheelhouse along). It is created with Debian
bookworm's `/usr/bin/python3` (3.11.2), so it runs in any bookworm-based grader image that has
the `python3` package, which the grader Dockerfile installs.

What the judge image is (its Dockerfile, lock and tag) lives here; building it is
`packager.images.judge_build`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

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
