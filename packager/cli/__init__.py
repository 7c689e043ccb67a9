"""Command-line interface: the only module that prints or picks exit codes.

Exit codes: 0 success (every task verified, for verify/package); 1 some task did not verify
or a run failed; 2 bad input (dataset, row, task id, option); 3 no Docker engine reachable.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from packager.errors import InputError, PackagerError
from packager.registry import ENGINES

if TYPE_CHECKING:
    from rich.console import Console

    from packager.models.spec import TaskResult, TaskSpec
    from packager.run.select import Selection

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=(
        "Turn benchmark dataset rows into verified Harbor tasks and HUD environments.\n\n"
        "Without --dataset the embedded sample dataset is used. Typical use: "
        "`packager package samples__textkit-1` renders, builds and verifies one task."
    ),
    pretty_exceptions_enable=False,
)

DatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        "-d",
        help="Rows to read: 'samples' (default), a .jsonl/.json/.parquet file, a downloaded "
        "dataset folder, or a hub id owner/name.",
    ),
]
SplitOpt = Annotated[str, typer.Option("--split", help="Dataset split to read.")]
SchemaOpt = Annotated[
    str | None,
    typer.Option(
        "--schema", help="Skip schema detection: swebench, swe-rebench, ec-swe, pdl, sweeper."
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Output folder.")]
RepoSourceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--repo-source",
        help="OWNER/NAME=LOCATION or URL=LOCATION: read that repository from a local bare repo, "
        "working copy or bundle instead of GitHub; or DIR, a folder of mirrors "
        "(<dir>/<owner>/<name>.git, <dir>/<owner>+<name>, <dir>/<owner>__<name>.bundle, ...). "
        "Repeatable.",
    ),
]
RecipesOpt = Annotated[
    Path | None,
    typer.Option(
        "--recipes",
        help="YAML/JSON file of environments for rows that carry none (SWE-bench) or web-app "
        "start commands (SWEeper): keys instance_id/case_id/slug, owner/name@version or "
        "owner/name (most specific wins); values use SWE-rebench install_config keys.",
    ),
]
BaseImageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--base-image",
        help="VERSION=IMAGE: the base image for recipes asking for that Python version "
        "(default: the official python:VERSION-slim where the engine has or can pull it, "
        "else Debian's python3: 3.9 bullseye, 3.11 bookworm, 3.13 trixie). Repeatable.",
    ),
]
PrebuiltOpt = Annotated[
    str,
    typer.Option(
        "--prebuilt",
        help="Published harness images: auto (a row's docker_image when the engine has it, "
        "else its recipe), always (SWE-bench rows by the harness naming too), never.",
    ),
]
PromptOpt = Annotated[
    str,
    typer.Option(
        "--prompt", help="SWEeper: the agent's instruction, scoped (task_scoped) or specified."
    ),
]
GraderEntryOpt = Annotated[
    str | None,
    typer.Option(
        "--grader-entry",
        help="EC-SWE: the scoring script's path among grader_files (default: the single "
        "grader|grading|protected/{grade,grader,score,run_grader}.{py,sh}).",
    ),
]
HistoryOpt = Annotated[
    str,
    typer.Option(
        "--history",
        help="Repository history in the agent image: full (up to base_commit) or base-only "
        "(one commit holding the base tree; for mirrors that lack history objects).",
    ),
]
FilterOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        help="Only rows whose id matches this glob (repeatable; any match counts), e.g. "
        "'django__*'.",
    ),
]
RepoFilterOpt = Annotated[
    list[str] | None,
    typer.Option("--repo", help="Only rows of this repository, owner/name or a glob (repeatable)."),
]
LanguageOpt = Annotated[
    list[str] | None,
    typer.Option("--language", help="Only rows in this language, e.g. python (repeatable)."),
]
PythonFallbackOpt = Annotated[
    str,
    typer.Option(
        "--python-fallback",
        help="A Python version no image serves (no --base-image, no official image, not "
        "Debian's 3.9/3.11/3.13): nearest (use the nearest served version at or above it, "
        "recorded as python_used) or never (refuse the row, exit 2).",
    ),
]
TasksArg = Annotated[list[str] | None, typer.Argument(help="Instance ids to work on.")]
AllOpt = Annotated[bool, typer.Option("--all", help="Work on every row of the dataset.")]


def _fail(exc: PackagerError) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(exc.exit_code)


def _choice(value: str, name: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise typer.BadParameter(f"{name} {value!r}: expected one of {', '.join(allowed)}")
    return value


ROW_ARGS = (
    "tasks",
    "all_tasks",
    "dataset",
    "split",
    "schema",
    "repo_source",
    "recipes",
    "base_image",
    "prebuilt",
    "prompt",
    "grader_entry",
    "history",
    "id_filter",
    "repo_filter",
    "language",
    "python_fallback",
)
"""The options every row-reading command takes, passed on to `_selection` by name."""


def _row_args(values: dict[str, Any]) -> dict[str, Any]:
    """A command's row options out of its arguments (its `locals()`)."""
    return {name: values[name] for name in ROW_ARGS}


def _selection(
    tasks: list[str] | None,
    all_tasks: bool,
    dataset: str | None,
    split: str,
    schema: str | None,
    repo_source: list[str] | None,
    *,
    recipes: Path | None = None,
    base_image: list[str] | None = None,
    prebuilt: str = "auto",
    prompt: str = "scoped",
    grader_entry: str | None = None,
    history: str = "full",
    id_filter: list[str] | None = None,
    repo_filter: list[str] | None = None,
    language: list[str] | None = None,
    python_fallback: str = "nearest",
) -> Selection:
    from packager.datasets.recipes import Recipes, parse_base_image_options, read_recipes
    from packager.datasets.sources import open_dataset
    from packager.repos import parse_repo_sources
    from packager.run.select import Selection

    if not tasks and not all_tasks:
        raise typer.BadParameter("name at least one TASK or pass --all")
    if tasks and all_tasks:
        raise typer.BadParameter("give TASK ids or --all, not both")
    sources = parse_repo_sources(repo_source or [])
    return Selection(
        dataset=open_dataset(dataset, split),
        task_ids=tuple(tasks or ()),
        all_tasks=all_tasks,
        schema=schema,
        repo_sources=dict(sources.explicit),
        mirror_dirs=tuple(sources.mirror_dirs),
        recipes=read_recipes(recipes) if recipes is not None else Recipes(),
        base_images=parse_base_image_options(base_image or []),
        prebuilt=_choice(prebuilt, "--prebuilt", ("auto", "always", "never")),  # type: ignore[arg-type]
        prompt=_choice(prompt, "--prompt", ("scoped", "specified")),  # type: ignore[arg-type]
        grader_entry=grader_entry,
        history=_choice(history, "--history", ("full", "base-only")),  # type: ignore[arg-type]
        id_globs=tuple(id_filter or ()),
        repo_globs=tuple(repo_filter or ()),
        languages=tuple(language or ()),
        python_fallback=_choice(python_fallback, "--python-fallback", ("nearest", "never")),  # type: ignore[arg-type]
    )


@app.command("list")
def list_command(
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
) -> None:
    """List the rows of a dataset: instance id, schema, language, and where the row's
    environment comes from (a recipe, its install_config, the SWE-bench harness's spec, a
    published image) with the Python it asks for and the one it gets.
    """
    from packager.adapters import Context, detect_schema, row_id, to_spec
    from packager.datasets.recipes import parse_base_image_options, read_recipes
    from packager.datasets.sources import iter_rows, open_dataset

    try:
        ds = open_dataset(dataset, split)
        extra = read_recipes(recipes) if recipes is not None else None
        ctx = Context(
            dataset=ds.name,
            split=split,
            recipes=ds.recipes.merged(extra) if extra is not None else ds.recipes,
            base_images=parse_base_image_options(base_image or []),
        )
        for row in iter_rows(ds):
            name = schema or detect_schema(row)
            try:
                spec = to_spec(row, ctx, name)
            except PackagerError as exc:
                # Listing shows rows as they are; `render` names what is wrong with a bad one.
                language = str(row.get("language") or "-")
                problem = str(getattr(exc, "problem", exc)).split(";")[0]
                typer.echo(f"{row_id(row)}\t{name}\t{language}\tnot packageable: {problem}")
                continue
            typer.echo(
                f"{row_id(row)}\t{name}\t{spec.provenance.language}\t{_environment_line(spec)}"
            )
    except PackagerError as exc:
        _fail(exc)


def _environment_line(spec: TaskSpec) -> str:
    """Where a spec's environment comes from, and its Python (`3.6 -> 3.9` when substituted)."""
    meta = spec.provenance.metadata
    source = str(meta.get("environment_source") or "-")
    asked, used = meta.get("python_requested"), meta.get("python_used")
    if asked is None:
        return source
    python = f"python {asked}" if asked == used else f"python {asked} -> {used}"
    return f"{source}; {python}"


@app.command("render")
def render_command(
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    out: OutOpt = Path("build"),
    repo_source: RepoSourceOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
    prebuilt: PrebuiltOpt = "auto",
    prompt: PromptOpt = "scoped",
    grader_entry: GraderEntryOpt = None,
    history: HistoryOpt = "full",
    id_filter: FilterOpt = None,
    repo_filter: RepoFilterOpt = None,
    language: LanguageOpt = None,
    python_fallback: PythonFallbackOpt = "nearest",
) -> None:
    """Write Harbor task folders, HUD environment sources and oracle/nop manifests.

    Every selected row is validated before anything is written; a bad row exits 2 and
    leaves earlier output untouched.
    """
    from packager.run.materialize import render_selection

    def rendered(task_id: str, task_dir: Path) -> None:
        typer.echo(f"rendered {task_id} -> {task_dir}")

    try:
        sel = _selection(**_row_args(locals()))
        # Each task is echoed as it is placed; no spec is kept (flat memory over any row count).
        render_selection(sel, out, rendered, keep_specs=False)
    except PackagerError as exc:
        _fail(exc)


WorkersOpt = Annotated[int, typer.Option("--workers", "-j", min=1, help="Tasks worked on at once.")]
CaOpt = Annotated[
    Path | None,
    typer.Option(
        "--ca-bundle",
        exists=True,
        dir_okay=False,
        help="Extra CA bundle trusted inside builds (TLS-intercepting proxies).",
    ),
]
BuildTimeoutOpt = Annotated[float, typer.Option("--build-timeout", help="Seconds per image build.")]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="|".join(ENGINES),
        help="Verification engine: local (Docker SDK, seconds per run) or harbor (the real "
        "`harbor run` in the pinned .harbor environment; `make harbor`).",
    ),
]
HarborEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--harbor-env",
        metavar="NAME",
        help="With --engine harbor: Harbor's environment type for the trials (`harbor run "
        "--env`), default docker; e.g. daytona, modal or e2b for Harbor's cloud sandboxes "
        "(docs/harbor.md).",
    ),
]


ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        metavar="local|ray",
        help="Where each task's build, audit and verification run: local (this machine's "
        "Docker engine, -j at once) or ray (one job per task on a Ray cluster, each on its "
        "node's Docker engine; needs packager\\[ray]; docs/scale.md).",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        metavar="HOST:PORT",
        help="With --executor ray: the cluster's head, as `ray start --head` prints it "
        "(default: RAY_ADDRESS, else the cluster this machine belongs to).",
    ),
]
WorkersPerNodeOpt = Annotated[
    int,
    typer.Option(
        "--workers-per-node",
        min=1,
        help="With --executor ray: at most this many jobs at once on each node (each asks "
        "Ray for that share of the node's CPUs, so Ray itself holds the cap).",
    ),
]
JobRegistryOpt = Annotated[
    str | None,
    typer.Option(
        "--registry",
        metavar="HOST[:PORT]/NAMESPACE",
        help="With --executor ray: each job pushes its task's images there, and nodes pull "
        "from it the base images their engine lacks (the driver pushes those first).",
    ),
]
SharedReposOpt = Annotated[
    bool,
    typer.Option(
        "--shared-repos",
        help="With --executor ray: the repo sources (--repo-source paths and folders, the "
        "dataset's bundles) are at the same paths on every node (a shared filesystem), so "
        "they are not shipped through Ray's object store.",
    ),
]


def _engine_env(engine: str, harbor_env: str | None) -> str:
    """The environment type `engine` runs trials in (--harbor-env, docker by default); an
    unknown engine or a type it cannot use is a bad parameter.
    """
    from packager.engines import DEFAULT_ENVIRONMENT, get_engine

    if harbor_env is not None and engine != "harbor":
        raise typer.BadParameter(
            f"--harbor-env {harbor_env} needs --engine harbor (the {engine} engine runs on the "
            "local Docker engine)"
        )
    env = harbor_env if harbor_env is not None else DEFAULT_ENVIRONMENT
    try:
        get_engine(engine, environment=env)
    except PackagerError as exc:
        raise typer.BadParameter(str(exc)) from None
    return env


OracleRunsOpt = Annotated[int, typer.Option("--oracle-runs", min=1, help="Oracle runs per task.")]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="Verify again tasks already verified for the same images (no resume)."
    ),
]
PullOpt = Annotated[
    bool,
    typer.Option(
        "--pull/--no-pull",
        help="Let builds pull missing base images from a registry (default: fail fast).",
    ),
]
JudgeOpt = Annotated[
    str,
    typer.Option(
        "--judge",
        help="Where a browser judge's model is (SWEeper tasks): env = the endpoint named by "
        "PACKAGER_JUDGE_BASE_URL, PACKAGER_JUDGE_MODEL and PACKAGER_JUDGE_API_KEY (unset: the "
        "task stops at needs_judge); replay = a local server replaying the sample's recorded "
        "model turns (packager/samples/replays/<id>.yaml), started and stopped by this command.",
    ),
]
MemoryOpt = Annotated[
    int | None,
    typer.Option(
        "--memory-mb",
        min=16,
        help="Memory limit of each agent and grader container, in MiB (no swap beyond it); "
        "a run killed for memory is an infra_error.",
    ),
]


MaxAblationsOpt = Annotated[
    int,
    typer.Option(
        "--max-ablations",
        min=1,
        help="Quality: at most this many ablated variants of the gold patch per task (hunks "
        "are grouped per file beyond it, every file covered).",
    ),
]
StrictQualityOpt = Annotated[
    bool,
    typer.Option(
        "--strict-quality",
        help="Exit 1 when a task is flagged by the quality checks (else they only flag).",
    ),
]


def _quality_one(
    client: Any,
    spec: TaskSpec,
    paths: Any,
    result: TaskResult,
    sel: Selection,
    *,
    max_ablations: int,
    memory_mb: int | None,
    force: bool,
) -> Any:
    """The quality report of a verified task: the saved one when images, gold patch and
    instruction are unchanged (unless `force`), else a new run; written to results/.
    """
    from packager.checks.quality import cached_quality, run_quality, write_quality

    report = (
        None
        if force
        else cached_quality(paths, spec, result.image_ids, max_ablations=max_ablations)
    )
    if report is None:
        report = run_quality(
            client,
            spec,
            paths,
            result.images,
            result=result,
            max_ablations=max_ablations,
            repo_sources=sel.merged_repo_sources,
            mirror_dirs=sel.mirror_dirs,
            memory_mb=memory_mb,
        )
        write_quality(paths, report)
    return report


def _echo_quality(report: Any) -> None:
    from packager.checks.quality import summary_line

    typer.echo("quality " + summary_line(report))
    for reason in report.reasons:
        typer.echo(f"  - {reason}")


def _run_tasks(
    sel: Selection,
    out: Path,
    *,
    verify: bool,
    workers: int,
    ca_bundle: Path | None,
    build_timeout: float,
    oracle_runs: int,
    force: bool = False,
    pull: bool = False,
    memory_mb: int | None = None,
    engine: str = "local",
    judge: str = "env",
    quality: bool = False,
    max_ablations: int = 12,
    strict_quality: bool = False,
    harbor_env: str = "docker",
    executor: ExecutorChoice | None = None,
) -> int:
    """Render, then build (and verify) every selected task; print the table; return exit code.

    With `verify`, a task whose saved result is already `verified` for the same images and
    engine is reported as cached and not run again (unless `force`): a rerun resumes.
    Ctrl-C stops the workers, removes this run's containers and exits 130; results of finished
    tasks are kept and the interrupted tasks write none. `judge` says where a browser judge's
    model is (docs/sweeper.md).
    """
    from rich.console import Console

    from packager.judge.endpoint import judge_endpoint
    from packager.run.materialize import render_selection

    console = Console(stderr=True)
    specs = render_selection(sel, out)
    with judge_endpoint(judge, specs) as judge_env:
        return _build_and_verify(
            sel,
            out,
            specs,
            console,
            judge_env,
            verify=verify,
            workers=workers,
            ca_bundle=ca_bundle,
            build_timeout=build_timeout,
            oracle_runs=oracle_runs,
            force=force,
            pull=pull,
            memory_mb=memory_mb,
            engine=engine,
            quality=quality,
            max_ablations=max_ablations,
            strict_quality=strict_quality,
            harbor_env=harbor_env,
            executor=executor,
        )


@dataclass(frozen=True)
class ExecutorChoice:
    """Where the jobs run (`--executor` and its options)."""

    name: str = "local"
    ray_address: str | None = None
    workers_per_node: int = 1
    registry: str | None = None
    shared_repos: bool = False


def _executor_choice(
    executor: str,
    ray_address: str | None,
    workers_per_node: int,
    registry: str | None,
    shared_repos: bool,
    *,
    quality: bool = False,
) -> ExecutorChoice:
    """The validated executor options (bad combinations are bad parameters)."""
    from packager.executors import names

    if executor not in names():
        raise typer.BadParameter(f"unknown executor {executor!r} (available: {', '.join(names())})")
    if executor != "ray":
        for given, flag in (
            (ray_address, "--ray-address"),
            (workers_per_node != 1 or None, "--workers-per-node"),
            (shared_repos or None, "--shared-repos"),
        ):
            if given is not None:
                raise typer.BadParameter(f"{flag} needs --executor ray")
    if executor == "ray" and quality:
        raise typer.BadParameter("--quality runs with the local executor only")
    if executor == "ray" and ray_address is not None:
        from packager.executors.ray import head_endpoint

        try:
            head_endpoint(ray_address)
        except PackagerError as exc:
            raise typer.BadParameter(str(exc)) from None
    if registry is not None:
        from packager.release.publish import Registry

        try:
            Registry.parse(registry)
        except PackagerError as exc:
            raise typer.BadParameter(str(exc)) from None
    return ExecutorChoice(executor, ray_address, workers_per_node, registry, shared_repos)


def _build_and_verify(
    sel: Selection,
    out: Path,
    specs: list[TaskSpec],
    console: Console,
    judge_env: dict[str, str],
    *,
    verify: bool,
    workers: int,
    ca_bundle: Path | None,
    build_timeout: float,
    oracle_runs: int,
    force: bool,
    pull: bool,
    memory_mb: int | None,
    engine: str,
    quality: bool = False,
    max_ablations: int = 12,
    strict_quality: bool = False,
    harbor_env: str = "docker",
    executor: ExecutorChoice | None = None,
) -> int:
    """_run_tasks once the tasks are rendered and the judge's endpoint is known."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from packager.executors import Events, Executor, Interrupted, Job, get_executor
    from packager.images import build
    from packager.run.build import BuildOptions
    from packager.run.store import OutputPaths, cached_result, write_report, write_result

    choice = executor or ExecutorChoice()
    paths = OutputPaths(out, sel.dataset.name)
    client: Any = None
    if choice.name == "local":
        client = build.connect()
        swept = build.remove_orphan_containers(client)
        if swept:
            console.print(
                f"removed {swept} container(s) left by an earlier run that did not finish"
            )
    opts = BuildOptions(
        timeout_sec=build_timeout, ca_bundle=ca_bundle, pull=pull, mirror_dirs=sel.mirror_dirs
    )
    results: list[TaskResult] = []
    todo = []
    for spec in specs:
        # With Ray the images live on the nodes' engines: the saved result alone decides.
        cached = (
            None
            if (force or not verify)
            else cached_result(paths, spec, oracle_runs=oracle_runs, engine=engine, client=client)
        )
        if cached is None:
            todo.append(spec)
            continue
        results.append(cached)
    if 0 < len(results) <= 20:
        for cached in results:
            typer.echo(
                f"{cached.instance_id}: {cached.status} (cached: same images already verified, "
                f"{paths.result_file(cached.task)}; --force reruns)"
            )
    if results:
        names = ", ".join(r.instance_id for r in results[:5])
        more = f" and {len(results) - 5} more" if len(results) > 5 else ""
        typer.echo(
            f"cached: {len(results)} of {len(specs)} task(s) already verified with the same "
            f"images and engine ({names}{more}); --force reruns them"
        )
    if todo and results:
        typer.echo(f"to do: {len(todo)} task(s) changed, new or not verified before")
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    flagged: list[str] = []

    def check_quality(spec: TaskSpec, result: TaskResult) -> None:
        if not quality or result.status != "verified":
            return
        report = _quality_one(
            client,
            spec,
            paths,
            result,
            sel,
            max_ablations=max_ablations,
            memory_mb=memory_mb,
            force=force,
        )
        _echo_quality(report)
        if report.flagged:
            flagged.append(result.instance_id)

    if quality:  # tasks verified before: their quality (cached when nothing changed)
        by_id = {s.task_id: s for s in specs}
        for cached in list(results):
            check_quality(by_id[cached.instance_id], cached)

    def record(result: TaskResult) -> None:
        where = write_result(paths, result)
        results.append(result)
        kept = (
            f" [earlier result kept; this one in {where}]"
            if where != paths.result_file(result.task)
            else ""
        )
        typer.echo(
            f"{result.instance_id}: {result.status}"
            + (f" ({result.reason})" if result.reason else "")
            + kept
        )

    runner: Executor
    if choice.name == "local":
        runner = get_executor("local", client=client, workers=workers)
    else:
        from packager.release.publish import Registry

        runner = get_executor(
            choice.name,
            address=choice.ray_address or "auto",
            workers_per_node=choice.workers_per_node,
            registry=Registry.parse(choice.registry) if choice.registry else None,
            shared_repos=choice.shared_repos,
            local_client=_local_engine_or_none(),
            log=lambda text: console.print(text, highlight=False, markup=False),
        )
    job = Job(
        paths=paths,
        repo_sources=sel.merged_repo_sources,
        build_opts=opts,
        verify=verify,
        oracle_runs=oracle_runs,
        memory_mb=memory_mb,
        engine=engine,
        harbor_env=harbor_env,
        judge_env=judge_env,
    )
    try:
        with Progress(*columns, console=console, transient=False) as progress:
            build_bar = progress.add_task("build + audit", total=len(todo))
            run_bar = progress.add_task("verify", total=len(todo)) if verify else None

            def finished(result: TaskResult) -> None:
                if run_bar is not None:
                    progress.advance(run_bar)
                record(result)

            runner.run(
                todo,
                job,
                Events(
                    built=lambda: progress.advance(build_bar),
                    result=finished,
                    ran=(lambda staged, result: check_quality(staged.spec, result))
                    if quality
                    else None,
                ),
            )
    except Interrupted as exc:
        console.print(f"{exc}; finished results are kept")
        raise typer.Exit(130) from None
    from packager.release.clean import disk_use

    try:
        disk: dict[str, int] | None = disk_use(client) if client is not None else None
    except Exception:  # noqa: BLE001 - a figure for the report, never a reason to fail
        disk = None
    report = write_report(paths, disk)
    _print_table(sorted(results, key=lambda r: r.instance_id))
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    ran = len(results) - (len(specs) - len(todo))
    typer.echo(f"summary: {summary} ({len(specs) - len(todo)} cached, {ran} built or run now)")
    typer.echo(f"results: {paths.base / 'results'}  report: {report} (and report.html)")
    good = {"verified"} if verify else {"built", "verified"}
    if flagged:
        typer.echo(
            f"quality: {len(flagged)} task(s) flagged ({', '.join(sorted(flagged))}); "
            + (
                "--strict-quality fails the run"
                if strict_quality
                else "not a failure without --strict-quality"
            )
        )
    if strict_quality and flagged:
        return 1
    return 0 if all(r.status in good for r in results) else 1


def _local_engine_or_none() -> Any:
    """The local engine when one answers (the Ray driver pushes base images from it), else None."""
    from packager.images import build

    try:
        return build.connect(timeout=10)
    except PackagerError:
        return None


def _print_table(results: list[TaskResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    from packager.release.report import HEADERS, table_rows

    table = Table(*HEADERS)
    for row in table_rows(results):
        table.add_row(*row)
    Console(width=200).print(table)


@app.command("build")
def build_command(
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    out: OutOpt = Path("build"),
    repo_source: RepoSourceOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
    prebuilt: PrebuiltOpt = "auto",
    prompt: PromptOpt = "scoped",
    grader_entry: GraderEntryOpt = None,
    history: HistoryOpt = "full",
    id_filter: FilterOpt = None,
    repo_filter: RepoFilterOpt = None,
    language: LanguageOpt = None,
    python_fallback: PythonFallbackOpt = "nearest",
    workers: WorkersOpt = 1,
    ca_bundle: CaOpt = None,
    build_timeout: BuildTimeoutOpt = 1800.0,
    pull: PullOpt = False,
) -> None:
    """Render, then build each task's agent image and grader image (cached by content hash)."""
    try:
        sel = _selection(**_row_args(locals()))
        code = _run_tasks(
            sel,
            out,
            verify=False,
            workers=workers,
            ca_bundle=ca_bundle,
            build_timeout=build_timeout,
            oracle_runs=1,
            pull=pull,
        )
    except PackagerError as exc:
        _fail(exc)
    raise typer.Exit(code)


@app.command("package")
def package_command(
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    out: OutOpt = Path("build"),
    repo_source: RepoSourceOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
    prebuilt: PrebuiltOpt = "auto",
    prompt: PromptOpt = "scoped",
    grader_entry: GraderEntryOpt = None,
    history: HistoryOpt = "full",
    id_filter: FilterOpt = None,
    repo_filter: RepoFilterOpt = None,
    language: LanguageOpt = None,
    python_fallback: PythonFallbackOpt = "nearest",
    workers: WorkersOpt = 1,
    ca_bundle: CaOpt = None,
    build_timeout: BuildTimeoutOpt = 1800.0,
    oracle_runs: OracleRunsOpt = 2,
    force: ForceOpt = False,
    pull: PullOpt = False,
    memory_mb: MemoryOpt = None,
    engine: EngineOpt = "local",
    harbor_env: HarborEnvOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    workers_per_node: WorkersPerNodeOpt = 1,
    registry: JobRegistryOpt = None,
    shared_repos: SharedReposOpt = False,
    judge: JudgeOpt = "env",
    quality: Annotated[
        bool,
        typer.Option(
            "--quality",
            help="Also check each verified task's quality (docs/quality.md): gold hunks the "
            "tests do not need, and instruction leaks. Flags only, unless --strict-quality.",
        ),
    ] = False,
    max_ablations: MaxAblationsOpt = 12,
    strict_quality: StrictQualityOpt = False,
) -> None:
    """Render, build and verify: exit 0 only when every task is verified (oracle 1.0, nop < 1.0).

    Tasks already verified for the same images are reported as cached (resume); --force reruns.
    """
    env = _engine_env(engine, harbor_env)
    runner = _executor_choice(
        executor, ray_address, workers_per_node, registry, shared_repos, quality=quality
    )
    try:
        sel = _selection(**_row_args(locals()))
        code = _run_tasks(
            sel,
            out,
            verify=True,
            workers=workers,
            ca_bundle=ca_bundle,
            build_timeout=build_timeout,
            oracle_runs=oracle_runs,
            force=force,
            pull=pull,
            memory_mb=memory_mb,
            engine=engine,
            judge=judge,
            quality=quality,
            max_ablations=max_ablations,
            strict_quality=strict_quality,
            harbor_env=env,
            executor=runner,
        )
    except PackagerError as exc:
        _fail(exc)
    raise typer.Exit(code)


@app.command("verify")
def verify_command(
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    out: OutOpt = Path("build"),
    repo_source: RepoSourceOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
    prebuilt: PrebuiltOpt = "auto",
    prompt: PromptOpt = "scoped",
    grader_entry: GraderEntryOpt = None,
    history: HistoryOpt = "full",
    id_filter: FilterOpt = None,
    repo_filter: RepoFilterOpt = None,
    language: LanguageOpt = None,
    python_fallback: PythonFallbackOpt = "nearest",
    workers: WorkersOpt = 1,
    engine: EngineOpt = "local",
    harbor_env: HarborEnvOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    workers_per_node: WorkersPerNodeOpt = 1,
    registry: JobRegistryOpt = None,
    shared_repos: SharedReposOpt = False,
    patch: Annotated[
        Path | None,
        typer.Option(
            "--patch",
            exists=True,
            dir_okay=False,
            help="Grade this candidate patch instead; prints one JSON object.",
        ),
    ] = None,
    oracle_runs: OracleRunsOpt = 2,
    force: ForceOpt = False,
    memory_mb: MemoryOpt = None,
    judge: JudgeOpt = "env",
) -> None:
    """Verify tasks (oracle twice, nop once), or grade one candidate patch with --patch."""
    import json

    env = _engine_env(engine, harbor_env)
    runner = _executor_choice(executor, ray_address, workers_per_node, registry, shared_repos)
    if patch is not None and (engine != "local" or runner.name != "local"):
        raise typer.BadParameter("--patch grades with the local engine and executor")
    try:
        sel = _selection(**_row_args(locals()))
        if patch is None:
            code = _run_tasks(
                sel,
                out,
                verify=True,
                workers=workers,
                ca_bundle=None,
                build_timeout=1800.0,
                oracle_runs=oracle_runs,
                force=force,
                memory_mb=memory_mb,
                engine=engine,
                judge=judge,
                harbor_env=env,
                executor=runner,
            )
            raise typer.Exit(code)
        from packager.engines.containers import run_once
        from packager.engines.local import make_run_plan
        from packager.images import build
        from packager.judge.endpoint import judge_endpoint, missing_judge_env
        from packager.run.build import BuildOptions, build_task
        from packager.run.materialize import render_selection
        from packager.run.store import OutputPaths

        specs = render_selection(sel, out)
        if len(specs) != 1:
            raise typer.BadParameter("--patch grades exactly one TASK")
        spec = specs[0]
        paths = OutputPaths(out, sel.dataset.name)
        with judge_endpoint(judge, [spec]) as judge_env:
            missing = missing_judge_env(judge_env) if spec.grading.rule == "judge" else []
            if missing:  # before anything is built: the run could not be graded
                raise InputError(
                    f"{spec.task_id}: graded by a browser judge whose model is not set: set "
                    f"{' and '.join(missing)} (docs/sweeper.md), or pass --judge replay for a "
                    "task with recorded turns"
                )
            client = build.connect()
            built = build_task(
                client,
                spec,
                paths,
                sel.merged_repo_sources,
                BuildOptions(mirror_dirs=sel.mirror_dirs),
            )
            images = built.images
            plan = make_run_plan(spec, paths, images, memory_mb=memory_mb, judge_env=judge_env)
            run = run_once(
                client,
                plan,
                "patch",
                paths.log_dir(spec.provenance.slug) / "patch",
                patch=patch.read_bytes(),
            )
    except PackagerError as exc:
        _fail(exc)
    typer.echo(
        json.dumps(
            {
                "task": spec.task_id,
                "reward": run.reward,
                "subscores": run.subscores,
                "status": run.grade_status,
                "reason": run.reason,
                "log_dir": run.log_dir,
            },
            sort_keys=True,
        )
    )
    raise typer.Exit(0 if run.reward is not None else 1)


@app.command("audit")
def audit_command(
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    out: OutOpt = Path("build"),
    repo_source: RepoSourceOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
    prebuilt: PrebuiltOpt = "auto",
    prompt: PromptOpt = "scoped",
    grader_entry: GraderEntryOpt = None,
    history: HistoryOpt = "full",
    id_filter: FilterOpt = None,
    repo_filter: RepoFilterOpt = None,
    language: LanguageOpt = None,
    python_fallback: PythonFallbackOpt = "nearest",
) -> None:
    """Inspect every layer and git object of built agent images for leaks (exit 1 on a leak).

    Looks for hidden tests, grader files, test- and gold-patch content, commits after the base
    commit, tags, reflogs and remotes. `package` runs this before verifying.
    """
    from packager.checks.audit import audit_path, audit_task
    from packager.images import build
    from packager.run.materialize import render_selection
    from packager.run.store import OutputPaths

    try:
        sel = _selection(**_row_args(locals()))
        specs = render_selection(sel, out)
        client = build.connect()
        paths = OutputPaths(out, sel.dataset.name)
        leaks = 0
        for spec in specs:
            report = audit_task(client, spec, paths)
            where = audit_path(paths, spec.provenance.slug)
            typer.echo(f"{spec.task_id}: {report.status} ({report.stats['seconds']} s) -> {where}")
            for f in report.findings:
                typer.echo(f"  {f.kind} {f.path} {f.object_id or ''} {f.detail}")
            leaks += 0 if report.clean else 1
    except PackagerError as exc:
        _fail(exc)
    raise typer.Exit(1 if leaks else 0)


@app.command("quality")
def quality_command(
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    schema: SchemaOpt = None,
    out: OutOpt = Path("build"),
    repo_source: RepoSourceOpt = None,
    recipes: RecipesOpt = None,
    base_image: BaseImageOpt = None,
    prebuilt: PrebuiltOpt = "auto",
    prompt: PromptOpt = "scoped",
    grader_entry: GraderEntryOpt = None,
    history: HistoryOpt = "full",
    id_filter: FilterOpt = None,
    repo_filter: RepoFilterOpt = None,
    language: LanguageOpt = None,
    python_fallback: PythonFallbackOpt = "nearest",
    max_ablations: MaxAblationsOpt = 12,
    strict_quality: StrictQualityOpt = False,
    force: ForceOpt = False,
    memory_mb: MemoryOpt = None,
) -> None:
    """Check verified tasks beyond gold and nop (docs/quality.md): grade the gold patch with
    each hunk left out (a hunk whose removal still scores 1.0 is not needed by the tests), and
    look for an instruction that quotes the fix or names hidden tests. Results go to
    results/<task>.quality.json and the reports; a flagged task fails only with
    --strict-quality. Unchanged tasks reuse their saved checks (--force runs them again).
    """
    from packager.images import build
    from packager.models.spec import TaskResult
    from packager.run.materialize import render_selection
    from packager.run.store import OutputPaths, write_report

    try:
        sel = _selection(**_row_args(locals()))
        specs = render_selection(sel, out)
        paths = OutputPaths(out, sel.dataset.name)
        client = build.connect()
        unverified: list[str] = []
        flagged: list[str] = []
        for spec in specs:
            path = paths.result_file(spec.provenance.slug)
            result = TaskResult.model_validate_json(path.read_text()) if path.is_file() else None
            if result is None or result.status != "verified":
                status = result.status if result else "not packaged"
                typer.echo(f"{spec.task_id}: skipped ({status}; `packager package` verifies it)")
                unverified.append(spec.task_id)
                continue
            report = _quality_one(
                client,
                spec,
                paths,
                result,
                sel,
                max_ablations=max_ablations,
                memory_mb=memory_mb,
                force=force,
            )
            _echo_quality(report)
            if report.flagged:
                flagged.append(spec.task_id)
        report_file = write_report(paths)
    except PackagerError as exc:
        _fail(exc)
    typer.echo(
        f"quality: {len(specs) - len(unverified)} checked, {len(flagged)} flagged, "
        f"{len(unverified)} not verified; report: {report_file}"
    )
    raise typer.Exit(1 if unverified or (strict_quality and flagged) else 0)


@app.command("publish")
def publish_command(
    registry: Annotated[
        str,
        typer.Option(
            "--registry",
            help="Where the images go: HOST[:PORT]/NAMESPACE (a registry on loopback speaks "
            "plain HTTP, as Docker allows there).",
        ),
    ],
    tasks: TasksArg = None,
    all_tasks: AllOpt = False,
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    out: OutOpt = Path("build"),
    dataset_repo: Annotated[
        str | None,
        typer.Option(
            "--dataset-repo",
            help="A git repository (path or URL) to commit the release into, in the layout "
            "`harbor run -d NAME@VERSION --registry-path <clone>/registry.json` resolves; a path "
            "that does not exist becomes a new bare repository.",
        ),
    ] = None,
    branch: Annotated[
        str | None,
        typer.Option(
            "--branch",
            help="The dataset repository's branch to commit the release on (default: the "
            "branch its HEAD names, so a plain clone checks the release out).",
        ),
    ] = None,
    include_unverified: Annotated[
        bool,
        typer.Option("--include-unverified", help="Also publish tasks that are not verified."),
    ] = False,
    name: Annotated[
        str | None, typer.Option("--name", help="Dataset name (default: the dataset's).")
    ] = None,
    version: Annotated[str, typer.Option("--version", help="Dataset version.")] = "1.0",
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            metavar="local|ray",
            help="ray: the tasks were packaged with --executor ray and the same --registry, so "
            "their images are already there (pushed by their jobs); no local engine is needed.",
        ),
    ] = "local",
) -> None:
    """Push verified tasks' images to a registry, write a release copy of their task folders
    naming the images by digest (with dataset.toml and registry.json), and optionally commit it
    into a dataset repository. Publishing again with no change pushes nothing and commits
    nothing. An image this machine's engine lacks is taken from the registry when it serves
    that tag already (`--executor ray`).
    """
    from packager.datasets.sources import open_dataset
    from packager.images import build
    from packager.release.publish import Registry, publish
    from packager.run.store import OutputPaths, read_results

    if not tasks and not all_tasks:
        raise typer.BadParameter("name TASK ids or pass --all")
    if branch is not None and dataset_repo is None:
        raise typer.BadParameter("--branch names a branch of --dataset-repo: pass both")
    try:
        reg = Registry.parse(registry)
        ds = open_dataset(dataset, split)
        paths = OutputPaths(out, ds.name)
        results = read_results(paths)
        by_id = {r.instance_id: r for r in results} | {r.task: r for r in results}
        if tasks:
            missing = [t for t in tasks if t not in by_id]
            if missing:
                raise PackagerError(
                    f"no results for {', '.join(missing)} under {paths.base / 'results'}: "
                    "run `packager package` first"
                )
            chosen = [by_id[t] for t in tasks]
        else:
            chosen = results
        _executor_choice(executor, None, 1, registry, False)
        client = build.connect() if executor == "local" else _local_engine_or_none()
        report = publish(
            client,
            paths,
            chosen,
            registry=reg,
            include_unverified=include_unverified,
            dataset_repo=dataset_repo,
            branch=branch,
            name=name,
            version=version,
        )
    except PackagerError as exc:
        _fail(exc)
    for task in report.tasks:
        for image in task.images:
            state = "pushed" if image.pushed else "unchanged"
            typer.echo(f"{task.task}: {image.role} {image.reference} ({state})")
    for task_id, why in report.skipped.items():
        typer.echo(f"{task_id}: not published ({why})")
    typer.echo(
        f"published {len(report.tasks)} task(s): {report.pushed} image(s) pushed, "
        f"{report.unchanged} unchanged; release: {report.release_dir}"
    )
    if report.dataset_repo is not None:
        change = ", ".join(c[:12] for c in report.commits) or "no change, no commit"
        typer.echo(f"dataset repository {report.dataset_repo} ({report.branch}): {change}")
    raise typer.Exit(1 if tasks and report.skipped else 0)


@app.command("clean")
def clean_command(
    keep_newest: Annotated[
        int,
        typer.Option(
            "--keep-newest",
            min=0,
            help="Keep the N newest images of each task and role (0: remove them all).",
        ),
    ] = 0,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            help="Only images and containers of tasks matching this glob "
            "(the label packager.task, e.g. 'samples/*').",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
) -> None:
    """Remove this tool's containers, images and build cache from the Docker engine (found by
    the label packager.tool=packager; base images and other images are never touched).
    """
    from packager.images import build
    from packager.release.clean import clean, disk_use, human

    client = build.connect()
    before = disk_use(client)
    report = clean(client, keep_newest=keep_newest, task_glob=task, dry_run=dry_run, log=typer.echo)
    verb = "would remove" if dry_run else "removed"
    typer.echo(
        f"{verb} {report.containers} container(s), {len(report.images)} image tag(s) "
        f"({human(report.reclaimed_bytes)}), {report.build_cache} dangling build layer(s); "
        f"kept {len(report.kept)}"
    )
    after = before if dry_run else disk_use(client)
    typer.echo(
        f"packager images on this engine: {after['images']}, {human(after['size_bytes'])} "
        f"({human(after['unique_bytes'])} not shared)"
    )


@app.command("report")
def report_command(
    dataset: DatasetOpt = None,
    split: SplitOpt = "test",
    out: OutOpt = Path("build"),
) -> None:
    """Summarise the latest results of a dataset (terminal table, report.md and report.html)."""
    from packager.datasets.sources import open_dataset
    from packager.run.store import OutputPaths, read_results, write_report

    try:
        ds = open_dataset(dataset, split)
    except PackagerError as exc:
        _fail(exc)
    paths = OutputPaths(out, ds.name)
    results = read_results(paths)
    if not results:
        typer.echo(f"no results under {paths.base / 'results'}", err=True)
        raise typer.Exit(1)
    _print_table(results)
    typer.echo(f"report: {write_report(paths)}")


def main() -> None:
    """Entry point for the `packager` script."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
