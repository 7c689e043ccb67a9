"""Where a dataset's outputs go: one object for every output path (no other packager import,
so any module can take one without importing the pipeline).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
