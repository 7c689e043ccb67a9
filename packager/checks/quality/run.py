"""Running the checks of one task (`run_quality`): the control and the ablations, each graded
as a candidate patch through `packager.engines.patch.grade_patch`, beside the instruction leaks,
gathered into a `QualityReport`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packager.checks.quality.ablation import (
    MAX_ABLATIONS_DEFAULT,
    Ablation,
    ablated_patch,
    ablation_plan,
)
from packager.checks.quality.base import base_lookup
from packager.checks.quality.hunks import skipped, split_hunks
from packager.checks.quality.leaks import Leak, instruction_leaks
from packager.checks.quality.report import (
    AblationRun,
    AblationStatus,
    HunkResult,
    Ladder,
    QualityReport,
    SkippedFile,
    patch_digest,
)
from packager.diffs import FileDiff
from packager.engines.patch import grade_patch
from packager.errors import InputError

if TYPE_CHECKING:
    from packager.context import RunContext
    from packager.images.build import DockerClient
    from packager.models.spec import RunResult, TaskResult, TaskSpec
    from packager.settings import VerifyConfig
    from packager.storage import OutputPaths


def candidate_bytes(spec: TaskSpec, gold: str) -> bytes:
    """The model.patch an agent applying `gold` would leave: the collect hook diffs against the
    snapshot's HEAD, so a setup patch (applied uncommitted in the agent image) comes first.
    """
    setup = spec.repo.setup_patch or ""
    if setup and not setup.endswith("\n"):
        setup += "\n"
    return (setup + gold).encode("utf-8", "surrogateescape")


def _as_run(
    index: int, removes: str, run: RunResult, files: tuple[str, ...] = (), hunks: int = 0
) -> AblationRun:
    return AblationRun(
        index=index,
        removes=removes,
        files=files,
        hunks=hunks,
        reward=run.reward,
        subscores=dict(run.subscores),
        grade_status=run.grade_status,
        reason=run.reason,
        seconds=run.duration_sec,
        log_dir=run.log_dir,
    )


def _measured(run: AblationRun) -> bool:
    """Whether a run's reward says something about the tests (it applied and was graded)."""
    return run.reward is not None and run.grade_status not in ("infra_error", "patch_failed")


def _ladder(spec: TaskSpec, control: AblationRun | None, runs: Sequence[AblationRun]) -> Ladder:
    raw = spec.provenance.metadata.get("graded_ladder_rungs")
    gold = control.reward if control else None
    floor = spec.expectations.nop_reward
    rewards = tuple(r.reward for r in runs)
    if not isinstance(raw, list):
        return Ladder(
            available=False,
            gold=gold,
            floor=floor,
            rewards=rewards,
            note="graded_ladder_rungs is not in the task's provenance metadata",
        )
    return Ladder(
        available=True,
        rungs=tuple(raw),
        gold=gold,
        floor=floor,
        rewards=rewards,
        note=(
            "the row names its rungs but ships neither their diffs nor their rewards, so "
            "rungs and ablations are shown side by side, not matched"
        ),
    )


@dataclass(frozen=True)
class _Ablated:
    status: AblationStatus
    note: str | None = None
    control: AblationRun | None = None
    runs: tuple[AblationRun, ...] = ()


def _ablate(
    spec: TaskSpec,
    plan: Sequence[Ablation],
    grade: Callable[[bytes, Path], RunResult],
    qdir: Path,
    say: Callable[[str], None],
) -> _Ablated:
    """The control run, then one run per ablation (unless the task cannot be ablated); `grade`
    grades a candidate's bytes with its logs in a folder.
    """
    slug = spec.provenance.slug
    gold = spec.gold_patch or ""
    if spec.grading.browser_judged:
        return _Ablated(
            "skipped",
            "browser-judged task: every ablation would need a model to follow both workflows "
            "in a browser, so hunks are not ablated (instruction leaks are still checked)",
        )
    if not plan:
        return _Ablated(
            "nothing_to_ablate",
            "the gold patch has no text hunks (binary files, renames or mode changes only)",
        )
    say(f"{slug}: control (the whole gold patch)")
    first = grade(candidate_bytes(spec, gold), qdir / "control")
    control = _as_run(0, "", first)
    if first.reward != 1.0 or not _measured(control):
        note = (
            f"the whole gold patch, graded as a candidate, scored {first.reward} "
            f"({first.grade_status}: {first.reason}); ablations would prove nothing"
        )
        return _Ablated("control_failed", note, control)
    files = split_hunks(gold)
    runs = []
    for ablation in plan:
        removes = ablation.describe(files)
        say(f"{slug}: ablation {ablation.index}/{len(plan)} without {removes}")
        candidate = candidate_bytes(spec, ablated_patch(gold, ablation))
        run = grade(candidate, qdir / f"ablation-{ablation.index}")
        runs.append(_as_run(ablation.index, removes, run, ablation.files, len(ablation.removes)))
    return _Ablated("done", None, control, tuple(runs))


def _hunk_results(
    files: Sequence[FileDiff], plan: Sequence[Ablation], runs: Sequence[AblationRun]
) -> list[HunkResult]:
    """Every gold hunk with the ablation that left it out and what that run scored."""
    by_hunk = {
        unit: run for ablation, run in zip(plan, runs, strict=False) for unit in ablation.removes
    }
    hunks = []
    for f in files:
        for h, hunk in enumerate(f.hunks):
            run = by_hunk.get((f.index, h))
            covered = None
            if run is not None and _measured(run):
                covered = bool(run.reward is not None and run.reward < 1.0)
            hunks.append(
                HunkResult(
                    file=hunk.file,
                    old_start=hunk.old_start,
                    old_len=hunk.old_len,
                    new_start=hunk.new_start,
                    new_len=hunk.new_len,
                    where=hunk.where,
                    ablation=run.index if run is not None else None,
                    covered=covered,
                    reward=run.reward if run is not None else None,
                )
            )
    return hunks


def _reasons(hunks: Sequence[HunkResult], leaks: Sequence[Leak]) -> list[str]:
    """Why a task is flagged, one sentence per check that found something."""
    reasons = []
    uncovered = [h for h in hunks if h.covered is False]
    if uncovered:
        reasons.append(
            f"{len(uncovered)} of {len(hunks)} gold hunks not covered by the tests (the gold "
            "patch without them still scores 1.0): " + "; ".join(h.where for h in uncovered)
        )
    if leaks:
        reasons.append(
            "the instruction gives away "
            + "; ".join(f"{leak.kind} {leak.text!r} ({leak.where})" for leak in leaks)
        )
    return reasons


def _skipped_files(files: Sequence[FileDiff]) -> tuple[SkippedFile, ...]:
    """The gold patch's sections that nothing can be ablated from, and why."""
    return tuple(SkippedFile(file=f.path, reason=why) for f in files if (why := skipped(f)))


def _wait_for_removals() -> None:
    """The ablations' containers, removed in the background while the next one ran, are all
    gone before the report is written.
    """
    # heavy: the engines' container runner loads the Docker SDK (only after runs happened)
    from packager.engines.containers import wait_for_removals

    wait_for_removals()


def run_quality(
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    images: Mapping[str, str],
    *,
    result: TaskResult | None = None,
    max_ablations: int = MAX_ABLATIONS_DEFAULT,
    repo_sources: Mapping[str, str] | None = None,
    mirror_dirs: Sequence[str] = (),
    in_base: Callable[[str], bool] | None = None,
    settings: VerifyConfig | None = None,
    log: Callable[[str], None] | None = None,
    run: RunContext | None = None,
) -> QualityReport:
    """Ablate the gold patch hunk by hunk and look for instruction leaks (see the module doc).

    `images` are the task's built `agent` and `grader` tags (those it was verified with); when
    `result` is given it must be `verified`. `in_base` answers whether a text is in the base
    tree (default: `base_lookup` over `repo_sources`/`mirror_dirs`). Logs of each run go to
    `logs/<task>/quality/{control,ablation-<n>}/` (`settings`, `run`: the run's); `log` gets a
    line per run; an infrastructure fault of a run is recorded there (its hunks: covered None).
    """
    slug = spec.provenance.slug
    if result is not None and result.status != "verified":
        raise InputError(
            f"{spec.task_id}: quality checks need a verified task; its status is "
            f"{result.status} ({result.reason or 'no reason given'})"
        )
    if not spec.gold_patch:
        raise InputError(f"{spec.task_id}: the task has no gold patch to ablate")
    started, gold = time.monotonic(), spec.gold_patch
    files = split_hunks(gold)
    lookup = in_base or base_lookup(spec, repo_sources or {}, mirror_dirs)
    leaks = instruction_leaks(spec, lookup)
    try:
        image_ids = {k: str(client.images.get(v).id) for k, v in images.items()}
    except Exception:  # noqa: BLE001 - a fake or failing engine: ids are only a cache key
        image_ids = {}
    qdir = paths.log_dir(slug) / "quality"
    shutil.rmtree(qdir, ignore_errors=True)  # no ablation folder of an earlier run lingers
    plan = ablation_plan(gold, max_ablations)
    done = _ablate(
        spec,
        plan,
        lambda candidate, where: grade_patch(
            client, spec, paths, images, candidate, log_dir=where, config=settings, run=run
        ),
        qdir,
        log or (lambda _line: None),
    )
    _wait_for_removals()
    hunks = _hunk_results(files, plan, done.runs)
    reasons = _reasons(hunks, leaks)
    return QualityReport(
        task=slug,
        instance_id=spec.task_id,
        dataset=spec.provenance.dataset,
        schema_name=spec.provenance.schema_name,
        images=dict(images),
        image_ids=image_ids,
        gold_patch_sha256=patch_digest(gold),
        instruction_sha256=patch_digest(spec.instruction),
        max_ablations=max_ablations,
        ablation_status=done.status,
        ablation_note=done.note,
        control=done.control,
        ablations=done.runs,
        hunks=tuple(hunks),
        covered=sum(1 for h in hunks if h.covered) if done.status == "done" else None,
        total=len(hunks),
        skipped_files=_skipped_files(files),
        leaks=tuple(leaks),
        ladder=(
            _ladder(spec, done.control, done.runs) if spec.provenance.schema_name == "pdl" else None
        ),
        seconds=round(time.monotonic() - started, 3),
        flagged=bool(reasons),
        reasons=tuple(reasons),
    )
