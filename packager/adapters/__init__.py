"""Adapters: one per dataset schema, each a pure `to_spec(row, ctx) -> TaskSpec`.

Detection looks at the row's non-null columns; the first schema whose marker columns are all
present wins (most specific first). `--schema` skips detection. Schemas, their adapters and their
marker columns are listed in `packager.registry` (SchemaName, SCHEMAS).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from packager.adapters.declared import added_requirements
from packager.datasets.recipes import Recipes
from packager.datasets.services import services_for, unroutable_for
from packager.datasets.vendored import vendoring_installers
from packager.errors import DatasetError, RowError
from packager.models.spec import Service, TaskSpec
from packager.registry import (
    SCHEMAS,
    GraderNetwork,
    History,
    Prebuilt,
    Prompt,
    PythonFallback,
    SchemaName,
    ToolchainFallback,
    load,
    parse,
)
from packager.stamps import as_stamp


@dataclass(frozen=True)
class Context:
    """What an adapter knows besides the row: the dataset and the user's options."""

    dataset: str
    split: str
    recipes: Recipes = field(default_factory=Recipes)
    base_images: Mapping[str, str] = field(default_factory=dict)
    """Python version -> base image (`--base-image`)."""
    prebuilt: Prebuilt = "auto"
    """Published harness images: `always` use them (SWE-bench rows by the harness naming),
    `never` build from the recipe, `auto` use a row's `docker_image` when the engine has it."""
    has_image: Callable[[str], bool] = field(default=lambda _name: False)
    """Whether the engine has an image locally (the pipeline asks Docker when it answers)."""
    prompt: Prompt = "scoped"
    """SWEeper: `scoped` gives the agent task_scoped, `specified` gives task_specified."""
    grader_entry: str | None = None
    """EC-SWE: the scoring script's path among grader_files (`--grader-entry`)."""
    history: History = "full"
    can_pull: Callable[[str], bool] = field(default=lambda _name: False)
    """Whether the engine can pull an image from a registry (the pipeline asks it once)."""
    python_fallback: PythonFallback = "nearest"
    """`--python-fallback`: use the nearest Python served when the one asked is not
    (`nearest`), or refuse the row (`never`)."""
    toolchain_fallback: ToolchainFallback = "nearest"
    """`--toolchain-fallback`: likewise for a harness spec's Node, Go, Rust, JDK, PHP or Ruby
    version Debian does not ship."""
    as_of: str = "published"
    """`--as-of`: pip resolves a Python environment as of when its recipe was validated, or
    the row's `created_at` when later (`published`), the row's `created_at` (`created`), its
    environment setup commit's date (`setup-commit`), a given date, or now (`none`)."""
    strict_environment: bool = False
    grader_network: GraderNetwork = "none"
    """`--grader-network`: `public` grades with the network (Grading.network)."""
    """`--strict-environment`: a conda package pip cannot install fails the build (else it is
    dropped and recorded)."""

    def python_available(self, image: str) -> bool:
        """Whether an image (an official Python one) can be used: present or pullable."""
        return self.has_image(image) or self.can_pull(image)


ID_COLUMNS = ("instance_id", "case_id")
"""The id column of a row: SWEeper rows have `case_id`, every other card `instance_id`."""


def row_id(row: Mapping[str, Any]) -> str | None:
    """The row's id (instance_id, or SWEeper's case_id), None when it has none."""
    for column in ID_COLUMNS:
        value = row.get(column)
        if isinstance(value, str) and value:
            return value
    return None


def detect_schema(row: Mapping[str, Any]) -> SchemaName:
    """The schema whose marker columns the row has, non-null (a table mixing datasets fills
    absent columns with nulls).
    """
    keys = {key for key, value in row.items() if value is not None}
    for name, entry in SCHEMAS.items():
        if all(m in keys for m in entry.markers):
            return name
    task = row_id(row) or "<no instance_id>"
    raise RowError(
        task,
        "<columns>",
        f"unknown schema: columns {sorted(keys)} match none of "
        f"{', '.join(SCHEMAS)} (pass --schema)",
    )


def get_adapter(schema: str) -> Callable[[Mapping[str, Any], Context], TaskSpec]:
    """The `to_spec` function of a schema."""
    member = parse(SchemaName, schema)
    if member is None:
        raise DatasetError(f"unknown schema {schema!r}; known: {', '.join(SCHEMAS)}")
    adapter: Callable[[Mapping[str, Any], Context], TaskSpec] = load(SCHEMAS[member])
    return adapter


AS_OF_COLUMN = "created_at"
"""The row's date `--as-of created` reads (SWE-bench, SWE-rebench; other cards carry none,
and their environments resolve as of now)."""

AS_OF_COMMIT_COLUMNS = ("environment_setup_commit", "base_commit")
"""The commit whose committer date `--as-of setup-commit` reads: the first of these columns a
row carries (SWE-bench Multilingual has no environment_setup_commit; its base is used)."""


def as_of_commit(row: Mapping[str, Any], rule: str) -> str | None:
    """The commit `--as-of setup-commit` dates (None for other rules or rows without one)."""
    if rule != "setup-commit":
        return None
    for column in AS_OF_COMMIT_COLUMNS:
        value = row.get(column)
        if isinstance(value, str) and value:
            return value
    return None


def resolved_as_of(
    row: Mapping[str, Any], rule: str, task: str, validated: str | None = None
) -> str | None:
    """The cut-off a row's Python environment resolves at (a UTC stamp), None for now.
    `published`: when its recipe was validated (`validated`), or the row's own date when that
    is later; a recipe that names no date resolves as of now.
    """
    if rule in ("none", "setup-commit") or (rule == "published" and validated is None):
        return None
    value = row.get(AS_OF_COLUMN) if rule in ("created", "published") else rule
    if rule in ("created", "published") and not isinstance(value, str | datetime):
        return validated if rule == "published" else None
    try:
        stamp = as_stamp(value.isoformat() if isinstance(value, datetime) else str(value))
    except ValueError as exc:
        field = "--as-of" if rule not in ("created", "published") else AS_OF_COLUMN
        raise RowError(task, field, f"not a date: {value!r}") from exc
    return max(stamp, validated) if rule == "published" and validated else stamp


def _with_services(spec: TaskSpec) -> TaskSpec:
    """A row whose tests call a well-known service that is a package (services.yaml): the
    grader serves a stand-in on loopback and the test command is told where (its env). A row
    whose tests expect an address to answer nothing gets it routed nowhere (`unroutable`).
    """
    env = spec.environment
    version = spec.provenance.metadata.get("version")
    known = version if isinstance(version, str) else None
    services: tuple[Service, ...] = ()
    if env.python and not env.prebuilt and not spec.grading.services:
        services = services_for(spec.repo.name, known)
    unroutable = () if spec.grading.unroutable else unroutable_for(spec.repo.name, known)
    if not services and not unroutable:
        return spec
    update: dict[str, Any] = {"unroutable": unroutable} if unroutable else {}
    meta = dict(spec.provenance.metadata)
    if unroutable:
        meta["unroutable"] = list(unroutable)
    if services:
        told = {k: v for s in services for k, v in s.env.items()}
        update |= {"services": services, "env": {**spec.grading.env, **told}}
        meta["stand_in_services"] = [s.name for s in services]
    grading = spec.grading.model_copy(update=update)
    return spec.model_copy(
        update={
            "grading": grading,
            "provenance": spec.provenance.model_copy(update={"metadata": meta}),
        }
    )


def _with_refresh(spec: TaskSpec) -> TaskSpec:
    """A Python environment (a venv this project builds) whose gold patch declares dependencies:
    the grader re-runs the install step offline after the candidate (Grading.refresh_*).
    """
    env = spec.environment
    if not (env.python and not env.prebuilt and env.install and spec.gold_patch):
        return spec
    requirements = added_requirements(spec.gold_patch)
    if not requirements:
        return spec
    grading = spec.grading.model_copy(
        update={
            "refresh_requirements": requirements,
            "refresh_command": " && ".join(env.install),
        }
    )
    return spec.model_copy(update={"grading": grading})


def _with_installers_out(spec: TaskSpec) -> TaskSpec:
    """A venv this project builds for a repository whose package an installer vendors
    (vendored.yaml): the agent image holds none of those installers.
    """
    env = spec.environment
    if not (env.python and not env.prebuilt and not env.dockerfile) or env.installers_out:
        return spec
    installers, package = vendoring_installers(spec.repo.name)
    if not installers:
        return spec
    environment = env.model_copy(update={"installers_out": installers, "vendored_package": package})
    meta = {**spec.provenance.metadata, "installers_out": list(installers)}
    return spec.model_copy(
        update={
            "environment": environment,
            "provenance": spec.provenance.model_copy(update={"metadata": meta}),
        }
    )


def to_spec(row: Mapping[str, Any], ctx: Context, schema: str | None = None) -> TaskSpec:
    """Adapt one row, detecting its schema unless given; pydantic errors become RowErrors."""
    from pydantic import ValidationError

    name = schema or detect_schema(row)
    task = row_id(row) or "<no instance_id>"
    try:
        spec = get_adapter(name)(row, ctx)
        env = spec.environment
        update: dict[str, Any] = {}
        if ctx.strict_environment and env.drop_unavailable:
            update["drop_unavailable"] = False
        python_env = bool(env.python and not env.prebuilt)
        as_of = resolved_as_of(row, ctx.as_of, task, env.validated_as_of) if python_env else None
        if as_of is not None:
            update["as_of"] = as_of
        dated_commit = as_of_commit(row, ctx.as_of) if python_env else None
        if dated_commit is not None:
            update["as_of_commit"] = dated_commit
        spec = _with_refresh(spec)
        if ctx.grader_network != "public":  # with the network, the tests reach the real ones
            spec = _with_services(spec)
        spec = _with_installers_out(spec)
        env = spec.environment
        if ctx.grader_network == "public" and not spec.grading.network:
            grading = spec.grading.model_copy(update={"network": True})
            spec = spec.model_copy(update={"grading": grading})
        if update:
            spec = spec.model_copy(update={"environment": env.model_copy(update=update)})
            if as_of is not None:
                meta = {**spec.provenance.metadata, "resolved_as_of": as_of}
                provenance = spec.provenance.model_copy(update={"metadata": meta})
                spec = spec.model_copy(update={"provenance": provenance})
        return spec
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<row>"
        raise RowError(task, field, first["msg"]) from exc
