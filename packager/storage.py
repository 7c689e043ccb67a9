"""Where things are kept, in one leaf module: every output path of a dataset (`OutputPaths`) and
every folder of this machine's cache (`CACHE_FOLDERS`, which `packager clean --caches` reads).

It imports nothing of the packager, so every layer may import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def cache_root() -> Path:
    """The packager cache of this machine: `PACKAGER_CACHE`, else `$XDG_CACHE_HOME/packager`, else
    `~/.cache/packager`.
    """
    root = os.environ.get("PACKAGER_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "packager"


@dataclass(frozen=True)
class CacheFolder:
    """One folder of the machine cache."""

    name: str
    holds: str
    derived: bool
    """Every run can make it again from its inputs, so `clean --caches` may empty it."""

    def path(self) -> Path:
        return cache_root() / self.name


MIRRORS = CacheFolder("mirrors", "repositories fetched with `packager fetch`", derived=False)
SNAPSHOTS = CacheFolder("snapshots", "repository snapshots cut at a base commit", derived=True)
WHEELHOUSE = CacheFolder("wheelhouse", "wheels served to image builds", derived=True)
LOCKS = CacheFolder("locks", "build locks, and failed-environment records", derived=False)
HUD_WHEELS = CacheFolder("hud-wheels", "the HUD SDK's wheels for environment images", True)
JUDGE_WHEELS = CacheFolder("judge-wheels", "the judge image's wheels", derived=True)
INDEX_PAGES = CacheFolder("index-pages", "package index pages read for --as-of", derived=False)
AUDITS = CacheFolder("audits", "leak-audit verdicts by image and gold", derived=True)
AUDIT_LAYERS = CacheFolder("audit-layers", "leak-audit findings by image layer", derived=True)
RAY_REPOS = CacheFolder("ray-repos", "repository bundles shipped to a Ray node", derived=True)
ENVIRONMENTS = CacheFolder("environments", "what an environment build dropped", derived=False)
TOOLS = CacheFolder("tools", "helper binaries of perturbed runs (libfaketime)", derived=True)

CACHE_FOLDERS: tuple[CacheFolder, ...] = (
    AUDIT_LAYERS,
    AUDITS,
    SNAPSHOTS,
    WHEELHOUSE,
    HUD_WHEELS,
    JUDGE_WHEELS,
    RAY_REPOS,
    MIRRORS,
    LOCKS,
    INDEX_PAGES,
    ENVIRONMENTS,
    TOOLS,
)
"""Every folder of the machine cache; `clean --caches` empties the derived ones, in this order."""


ERROR_SUFFIX = ".error.json"
CHECK_NAMES = ("audit", "quality")
"""The checks that keep a verdict per task, results/<task>.<check>.json (`checks.store`)."""
REPORT_SUFFIXES = (ERROR_SUFFIX, *(f".{name}.json" for name in CHECK_NAMES))
"""Files beside results/<task>.json that are not a task's result."""


@dataclass(frozen=True)
class OutputPaths:
    """Every output path of one dataset, in one object."""

    root: Path
    dataset: str

    @property
    def base(self) -> Path:
        return self.root / self.dataset

    def task_dir(self, slug: str) -> Path:
        return self.base / "tasks" / slug

    def source_dir(self, slug: str) -> Path:
        return self.base / "sources" / slug

    def manifest_dir(self, slug: str) -> Path:
        return self.base / "manifests" / slug

    @property
    def results_dir(self) -> Path:
        return self.base / "results"

    def result_file(self, slug: str) -> Path:
        return self.results_dir / f"{slug}.json"

    def error_file(self, slug: str) -> Path:
        """results/<task>.error.json: an infra_error that did not replace an earlier verdict."""
        return self.results_dir / f"{slug}{ERROR_SUFFIX}"

    def check_file(self, slug: str, check: str) -> Path:
        """results/<task>.<check>.json: a check's verdict (`checks.store`): `audit`, the leak
        audit of the task's agent image; `quality`, the quality checks of a verified task.
        """
        assert check in CHECK_NAMES, check
        return self.results_dir / f"{slug}.{check}.json"

    def audit_file(self, slug: str) -> Path:
        return self.check_file(slug, "audit")

    def quality_file(self, slug: str) -> Path:
        return self.check_file(slug, "quality")

    def calibration_file(self, slug: str) -> Path:
        """calibration/<task>.json: the limits its last verification measured, which the
        render writes into task.toml (`stages.calibrate`).
        """
        return self.base / "calibration" / f"{slug}.json"

    def labels_file(self, slug: str) -> Path:
        """labels/<task>.json: the labels its last runs derived and the listed tests they saw
        flip, read by `--labels derived` and `--quarantine` (`stages.relabel`).
        """
        return self.base / "labels" / f"{slug}.json"

    def relative(self, path: Path) -> str:
        """`path` as written under `<out>/<dataset>` (what a Ray job ships back and forth)."""
        return path.relative_to(self.base).as_posix()

    def log_dir(self, slug: str) -> Path:
        return self.base / "logs" / slug

    @property
    def report_file(self) -> Path:
        return self.base / "report.md"


def human_bytes(size: int) -> str:
    """Bytes for people, in decimal units: 12 kB, 340.0 MB, 1.2 GB (the size of what is kept)."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit in ("B", "kB") else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"
