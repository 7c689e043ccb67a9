"""Runs what a command asks for, from one `RunConfig`: render, build and verify (`package`),
grade one candidate patch, audit, check quality, publish, clean, report.

This module owns the orchestration around the pipeline: opening the selection, the Docker
client and the output paths (each made here and nowhere else), the split between cached and
new tasks, the orphan sweep, the executor and its `Job`, the quality checks, the result files
and the report. It prints nothing: what the user sees goes through a `Display`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from packager.adapters import Context, detect_schema, row_id, to_spec
from packager.checks import seam
from packager.checks.audit import audit_path, audit_task
from packager.context import RunContext
from packager.datasets.recipes import Recipes, parse_base_image_options, read_recipes
from packager.datasets.sources import iter_rows, open_dataset
from packager.engines import get_engine
from packager.engines.patch import grade_patch
from packager.errors import InputError, PackagerError
from packager.executors import Events, executor_entry
from packager.executors import from_config as executor_from_config
from packager.images import build
from packager.judge.endpoint import judge_endpoint, missing_judge_env
from packager.models.spec import TaskResult
from packager.release import evidence
from packager.release.clean import clean, clean_caches, dataset_disk, disk_use, folder_bytes
from packager.release.publish import Registry, publish, select
from packager.repos import parse_repo_sources
from packager.run import store
from packager.run.materialize import render_selection
from packager.run.select import Selection
from packager.run.store import cached_result, read_results, write_result
from packager.stages.build import BuildOptions, Rendered, build_task
from packager.stages.job import Job
from packager.storage import SNAPSHOTS, OutputPaths, cache_root, human_bytes

if TYPE_CHECKING:
    from packager.checks.audit import AuditReport
    from packager.checks.quality import QualityReport
    from packager.config import CleanConfig, PublishConfig, RunConfig, SelectionConfig
    from packager.executors import Executor
    from packager.images.build import DockerClient
    from packager.models.spec import TaskResult, TaskSpec
    from packager.release.clean import CleanReport
    from packager.release.publish import PublishReport
    from packager.run.select import Selection
    from packager.stages.build import BuildOptions
    from packager.stages.job import Job
    from packager.storage import OutputPaths


class Display(Protocol):
    """What a run shows as it goes (the CLI's progress bars and lines)."""

    def note(self, text: str) -> None:
        """A line beside the progress (orphans swept, the Ray driver's log)."""

    def cached(self, cached: Sequence[tuple[TaskResult, Path]], total: int, todo: int) -> None:
        """The tasks taken from saved results (with their files), before anything runs."""

    def quality(self, report: QualityReport) -> None:
        """A task's quality report."""

    def skipped(self, task_id: str, status: str) -> None:
        """A task the quality checks skip (not verified)."""

    def start(self, total: int, verify: bool) -> None:
        """The jobs of `total` tasks start."""

    def built(self) -> None:
        """A task's build and audit ended."""

    def recorded(self, result: TaskResult, kept: Path | None) -> None:
        """A task's final result; `kept`: where it went when an earlier verdict stays."""

    def stop(self) -> None:
        """The jobs ended (or were interrupted)."""


@dataclass
class RunOutcome:
    """What `package` did: every result (cached ones first), and where they are."""

    results: list[TaskResult]
    cached: int
    todo: int
    verify: bool
    results_dir: Path
    report: Path
    flagged: list[str] = field(default_factory=list)

    def exit_code(self, strict_quality: bool) -> int:
        """0 when every task is verified (built, without verification), 1 otherwise; a task
        flagged by the quality checks fails the run only with `strict_quality`.
        """
        if strict_quality and self.flagged:
            return 1
        good = {"verified"} if self.verify else {"built", "verified"}
        return 0 if all(r.status in good for r in self.results) else 1


@dataclass
class QualityOutcome:
    checked: int
    flagged: list[str]
    unverified: list[str]
    report: Path


def output_paths(out: Path, dataset: str) -> OutputPaths:
    """The output paths of a dataset (the one place they are made)."""
    return OutputPaths(out, dataset)


def connect() -> DockerClient:
    """A client of this machine's Docker engine (made here only), or exit 3."""
    return build.connect()


def open_selection(cfg: SelectionConfig) -> Selection:
    """The rows a configuration selects, its dataset opened and its files read."""
    sources = parse_repo_sources(cfg.repo_source)
    return Selection(
        dataset=open_dataset(cfg.dataset, cfg.split),
        task_ids=cfg.tasks,
        all_tasks=cfg.all_tasks,
        schema=cfg.schema_name,
        repo_sources=dict(sources.explicit),
        mirror_dirs=tuple(sources.mirror_dirs),
        recipes=read_recipes(cfg.recipes) if cfg.recipes is not None else Recipes(),
        base_images=parse_base_image_options(cfg.base_image),
        prebuilt=cfg.prebuilt,
        prompt=cfg.prompt,
        grader_entry=cfg.grader_entry,
        history=cfg.history,
        id_globs=cfg.id_filter,
        repo_globs=cfg.repo_filter,
        languages=cfg.language,
        python_fallback=cfg.python_fallback,
        toolchain_fallback=cfg.toolchain_fallback,
        strict_environment=cfg.strict_environment,
        grader_network=cfg.grader_network,
        labels=cfg.labels,
        quarantine=cfg.quarantine,
        as_of=cfg.as_of,
    )


def list_rows(
    dataset: str | None,
    split: str,
    schema: str | None,
    recipes: Path | None,
    base_images: Sequence[str],
) -> Iterator[tuple[str, str, str, str]]:
    """Each row of a dataset as (id, schema, language, where its environment comes from); a row
    that cannot be packaged says why instead (`render` names what is wrong with it).
    """
    ds = open_dataset(dataset, split)
    extra = read_recipes(recipes) if recipes is not None else None
    ctx = Context(
        dataset=ds.name,
        split=split,
        recipes=ds.recipes.merged(extra) if extra is not None else ds.recipes,
        base_images=parse_base_image_options(base_images),
    )
    for row in iter_rows(ds):
        name = schema or detect_schema(row)
        try:
            spec = to_spec(row, ctx, name)
        except PackagerError as exc:
            language = str(row.get("language") or "-")
            problem = str(getattr(exc, "problem", exc)).split(";")[0]
            yield str(row_id(row)), name, language, f"not packageable: {problem}"
            continue
        yield str(row_id(row)), name, spec.provenance.language, _environment_line(spec)


def _environment_line(spec: TaskSpec) -> str:
    """Where a spec's environment comes from, and its Python (`3.6 -> 3.9` when substituted)."""
    meta = spec.provenance.metadata
    source = str(meta.get("environment_source") or "-")
    parts = [source]
    for kind in ("python", "toolchain"):
        asked, used = meta.get(f"{kind}_requested"), meta.get(f"{kind}_used")
        if asked is not None:
            prefix = "python " if kind == "python" else ""
            parts.append(f"{prefix}{asked}" if asked == used else f"{prefix}{asked} -> {used}")
    return "; ".join(parts)


def render(config: RunConfig, on_task: Callable[[str, Path], None]) -> None:
    """Render the selected rows; each task is reported as it is placed and none is kept
    (flat memory over any row count).
    """
    render_selection(open_selection(config.selection), config.out, on_task, keep_specs=False)


def package(config: RunConfig, display: Display, *, verify: bool = True) -> RunOutcome:
    """Render, then build (and with `verify`, verify) every selected task.

    A task whose saved result is already `verified` for the same images and engine is taken
    as cached and not run again (unless `force`): a rerun resumes. Ctrl-C stops the workers
    (`errors.Interrupted`); results of finished tasks are kept.
    """
    sel = open_selection(config.selection)
    rendered: dict[str, Rendered] = {}
    specs = render_selection(sel, config.out, rendered=rendered)
    with judge_endpoint(config.verify.judge, specs) as judge_env:
        return _Run(config, sel, display, verify, judge_env, rendered).run(specs)


class _Run:
    """One `package` run once its tasks are rendered and the judge's endpoint is known."""

    def __init__(
        self,
        config: RunConfig,
        sel: Selection,
        display: Display,
        verify: bool,
        judge_env: dict[str, str],
        rendered: dict[str, Rendered],
    ) -> None:
        self.config, self.sel, self.display, self.verify = config, sel, display, verify
        self.judge_env = judge_env
        self.rendered = rendered
        """Each task's image tags and folder digest, as its render decided (by slug)."""
        self.paths = output_paths(config.out, sel.dataset.name)
        self.client: DockerClient | None = None
        self.results: list[TaskResult] = []
        self.flagged: list[str] = []
        self.context = RunContext()
        """This run's id and cancellation, handed to every job (packager.context)."""

    def run(self, specs: list[TaskSpec]) -> RunOutcome:
        try:
            return self._run(specs)
        finally:
            self.context.close()  # the run's services (the wheelhouse server) stop with it

    def _run(self, specs: list[TaskSpec]) -> RunOutcome:
        if executor_entry(self.config.executor.name).local_engine:
            self.client = connect()
            swept = build.remove_orphan_containers(self.client, self.context)
            if swept:
                self.display.note(
                    f"removed {swept} container(s) left by an earlier run that did not finish"
                )
        todo = self._split_cached(specs)
        saved = [(r, self.paths.result_file(r.task)) for r in self.results]
        self.display.cached(saved, len(specs), len(todo))
        if self.config.quality.enabled:  # tasks verified before: their quality (cached if same)
            by_id = {s.task_id: s for s in specs}
            for cached in list(self.results):
                self._check_quality(by_id[cached.instance_id], cached)
        events = Events(
            built=self.display.built,
            result=self._record,
            ran=(lambda staged, result: self._check_quality(staged.spec, result))
            if self.config.quality.enabled
            else None,
        )
        runner, job = self._executor(), self._job()
        self.display.start(len(todo), self.verify)
        try:
            runner.run(todo, job, events)
        finally:
            self.display.stop()
        return RunOutcome(
            results=self.results,
            cached=len(specs) - len(todo),
            todo=len(todo),
            verify=self.verify,
            results_dir=self.paths.results_dir,
            report=self._report(),
            flagged=self.flagged,
        )

    def _split_cached(self, specs: list[TaskSpec]) -> list[TaskSpec]:
        """The tasks to run; the others' saved results go into `results`. With Ray the images
        live on the nodes' engines: the saved result alone decides.
        """
        verify = self.config.verify
        todo = []
        for spec in specs:
            cached = (
                None
                if (verify.force or not self.verify)
                else cached_result(
                    self.paths,
                    spec,
                    oracle_runs=verify.oracle_runs,
                    nop_runs=verify.nop_runs,
                    perturb=verify.perturbations,
                    engine=verify.engine,
                    client=self.client,
                    rendered=self.rendered.get(spec.provenance.slug),
                )
            )
            if cached is None:
                todo.append(spec)
            else:
                self.results.append(cached)
        return todo

    def _check_quality(self, spec: TaskSpec, result: TaskResult) -> None:
        if result.status != "verified":
            return
        assert self.client is not None  # --quality runs with the local executor only
        report = quality_for(
            self.config, self.client, spec, self.paths, result, self.sel, self.context
        )
        self.display.quality(report)
        if report.flagged:
            self.flagged.append(result.instance_id)

    def _record(self, result: TaskResult) -> None:
        where = write_result(self.paths, result)
        self.results.append(result)
        self.display.recorded(
            result, where if where != self.paths.result_file(result.task) else None
        )

    def _job(self) -> Job:
        cfg = self.config
        opts = build_options(cfg, self.sel.mirror_dirs, self.context)
        return Job(
            paths=self.paths,
            repo_sources=self.sel.merged_repo_sources,
            build_opts=opts,
            verify=self.verify,
            settings=cfg.verify,
            runner=get_engine(cfg.verify.engine, environment=cfg.verify.environment),
            judge_env=self.judge_env,
            rendered=self.rendered,
        )

    def _executor(self) -> Executor:
        return executor_from_config(self.config, client=self.client, log=self.display.note)

    def _report(self) -> Path:
        try:
            disk = disk_use(self.client) if self.client is not None else None
            if disk is not None and self.client is not None:
                tags = {r.task: list(r.images.values()) for r in store.read_results(self.paths)}
                disk |= dataset_disk(self.client, {k: v for k, v in tags.items() if v})
            if disk is not None:
                disk["output_bytes"] = folder_bytes(self.paths.base)
                disk["snapshot_cache_bytes"] = folder_bytes(SNAPSHOTS.path())
        except Exception:  # noqa: BLE001 - a figure for the report, never a reason to fail
            disk = None
        return store.write_report(self.paths, disk, config_digest=self.config.digest())


def quality_for(
    config: RunConfig,
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    result: TaskResult,
    sel: Selection,
    run: RunContext,
) -> QualityReport:
    """The quality check (`checks.seam.quality`) of a verified task, with the run's settings."""
    return seam.quality(
        seam.Verified(
            spec=spec,
            paths=paths,
            client=client,
            result=result,
            run=run,
            settings=config.verify,
            repo_sources=sel.merged_repo_sources,
            mirror_dirs=tuple(sel.mirror_dirs),
            max_ablations=config.quality.max_ablations,
            force=config.verify.force,
        )
    )


def check_quality(config: RunConfig, display: Display) -> QualityOutcome:
    """The quality checks of the selected tasks that are verified (the others are skipped)."""
    sel = open_selection(config.selection)
    specs = render_selection(sel, config.out)
    paths = output_paths(config.out, sel.dataset.name)
    client = connect()
    context = RunContext()
    unverified: list[str] = []
    flagged: list[str] = []
    with closing(context):
        for spec in specs:
            result = _saved_result(paths, spec)
            if result is None or result.status != "verified":
                display.skipped(spec.task_id, result.status if result else "not packaged")
                unverified.append(spec.task_id)
                continue
            report = quality_for(config, client, spec, paths, result, sel, context)
            display.quality(report)
            if report.flagged:
                flagged.append(spec.task_id)
    report_file = store.write_report(paths, config_digest=config.digest())
    return QualityOutcome(len(specs) - len(unverified), flagged, unverified, report_file)


def _saved_result(paths: OutputPaths, spec: TaskSpec) -> TaskResult | None:
    path = paths.result_file(spec.provenance.slug)
    return TaskResult.model_validate_json(path.read_text()) if path.is_file() else None


def audit(config: RunConfig) -> Iterator[tuple[TaskSpec, AuditReport, Path]]:
    """Audit each selected task's agent image: (spec, report, where the report went)."""
    sel = open_selection(config.selection)
    specs = render_selection(sel, config.out)
    client = connect()
    paths = output_paths(config.out, sel.dataset.name)
    for spec in specs:
        yield spec, audit_task(client, spec, paths), audit_path(paths, spec.provenance.slug)


def build_options(
    config: RunConfig, mirror_dirs: tuple[str, ...], run: RunContext | None = None
) -> BuildOptions:
    """The build stage's options from a run's configuration (every command that builds), in
    `run` (a run of its own when not told).
    """
    return BuildOptions(
        timeout_sec=config.build.timeout,
        ca_bundle=config.build.ca_bundle,
        pull=config.build.pull,
        mirror_dirs=mirror_dirs,
        run=run or RunContext(),
    )


def grade_candidate(config: RunConfig) -> dict[str, Any]:
    """Grade `config.verify.patch` on its one task (built first): the run's reward, subscores,
    status, reason and log folder. The one `verify --patch` path.
    """
    patch = config.verify.patch
    assert patch is not None
    sel = open_selection(config.selection)
    rendered: dict[str, Rendered] = {}
    specs = render_selection(sel, config.out, rendered=rendered)
    if len(specs) != 1:
        raise InputError("--patch grades exactly one TASK")
    spec = specs[0]
    paths = output_paths(config.out, sel.dataset.name)
    context = RunContext()
    with judge_endpoint(config.verify.judge, [spec]) as judge_env, closing(context):
        missing = missing_judge_env(judge_env) if spec.grading.browser_judged else []
        if missing:  # before anything is built: the run could not be graded
            raise InputError(
                f"{spec.task_id}: graded by a browser judge whose model is not set: set "
                f"{' and '.join(missing)} (docs/sweeper.md), or pass --judge replay for a "
                "task with recorded turns"
            )
        client = connect()
        # The images `package` verified for this very spec (same tags, same ids, bases
        # unchanged): graded on them, nothing built. Otherwise built with the task's own build
        # options (--ca-bundle, --build-timeout, --pull), as `package` builds them.
        done = rendered.get(spec.provenance.slug)
        verified = cached_result(paths, spec, oracle_runs=1, client=client, rendered=done)
        if verified is not None:
            images = verified.images
        else:
            opts = build_options(config, sel.mirror_dirs, context)
            tags = done.tags if done is not None else None
            images = build_task(client, spec, paths, sel.merged_repo_sources, opts, tags).images
        run = grade_patch(
            client, spec, paths, images, patch.read_bytes(), config=config.verify,
            judge_env=judge_env, run=context,
        )  # fmt: skip
    return {
        "task": spec.task_id,
        "reward": run.reward,
        "subscores": run.subscores,
        "status": run.grade_status,
        "reason": run.reason,
        "suspicious": run.suspicious or [],
        "log_dir": run.log_dir,
    }


def saved_results(
    out: Path, dataset: str | None, split: str
) -> tuple[OutputPaths, list[TaskResult]]:
    """The output paths of a dataset and its saved results."""
    paths = output_paths(out, open_dataset(dataset, split).name)
    return paths, read_results(paths)


def write_report(paths: OutputPaths) -> Path:
    """report.md and report.html of a dataset's saved results."""
    return store.write_report(paths)


def release(
    out: Path, dataset: str | None, split: str, ids: Sequence[str], config: PublishConfig
) -> PublishReport:
    """Publish the saved results of `ids` (all when empty): with the local executor from this
    machine's engine, with Ray from the registry the jobs pushed to (and the engine if any).
    """
    where = Registry.parse(config.registry)
    paths, results = saved_results(out, dataset, split)
    chosen = select(results, ids, paths.results_dir)
    local = executor_entry(config.executor).local_engine
    client = connect() if local else build.local_engine_or_none()
    return publish(
        client, paths, chosen, registry=where, include_unverified=config.include_unverified,
        dataset_repo=config.dataset_repo, branch=config.branch, name=config.name,
        version=config.version,
    )  # fmt: skip


def release_diff(old: Path, new: Path) -> list[evidence.Change]:
    """The tasks whose release evidence differs between two releases (folders or manifests)."""
    return evidence.diff(evidence.load(old), evidence.load(new))


def clean_engine(
    config: CleanConfig, log: Callable[[str], None]
) -> tuple[CleanReport, dict[str, int]]:
    """Remove this tool's containers, images and build cache (and with `caches` the machine's
    derived caches); the report and the disk use left (before it, with `dry_run`).
    """
    keep_newest, task, dry_run = config.keep_newest, config.task, config.dry_run

    client = connect()
    before = disk_use(client)
    report = clean(client, keep_newest=keep_newest, task_glob=task, dry_run=dry_run, log=log)
    if config.caches:
        freed = clean_caches(cache_root(), dry_run=dry_run, log=log)
        log(f"machine caches: {human_bytes(freed)} {'to free' if dry_run else 'freed'}")
    return report, before if dry_run else disk_use(client)
