"""One run's configuration: `RunConfig` and its sub-configs, each default written once.

A run is configured by the command line, optionally over a YAML file (`--config FILE`, the same
keys as the fields below, one mapping per section). `RunConfig.load` reads the file, lays the
flags given on the command line over it and validates the whole. Every check of the input is a
validator here and raises `InputError` (exit 2), so a bad flag and a bad file key fail alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from packager.adapters import History, Prebuilt, Prompt, PythonFallback
from packager.errors import InputError, PackagerError

PARTIAL = "partial"
"""Validation context flag: a file on its own, before the command line completes it (checks
between fields wait for the whole)."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _whole(info: ValidationInfo) -> bool:
    return not (info.context or {}).get(PARTIAL, False)


class SelectionConfig(_Section):
    """Which rows of which dataset (`packager.run.select.Selection` once opened)."""

    tasks: tuple[str, ...] = ()
    all_tasks: bool = False
    dataset: str | None = None
    split: str = "test"
    schema_name: str | None = None
    repo_source: tuple[str, ...] = ()
    recipes: Path | None = None
    base_image: tuple[str, ...] = ()
    prebuilt: Prebuilt = "auto"
    prompt: Prompt = "scoped"
    grader_entry: str | None = None
    history: History = "full"
    id_filter: tuple[str, ...] = ()
    repo_filter: tuple[str, ...] = ()
    language: tuple[str, ...] = ()
    python_fallback: PythonFallback = "nearest"


class BuildConfig(_Section):
    """The build stage."""

    workers: int = Field(1, ge=1)
    ca_bundle: Path | None = None
    timeout: float = 1800.0
    pull: bool = False


class VerifyConfig(_Section):
    """How tasks are verified (or one candidate patch graded)."""

    engine: str = "local"
    harbor_env: str | None = None
    oracle_runs: int = Field(2, ge=1)
    force: bool = False
    memory_mb: int | None = Field(None, ge=16)
    judge: str = "env"
    patch: Path | None = None

    @property
    def environment(self) -> str:
        """The environment type trials run in (`--harbor-env`, docker by default)."""
        from packager.engines import DEFAULT_ENVIRONMENT

        return self.harbor_env if self.harbor_env is not None else DEFAULT_ENVIRONMENT

    @model_validator(mode="after")
    def _engine_env(self, info: ValidationInfo) -> Self:
        """An unknown engine, or an environment type it cannot use, is bad input."""
        from packager.engines import get_engine

        if not _whole(info):
            return self
        if self.harbor_env is not None and self.engine != "harbor":
            raise InputError(
                f"--harbor-env {self.harbor_env} needs --engine harbor (the {self.engine} engine "
                "runs on the local Docker engine)"
            )
        try:
            get_engine(self.engine, environment=self.environment)
        except PackagerError as exc:
            raise InputError(str(exc)) from None
        return self


class ExecutorConfig(_Section):
    """Where the jobs run (`--executor` and its Ray options)."""

    name: str = "local"
    ray_address: str | None = None
    workers_per_node: int = Field(1, ge=1)
    registry: str | None = None
    """`HOST[:PORT]/NAMESPACE` (checked here, `release.publish.Registry.parse`)."""
    shared_repos: bool = False

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        from packager.executors import names

        if value not in names():
            raise InputError(f"unknown executor {value!r} (available: {', '.join(names())})")
        return value

    @field_validator("registry")
    @classmethod
    def _registry(cls, value: str | None) -> str | None:
        from packager.release.publish import Registry

        if value is not None:
            try:
                Registry.parse(value)
            except PackagerError as exc:
                raise InputError(str(exc)) from None
        return value

    @field_validator("ray_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        from packager.executors.ray import head_endpoint

        if value is not None:
            try:
                head_endpoint(value)
            except PackagerError as exc:
                raise InputError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _ray_only(self, info: ValidationInfo) -> Self:
        if _whole(info) and self.name != "ray":
            for given, flag in (
                (self.ray_address, "--ray-address"),
                (self.workers_per_node != 1 or None, "--workers-per-node"),
                (self.shared_repos or None, "--shared-repos"),
            ):
                if given is not None:
                    raise InputError(f"{flag} needs --executor ray")
        return self


class QualityConfig(_Section):
    """The quality checks (docs/quality.md)."""

    enabled: bool = False
    max_ablations: int = Field(12, ge=1)
    strict: bool = False


class RunConfig(_Section):
    """Everything one run of `packager` is told."""

    out: Path = Path("build")
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)

    @model_validator(mode="after")
    def _combinations(self, info: ValidationInfo) -> Self:
        """Checks between sections, once the file and the flags are laid together."""
        if not _whole(info):
            return self
        local = self.executor.name == "local"
        if self.quality.enabled and not local:
            raise InputError("--quality runs with the local executor only")
        if self.verify.patch is not None and (self.verify.engine != "local" or not local):
            raise InputError("--patch grades with the local engine and executor")
        if not self.selection.tasks and not self.selection.all_tasks:
            raise InputError("name at least one TASK or pass --all")
        if self.selection.tasks and self.selection.all_tasks:
            raise InputError("give TASK ids or --all, not both")
        return self

    def digest(self) -> str:
        """A short sha256 of the canonical JSON of this configuration (recorded in reports)."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def load(cls, file: Path | None, flags: Mapping[str, Any]) -> RunConfig:
        """The configuration of `file` (YAML; None: none) with `flags` laid over it: top-level
        keys, or a section's name mapped to its keys. A bad key or value names where it is.
        """
        data = _read(file) if file is not None else {}
        if file is not None:
            _validate(data, str(file), partial=True)
        for key, value in flags.items():
            if isinstance(value, Mapping):
                section = data.get(key)
                data[key] = {**(section if isinstance(section, Mapping) else {}), **value}
            else:
                data[key] = value
        return _validate(data, str(file) if file is not None else "", partial=False)


def _read(file: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"--config {file}: cannot be read: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(
            f"--config {file}: expected a mapping of sections, not {type(data).__name__}"
        )
    return data


def _validate(data: Mapping[str, Any], where: str, *, partial: bool) -> RunConfig:
    prefix = f"{where}: " if where else ""
    try:
        return RunConfig.model_validate(data, context={PARTIAL: partial})
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise InputError(f"{prefix}{key}: {error['msg']}") from None
    except InputError as exc:
        if partial:
            raise InputError(f"{prefix}{exc}") from None
        raise
