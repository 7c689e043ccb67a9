"""One task's job: build its images, run the checks after a build on them (`checks.seam`: the
audit of the agent image, a web app's answer), then run its oracle and nop trials. `TaskJob` is
the only place these stages are put together; the executors schedule it
(`packager.executors`). Every failure of a task becomes its result; only an interruption
(Ctrl-C: `build.Cancelled`) escapes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packager.checks.seam import Built, after_build, after_verify
from packager.context import Cancelled, RunContext
from packager.engines import DEFAULT_ENGINE, Engine, VerifyRequest, get_engine
from packager.errors import BuildError, PackagerError, RepoSourceError, RowError
from packager.models.spec import TaskResult, TaskSpec
from packager.render.harbor_dataset import task_digest
from packager.settings import VerifyConfig
from packager.stages.build import (
    BuildOptions,
    BuildOutcome,
    ImageTags,
    Rendered,
    build_failure_reason,
    build_task,
    environment_facts,
    image_tags,
)
from packager.stages.calibrate import calibrate
from packager.stages.relabel import keep_label_record

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import Status, TaskResult
    from packager.storage import OutputPaths


@dataclass(frozen=True)
class Job:
    """What every task's job needs besides its spec: the same for all tasks of a run."""

    paths: OutputPaths
    repo_sources: Mapping[str, str]
    build_opts: BuildOptions
    verify: bool
    settings: VerifyConfig = field(default_factory=VerifyConfig)
    """The run's verify settings as the command line gave them (`RunConfig.verify`)."""
    runner: Engine = field(default_factory=lambda: get_engine(DEFAULT_ENGINE))
    """The engine of `settings`, made once for the run (the driver makes it)."""
    judge_env: Mapping[str, str] = field(default_factory=dict)
    rendered: Mapping[str, Rendered] = field(default_factory=dict)
    """What this run's render decided for each task (by slug): its image tags and folder digest,
    so a job does not render its task again (a task missing here is rendered on demand)."""

    @property
    def run(self) -> RunContext:
        """The run the job belongs to (it travels with the build options, which every build
        step has).
        """
        return self.build_opts.run


@dataclass(frozen=True)
class Staged:
    """A task whose images are built and audited, ready for its runs (the run stage)."""

    spec: TaskSpec
    images: dict[str, str]
    image_ids: dict[str, str]
    durations: dict[str, float]
    logs: dict[str, str]
    finish: Callable[..., TaskResult]
    """The task's result with its images, durations and logs: finish(status, reason=None)."""
    environment: dict[str, str] = field(default_factory=dict)
    """Facts of the agent image's environment (TaskResult.environment)."""
    task_digest: str | None = None
    """The task folder's digest its images were built from (TaskResult.task_digest)."""


@dataclass(frozen=True)
class _Finish:
    """A built task's result for a status: its images, ids, durations and logs as they are
    when it is called (the audit and app check add theirs after the build).
    """

    base: dict[str, object]
    log_dir: str
    images: dict[str, str]
    image_ids: dict[str, str]
    durations: dict[str, float]
    logs: dict[str, str]
    environment: dict[str, str]

    def __call__(self, status: Status, reason: str | None = None) -> TaskResult:
        return TaskResult(
            **self.base,
            status=status,
            reason=reason,
            images=self.images,
            image_ids=self.image_ids,
            durations=self.durations,
            logs={"dir": self.log_dir, **self.logs},
            environment=self.environment,
        )


DISK_FULL = ("no space left on device", "out of diskspace")
"""ENOSPC as the engine, pip and git say it (lower-cased; git's pack writer says the second)."""


def with_dropped(reason: str | None, dropped: str | None) -> str | None:
    """A reason that names a module missing at test time, with the dropped requirement it
    belongs to when the environment's build dropped one of that name (a conda-only package).
    """
    import re

    if not reason or not dropped:
        return reason
    missing = {m.lower() for m in re.findall(r"No module named '?([\w]+)", reason)}
    missing |= {m.lower() for m in re.findall(r"module ([\w]+)[\w.]* is missing", reason)}

    def module(entry: str) -> str:
        return re.split(r"[^\w-]", entry, maxsplit=1)[0].lower().replace("-", "_")

    hit = [d for d in dropped.split("; ") if module(d) in missing]
    if hit:
        return (
            f"{reason} (dropped from the environment, pip could not install it: {'; '.join(hit)})"
        )
    # Tests that skip for want of the package do not pass either: name the ones that say which.
    not_passed = reason.split("not passed:", 1)[1] if "not passed:" in reason else ""
    named = [
        d
        for d in dropped.split("; ")
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(module(d))}(?![A-Za-z0-9])", not_passed)
    ]
    if not named:
        return reason
    return (
        f"{reason} (tests named after a package dropped from the environment, which pip could "
        f"not install: {'; '.join(named)})"
    )


class TaskJob:
    """One task's build → audit → verify on one engine (`client`), with the settings every task
    of a run shares (`job`: its output paths, repository sources, build options, runs).
    """

    def __init__(self, job: Job, client: DockerClient) -> None:
        self.job = job
        self.client = client

    def __call__(self, spec: TaskSpec) -> TaskResult:
        """The task's final result: built, then verified unless the job only builds."""
        staged = self.build(spec)
        if isinstance(staged, TaskResult):
            return staged
        return self.verify(staged)

    def build(self, spec: TaskSpec) -> TaskResult | Staged:
        """Build and audit one task (and prove a web app answers): its final result when it
        ends here (build_failed, leak, needs_judge, ...), else what its runs need.
        """
        self.job.run.check()
        started = time.monotonic()
        built = self._build_images(spec)
        if isinstance(built, TaskResult):
            return built
        self.job.run.check()
        staged = self._staged(spec, built, started)
        return self._checks(staged)

    def verify(self, staged: Staged) -> TaskResult:
        """The task's oracle and nop runs (its result as built when the job only builds)."""
        if not self.job.verify:
            return staged.finish("built")
        job = self.job
        started = time.monotonic()
        result = run_stage(
            staged,
            job.paths,
            runner=job.runner,
            settings=job.settings,
            client=self.client,
            judge_env=job.judge_env,
            run=job.run,
        )
        # The run stage's whole wall (run plans, containers, grading), beside each run's own.
        durations = {**result.durations, "verify": round(time.monotonic() - started, 3)}
        return result.model_copy(update={"durations": durations})

    def _base(self, spec: TaskSpec) -> dict[str, object]:
        """What every result of the task says of it (with its folder's digest as it is now:
        built from, or failed to build from).
        """
        folder = self.job.paths.task_dir(spec.provenance.slug)
        rendered = self.job.rendered.get(spec.provenance.slug)
        if rendered is not None:
            digest: str | None = rendered.digest
        else:
            digest = task_digest(folder) if (folder / "task.toml").is_file() else None
        return {
            "task": spec.provenance.slug,
            "instance_id": spec.task_id,
            "dataset": spec.provenance.dataset,
            "engine": self.job.runner.name,
            "expected_nop": spec.expectations.nop_reward,
            "task_digest": digest,
        }

    def _failed(
        self,
        spec: TaskSpec,
        status: Status,
        reason: str,
        logs: dict[str, str] | None = None,
        environment: dict[str, str] | None = None,
    ) -> TaskResult:
        """The result of a task whose images could not be built. A build that failed because the
        machine's disk filled up is an infrastructure fault, not the row's (infra_error).
        """
        if status == "build_failed" and any(said in reason.lower() for said in DISK_FULL):
            status, reason = "infra_error", f"the machine's disk is full: {reason}"

        return TaskResult(
            **self._base(spec),
            status=status,
            reason=reason,
            logs={"dir": str(self.job.paths.log_dir(spec.provenance.slug)), **(logs or {})},
            environment=environment or {},
        )

    def _build_images(self, spec: TaskSpec) -> BuildOutcome | TaskResult:
        """The task's images, or its result when they could not be built."""
        job, slug = self.job, spec.provenance.slug
        try:
            rendered = job.rendered.get(slug)
            tags: ImageTags = rendered.tags if rendered is not None else image_tags(spec)
            repo_sources = dict(job.repo_sources)
            return build_task(self.client, spec, job.paths, repo_sources, job.build_opts, tags)
        except BuildError as exc:
            reason = build_failure_reason(exc, spec)
            log = {"build": str(exc.log_path)} if exc.log_path is not None else {}
            return self._failed(spec, "build_failed", reason, log, environment_facts(spec))
        except (RepoSourceError, RowError) as exc:
            snapshot_log = job.paths.log_dir(slug) / "snapshot.log"
            found = {"snapshot": str(snapshot_log)} if snapshot_log.is_file() else {}
            return self._failed(spec, "build_failed", str(exc), found)
        except PackagerError as exc:
            return self._failed(spec, "infra_error", str(exc))
        except Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - docker/requests errors: the daemon went away
            return self._failed(spec, "infra_error", f"{type(exc).__name__}: {exc}")

    def _staged(self, spec: TaskSpec, built: BuildOutcome, started: float) -> Staged:
        """A built task, its result's images, image ids, durations, logs and environment."""
        images = built.images
        try:
            image_ids = {k: str(self.client.images.get(v).id) for k, v in images.items()}
        except Exception:  # noqa: BLE001 - a fake or failing engine: ids are only a cache key
            image_ids = {}
        durations = {"build": round(time.monotonic() - started, 3), **built.durations()}
        logs = built.logs()
        environment = environment_facts(spec, built.flattened_from)
        if built.environment_image is not None:
            environment["image"] = built.environment_image
        dropped = built.dropped
        if dropped:
            environment["dropped"] = "; ".join(dropped)
        log_dir = str(self.job.paths.log_dir(spec.provenance.slug))
        base = self._base(spec)
        finish = _Finish(base, log_dir, images, image_ids, durations, logs, environment)
        digest = base["task_digest"]
        return Staged(
            spec, images, image_ids, durations, logs, finish, environment,
            digest if isinstance(digest, str) else None,
        )  # fmt: skip

    def _checks(self, staged: Staged) -> TaskResult | Staged:
        """The checks after the build (`checks.seam.AFTER_BUILD`): the task's result when one
        ends it there (infra_error, leak, needs_judge), else `staged` with their seconds and logs.
        """
        job = self.job
        verdict = after_build(
            Built(
                staged.spec,
                job.paths,
                self.client,
                staged.images,
                job.run,
                job.judge_env,
                job.verify,
            )
        )
        staged.durations.update(verdict.seconds)
        staged.logs.update(verdict.logs)
        if verdict.status is not None:
            return staged.finish(verdict.status, verdict.reason)
        return staged


def _image_mb(client: DockerClient, tag: str) -> float:
    """The image's size in MiB (0 when the engine cannot say)."""
    try:
        return float(client.images.get(tag).attrs.get("Size") or 0) / 2**20
    except Exception:  # noqa: BLE001 - a figure for the calibration, never a reason to fail
        return 0.0


def run_stage(
    staged: Staged,
    paths: OutputPaths,
    *,
    runner: Engine,
    settings: VerifyConfig,
    client: DockerClient,
    judge_env: Mapping[str, str] | None = None,
    run: RunContext | None = None,
) -> TaskResult:
    """Oracle and nop runs of a built task by the run's engine `runner`, under the run's verify
    `settings`, in `run`; every failure of a run becomes the task's result.
    """
    spec, finish = staged.spec, staged.finish
    run = run or RunContext()
    run.check()
    try:
        verified = runner.verify(
            VerifyRequest(
                spec,
                paths,
                client=client,
                images=staged.images,
                config=settings,
                durations=staged.durations,
                extra_logs=staged.logs,
                judge_env=judge_env,
                run=run,
            )
        )
        checked = after_verify(spec, verified)
        reason = checked.pop("reason", verified.reason)
        digest = staged.task_digest
        keep_label_record(paths, spec.provenance.slug, verified.model_copy(update=checked))
        resources = checked.get("resources")
        if checked.get("status", verified.status) == "verified" and resources:
            digest = calibrate(spec, paths, resources, _image_mb(client, staged.images["agent"]))
        return verified.model_copy(
            update={
                "image_ids": staged.image_ids,
                **checked,
                "environment": staged.environment,
                "task_digest": digest,
                "reason": with_dropped(reason, staged.environment.get("dropped")),
            }
        )
    except Cancelled:
        raise
    except PackagerError as exc:
        return finish("infra_error", str(exc))
    except Exception as exc:  # noqa: BLE001 - docker/requests errors: the daemon went away
        return finish("infra_error", f"{type(exc).__name__}: {exc}")
