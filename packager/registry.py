"""The one registry shape: what can be chosen by name (engines, executors, dataset schemas),
and the closed choices of row options (`--prebuilt`, `--prompt`, `--history`,
`--python-fallback`, `--toolchain-fallback`).

Each choice is a StrEnum (so typer lists and checks the values, and code compares members, not
loose strings) and a table from member to an `Entry`: the `module:attribute` that implements it,
imported only when the choice is made (so `ray` or `harbor` cost nothing to a local run), and the
pip extra that provides it where it is optional. Adding an engine, an executor or a schema is one
member and one entry here plus its module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypeVar

from packager.errors import InputError


class EngineName(StrEnum):
    """`--engine`: what runs a built task's oracle and nop runs (packager.engines)."""

    LOCAL = "local"
    HARBOR = "harbor"


class ExecutorName(StrEnum):
    """`--executor`: where each task's build → audit → verify job runs (packager.executors)."""

    LOCAL = "local"
    RAY = "ray"


class JudgeMode(StrEnum):
    """`--judge`: where a browser judge's model is (packager.judge.endpoint)."""

    ENV = "env"
    REPLAY = "replay"


class SchemaName(StrEnum):
    """`--schema`: the dataset card a row follows (packager.adapters), in detection order."""

    SWEEPER = "sweeper"
    PDL = "pdl"
    EC_SWE = "ec-swe"
    SWE_REBENCH = "swe-rebench"
    SWEBENCH = "swebench"
    SWEBENCH_MULTILINGUAL = "swebench-multilingual"


@dataclass(frozen=True)
class Entry:
    """Where a named choice lives and what it needs."""

    target: str
    """`module:attribute`, imported on first use."""
    extra: str | None = None
    """The pip extra that installs what the module imports, e.g. `packager[ray]`."""
    markers: tuple[str, ...] = ()
    """Schemas: the columns a row must carry, non-null, to be detected as this schema."""
    local_engine: bool = False
    """Executors: the jobs run on this machine's Docker engine (the driver connects to it; the
    quality checks and `verify --patch`, which run there too, may be combined with it)."""


ENGINES: Mapping[EngineName, Entry] = {
    EngineName.LOCAL: Entry("packager.engines.local:make_engine"),
    EngineName.HARBOR: Entry("packager.engines.harbor:make_engine"),
}
EXECUTORS: Mapping[ExecutorName, Entry] = {
    ExecutorName.LOCAL: Entry("packager.executors.local:LocalExecutor", local_engine=True),
    ExecutorName.RAY: Entry("packager.executors.ray:RayExecutor", extra="packager[ray]"),
}
SCHEMAS: Mapping[SchemaName, Entry] = {
    SchemaName.SWEEPER: Entry(
        "packager.adapters.sweeper:to_spec", markers=("case_id", "workflows")
    ),
    SchemaName.PDL: Entry("packager.adapters.pdl:to_spec", markers=("files", "reward_formula")),
    SchemaName.EC_SWE: Entry("packager.adapters.ecswe:to_spec", markers=("grader", "grader_files")),
    SchemaName.SWE_REBENCH: Entry(
        "packager.adapters.rebench:to_spec", markers=("install_config", "docker_image")
    ),
    SchemaName.SWEBENCH: Entry(
        "packager.adapters.swebench:to_spec",
        markers=("FAIL_TO_PASS", "environment_setup_commit"),
    ),
    # The same card's shape without `environment_setup_commit` (SWE-bench Multilingual): the
    # same adapter, the environment read at the base commit (assumptions.MISSING_ENV_COMMIT).
    SchemaName.SWEBENCH_MULTILINGUAL: Entry(
        "packager.adapters.swebench:to_spec_multilingual",
        markers=("FAIL_TO_PASS", "base_commit", "version"),
    ),
}
"""In detection order: most specific first (the first whose markers a row has wins)."""

Prebuilt = Literal["auto", "always", "never"]
"""`--prebuilt` (typer checks a Literal's choices itself; adapters read them)."""
Prompt = Literal["scoped", "specified"]
"""`--prompt`."""
History = Literal["full", "base-only"]
"""`--history`."""
PythonFallback = Literal["nearest", "never"]
"""`--python-fallback`."""
ToolchainFallback = Literal["nearest", "never"]
"""`--toolchain-fallback`."""
GraderNetwork = Literal["none", "public"]
"""`--grader-network`."""


E = TypeVar("E", bound=StrEnum)


def parse(kind: type[E], value: str) -> E | None:
    """The member of `kind` whose value is `value`, None when there is none (the caller raises
    its own error, which names the available values).
    """
    try:
        return kind(value)
    except ValueError:
        return None


def find(table: Mapping[Any, Entry], name: str) -> Entry | None:
    """The entry of `table` called `name` (None when there is none): the tables are keyed by
    their StrEnum, and an entry added under a plain name (a plugin, a test) is found too.
    """
    for key, entry in table.items():
        if key == name:
            return entry
    return None


def load(entry: Entry) -> Any:
    """Import an entry's target. A missing optional dependency names the extra to install."""
    module_name, _, attribute = entry.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if entry.extra is None or exc.name == module_name:
            raise
        raise InputError(
            f"{module_name} needs {exc.name}, which is not installed: pip install '{entry.extra}'"
        ) from exc
    return getattr(module, attribute)
