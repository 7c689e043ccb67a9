"""Flattened bases: a published harness image's final file system copied into one layer on
`scratch`, without the workdir's `.git`, its run configuration restated, so no history its own
layers carry reaches an image built FROM it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packager.context import RunContext
from packager.images.build import DockerClient, build_image, image_size_mb
from packager.render import naming

FLATTEN_RECIPE = "1"
"""Version of the flatten recipe (`make_flatten_dockerfile`, `flatten_image`): part of a flat
image's tag, so a changed recipe makes new flat images (and, through `LABEL_FLAT_BASE`, new
agent images)."""

FLAT_REPOSITORY = "packager/flat"
LABEL_FLAT_BASE = "packager.flat_base"
"""On agent images built FROM a flattened published image: the flat image's tag."""
LABEL_FLATTENED_FROM = "packager.flattened_from"
"""On flat images and the agent images built FROM them: `<published image>@<its id>`."""

_ENV_KEY = re.compile(r"[A-Za-z0-9_.-]+")


def _dockerfile_word(value: str) -> str:
    """`value` as one double-quoted Dockerfile word, taken literally by ENV, LABEL and the
    flag values of HEALTHCHECK: no `$` expansion, quotes and backslashes kept.

    A value holding a line break cannot be written in a Dockerfile (a trailing backslash joins
    lines): ValueError.
    """
    if "\n" in value or "\r" in value or "\0" in value:
        raise ValueError(f"a line break or NUL in {value[:40]!r} cannot be written in a Dockerfile")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def _json_words(words: Any, field: str) -> str:
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError(f"image config {field} is not a list of strings: {words!r}")
    text = json.dumps(words)
    if "\n" in text:  # json.dumps escapes line breaks; this never happens
        raise ValueError(f"image config {field} cannot be written on one line")
    return text


def _duration(nanoseconds: Any) -> str | None:
    return f"{int(nanoseconds)}ns" if isinstance(nanoseconds, int) and nanoseconds > 0 else None


def make_flatten_dockerfile(image: str, config: Mapping[str, Any], workdir: str) -> str:
    """A multi-stage Dockerfile that copies the file system of `image` (a published harness
    image), without `<workdir>/.git`, into one layer on `scratch`, and restates its run
    configuration (`config`: the image's `Config` as `docker image inspect` shows it).

    Why: a later layer cannot remove what an earlier layer holds (a whiteout hides a file from
    containers, not from anyone holding the image), so history the published image's own layers
    carry (later commits, branches, tags, unreachable objects) would stay in any image built
    FROM it. Copying the final file system of a stage that deleted `.git` keeps none of it.

    The first stage's images carry the tool's label, so `packager clean` prunes them once they
    dangle. Restated: Env (every value literal), WorkingDir, User, Shell, Entrypoint, Cmd,
    ExposedPorts, Volumes, StopSignal, Healthcheck and Labels (but this tool's own
    `packager.*` labels).
    ONBUILD triggers of `image` run in the first stage (as in any build FROM it) and are not
    carried over. Raises ValueError for a value a Dockerfile cannot hold (a line break).
    """
    if not workdir.startswith("/") or "\n" in workdir:
        raise ValueError(f"workdir {workdir!r} is not an absolute path")
    lines = _stage_lines(image, workdir)
    lines += _env_and_label_lines(config)
    lines += _port_volume_signal_lines(config)
    health = _healthcheck_line(config.get("Healthcheck") or {})
    if health:
        lines.append(health)
    lines += _process_lines(config)
    return "\n".join(lines) + "\n"


def _stage_lines(image: str, workdir: str) -> list[str]:
    """The published stage, without `.git`, copied onto `scratch`."""
    return [
        f"# Flattened: the file system of {image} without {workdir}/.git, in one layer.",
        f"# packager flatten recipe {FLATTEN_RECIPE}.",
        f"FROM {image} AS published",
        # The stage's images are left as build cache: labelled, `packager clean` prunes them
        # (else they would keep the published image's layers after it is removed).
        f"LABEL {naming.LABEL_TOOL}=packager {naming.LABEL_ROLE}=flat-stage",
        "USER root",
        f"RUN rm -rf {shlex.quote(workdir.rstrip('/') + '/.git')}",
        "FROM scratch",
        "COPY --from=published / /",
    ]


def _env_and_label_lines(config: Mapping[str, Any]) -> list[str]:
    """ENV (every value literal) and LABEL (but the tool's own `packager.*` labels)."""
    lines = []
    env = []
    for item in config.get("Env") or []:
        key, sep, value = str(item).partition("=")
        if not sep or not _ENV_KEY.fullmatch(key):
            raise ValueError(f"image config Env entry {str(item)[:60]!r} cannot be restated")
        env.append(f"{key}={_dockerfile_word(value)}")
    if env:
        lines.append("ENV " + " \\\n    ".join(env))
    labels = {
        str(k): str(v)
        for k, v in sorted((config.get("Labels") or {}).items())
        if not str(k).startswith("packager.")
    }
    if labels:
        pairs = [f"{_dockerfile_word(k)}={_dockerfile_word(v)}" for k, v in labels.items()]
        lines.append("LABEL " + " \\\n    ".join(pairs))
    return lines


def _port_volume_signal_lines(config: Mapping[str, Any]) -> list[str]:
    """EXPOSE, VOLUME and STOPSIGNAL."""
    lines = [f"EXPOSE {port}" for port in sorted(config.get("ExposedPorts") or {})]
    volumes = sorted(config.get("Volumes") or {})
    if volumes:
        lines.append(f"VOLUME {_json_words(volumes, 'Volumes')}")
    if config.get("StopSignal"):
        lines.append(f"STOPSIGNAL {config['StopSignal']}")
    return lines


def _healthcheck_line(health: Mapping[str, Any]) -> str | None:
    """HEALTHCHECK as the image states it (None when it states none)."""
    test = health.get("Test") or []
    if test and test[0] == "NONE":
        return "HEALTHCHECK NONE"
    if len(test) < 2 or test[0] not in ("CMD", "CMD-SHELL"):
        return None
    flags = [
        f"--{flag}={value}"
        for flag, value in (
            ("interval", _duration(health.get("Interval"))),
            ("timeout", _duration(health.get("Timeout"))),
            ("start-period", _duration(health.get("StartPeriod"))),
            ("retries", health.get("Retries") or None),
        )
        if value
    ]
    if test[0] == "CMD":
        command = _json_words(test[1:], "Healthcheck")
    else:  # the shell form, run by the image's shell as the image ran it
        command = str(test[1])
        if "\n" in command or "\r" in command or command.lstrip().startswith("["):
            raise ValueError(f"health check {command[:40]!r} cannot be restated")
    return " ".join(["HEALTHCHECK", *flags, "CMD", command])


def _process_lines(config: Mapping[str, Any]) -> list[str]:
    """SHELL, WORKDIR, ENTRYPOINT, CMD and USER, in that order."""
    lines = []
    if config.get("Shell"):
        lines.append(f"SHELL {_json_words(config['Shell'], 'Shell')}")
    if config.get("WorkingDir"):
        lines.append(f"WORKDIR {_dockerfile_word(str(config['WorkingDir']))}")
    if config.get("Entrypoint"):
        lines.append(f"ENTRYPOINT {_json_words(config['Entrypoint'], 'Entrypoint')}")
    if config.get("Cmd"):
        lines.append(f"CMD {_json_words(config['Cmd'], 'Cmd')}")
    if config.get("User"):
        lines.append(f"USER {_dockerfile_word(str(config['User']))}")
    return lines


def flat_tag(image_id: str, workdir: str, dockerfile: str) -> str:
    """The flat image's tag: a hash of the published image's id, the workdir, the recipe
    version and the Dockerfile made from them (a re-pulled image gets a new flat image).
    """
    digest = hashlib.sha256(
        "\0".join((FLATTEN_RECIPE, image_id, workdir, dockerfile)).encode()
    ).hexdigest()
    return f"{FLAT_REPOSITORY}:{digest[:16]}"


@dataclass(frozen=True)
class FlatBase:
    """A flattened published image (`flatten_plan`), built or not yet."""

    image: str
    """The published image, as the task names it."""
    image_id: str
    workdir: str
    dockerfile: str
    tag: str

    @property
    def source(self) -> str:
        """`<published image>@<its id>`."""
        return f"{self.image}@{self.image_id}"

    @property
    def agent_labels(self) -> dict[str, str]:
        """The labels of an agent image built FROM this flat image."""
        return {LABEL_FLAT_BASE: self.tag, LABEL_FLATTENED_FROM: self.source}


@dataclass(frozen=True)
class FlattenOutcome:
    """What `flatten_image` did."""

    tag: str
    built: bool
    duration_sec: float
    size_mb: float
    log_path: Path | None


def flatten_plan(client: DockerClient, image: str, workdir: str) -> FlatBase:
    """The flat image for `image` (which must exist): its Dockerfile and tag, nothing built.

    The Dockerfile names the image by id, so the build flattens exactly the image inspected
    even if its tag moves meanwhile. Raises ValueError for a config a Dockerfile cannot hold.
    """
    found = client.images.get(image)
    image_id = str(found.id)
    dockerfile = make_flatten_dockerfile(image_id, found.attrs.get("Config") or {}, workdir)
    return FlatBase(image, image_id, workdir, dockerfile, flat_tag(image_id, workdir, dockerfile))


_FLATTEN_LOCKS: dict[str, threading.Lock] = {}
_FLATTEN_LOCKS_GUARD = threading.Lock()


def flatten_image(
    client: DockerClient,
    plan: FlatBase,
    *,
    task: str,
    log_path: Path,
    timeout_sec: float,
    run: RunContext | None = None,
) -> FlattenOutcome:
    """Build the flat image of `plan` unless it exists (`build_image`: a deadline, a log, the
    tool's labels with role `flat`). Builds of one plan in this process run one at a time: a
    task that waits for another's build reuses its image (waiting stops when `run` is
    cancelled).
    """
    with _FLATTEN_LOCKS_GUARD:
        lock = _FLATTEN_LOCKS.setdefault(plan.tag, threading.Lock())
    while not lock.acquire(timeout=0.5):
        if run is not None:
            run.check()
    try:
        with tempfile.TemporaryDirectory(prefix="packager-flat-") as tmp:
            (Path(tmp) / "Dockerfile").write_text(plan.dockerfile)
            outcome = build_image(
                client,
                task=task,
                role="flat",
                context=Path(tmp),
                tag=plan.tag,
                log_path=log_path,
                timeout_sec=timeout_sec,
                labels={LABEL_FLATTENED_FROM: plan.source},
                run=run,
            )
    finally:
        lock.release()
    return FlattenOutcome(
        plan.tag,
        outcome.built,
        outcome.duration_sec,
        image_size_mb(client, plan.tag),
        outcome.log_path,
    )
