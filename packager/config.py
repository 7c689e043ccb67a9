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
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from packager.defaults import BUILD_TIMEOUT_SEC, MAX_ABLATIONS
from packager.engines import get_engine
from packager.errors import DatasetError, InputError, PackagerError
from packager.registry import (
    EXECUTORS,
    SCHEMAS,
    ExecutorName,
    GraderNetwork,
    History,
    Prebuilt,
    Prompt,
    PythonFallback,
    SchemaName,
    ToolchainFallback,
    find,
    parse,
)
from packager.settings import PARTIAL, VerifyConfig, whole
from packager.settings import Section as _Section
from packager.stamps import as_stamp


def ray_head(address: str) -> tuple[str, int] | None:
    """(host, port) of a `--ray-address HOST:PORT`; None for `auto`, `local` and `ray://`
    addresses, which Ray resolves itself. ValueError names what is wrong.
    """
    if address in ("auto", "local") or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--ray-address {address!r} is not HOST:PORT, auto or ray://HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def _executor_name(value: object) -> str:
    """An executor the registry lists (its table, not a closed enum: a new executor is its
    module plus one entry there, `tests/unit/executors/test_toy_executor.py`).
    """
    if str(value) not in EXECUTORS:
        raise InputError(f"unknown executor {value!r} (available: {', '.join(EXECUTORS)})")
    return str(value)


class SelectionConfig(_Section):
    """Which rows of which dataset (`packager.run.select.Selection` once opened)."""

    tasks: tuple[str, ...] = Field((), description="Instance ids to work on.")
    all_tasks: bool = Field(False, description="Work on every row of the dataset.")
    dataset: str | None = Field(
        None,
        description=(
            "Rows to read: 'samples' (default), a .jsonl/.json/.parquet file, a "
            "downloaded dataset folder, or a hub id owner/name."
        ),
    )
    split: str = Field("test", description="Dataset split to read.")
    schema_name: SchemaName | None = Field(
        None, description="Skip schema detection: swebench, swe-rebench, ec-swe, pdl, sweeper."
    )
    repo_source: tuple[str, ...] = Field(
        (),
        description=(
            "OWNER/NAME=LOCATION or URL=LOCATION: read that repository from a local "
            "bare repo, working copy or bundle instead of GitHub; or DIR, a folder "
            "of mirrors (<dir>/<owner>/<name>.git, <dir>/<owner>+<name>, "
            "<dir>/<owner>__<name>.bundle, ...). Repeatable."
        ),
    )
    recipes: Path | None = Field(
        None,
        description=(
            "YAML/JSON file of environments for rows that carry none (SWE-bench) or "
            "web-app start commands (SWEeper): keys instance_id/case_id/slug, "
            "owner/name@version or owner/name (most specific wins); values use "
            "SWE-rebench install_config keys."
        ),
    )
    base_image: tuple[str, ...] = Field(
        (),
        description=(
            "VERSION=IMAGE: the base image for recipes asking for that Python "
            "version (default: the official python:VERSION-slim where the engine "
            "has or can pull it, else Debian's python3: 3.9 bullseye, 3.11 "
            "bookworm, 3.13 trixie). Repeatable."
        ),
    )
    prebuilt: Prebuilt = Field(
        "auto",
        description=(
            "Published harness images: auto (a row's docker_image when the engine "
            "has it, else its recipe), always (SWE-bench rows by the harness naming "
            "too), never."
        ),
    )
    prompt: Prompt = Field(
        "scoped", description="SWEeper: the agent's instruction, scoped (task_scoped) or specified."
    )
    grader_entry: str | None = Field(
        None,
        description=(
            "EC-SWE: the scoring script's path among grader_files (default: the "
            "single "
            "grader|grading|protected/{grade,grader,score,run_grader}.{py,sh})."
        ),
    )
    history: History = Field(
        "full",
        description=(
            "Repository history in the agent image: full (up to base_commit) or "
            "base-only (one commit holding the base tree; for mirrors that lack "
            "history objects)."
        ),
    )
    id_filter: tuple[str, ...] = Field(
        (),
        description=(
            "Only rows whose id matches this glob (repeatable; any match counts), e.g. 'django__*'."
        ),
    )
    repo_filter: tuple[str, ...] = Field(
        (), description="Only rows of this repository, owner/name or a glob (repeatable)."
    )
    language: tuple[str, ...] = Field(
        (), description="Only rows in this language, e.g. python (repeatable)."
    )
    python_fallback: PythonFallback = Field(
        "nearest",
        description=(
            "A Python version no image serves (no --base-image, no official image, "
            "not Debian's 3.9/3.11/3.13): nearest (use the nearest served version "
            "at or above it, recorded as python_used) or never (refuse the row, "
            "exit 2)."
        ),
    )
    toolchain_fallback: ToolchainFallback = Field(
        "nearest",
        description=(
            "A Node, Go, Rust, JDK, PHP or Ruby version (a harness spec's docker_specs) no "
            "Debian release here ships: nearest (use the nearest shipped version at or above "
            "it, recorded as toolchain_used) or never (refuse the row, exit 2)."
        ),
    )
    as_of: str = Field(
        "published",
        description=(
            "pip resolves a Python environment as of: published (the default: when its recipe "
            "was validated, for the SWE-bench harness specs 2024-08-13, or the row's created_at "
            "when later; a recipe naming no date resolves as of now), created (the row's "
            "created_at), "
            "setup-commit (the committer date of its environment_setup_commit), a date "
            "(2020-06-01 or 2020-06-01T12:00:00Z), or none (now). Pins in the spec still win; "
            "served by the machine's index as of that date during packager builds."
        ),
    )
    grader_network: GraderNetwork = Field(
        "none",
        description=(
            "The grader container's network: none (offline, the default; a gold run whose tests "
            "reach for the network is needs_network) or public (graded with the network, as "
            "the SWE-bench harness grades; written into task.toml as the verifier's "
            "network_mode and into the HUD environment; docs/security.md says what it costs)."
        ),
    )
    labels: Literal["dataset", "derived"] = Field(
        "dataset",
        description=(
            "The labels a task grades with: dataset (its FAIL_TO_PASS and PASS_TO_PASS as "
            "published, so verdicts match the harness's) or derived (those its last runs "
            "show: failing at base and passing with the gold patch in every run; passing "
            "in every run). Recorded in task.toml's metadata."
        ),
    )
    quarantine: bool = Field(
        False,
        description=(
            "Grade without the listed tests the last runs saw change outcome (a flaky "
            "task's, see --runs and --perturb): they are taken out of its labels and named "
            "with their flip counts in task.toml's metadata and the release manifest."
        ),
    )
    strict_environment: bool = Field(
        False,
        description=(
            "A package of a conda list or environment.yml that pip cannot install fails the "
            "build, naming it and the spec key (default: dropped, recorded as "
            "environment.dropped in the result, and the tests decide)."
        ),
    )

    @field_validator("schema_name", mode="before")
    @classmethod
    def _schema(cls, value: object) -> SchemaName | None:
        if value is None:
            return None
        member = parse(SchemaName, str(value))
        if member is None:
            raise DatasetError(f"unknown schema {value!r}; known: {', '.join(SCHEMAS)}")
        return member

    @field_validator("as_of")
    @classmethod
    def _as_of(cls, value: str) -> str:
        if value in ("none", "published", "created", "setup-commit"):
            return value
        try:
            return as_stamp(value)
        except ValueError:
            raise InputError(
                f"--as-of {value!r}: expected published, created, setup-commit, none or a date "
                "such as "
                "2020-06-01"
            ) from None


class BuildConfig(_Section):
    """The build stage."""

    workers: int = Field(1, ge=1, description="Tasks worked on at once.")
    ca_bundle: Path | None = Field(
        None, description="Extra CA bundle trusted inside builds (TLS-intercepting proxies)."
    )
    timeout: float = Field(BUILD_TIMEOUT_SEC, description="Seconds per image build.")
    pull: bool = Field(
        False,
        description=("Let builds pull missing base images from a registry (default: fail fast)."),
    )


class ExecutorConfig(_Section):
    """Where the jobs run (`--executor` and its Ray options)."""

    name: str = Field(
        ExecutorName.LOCAL.value,
        description=(
            "Where each task's build, audit and verification run: local (this "
            "machine's Docker engine, -j at once) or ray (one job per task on a Ray "
            "cluster, each on its node's Docker engine; needs packager\\[ray]; "
            "docs/scale.md)."
        ),
    )
    ray_address: str | None = Field(
        None,
        description=(
            "With --executor ray: the cluster's head, as `ray start --head` prints "
            "it (default: RAY_ADDRESS, else the cluster this machine belongs to)."
        ),
    )
    workers_per_node: int = Field(
        1,
        ge=1,
        description=(
            "With --executor ray: at most this many jobs at once on each node (each "
            "asks Ray for that share of the node's CPUs, so Ray itself holds the "
            "cap)."
        ),
    )
    registry: str | None = Field(
        None,
        description=(
            "With --executor ray: each job pushes its task's images there, and "
            "nodes pull from it the base images their engine lacks (the driver "
            "pushes those first)."
        ),
    )
    """`HOST[:PORT]/NAMESPACE` (checked here, `release.publish.Registry.parse`)."""
    shared_repos: bool = Field(
        False,
        description=(
            "With --executor ray: the repo sources (--repo-source paths and "
            "folders, the dataset's bundles) are at the same paths on every node (a "
            "shared filesystem), so they are not shipped through Ray's object "
            "store."
        ),
    )

    @field_validator("name", mode="before")
    @classmethod
    def _known(cls, value: object) -> str:
        return _executor_name(value)

    @field_validator("registry")
    @classmethod
    def _registry(cls, value: str | None) -> str | None:
        # heavy: release.publish loads the image and registry clients; config loads for --help
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
        if value is not None:
            try:
                ray_head(value)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _ray_only(self, info: ValidationInfo) -> Self:
        if whole(info) and self.name != "ray":
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

    enabled: bool = Field(
        False,
        description=(
            "Also check each verified task's quality (docs/quality.md): gold hunks "
            "the tests do not need, and instruction leaks. Flags only, unless "
            "--strict-quality."
        ),
    )
    max_ablations: int = Field(
        MAX_ABLATIONS,
        ge=1,
        description=(
            "Quality: at most this many ablated variants of the gold patch per task "
            "(hunks are grouped per file beyond it, every file covered)."
        ),
    )
    strict: bool = Field(
        False,
        description=("Exit 1 when a task is flagged by the quality checks (else they only flag)."),
    )


class PublishConfig(_Section):
    """`packager publish`: where a release of verified tasks goes."""

    registry: str = Field(
        description="Where the images go: HOST[:PORT]/NAMESPACE (a registry on loopback speaks "
        "plain HTTP, as Docker allows there)."
    )
    dataset_repo: str | None = Field(
        None,
        description="A git repository (path or URL) to commit the release into, in the layout "
        "`harbor run -d NAME@VERSION --registry-path <clone>/registry.json` resolves; a path "
        "that does not exist becomes a new bare repository.",
    )
    branch: str | None = Field(
        None,
        description="The dataset repository's branch to commit the release on (default: the "
        "branch its HEAD names, so a plain clone checks the release out).",
    )
    include_unverified: bool = Field(False, description="Also publish tasks that are not verified.")
    name: str | None = Field(None, description="Dataset name (default: the dataset's).")
    version: str = Field("1.0", description="Dataset version.")
    executor: str = Field(
        ExecutorConfig.model_fields["name"].default,
        description="ray: the tasks were packaged with --executor ray and the same --registry, "
        "so their images are already there (pushed by their jobs); no local engine is needed.",
    )

    @field_validator("executor", mode="before")
    @classmethod
    def _known(cls, value: object) -> str:
        return _executor_name(value)

    @model_validator(mode="after")
    def _branch_needs_repo(self) -> Self:
        if self.branch is not None and self.dataset_repo is None:
            raise InputError("--branch names a branch of --dataset-repo: pass both")
        return self


class CleanConfig(_Section):
    """`packager clean`: which of this tool's images and containers to remove."""

    keep_newest: int = Field(
        0, ge=0, description="Keep the N newest images of each task and role (0: remove them all)."
    )
    task: str | None = Field(
        None,
        description="Only images and containers of tasks matching this glob (the label "
        "packager.task, e.g. 'samples/*').",
    )
    dry_run: bool = Field(False, description="Say what would be removed; remove nothing.")
    caches: bool = Field(
        False,
        description="Also empty this machine's derived caches (audit layer indexes and "
        "verdicts, snapshot tars and history packs, wheelhouses); fetched repository mirrors "
        "stay. Not while another packager run is going.",
    )


class RunConfig(_Section):
    """Everything one run of `packager` is told."""

    out: Path = Field(Path("build"), description="Output folder.")
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)

    @model_validator(mode="after")
    def _combinations(self, info: ValidationInfo) -> Self:
        """Checks between sections, once the file and the flags are laid together."""
        if not whole(info):
            return self
        local = getattr(find(EXECUTORS, self.executor.name), "local_engine", False)
        if self.quality.enabled and not local:
            raise InputError("--quality runs with the local executor only")
        if self.verify.patch is not None and (self.verify.engine != "local" or not local):
            raise InputError("--patch grades with the local engine and executor")
        try:
            get_engine(self.verify.engine, environment=self.verify.environment)
        except PackagerError as exc:
            raise InputError(str(exc)) from None
        if not self.selection.tasks and not self.selection.all_tasks:
            raise InputError("name at least one TASK or pass --all")
        if self.selection.tasks and self.selection.all_tasks:
            raise InputError("give TASK ids or --all, not both")
        return self

    @classmethod
    def section_of(cls, name: str) -> tuple[str | None, type[BaseModel]]:
        """The section (None: top level) and the model holding the field `name`."""
        if name in cls.model_fields:
            return None, cls
        for section, info in cls.model_fields.items():
            model = info.annotation
            if isinstance(model, type) and issubclass(model, BaseModel):
                if name in model.model_fields:
                    return section, model
        raise LookupError(f"no RunConfig field {name!r}")

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
