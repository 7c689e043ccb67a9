"""Building the judge image (`packager.judge.image` says what it is): the lock's wheels are
downloaded by the host's pip into the machine cache, then copied into a build context with the
judge's Dockerfile.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packager.errors import BuildError
from packager.images.build import DockerClient, build_image, image_exists
from packager.judge.image import (
    DOCKERFILE,
    LOCK,
    PLATFORMS,
    TARGET_PYTHON,
    judge_digest,
    judge_image_tag,
)
from packager.storage import JUDGE_WHEELS


def wheel_cache() -> Path:
    """Where the downloaded wheelhouse is kept (`storage.JUDGE_WHEELS`)."""
    return JUDGE_WHEELS.path() / judge_digest()[:12]


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
