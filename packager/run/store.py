"""Where a dataset's outputs go (one object for every output path) and where this machine's
caches live. No other packager import, so any module can use it without importing the pipeline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def cache_root() -> Path:
    """The packager cache of this machine: `PACKAGER_CACHE`, else `$XDG_CACHE_HOME/packager`, else
    `~/.cache/packager` (repository mirrors, wheelhouses, bundles shipped to a Ray node).
    """
    root = os.environ.get("PACKAGER_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "packager"


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

    def result_file(self, slug: str) -> Path:
        return self.base / "results" / f"{slug}.json"

    def log_dir(self, slug: str) -> Path:
        return self.base / "logs" / slug

    @property
    def report_file(self) -> Path:
        return self.base / "report.md"
