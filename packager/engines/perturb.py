"""Perturbed gold runs (docs/grading.md, "Stability"): the gold patch graded again in the same
grader image with one thing changed that a sound test should not depend on.

- `shuffle`: the tests in another order (test files shuffled, then each file's tests), with a
  seed fixed per task so a finding can be replayed. The grading runtime applies it where the
  runner allows it (pytest, through its proof plugin); elsewhere the run says it was not
  shuffled and counts as a repeat.
- `cpus`: one CPU, as `nproc` and `os.sched_getaffinity` see it (a cpuset of CPU 0) and as a
  quota.
- `clock`: the test command's clock moved to a minute before a daylight-saving jump
  (`CLOCK_AT`, 2027-03-14 01:59 in New York, whose zone `TZ` names), through libfaketime
  preloaded into the test command only (monotonic clocks are left alone, so timeouts hold;
  file times move with the clock, so a file keeps its age). The library comes from Debian's
  `libfaketime` package, built once per machine into a helper image from the oldest Debian
  base the engine has (its glibc needs are then met by every newer one) and kept in the
  machine cache (`TOOLS`).

Each perturbation is data: the environment the test command gets (`grading.grade.TEST_ENV`),
the grader container's CPUs, files put into it. The local engine runs them (`verify_task`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from packager.errors import PackagerError
from packager.grading.canaries import SHUFFLE_SEED
from packager.grading.grade import TEST_ENV
from packager.images.build import build_image, image_exists
from packager.images.tar import make_tar, read_tar_member
from packager.settings import PERTURBATIONS
from packager.storage import TOOLS

if TYPE_CHECKING:
    from packager.engines.containers import RunPlan
    from packager.images.build import DockerClient

CLOCK_ZONE = "America/New_York"
CLOCK_AT = datetime(2027, 3, 14, 6, 59, 0, tzinfo=UTC)
"""01:59 EST: the clock jumps to 03:00 EDT a minute into the run."""
CLOCK_LIBRARY = "/opt/packager-clock/libfaketime.so.1"
"""Where the library is put in a clock-perturbed grader container."""

FAKETIME_IMAGE = "packager/tool-libfaketime:1"
FAKETIME_SO = "usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
FAKETIME_BASES = ("debian:bullseye-slim", "debian:bookworm-slim", "debian:trixie-slim")
"""Oldest first: the library built on the oldest base loads on every newer glibc."""


@dataclass(frozen=True)
class Perturbation:
    """One perturbed gold run: what changes in its grader container."""

    name: str
    test_env: tuple[tuple[str, str], ...] = ()
    """Variables of the test command only (not of the grading runtime)."""
    cpus: float | None = None
    cpuset: str | None = None
    files: tuple[tuple[str, bytes], ...] = ()


class PerturbationUnavailable(PackagerError):
    """A perturbation cannot be made on this machine (its run is skipped and says why)."""


def shuffle_seed(task: str) -> str:
    """The task's shuffle seed: the same on every run, so an order a finding names replays."""
    return str(int(hashlib.sha256(task.encode()).hexdigest()[:8], 16))


def make_perturbation(name: str, task: str, client: DockerClient) -> Perturbation:
    """The perturbation `name` of `PERTURBATIONS` for `task` (PerturbationUnavailable: it
    cannot be made here, e.g. no libfaketime).
    """
    if name == "shuffle":
        return Perturbation(name, test_env=((SHUFFLE_SEED, shuffle_seed(task)),))
    if name == "cpus":
        return Perturbation(name, cpus=1.0, cpuset="0")
    if name == "clock":
        offset = int(CLOCK_AT.timestamp() - time.time())
        env = (
            ("LD_PRELOAD", CLOCK_LIBRARY),
            ("FAKETIME", f"{offset:+d}s"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("TZ", CLOCK_ZONE),
        )
        return Perturbation(name, test_env=env, files=((CLOCK_LIBRARY, faketime(client)),))
    raise ValueError(f"unknown perturbation {name!r} (known: {', '.join(PERTURBATIONS)})")


def perturbed(plan: RunPlan, perturbation: Perturbation) -> RunPlan:
    """`plan` with `perturbation` applied to its grader container."""
    env = plan.grader_env
    if perturbation.test_env:
        env = (*env, (TEST_ENV, json.dumps(dict(perturbation.test_env), sort_keys=True)))
    return replace(
        plan,
        grader_env=env,
        cpus=perturbation.cpus if perturbation.cpus is not None else plan.cpus,
        grader_cpuset=perturbation.cpuset or plan.grader_cpuset,
        grader_files=(*plan.grader_files, *perturbation.files),
    )


def faketime(client: DockerClient) -> bytes:
    """Debian's libfaketime.so.1, from the machine cache, else from a helper image built now
    (PerturbationUnavailable when no Debian base is there or the build fails).
    """
    cached = TOOLS.path() / "libfaketime.so.1"
    if cached.is_file():
        return cached.read_bytes()
    if not image_exists(client, FAKETIME_IMAGE):
        base = next((b for b in FAKETIME_BASES if image_exists(client, b)), None)
        if base is None:
            raise PerturbationUnavailable(f"no Debian base image ({', '.join(FAKETIME_BASES)})")
        dockerfile = (
            f"FROM {base}\nRUN apt-get update && apt-get install -y --no-install-recommends "
            "libfaketime && rm -rf /var/lib/apt/lists/*\n"
        )
        try:
            build_image(
                client,
                task="tools",
                role="libfaketime",
                context=Path("."),
                context_tar=make_tar({"Dockerfile": dockerfile.encode()}),
                tag=FAKETIME_IMAGE,
                log_path=TOOLS.path() / "libfaketime-build.log",
                timeout_sec=600,
            )
        except PackagerError as exc:
            raise PerturbationUnavailable(f"libfaketime could not be built: {exc}") from exc
    box = client.containers.create(FAKETIME_IMAGE, command=["true"])
    try:
        stream, _ = box.get_archive("/" + FAKETIME_SO)
        data = read_tar_member(b"".join(stream), Path(FAKETIME_SO).name)
    finally:
        box.remove(force=True)
    if not data:
        raise PerturbationUnavailable(f"{FAKETIME_IMAGE} holds no {FAKETIME_SO}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.name}.{os.getpid()}")
    partial.write_bytes(data)
    partial.replace(cached)
    return data
