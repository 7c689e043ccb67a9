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
from types import ModuleType
from typing import Annotated, Any, ClassVar, get_type_hints

import typer
from pydantic import BaseModel

from packager import registry as kinds
from packager.config import CleanConfig, PublishConfig, RunConfig


def pipeline() -> ModuleType:
    """`packager.run.driver`, loaded when a command runs: `--help`, a bad flag or a bad config
    file need none of the pipeline (a test keeps `import packager.cli` free of it).
    """
    # heavy: the driver imports every layer of the pipeline, about 0.3 s of imports
    from packager.run import driver

    return driver


def opt(*names: str, argument: bool = False, **kw: Any) -> Any:
    """A group field: its typer option (or argument); default and help are its config field's."""
    info = typer.Argument(**kw) if argument else typer.Option(*names, **kw)
    return dataclasses.field(metadata={"typer": info})


@dataclasses.dataclass(frozen=True)
class OutFlag:
    out: Path = opt("--out", "-o")


@dataclasses.dataclass(frozen=True)
class DatasetFlags:
    dataset: str | None = opt("--dataset", "-d")
    split: str = opt("--split")


@dataclasses.dataclass(frozen=True)
class TaskPick:
    tasks: list[str] | None = opt(argument=True)
    all_tasks: bool = opt("--all")


@dataclasses.dataclass(frozen=True)
class ListFlags(DatasetFlags):
    schema_name: str | None = opt("--schema")
    recipes: Path | None = opt("--recipes")
    base_image: list[str] | None = opt("--base-image")


@dataclasses.dataclass(frozen=True)
class RowOptions(OutFlag, ListFlags, TaskPick):
    """The rows to work on and how they become tasks (every row-reading command)."""

    repo_source: list[str] | None = opt("--repo-source")
    prebuilt: kinds.Prebuilt = opt("--prebuilt")
    prompt: kinds.Prompt = opt("--prompt")
    grader_entry: str | None = opt("--grader-entry")
    history: kinds.History = opt("--history")
    id_filter: list[str] | None = opt("--filter")
    repo_filter: list[str] | None = opt("--repo")
    language: list[str] | None = opt("--language")
    python_fallback: kinds.PythonFallback = opt("--python-fallback")
    toolchain_fallback: kinds.ToolchainFallback = opt("--toolchain-fallback")
    as_of: str = opt("--as-of")
    strict_environment: bool = opt("--strict-environment")
    grader_network: kinds.GraderNetwork = opt("--grader-network")
    labels: str = opt("--labels", metavar="dataset|derived")
    quarantine: bool = opt("--quarantine")


@dataclasses.dataclass(frozen=True)
class WorkersFlags:
    workers: int = opt("--workers", "-j", min=1)


@dataclasses.dataclass(frozen=True)
class BuildFlags:
    ca_bundle: Path | None = opt("--ca-bundle", exists=True, dir_okay=False)
    timeout: float = opt("--build-timeout")
    pull: bool = opt("--pull/--no-pull")


@dataclasses.dataclass(frozen=True)
class VerifyFlags:
    oracle_runs: int = opt("--oracle-runs", min=1)
    nop_runs: int = opt("--nop-runs", min=1)
    runs: str | None = opt("--runs", metavar="G,N")
    perturb: str | None = opt("--perturb", metavar="shuffle,cpus,clock|all|none")
    engine: str = opt("--engine", metavar="|".join(kinds.ENGINES))
    harbor_env: str | None = opt("--harbor-env", metavar="NAME")
    judge: str = opt("--judge")


@dataclasses.dataclass(frozen=True)
class RerunFlags:
    force: bool = opt("--force")
    memory_mb: int | None = opt("--memory-mb", min=16)


@dataclasses.dataclass(frozen=True)
class PatchFlag:
    patch: Path | None = opt("--patch", exists=True, dir_okay=False)


def executor_opt() -> Any:
    """`--executor`, one declaration for the commands that run jobs and for `publish`."""
    return opt("--executor", metavar="|".join(kinds.EXECUTORS))


def registry_opt() -> Any:
    """`--registry`, one declaration for the Ray executor's image registry and `publish`'s."""
    return opt("--registry", metavar="HOST[:PORT]/NAMESPACE")


@dataclasses.dataclass(frozen=True)
class ExecutorFlags:
    name: str = executor_opt()
    ray_address: str | None = opt("--ray-address", metavar="HOST:PORT")
    workers_per_node: int = opt("--workers-per-node", min=1)
    registry: str | None = registry_opt()
    shared_repos: bool = opt("--shared-repos")


BUILD_AND_VERIFY = (RowOptions, WorkersFlags, BuildFlags, VerifyFlags, RerunFlags, ExecutorFlags)
"""The groups of every command that builds and verifies (package, verify)."""


@dataclasses.dataclass(frozen=True)
class QualityOn:
    enabled: bool = opt("--quality")


@dataclasses.dataclass(frozen=True)
class QualityFlags:
    max_ablations: int = opt("--max-ablations", min=1)
    strict: bool = opt("--strict-quality")


@dataclasses.dataclass(frozen=True)
class PublishFlags:
    """`publish`: its options' defaults and help are `PublishConfig`'s."""

    config_model: ClassVar[type[BaseModel]] = PublishConfig
    registry: str = registry_opt()
    dataset_repo: str | None = opt("--dataset-repo")
    branch: str | None = opt("--branch")
    include_unverified: bool = opt("--include-unverified")
    name: str | None = opt("--name")
    version: str = opt("--version")
    executor: str = executor_opt()


@dataclasses.dataclass(frozen=True)
class CleanFlags:
    """`clean`: its options' defaults and help are `CleanConfig`'s."""

    config_model: ClassVar[type[BaseModel]] = CleanConfig
    keep_newest: int = opt("--keep-newest", min=0)
    task: str | None = opt("--task")
    dry_run: bool = opt("--dry-run")
    caches: bool = opt("--caches")


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


def _field(group: type[Any], name: str) -> Any:
    """The config field behind a group's option: of the group's `config_model`, else of the
    `RunConfig` section holding `name`.
    """
    model = getattr(group, "config_model", None) or RunConfig.section_of(name)[1]
    return model.model_fields[name]


def _info(group: type[Any], field: dataclasses.Field[Any]) -> Any:
    """A field's typer option, its help text taken from its config field's description
    (written once there, where a `--config` file's keys are documented too) unless it has one.
    """
    info = field.metadata["typer"]
    if info.help is None:
        info.help = _field(group, field.name).description
    return info


def _default(group: type[Any], field: dataclasses.Field[Any]) -> Any:
    """A field's default as typer shows it: its config field's (an empty tuple as None)."""
    config_field = _field(group, field.name)
    if config_field.is_required():
        return inspect.Parameter.empty
    return None if config_field.default == () else config_field.default


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
            section = RunConfig.section_of(f.name)[0]
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
                default=_default(group, f),
                annotation=Annotated[hints[f.name], _info(group, f)],
            )
            for group in groups
            for hints in [get_type_hints(group)]
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
