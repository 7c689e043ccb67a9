"""The quality report of one task (`results/<task>.quality.json`): its models, where it is
saved, when a saved one can be reused (`cached_quality`), and its one-line summary.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from packager.checks.quality.ablation import MAX_ABLATIONS_DEFAULT
from packager.checks.quality.leaks import Leak
from packager.checks.store import QUALITY, VerdictStore, verdict_key
from packager.models.spec import Frozen

if TYPE_CHECKING:
    from packager.models.spec import TaskSpec
    from packager.storage import OutputPaths

QUALITY_VERSION = 1
"""Bumped when the checks change, so a saved report is not reused across versions."""


class HunkResult(Frozen):
    """One gold hunk and what leaving it out did."""

    file: str
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    where: str
    """`file: new lines a-b, old lines c-d`."""
    ablation: int | None
    """The ablation that left it out (None when ablation did not run)."""
    covered: bool | None
    """False: the gold patch without it still scores 1.0; None: not measured."""
    reward: float | None
    """The reward of the gold patch without it (and the rest of its ablation's group)."""


class AblationRun(Frozen):
    """One graded candidate: the whole gold patch (the control) or an ablation."""

    index: int
    """0 for the control (the whole gold patch)."""
    removes: str
    """What was left out (empty for the control)."""
    files: tuple[str, ...] = ()
    hunks: int = 0
    reward: float | None
    subscores: dict[str, float] = Field(default_factory=dict)
    grade_status: str
    reason: str | None = None
    seconds: float
    log_dir: str


class SkippedFile(Frozen):
    """A file of the gold patch with nothing to ablate."""

    file: str
    reason: str


class Ladder(Frozen):
    """PDL: the row's graded ladder rung names beside the ablated variants' rewards."""

    available: bool
    rungs: tuple[str, ...] = ()
    gold: float | None = None
    floor: float | None = None
    """The row's do-nothing floor (its expected nop reward)."""
    rewards: tuple[float | None, ...] = ()
    """The ablations' rewards, in ablation order (what `ablations` says each left out)."""
    note: str


AblationStatus = Literal["done", "skipped", "control_failed", "nothing_to_ablate"]


class QualityReport(Frozen):
    """The quality of one verified task (`results/<task>.quality.json`)."""

    version: int = QUALITY_VERSION
    task: str
    instance_id: str
    dataset: str
    schema_name: str
    images: dict[str, str]
    image_ids: dict[str, str] = Field(default_factory=dict)
    gold_patch_sha256: str
    instruction_sha256: str
    max_ablations: int
    ablation_status: AblationStatus
    ablation_note: str | None = None
    control: AblationRun | None = None
    ablations: tuple[AblationRun, ...] = ()
    hunks: tuple[HunkResult, ...] = ()
    covered: int | None
    """Hunks whose removal lowered the reward (None when ablation did not run)."""
    total: int
    """Hunks of the gold patch (binary sections and pure renames are not hunks)."""
    skipped_files: tuple[SkippedFile, ...] = ()
    leaks: tuple[Leak, ...] = ()
    ladder: Ladder | None = None
    seconds: float
    flagged: bool
    reasons: tuple[str, ...] = ()
    """Why it is flagged, one sentence each (empty when it is not)."""


def quality_path(paths: OutputPaths, slug: str) -> Path:
    """`<out>/<dataset>/results/<task>.quality.json`."""
    return VerdictStore(paths).file(QUALITY, slug)


def quality_key(
    image_ids: Mapping[str, str], gold_sha256: str, instruction_sha256: str, max_ablations: int
) -> str:
    """What a report depends on (`checks.store.verdict_key`): this version of the checks, the
    images (ids), the gold patch, the instruction and the ablation budget.
    """
    ids = json.dumps(dict(image_ids), sort_keys=True)
    return verdict_key(
        QUALITY, str(QUALITY_VERSION), ids, gold_sha256, instruction_sha256, str(max_ablations)
    )


def _report_key(report: QualityReport) -> str | None:
    if not report.image_ids:  # ids unknown (a failing engine): nothing to reuse it by
        return None
    return quality_key(
        report.image_ids,
        report.gold_patch_sha256,
        report.instruction_sha256,
        report.max_ablations,
    )


def write_quality(paths: OutputPaths, report: QualityReport) -> Path:
    """Write the report atomically to `quality_path`, with its cache key; returns the path."""
    return VerdictStore(paths).save(
        QUALITY, report.task, report.model_dump(mode="json"), _report_key(report)
    )


def _report(data: Mapping[str, object] | None) -> QualityReport | None:
    if data is None:
        return None
    try:
        return QualityReport.model_validate({k: v for k, v in data.items() if k != "cache_key"})
    except ValueError:
        return None


def read_quality(paths: OutputPaths, slug: str) -> QualityReport | None:
    """The saved report of a task (None when there is none or it cannot be read)."""
    return _report(VerdictStore(paths).read(QUALITY, slug))


def cached_quality(
    paths: OutputPaths,
    spec: TaskSpec,
    image_ids: Mapping[str, str],
    *,
    max_ablations: int = MAX_ABLATIONS_DEFAULT,
) -> QualityReport | None:
    """The saved report when it was made by this version of the checks, for the very same
    images (ids), gold patch, instruction and ablation budget (its `quality_key`); else None.
    """
    if not image_ids:
        return None
    key = quality_key(
        image_ids, patch_digest(spec.gold_patch), patch_digest(spec.instruction), max_ablations
    )
    return _report(VerdictStore(paths).reuse(QUALITY, spec.provenance.slug, key))


def patch_digest(text: str | None) -> str:
    """sha256 of a patch (or instruction) text: part of the cache key of a report."""
    return hashlib.sha256((text or "").encode("utf-8", "surrogateescape")).hexdigest()


def summary_line(report: QualityReport) -> str:
    """One line for a terminal: covered/total, leaks, seconds, and flagged or not."""
    hunks = (
        f"{report.covered}/{report.total} hunks covered"
        if report.covered is not None
        else f"ablation {report.ablation_status}"
    )
    leaks = f"{len(report.leaks)} leak(s)" if report.leaks else "no leak"
    flag = "FLAGGED" if report.flagged else "ok"
    return f"{report.task}: {flag}: {hunks}, {leaks}, {report.seconds:.1f} s"


def to_json(report: QualityReport) -> str:
    """The report as the JSON text `write_quality` writes (sorted keys)."""
    return json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
