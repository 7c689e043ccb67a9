"""Which rows a run works on: a `Selection` (dataset, ids, filters and the options that shape
tasks), one pass over its rows (`RowScan`: ids checked, filters applied) and `iter_specs`, the
adapted specs in dataset order.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from packager.adapters import Context, detect_schema, row_id, to_spec
from packager.datasets.recipes import Recipes
from packager.datasets.sources import DatasetSource, iter_rows
from packager.errors import PackagerError, RowError, UnknownTasksError
from packager.images.bases import can_pull
from packager.models.spec import TaskSpec
from packager.registry import GraderNetwork, Prebuilt, Prompt, SchemaName


@dataclass(frozen=True)
class Selection:
    """Which rows of which dataset to work on, and the options that shape their tasks."""

    dataset: DatasetSource
    task_ids: tuple[str, ...] = ()
    all_tasks: bool = False
    schema: SchemaName | None = None
    repo_sources: dict[str, str] = field(default_factory=dict)
    mirror_dirs: tuple[str, ...] = ()
    """Folders of repository mirrors (`--repo-source DIR`)."""
    recipes: Recipes = field(default_factory=Recipes)
    """`--recipes FILE` (merged over a `recipes.yaml` shipped next to the dataset)."""
    base_images: dict[str, str] = field(default_factory=dict)
    prebuilt: Prebuilt = "auto"
    prompt: Prompt = "scoped"
    grader_entry: str | None = None
    history: Literal["full", "base-only"] = "full"
    id_globs: tuple[str, ...] = ()
    """Only rows whose id matches one of these globs (`--filter`)."""
    repo_globs: tuple[str, ...] = ()
    """Only rows of a repository matching one of these (`--repo`; owner/name or a glob)."""
    languages: tuple[str, ...] = ()
    """Only rows in one of these languages (`--language`)."""
    python_fallback: Literal["nearest", "never"] = "nearest"
    """`--python-fallback`: substitute the nearest served Python, or refuse the row."""
    toolchain_fallback: Literal["nearest", "never"] = "nearest"
    """`--toolchain-fallback`: likewise for the toolchains of a harness spec."""
    strict_environment: bool = False
    """`--strict-environment`: a conda package pip cannot install fails the build."""
    grader_network: GraderNetwork = "none"
    """`--grader-network`: the grader container offline (`none`) or on the network."""
    labels: Literal["dataset", "derived"] = "dataset"
    """`--labels`: grade with the dataset's labels or those the last runs derived."""
    quarantine: bool = False
    """`--quarantine`: grade without the listed tests the last runs saw flip."""
    as_of: str = "published"
    """`--as-of`: published, created, setup-commit, a date, or none."""

    def wants(self, spec: TaskSpec) -> bool:
        """Whether an adapted row passes the repository and language filters."""
        if self.repo_globs and not any(
            fnmatch.fnmatchcase(spec.repo.name.lower(), g.lower()) for g in self.repo_globs
        ):
            return False
        return not self.languages or spec.provenance.language.lower() in {
            lang.lower() for lang in self.languages
        }

    @property
    def merged_repo_sources(self) -> dict[str, str]:
        """Dataset-shipped bundles, overridden by `--repo-source` options."""
        return {**self.dataset.repo_sources, **self.repo_sources}

    def context(self, has_image: Callable[[str], bool] | None = None) -> Context:
        """The adapters' view of this selection."""
        return Context(
            dataset=self.dataset.name,
            split=self.dataset.split,
            recipes=self.dataset.recipes.merged(self.recipes),
            base_images=dict(self.base_images),
            prebuilt=self.prebuilt,
            has_image=has_image or _engine_has_image,
            prompt=self.prompt,
            grader_entry=self.grader_entry,
            history=self.history,
            can_pull=_engine_can_pull,
            python_fallback=self.python_fallback,
            toolchain_fallback=self.toolchain_fallback,
            strict_environment=self.strict_environment,
            grader_network=self.grader_network,
            as_of=self.as_of,
        )


@functools.lru_cache(maxsize=64)
def _engine_can_pull(name: str) -> bool:
    """Whether a reachable engine's registry knows the image (packager.images.bases.can_pull: asked
    without downloading, once per image per process; False when no engine answers).
    """
    try:
        import docker

        return can_pull(docker.from_env(timeout=10), name)
    except Exception:  # noqa: BLE001 - no engine: nothing can be pulled
        return False


@functools.lru_cache(maxsize=1024)
def _engine_has_image(name: str) -> bool:
    """Whether a reachable local engine has the image (False when no engine answers)."""
    try:
        import docker
        import docker.errors

        client = docker.from_env(timeout=5)
        try:
            client.images.get(name)
        except docker.errors.ImageNotFound:
            return False
        return True
    except Exception:  # noqa: BLE001 - no engine: nothing is available locally
        return False


class RowScan:
    """One pass over a selection's rows in dataset order: ids checked (present, unique, known),
    id and schema filters applied. Adapting the rows it yields is the caller's (here or in a
    render worker); `finish` then fails on unknown ids, or on filters no adapted row passed.
    """

    def __init__(self, sel: Selection) -> None:
        self.sel = sel
        self.seen: set[str] = set()
        self.matched = 0
        """Adapted rows that passed `Selection.wants` (counted by the caller)."""

    def rows(self) -> Iterator[Mapping[str, Any]]:
        sel = self.sel
        wanted = set(sel.task_ids)
        for row in iter_rows(sel.dataset):
            instance_id = row_id(row)
            id_field = "case_id" if (sel.schema == "sweeper" or "case_id" in row) else "instance_id"
            if instance_id is None:
                raise RowError(f"row {len(self.seen) + 1}", id_field, "missing or empty")
            if instance_id in self.seen:
                raise RowError(instance_id, id_field, "duplicate id in the dataset")
            self.seen.add(instance_id)
            if not (sel.all_tasks or instance_id in wanted):
                continue
            if sel.id_globs and not any(fnmatch.fnmatchcase(instance_id, g) for g in sel.id_globs):
                continue
            if sel.schema is not None and sel.all_tasks and _other_schema(row, sel.schema):
                continue  # --schema with --all: rows of that schema only
            yield row

    def finish(self) -> None:
        sel = self.sel
        filters = [*sel.id_globs, *sel.repo_globs, *sel.languages]
        if sel.all_tasks and not self.matched and (filters or sel.schema):
            raise PackagerError(
                f"no row of {sel.dataset.name} matches the filters "
                f"({', '.join(filters + ([f'schema {sel.schema}'] if sel.schema else []))})"
            )
        unknown = set(sel.task_ids) - self.seen
        if unknown:
            raise UnknownTasksError(unknown, sel.dataset.name)


def iter_specs(sel: Selection) -> Iterator[TaskSpec]:
    """Adapt the selected rows, in dataset order; fails on duplicates and unknown ids."""
    ctx = sel.context()
    scan = RowScan(sel)
    for row in scan.rows():
        spec = to_spec(row, ctx, sel.schema)
        if sel.wants(spec):
            scan.matched += 1
            yield spec
    scan.finish()


def _other_schema(row: Mapping[str, Any], schema: str) -> bool:
    """Whether detection puts the row under another schema (undetectable rows are read as
    `schema`, which is what --schema is for).
    """
    try:
        return detect_schema(row) != schema
    except RowError:
        return False
