"""Images: the agent image, then the grader image FROM it, through the Docker SDK; the client,
the labels and sweeps of this run's containers, Ctrl-C, and the base images a Dockerfile names.

Tags are content hashes minted at render time, so an image that exists is never rebuilt. Every
image carries labels naming the tool and the task; build output goes to a log file; a build has
a deadline. The Docker client sits behind a small Protocol so unit tests can pass a fake.
Flattened bases live in `packager.images.flatten`, tar streams in `packager.images.tar`.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from packager.context import RunContext
from packager.errors import BuildError, EngineUnavailableError, PackagerError, RunError
from packager.images import bases
from packager.render import naming

ENGINE_HINT = (
    "no Docker engine is reachable. Run `make docker` (installs and starts dockerd on Debian "
    "as root; seeds base images), or start Docker yourself and retry"
)


class DockerClient(Protocol):
    """The part of `docker.DockerClient` this tool uses (a fake implements it in tests)."""

    @property
    def api(self) -> Any: ...

    @property
    def images(self) -> Any: ...

    @property
    def containers(self) -> Any: ...

    def ping(self) -> bool: ...


def connect(timeout: int = 120) -> DockerClient:
    """A client for the local engine, or EngineUnavailableError with the fix."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # docker raises DockerException, requests errors, FileNotFoundError
        raise EngineUnavailableError(ENGINE_HINT) from exc
    return client  # type: ignore[no-any-return]


def local_engine_or_none() -> DockerClient | None:
    """The local engine when one answers (the Ray driver pushes base images from it), else None."""
    try:
        return connect(timeout=10)
    except PackagerError:
        return None


def image_exists(client: DockerClient, tag: str) -> bool:
    """Whether the engine has the image."""
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


@dataclass(frozen=True)
class BuildOutcome:
    """What building one image did."""

    tag: str
    built: bool
    duration_sec: float
    log_path: Path | None


LABEL_PID = "packager.pid"
LABEL_HOST = "packager.host"
"""Containers also name the process that owns them, so a later run can remove the orphans of a
run that died with the daemon unreachable (it could not remove its own containers then)."""


def labels_for(
    task: str, role: str, run: RunContext | None = None, *, container: bool = True
) -> dict[str, str]:
    """Labels on every image and container this tool makes (containers also name their run,
    its process and host: `run` is required for them).
    """
    labels = {naming.LABEL_TOOL: "packager", naming.LABEL_TASK: task, naming.LABEL_ROLE: role}
    if container:
        if run is None:
            raise ValueError("a container's labels name its run")
        labels[naming.LABEL_RUN] = run.run_id
        labels[LABEL_PID] = str(os.getpid())
        labels[LABEL_HOST] = socket.gethostname()
    return labels


def remove_run_containers(client: DockerClient, run: RunContext) -> int:
    """Force-remove every container `run` started (after Ctrl-C); returns the count."""
    return _remove(
        client.containers.list(
            all=True, sparse=True, filters={"label": f"{naming.LABEL_RUN}={run.run_id}"}
        )
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_orphan_containers(client: DockerClient, run: RunContext) -> int:
    """Remove containers left by packager runs of this host whose process is gone (a run that
    lost the daemon cannot remove its own containers). Live runs' containers are never touched.
    """
    host = socket.gethostname()
    orphans = []
    # Sparse listing reads labels from the list call itself: a full listing inspects each
    # container and fails when a concurrent run removes one in between.
    for container in client.containers.list(
        all=True,
        sparse=True,
        filters={"label": [f"{naming.LABEL_TOOL}=packager", f"{LABEL_HOST}={host}"]},
    ):
        labels = container.attrs.get("Labels") or {}
        pid = labels.get(LABEL_PID, "")
        if labels.get(naming.LABEL_RUN) == run.run_id or not pid.isdigit():
            continue
        if not _pid_alive(int(pid)):
            orphans.append(container)
    return _remove(orphans)


def _remove(containers: list[Any]) -> int:
    removed = 0
    for container in containers:
        try:
            container.remove(force=True)
            removed += 1
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
    return removed


def is_connection_error(exc: BaseException) -> bool:
    """Whether an SDK error means the engine went away (connection refused, reset or cut
    mid-response), as opposed to a read timeout or a refusal by a live engine.
    """
    import requests

    if isinstance(exc, requests.exceptions.ReadTimeout) or "timed out" in str(exc).lower():
        return False
    return isinstance(
        exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError)
    )


def base_images(dockerfile: str) -> list[str]:
    """Images the FROM lines name, without build stages, `scratch` and `${ARG}` references."""
    stages: set[str] = set()
    images: list[str] = []
    for line in dockerfile.splitlines():
        words = [w for w in line.split() if not w.startswith("--")]
        if not words or words[0].upper() != "FROM" or len(words) < 2:
            continue
        image = words[1]
        if len(words) >= 4 and words[2].upper() == "AS":
            stages.add(words[3].lower())
        if image.lower() in stages or image == "scratch" or "$" in image:
            continue
        if image not in images:
            images.append(image)
    return images


def check_base_images(
    client: DockerClient, dockerfile: str, *, task: str, log_path: Path, pull: bool
) -> None:
    """Make sure every base image the Dockerfile names is present before building (a build
    would otherwise try the registry, which can hang where none is reachable): a missing one is
    pulled (with `pull`, or an official `python:*` image) or seeded from Debian's archive
    (`debian:<suite>-slim` of a Python Debian ships, packager.images.bases). Fails fast, naming
    every image that can be neither, and with the seeding log when seeding fails.
    """
    missing: list[bases.BaseImageMissing] = []
    for image in base_images(dockerfile):
        if image_exists(client, image):
            continue
        try:
            bases.ensure_base_image(client, image, log_dir=log_path.parent, pull=pull, task=task)
        except bases.BaseImageMissing as exc:
            missing.append(exc)
    if missing:
        if pull:
            reason = "; ".join(exc.reason for exc in missing)
        else:
            reason = (
                f"base image {', '.join(exc.image for exc in missing)} not present locally "
                "and pulls are disabled (docker pull/load it first, or pass --pull)"
            )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"ERROR: {reason}\n")
        raise BuildError(task, missing[0].image, reason, log_path)


def build_image(
    client: DockerClient,
    *,
    task: str,
    role: str,
    context: Path,
    tag: str,
    log_path: Path,
    timeout_sec: float,
    buildargs: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    force: bool = False,
    context_tar: bytes | None = None,
    extra_hosts: dict[str, str] | None = None,
    run: RunContext | None = None,
) -> BuildOutcome:
    """Build `context` into `tag` unless it exists (or `force`); raise BuildError with the log
    on failure. `labels` are added to the tool's own. `context_tar`, when given, is sent as
    the build context instead of the folder `context`. `extra_hosts` go into the build
    containers' /etc/hosts only (neither the image nor the build cache's keys see them).
    The build stops waiting (Cancelled) once `run` is cancelled.
    """
    if not force and image_exists(client, tag):
        return BuildOutcome(tag, False, 0.0, None)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    error: list[str] = []
    lost: list[str] = []
    done = threading.Event()

    def stream() -> None:
        try:
            with log_path.open("w", encoding="utf-8") as log:
                source: dict[str, Any] = (
                    {"path": str(context)}
                    if context_tar is None
                    else {"fileobj": io.BytesIO(context_tar), "custom_context": True}
                )
                for chunk in client.api.build(
                    **source,
                    tag=tag,
                    labels={**labels_for(task, role, container=False), **(labels or {})},
                    rm=True,
                    forcerm=True,
                    decode=True,
                    buildargs=buildargs or {},
                    pull=False,
                    extra_hosts=extra_hosts or None,
                ):
                    if "stream" in chunk:
                        log.write(chunk["stream"])
                    if "error" in chunk:
                        log.write(f"ERROR: {chunk['error']}\n")
                        error.append(str(chunk["error"]).strip())
                    log.flush()
        except Exception as exc:  # the SDK raises APIError, BuildError, connection errors
            if is_connection_error(exc):
                lost.append(f"{type(exc).__name__}: {exc}")
            else:
                error.append(f"{type(exc).__name__}: {exc}")
        finally:
            done.set()

    worker = threading.Thread(target=stream, daemon=True)
    worker.start()
    deadline = started + timeout_sec
    while not done.wait(0.5):
        if run is not None:
            run.check()
        if time.monotonic() >= deadline:
            raise BuildError(task, tag, f"timed out after {timeout_sec:.0f} s", log_path)
    if lost:
        raise RunError(task, f"lost the Docker engine while building {tag}: {lost[-1]}", log_path)
    if error or not image_exists(client, tag):
        reason = error[-1] if error else "no image produced"
        raise BuildError(task, tag, reason.splitlines()[-1][:300], log_path)
    return BuildOutcome(tag, True, time.monotonic() - started, log_path)


LABEL_BASES = "packager.bases"
"""On agent images: the ids of the images their FROM lines named when they were built. A tag is
a hash of the build context, which names a base image but not its content; a base that changed
since (a re-pulled or rebuilt published image) makes the agent image stale."""


def base_ids(client: DockerClient, dockerfile: str) -> str:
    """`image=id` for every base image the Dockerfile names that the engine has, sorted."""
    import docker.errors

    found = []
    for image in base_images(dockerfile):
        try:
            found.append(f"{image}={client.images.get(image).id}")
        except docker.errors.ImageNotFound:
            found.append(f"{image}=?")
    return ",".join(sorted(found))


def stale_bases(client: DockerClient, tag: str, bases: str) -> bool:
    """Whether an existing image was built on other base images than the current ones (or
    does not say: built before bases were recorded).
    """
    image = client.images.get(tag)
    recorded = ((image.attrs.get("Config") or {}).get("Labels") or {}).get(LABEL_BASES)
    return recorded != bases


def ca_base_image(client: DockerClient, base: str, ca_bundle: Path, log_dir: Path) -> str:
    """An image FROM `base` that trusts an extra CA bundle (TLS-intercepting proxies)."""
    data = ca_bundle.read_bytes()
    digest = hashlib.sha256(base.encode() + b"\0" + data).hexdigest()
    tag = f"packager/ca-base:{digest[:12]}"
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Path(tmp)
        (ctx / "extra-ca.crt").write_bytes(data)
        (ctx / "Dockerfile").write_text(
            f"FROM {base}\n"
            "COPY extra-ca.crt /usr/local/share/ca-certificates/packager-extra-ca.crt\n"
            "ENV PIP_CERT=/usr/local/share/ca-certificates/packager-extra-ca.crt \\\n"
            "    REQUESTS_CA_BUNDLE=/usr/local/share/ca-certificates/packager-extra-ca.crt \\\n"
            "    NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/packager-extra-ca.crt\n"
        )
        build_image(
            client,
            task="ca-base",
            role="ca",
            context=ctx,
            tag=tag,
            log_path=log_dir / "ca-base.log",
            timeout_sec=600,
        )
    return tag


def with_base_override(dockerfile: str) -> str:
    """Make the first FROM overridable by the PACKAGER_BASE build argument."""
    lines = dockerfile.splitlines(keepends=True)
    for i, line in enumerate(lines):
        words = line.split()
        if words and words[0].upper() == "FROM":
            rest = line[line.index(words[1]) + len(words[1]) :]
            lines[i] = f"ARG PACKAGER_BASE={words[1]}\nFROM ${{PACKAGER_BASE}}{rest}"
            break
    return "".join(lines)


def first_from(dockerfile: str) -> str:
    """The image the first FROM line names."""
    for line in dockerfile.splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM":
            return words[1]
    raise ValueError("no FROM line")


def image_size_mb(client: DockerClient, tag: str) -> float:
    """The image's size in MB (10^6 bytes, as `docker images` counts)."""
    return round(int(client.images.get(tag).attrs.get("Size") or 0) / 1e6, 1)


def image_label(client: DockerClient, tag: str, key: str) -> str | None:
    """One label of an image that exists (None when it has no such label)."""
    labels = (client.images.get(tag).attrs.get("Config") or {}).get("Labels") or {}
    value = labels.get(key)
    return None if value is None else str(value)


def pull_missing(client: DockerClient, image: str, *, task: str, log_path: Path) -> None:
    """Pull `image` when the engine lacks it (`--pull`); BuildError when that fails."""
    if image_exists(client, image):
        return
    try:
        client.images.pull(image)
    except Exception as exc:  # noqa: BLE001 - APIError, ImageNotFound, connection errors
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"ERROR: pulling {image} failed: {exc}\n")
        raise BuildError(task, image, f"pulling it failed: {exc}"[:300], log_path) from exc
