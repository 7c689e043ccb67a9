"""The one seam between a task's job and the checks run on it (`stages.job.TaskJob` names no
check: it runs `AFTER_BUILD` on a built task, in order, and `AFTER_VERIFY` on its result).

- After the build, a check sees the built task (`Built`) and returns a `Verdict`: the seconds
  and logs it adds to the task's result and, when the task ends there, the status and reason.
  `audit` (nothing from the grading side in the agent image) runs on every task; `app` (a judged
  web app answers HTTP, and a judge model is there to verify it) on judged tasks.
- After the runs, a check reads the spec and the verified result and returns a field of the
  result (`labels`: the dataset's labels against what ran; `resources`: what the runs used).
- On a verified task, when asked (`--quality`, `packager quality`): `quality` grades the gold
  patch with hunks left out and reads the instruction for leaks (`checks.quality`).

Checks that keep a verdict (the audit, the quality checks) keep it in one store under one key
scheme (`checks.store`). A new check is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from packager.checks.app import check_app_answers
from packager.checks.audit import AuditError, audit_path, audit_task
from packager.checks.labels import task_labels
from packager.checks.quality import QualityReport, cached_quality, run_quality, write_quality
from packager.checks.resources import measured_resources
from packager.checks.stability import flaky_reason, task_stability
from packager.errors import RunError
from packager.judge.endpoint import missing_judge_env
from packager.models.app import AppStart

if TYPE_CHECKING:
    from packager.context import RunContext
    from packager.images.build import DockerClient
    from packager.models.spec import Status, TaskResult, TaskSpec
    from packager.settings import VerifyConfig
    from packager.storage import OutputPaths


@dataclass(frozen=True)
class Built:
    """A built task as the checks after the build see it."""

    spec: TaskSpec
    paths: OutputPaths
    client: DockerClient
    images: Mapping[str, str]
    """Role (`agent`, `grader`, ...) -> image tag."""
    run: RunContext
    judge_env: Mapping[str, str]
    verify: bool
    """Whether the job goes on to the runs (a build-only job needs no judge)."""


@dataclass
class Verdict:
    """What a check adds to the task's result, and whether the task ends there."""

    seconds: dict[str, float] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    status: Status | None = None
    """None: the task goes on."""
    reason: str = ""


class BuiltCheck(Protocol):
    name: str

    def applies(self, spec: TaskSpec) -> bool: ...

    def __call__(self, task: Built) -> Verdict: ...


class Audit:
    """Nothing from the grading side (gold patch, hidden tests, grader files, later commits) is
    in any layer or git object of the agent image (`checks.audit`); a leak ends the task.
    """

    name = "audit"

    def applies(self, spec: TaskSpec) -> bool:
        return True

    def __call__(self, task: Built) -> Verdict:
        spec = task.spec
        try:
            audit = audit_task(task.client, spec, task.paths, task.images["agent"])
        except AuditError as exc:
            return Verdict(status="infra_error", reason=str(exc))
        verdict = Verdict(
            seconds={"audit": float(audit.stats["seconds"])},
            logs={"audit": str(audit_path(task.paths, spec.provenance.slug))},
        )
        if not audit.clean:
            verdict.status, verdict.reason = "leak", audit.summary()
        return verdict


class App:
    """A judged web app starts and answers HTTP (`checks.app`); without a judge model to
    verify it with, the task ends at `needs_judge`.
    """

    name = "app"

    def applies(self, spec: TaskSpec) -> bool:
        return spec.grading.browser_judged

    def __call__(self, task: Built) -> Verdict:
        spec, slug = task.spec, task.spec.provenance.slug
        g = spec.grading
        assert g.app_start is not None and g.app_port is not None
        log = task.paths.log_dir(slug) / "app-check.log"
        start = AppStart(g.app_start, g.app_port, g.app_start_how or "")
        verdict = Verdict(logs={"app_check": str(log)})
        try:
            seconds = check_app_answers(
                task.client,
                task.images["agent"],
                start,
                workdir=spec.repo.workdir,
                log_path=log,
                task=f"{spec.provenance.dataset}/{slug}",
                run=task.run,
            )
        except RunError as exc:
            verdict.status = "infra_error"
            verdict.reason = f"the app does not answer HTTP: {exc.reason}"
            return verdict
        verdict.seconds["app_check"] = round(seconds, 3)
        missing = missing_judge_env(task.judge_env)
        if task.verify and missing:
            verdict.status = "needs_judge"
            verdict.reason = (
                f"the app starts and answers HTTP on port {g.app_port} ({g.app_start_how}: "
                f"{g.app_start}); its workflows are judged by a model in a browser: set "
                f"{' and '.join(missing)} (the model's OpenAI-compatible endpoint and name; "
                "PACKAGER_JUDGE_API_KEY if it needs a key), or pass --judge replay for the "
                "recorded turns of a sample"
            )
        return verdict


AFTER_BUILD: tuple[BuiltCheck, ...] = (Audit(), App())
"""Run in order on a built task; the first verdict with a status ends it."""

AFTER_VERIFY: tuple[tuple[str, Callable[[TaskSpec, TaskResult], Any]], ...] = (
    ("labels", task_labels),
    ("resources", lambda spec, result: measured_resources(result)),
    ("stability", task_stability),
)
"""(result field, check) run on a result of the runs: each sets its field. A stability record
naming flaky listed tests makes a verified (or reward-flaky) task `flaky`, saying which."""


def after_build(task: Built) -> Verdict:
    """Every check of `AFTER_BUILD` that applies, in order, until one ends the task: their
    seconds and logs together, and the ending status (None: the task goes on to its runs).
    """
    total = Verdict()
    for check in AFTER_BUILD:
        if not check.applies(task.spec):
            continue
        verdict = check(task)
        total.seconds.update(verdict.seconds)
        total.logs.update(verdict.logs)
        if verdict.status is not None:
            total.status, total.reason = verdict.status, verdict.reason
            return total
    return total


def after_verify(spec: TaskSpec, result: TaskResult) -> dict[str, Any]:
    """The result fields `AFTER_VERIFY` sets on a result of the runs (with `status` and
    `reason` when the stability record finds flaky listed tests).
    """
    fields = {name: check(spec, result) for name, check in AFTER_VERIFY}
    flaky = flaky_reason(fields.get("stability"))
    if flaky is not None and result.status in ("verified", "flaky"):
        fields |= {"status": "flaky", "reason": flaky}
    return fields


@dataclass(frozen=True)
class Verified:
    """A verified task as the checks on a verified task see it."""

    spec: TaskSpec
    paths: OutputPaths
    client: DockerClient
    result: TaskResult
    run: RunContext
    settings: VerifyConfig
    """The run's verification settings: the candidates are graded as the task was verified."""
    repo_sources: Mapping[str, str]
    mirror_dirs: tuple[str, ...]
    max_ablations: int
    force: bool = False
    """Check again even when a saved verdict has the same key."""


def quality(task: Verified) -> QualityReport:
    """The quality report of a verified task: the saved one when its key (images, gold patch,
    instruction, budget, checks version) is unchanged and `force` is not set, else a new one
    (its containers the run's), saved in the store.
    """
    spec, budget = task.spec, task.max_ablations
    saved = (
        None
        if task.force
        else cached_quality(task.paths, spec, task.result.image_ids, max_ablations=budget)
    )
    if saved is not None:
        return saved
    report = run_quality(
        task.client,
        spec,
        task.paths,
        task.result.images,
        result=task.result,
        max_ablations=budget,
        repo_sources=task.repo_sources,
        mirror_dirs=task.mirror_dirs,
        settings=task.settings,
        run=task.run,
    )
    write_quality(task.paths, report)
    return report
