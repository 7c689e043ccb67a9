"""The command line's options, each declared once, in groups: frozen dataclasses whose fields
carry their typer option (`opt`). `with_options` splices a command's groups into its signature,
as typer reads it, and calls the command with one `RunConfig` (over `--config FILE`) or with one
object per group.

A field named as a `RunConfig` field takes that field's default, so each default is written
once, in `packager.config`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from pydantic import BaseModel

from packager.adapters import History, Prebuilt, Prompt, PythonFallback
from packager.config import ExecutorConfig, RunConfig
from packager.registry import ENGINES

_REQUIRED = inspect.Parameter.empty
_CONFIG = object()
"""An option's default is its `RunConfig` field's (of the same name)."""


def opt(*names: str, argument: bool = False, default: Any = _CONFIG, **kw: Any) -> Any:
    """A group field: its typer option (or argument) and its default (`_REQUIRED`: none)."""
    info = typer.Argument(**kw) if argument else typer.Option(*names, **kw)
    return dataclasses.field(metadata={"typer": info, "default": default})


@dataclasses.dataclass(frozen=True)
class OutFlag:
    out: Path = opt("--out", "-o", help="Output folder.")


@dataclasses.dataclass(frozen=True)
class DatasetFlags:
    dataset: str | None = opt(
        "--dataset",
        "-d",
        help="Rows to read: 'samples' (default), a .jsonl/.json/.parquet file, a downloaded "
        "dataset folder, or a hub id owner/name.",
    )
    split: str = opt("--split", help="Dataset split to read.")


@dataclasses.dataclass(frozen=True)
class TaskPick:
    tasks: list[str] | None = opt(argument=True, help="Instance ids to work on.")
    all_tasks: bool = opt("--all", help="Work on every row of the dataset.")


@dataclasses.dataclass(frozen=True)
class ListFlags(DatasetFlags):
    schema_name: str | None = opt(
        "--schema", help="Skip schema detection: swebench, swe-rebench, ec-swe, pdl, sweeper."
    )
    recipes: Path | None = opt(
        "--recipes",
        help="YAML/JSON file of environments for rows that carry none (SWE-bench) or web-app "
        "start commands (SWEeper): keys instance_id/case_id/slug, owner/name@version or "
        "owner/name (most specific wins); values use SWE-rebench install_config keys.",
    )
    base_image: list[str] | None = opt(
        "--base-image",
        help="VERSION=IMAGE: the base image for recipes asking for that Python version (default: "
        "the official python:VERSION-slim where the engine has or can pull it, else Debian's "
        "python3: 3.9 bullseye, 3.11 bookworm, 3.13 trixie). Repeatable.",
    )


@dataclasses.dataclass(frozen=True)
class RowOptions(OutFlag, ListFlags, TaskPick):
    """The rows to work on and how they become tasks (every row-reading command)."""

    repo_source: list[str] | None = opt(
        "--repo-source",
        help="OWNER/NAME=LOCATION or URL=LOCATION: read that repository from a local bare repo, "
        "working copy or bundle instead of GitHub; or DIR, a folder of mirrors "
        "(<dir>/<owner>/<name>.git, <dir>/<owner>+<name>, <dir>/<owner>__<name>.bundle, ...). "
        "Repeatable.",
    )
    prebuilt: Prebuilt = opt(
        "--prebuilt",
        help="Published harness images: auto (a row's docker_image when the engine has it, else "
        "its recipe), always (SWE-bench rows by the harness naming too), never.",
    )
    prompt: Prompt = opt(
        "--prompt", help="SWEeper: the agent's instruction, scoped (task_scoped) or specified."
    )
    grader_entry: str | None = opt(
        "--grader-entry",
        help="EC-SWE: the scoring script's path among grader_files (default: the single "
        "grader|grading|protected/{grade,grader,score,run_grader}.{py,sh}).",
    )
    history: History = opt(
        "--history",
        help="Repository history in the agent image: full (up to base_commit) or base-only (one "
        "commit holding the base tree; for mirrors that lack history objects).",
    )
    id_filter: list[str] | None = opt(
        "--filter",
        help="Only rows whose id matches this glob (repeatable; any match counts), e.g. "
        "'django__*'.",
    )
    repo_filter: list[str] | None = opt(
        "--repo", help="Only rows of this repository, owner/name or a glob (repeatable)."
    )
    language: list[str] | None = opt(
        "--language", help="Only rows in this language, e.g. python (repeatable)."
    )
    python_fallback: PythonFallback = opt(
        "--python-fallback",
        help="A Python version no image serves (no --base-image, no official image, not Debian's "
        "3.9/3.11/3.13): nearest (use the nearest served version at or above it, recorded as "
        "python_used) or never (refuse the row, exit 2).",
    )


@dataclasses.dataclass(frozen=True)
class WorkersFlags:
    workers: int = opt("--workers", "-j", min=1, help="Tasks worked on at once.")


@dataclasses.dataclass(frozen=True)
class BuildFlags:
    ca_bundle: Path | None = opt(
        "--ca-bundle",
        exists=True,
        dir_okay=False,
        help="Extra CA bundle trusted inside builds (TLS-intercepting proxies).",
    )
    timeout: float = opt("--build-timeout", help="Seconds per image build.")
    pull: bool = opt(
        "--pull/--no-pull",
        help="Let builds pull missing base images from a registry (default: fail fast).",
    )


@dataclasses.dataclass(frozen=True)
class VerifyFlags:
    oracle_runs: int = opt("--oracle-runs", min=1, help="Oracle runs per task.")
    engine: str = opt(
        "--engine",
        metavar="|".join(ENGINES),
        help="Verification engine: local (Docker SDK, seconds per run) or harbor (the real "
        "`harbor run` in the pinned .harbor environment; `make harbor`).",
    )
    harbor_env: str | None = opt(
        "--harbor-env",
        metavar="NAME",
        help="With --engine harbor: Harbor's environment type for the trials (`harbor run "
        "--env`), default docker; e.g. daytona, modal or e2b for Harbor's cloud sandboxes "
        "(docs/harbor.md).",
    )
    judge: str = opt(
        "--judge",
        help="Where a browser judge's model is (SWEeper tasks): env = the endpoint named by "
        "PACKAGER_JUDGE_BASE_URL, PACKAGER_JUDGE_MODEL and PACKAGER_JUDGE_API_KEY (unset: the "
        "task stops at needs_judge); replay = a local server replaying the sample's recorded "
        "model turns (packager/samples/replays/<id>.yaml), started and stopped by this command.",
    )


@dataclasses.dataclass(frozen=True)
class RerunFlags:
    force: bool = opt(
        "--force", help="Verify again tasks already verified for the same images (no resume)."
    )
    memory_mb: int | None = opt(
        "--memory-mb",
        min=16,
        help="Memory limit of each agent and grader container, in MiB (no swap beyond it); a run "
        "killed for memory is an infra_error.",
    )


@dataclasses.dataclass(frozen=True)
class PatchFlag:
    patch: Path | None = opt(
        "--patch",
        exists=True,
        dir_okay=False,
        help="Grade this candidate patch instead; prints one JSON object.",
    )


@dataclasses.dataclass(frozen=True)
class ExecutorFlags:
    name: str = opt(
        "--executor",
        metavar="local|ray",
        help="Where each task's build, audit and verification run: local (this machine's Docker "
        "engine, -j at once) or ray (one job per task on a Ray cluster, each on its node's Docker "
        "engine; needs packager\\[ray]; docs/scale.md).",
    )
    ray_address: str | None = opt(
        "--ray-address",
        metavar="HOST:PORT",
        help="With --executor ray: the cluster's head, as `ray start --head` prints it (default: "
        "RAY_ADDRESS, else the cluster this machine belongs to).",
    )
    workers_per_node: int = opt(
        "--workers-per-node",
        min=1,
        help="With --executor ray: at most this many jobs at once on each node (each asks Ray for "
        "that share of the node's CPUs, so Ray itself holds the cap).",
    )
    registry: str | None = opt(
        "--registry",
        metavar="HOST[:PORT]/NAMESPACE",
        help="With --executor ray: each job pushes its task's images there, and nodes pull from "
        "it the base images their engine lacks (the driver pushes those first).",
    )
    shared_repos: bool = opt(
        "--shared-repos",
        help="With --executor ray: the repo sources (--repo-source paths and folders, the "
        "dataset's bundles) are at the same paths on every node (a shared filesystem), so they "
        "are not shipped through Ray's object store.",
    )


@dataclasses.dataclass(frozen=True)
class QualityOn:
    enabled: bool = opt(
        "--quality",
        help="Also check each verified task's quality (docs/quality.md): gold hunks the tests do "
        "not need, and instruction leaks. Flags only, unless --strict-quality.",
    )


@dataclasses.dataclass(frozen=True)
class QualityFlags:
    max_ablations: int = opt(
        "--max-ablations",
        min=1,
        help="Quality: at most this many ablated variants of the gold patch per task (hunks are "
        "grouped per file beyond it, every file covered).",
    )
    strict: bool = opt(
        "--strict-quality",
        help="Exit 1 when a task is flagged by the quality checks (else they only flag).",
    )


@dataclasses.dataclass(frozen=True)
class PublishFlags:
    registry: str = opt(
        "--registry",
        default=_REQUIRED,
        help="Where the images go: HOST[:PORT]/NAMESPACE (a registry on loopback speaks plain "
        "HTTP, as Docker allows there).",
    )
    dataset_repo: str | None = opt(
        "--dataset-repo",
        default=None,
        help="A git repository (path or URL) to commit the release into, in the layout `harbor "
        "run -d NAME@VERSION --registry-path <clone>/registry.json` resolves; a path that does "
        "not exist becomes a new bare repository.",
    )
    branch: str | None = opt(
        "--branch",
        default=None,
        help="The dataset repository's branch to commit the release on (default: the branch its "
        "HEAD names, so a plain clone checks the release out).",
    )
    include_unverified: bool = opt(
        "--include-unverified", default=False, help="Also publish tasks that are not verified."
    )
    name: str | None = opt("--name", default=None, help="Dataset name (default: the dataset's).")
    version: str = opt("--version", default="1.0", help="Dataset version.")
    executor: str = opt(
        "--executor",
        default=ExecutorConfig.model_fields["name"].default,
        metavar="local|ray",
        help="ray: the tasks were packaged with --executor ray and the same --registry, so their "
        "images are already there (pushed by their jobs); no local engine is needed.",
    )


@dataclasses.dataclass(frozen=True)
class CleanFlags:
    keep_newest: int = opt(
        "--keep-newest",
        default=0,
        min=0,
        help="Keep the N newest images of each task and role (0: remove them all).",
    )
    task: str | None = opt(
        "--task",
        default=None,
        help="Only images and containers of tasks matching this glob (the label packager.task, "
        "e.g. 'samples/*').",
    )
    dry_run: bool = opt(
        "--dry-run", default=False, help="Say what would be removed; remove nothing."
    )


ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        exists=True,
        dir_okay=False,
        help="YAML file of this run's options (sections selection, build, verify, executor, "
        "quality; keys as the options' names); options given here override it.",
    ),
]
SECTIONS = {name: info.annotation for name, info in RunConfig.model_fields.items()}
"""Each `RunConfig` section's model, by name (`out` is a top-level field)."""


def _where(name: str) -> tuple[str | None, type[BaseModel]]:
    """The `RunConfig` section (None: top level) and model of the field `name`."""
    if name in RunConfig.model_fields:
        return None, RunConfig
    for section, model in SECTIONS.items():
        if isinstance(model, type) and issubclass(model, BaseModel) and name in model.model_fields:
            return section, model
    raise LookupError(f"no RunConfig field {name!r}")


def _default(field: dataclasses.Field[Any]) -> Any:
    """A field's default as typer shows it: its `RunConfig` field's (an empty tuple as None)."""
    if field.metadata["default"] is not _CONFIG:
        return field.metadata["default"]
    _, model = _where(field.name)
    value = model.model_fields[field.name].default
    return None if value == () else value


def _flags(ctx: typer.Context, groups: tuple[type[Any], ...], values: dict[str, Any]) -> Any:
    """The options given, by `RunConfig` section: with `--config FILE` those given on the
    command line only; else all (their defaults are the config's own). None is never given.
    """
    from_file = values.get("config") is not None
    flags: dict[str, Any] = {}
    for group in groups:
        for f in dataclasses.fields(group):
            source = ctx.get_parameter_source(f.name)
            value = values[f.name]
            if value is None or (from_file and (source is None or source.name == "DEFAULT")):
                continue
            value = tuple(value) if isinstance(value, list) else value
            section = _where(f.name)[0]
            (flags if section is None else flags.setdefault(section, {}))[f.name] = value
    return flags


def with_options(
    *groups: type[Any], config: bool = True
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the options of `groups`; it is called with one `RunConfig` (and takes
    `--config FILE`), or with `config=False` with one object per group.
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        params = [
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=_default(f),
                annotation=Annotated[get_type_hints(group)[f.name], f.metadata["typer"]],
            )
            for group in groups
            for f in dataclasses.fields(group)
        ]
        if config:
            params.append(inspect.Parameter("config", _KW, default=None, annotation=ConfigOpt))
        params.append(inspect.Parameter("ctx", _KW, annotation=typer.Context))

        @functools.wraps(command)
        def run(ctx: typer.Context, **values: Any) -> None:
            if config:
                command(RunConfig.load(values["config"], _flags(ctx, groups, values)))
                return
            fields = [[f.name for f in dataclasses.fields(g)] for g in groups]
            command(*(g(**{n: values[n] for n in f}) for g, f in zip(groups, fields, strict=True)))

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


_KW = inspect.Parameter.KEYWORD_ONLY
