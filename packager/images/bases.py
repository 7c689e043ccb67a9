"""Base images the engine lacks, obtained when a build needs them.

Responsible for: telling whether a missing base image can be had (pulled from the engine's
registry, or, for the Debian slim images of `DEBIAN_PYTHON_SUITES`, seeded from Debian's
archive with debootstrap, as `scripts/ensure-docker.sh` does for bookworm), doing it once per
machine (a file lock under the machine cache serializes threads and processes), and saying
what to do when neither works.

Must not: remove, replace or retag an image the engine already has (seeded images are the
machine's cache, like bookworm); pull anything but an official `python:*` image unless pulls
are enabled; restart or reconfigure the engine; name a mirror: the Debian mirror is the one
apt on this host uses (its sources files).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from packager.assumptions import DEBIAN_PYTHON_SUITES
from packager.errors import BuildError
from packager.images.locks import machine_lock

if TYPE_CHECKING:
    from packager.images.build import DockerClient

LOG = logging.getLogger(__name__)

DEBOOTSTRAP_TIMEOUT_SEC = 1800
APT_TIMEOUT_SEC = 600
APT_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))
"""Where this host's Debian mirror is read from (deb822 `URIs:`, then a one-line `deb`)."""

_SEEDABLE = re.compile(r"debian:(?P<suite>[a-z]+)-slim")


class BaseImageMissing(BuildError):
    """A base image the engine lacks and that can be neither pulled nor seeded."""


def seedable_suite(image: str) -> str | None:
    """The Debian suite of `debian:<suite>-slim` when this module can seed it, else None."""
    match = _SEEDABLE.fullmatch(image)
    if match is None or match["suite"] not in DEBIAN_PYTHON_SUITES.values():
        return None
    return match["suite"]


def is_official_python(image: str) -> bool:
    """Whether `image` is an official `python:*` image (`python:3.8-slim`)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    for prefix in ("docker.io/", "library/"):
        name = name.removeprefix(prefix)
    return name == "python"


_PULLABLE: dict[str, bool] = {}
_PULLABLE_LOCK = threading.Lock()


def can_pull(client: DockerClient, image: str) -> bool:
    """Whether the engine's registry answers for `image`, asked without downloading it. The
    verdict is kept for the rest of the process (with no registry it fails in ~50 ms anyway).
    """
    with _PULLABLE_LOCK:
        known = _PULLABLE.get(image)
    if known is not None:
        return known
    try:
        client.images.get_registry_data(image)
        verdict = True
    except Exception:  # noqa: BLE001 - no registry, no such image, no engine: cannot pull
        verdict = False
    with _PULLABLE_LOCK:
        _PULLABLE[image] = verdict
    return verdict


def ensure_base_image(
    client: DockerClient, image: str, *, log_dir: Path, pull: bool, task: str = "base image"
) -> None:
    """Make sure the engine has `image`: pull it (when `pull`, or for an official `python:*`
    image), else seed it from Debian's archive when `seedable_suite` knows it. Raises
    BaseImageMissing when it can be neither, BuildError (with the seeding log) when seeding
    fails. `task` names the task in those errors.
    """
    if _present(client, image):
        return
    pull_error = ""
    if pull or is_official_python(image):
        try:
            client.images.pull(image)
        except Exception as exc:  # noqa: BLE001 - APIError, ImageNotFound, connection errors
            pull_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if _present(client, image):
            return
    suite = seedable_suite(image)
    if suite is None:
        if pull:
            reason = f"base image {image} not present locally and pulling it failed: {pull_error}"
        else:
            reason = (
                f"base image {image} not present locally and pulls are disabled "
                "(docker pull/load it first, or pass --pull)"
            )
        raise BaseImageMissing(task, image, reason, None)
    with _seed_lock(image):
        if _present(client, image):  # another thread or process seeded it meanwhile
            return
        log_dir.mkdir(parents=True, exist_ok=True)
        seed_debian_image(client, image, suite, log_path=log_dir / f"seed-{suite}.log", task=task)


def seed_debian_image(
    client: DockerClient, image: str, suite: str, *, log_path: Path, task: str = "base image"
) -> None:
    """Build `image` from Debian's archive: `debootstrap --variant=minbase SUITE`, without apt's
    lists and caches, imported with `CMD ["bash"]`. Needs root on a Debian host with apt-get
    (debootstrap is installed when missing). The caller holds the seeding lock.
    """
    fix = (
        f"run `docker pull {image}` (or `docker load` it) where a registry is reachable, or "
        "run packager as root on a Debian host with apt-get, where it is seeded from Debian's "
        "archive with debootstrap"
    )

    def fail(problem: str, log: Path | None = log_path) -> BuildError:
        return BuildError(task, image, f"{image} is not present locally: {problem}; {fix}", log)

    if os.geteuid() != 0 or not Path("/etc/debian_version").exists() or not shutil.which("apt-get"):
        raise fail("seeding it needs root on a Debian host with apt-get", None)
    mirror = debian_mirror()
    if mirror is None:
        raise fail(f"no Debian mirror found in {' or '.join(str(p) for p in APT_SOURCES)}", None)
    started = time.monotonic()
    LOG.info("seeding %s from Debian's archive (log: %s)", image, log_path)
    with log_path.open("w", encoding="utf-8") as log:
        log.write(f"seeding {image} from {mirror} (suite {suite})\n")
        log.flush()
        debootstrap = _debootstrap(log)
        if debootstrap is None:
            raise fail("debootstrap is missing and installing it with apt-get failed")
        work = Path(tempfile.mkdtemp(prefix=f"packager-seed-{suite}-"))
        rootfs = work / "rootfs"
        try:
            command = [debootstrap, "--variant=minbase", suite, str(rootfs), mirror]
            if _run(command, log, DEBOOTSTRAP_TIMEOUT_SEC) != 0:
                raise fail(f"debootstrap failed ({_last_line(log_path)})")
            # debootstrap leaves the apt lists and caches behind; the slim image has none.
            for leftover in (
                *rootfs.glob("var/lib/apt/lists/*"),
                *rootfs.glob("var/cache/apt/*.bin"),
            ):
                if leftover.is_dir() and not leftover.is_symlink():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
            archive = work / "rootfs.tar"
            if _run(
                ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."], log, 600
            ):
                raise fail(f"packing the root file system failed ({_last_line(log_path)})")
            repository, _, tag = image.rpartition(":")
            log.write(f"$ docker import -c 'CMD [\"bash\"]' rootfs.tar {image}\n")
            log.flush()
            try:
                client.api.import_image_from_file(
                    str(archive), repository=repository, tag=tag, changes=['CMD ["bash"]']
                )
            except Exception as exc:  # noqa: BLE001 - APIError, connection errors
                log.write(f"ERROR: {type(exc).__name__}: {exc}\n")
                raise fail(f"importing the root file system failed: {exc}") from exc
        finally:
            if _unmount_under(work):
                shutil.rmtree(work, ignore_errors=True)
            else:  # never remove a tree that still reaches a host file system
                log.write(f"WARNING: {work} still has mounts inside; left in place\n")
        if not _present(client, image):
            raise fail("the engine does not list the imported image")
        log.write(f"seeded {image} in {time.monotonic() - started:.0f} s\n")
    LOG.info("seeded %s in %.0f s", image, time.monotonic() - started)


def debian_mirror() -> str | None:
    """The Debian mirror this host's apt uses: the first `URIs:` of the deb822 sources, else
    the first `deb` line of sources.list (options in brackets skipped).
    """
    deb822, one_line = APT_SOURCES
    try:
        for line in deb822.read_text().splitlines():
            if line.startswith("URIs:") and line.split()[1:]:
                return line.split()[1]
    except OSError:
        pass
    try:
        for line in one_line.read_text().splitlines():
            words = line.split()
            if not words or words[0] != "deb":
                continue
            words = words[1:]
            if words and words[0].startswith("["):
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if words:
                return words[0]
    except OSError:
        pass
    return None


def _present(client: DockerClient, image: str) -> bool:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


@contextmanager
def _seed_lock(name: str) -> Iterator[None]:
    """Held by one thread of one process at a time, per base image `name`."""
    with machine_lock(f"base-{name}"):
        yield


def _run(command: list[str], log: TextIO, timeout: float) -> int:
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.write(f"ERROR: {exc}\n")
        log.flush()
        return 1
    log.flush()
    return done.returncode


def _debootstrap(log: TextIO) -> str | None:
    """The path of debootstrap, installed with apt-get (under a machine-wide lock) if missing."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which("debootstrap", path=search)
    if found:
        return found
    with _seed_lock("apt-get"):
        found = shutil.which("debootstrap", path=search)
        if found:
            return found
        install = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q"]
        install += ["--no-install-recommends", "debootstrap"]
        if _run(install, log, APT_TIMEOUT_SEC) != 0:
            _run(["apt-get", "update", "-q"], log, APT_TIMEOUT_SEC)
            _run(install, log, APT_TIMEOUT_SEC)
    return shutil.which("debootstrap", path=search)


def _unmount_under(root: Path) -> bool:
    """Unmount whatever a failed debootstrap left mounted inside `root` (proc, sys), deepest
    first; whether nothing is mounted there any more (only then may the tree be removed).
    """
    prefix = str(root.resolve()) + "/"

    def mounted() -> list[str]:
        lines = Path("/proc/mounts").read_text().splitlines()
        points = (line.split()[1].replace("\\040", " ") for line in lines if line.split()[1:])
        return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)

    try:
        for point in mounted():
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        return not mounted()
    except OSError:
        return False


def _last_line(log_path: Path) -> str:
    try:
        lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:200] if lines else "no output"
