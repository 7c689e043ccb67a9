"""Rendering a selection: each row adapted, resolved and rendered (here, or in forked render
workers once a render is large) into a hidden staging folder, then every task's folders put in
place at once, in dataset order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from packager.adapters import Context, to_spec
from packager.errors import PackagerError
from packager.models.spec import TaskSpec
from packager.render.harbor import make_harbor_task, task_name
from packager.render.harbor_dataset import content_digest, write_harbor_dataset
from packager.render.hud import make_hud_files
from packager.render.write import Staging
from packager.run.resolve import resolve_spec
from packager.run.select import RowScan, Selection
from packager.stages.build import ImageTags, Rendered
from packager.stages.calibrate import calibrated
from packager.stages.relabel import relabeled
from packager.storage import OutputPaths

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

    from packager.render.write import Staging


RENDER_INLINE_ROWS = 32
"""Rows rendered in this process before render workers take over: a small render never forks."""
RENDER_CHUNK = 16
"""Specs sent to a render worker at a time."""


class _TaskRecord(NamedTuple):
    """What is kept of a task once its folders are staged (a few strings: memory stays flat)."""

    task_id: str
    slug: str
    digest: str
    name: str
    agent_image: str
    grader_image: str


@dataclass(frozen=True)
class _TaskStager:
    """Adapts, resolves and renders one row and stages its three folders, in this process or
    a render worker (forked: it inherits the selection and its caches).
    """

    paths: OutputPaths
    staging: Staging
    sel: Selection
    ctx: Context
    keep_specs: bool

    def __call__(self, row: Mapping[str, Any]) -> tuple[TaskSpec | None, _TaskRecord | None]:
        """The spec (when kept) and what was staged; (None, None) for a row the repository
        and language filters leave out.
        """
        spec = to_spec(row, self.ctx, self.sel.schema)
        if not self.sel.wants(spec):
            return None, None
        spec = resolve_spec(spec, self.sel.merged_repo_sources, self.sel.mirror_dirs)
        spec = calibrated(spec, self.paths)
        spec = relabeled(spec, self.paths, self.sel.labels, self.sel.quarantine)
        return (spec if self.keep_specs else None), self.stage(spec)

    def stage(self, spec: TaskSpec) -> _TaskRecord:
        task = make_harbor_task(spec)
        slug = spec.provenance.slug
        hud = make_hud_files(
            spec,
            dataset=self.paths.dataset,
            agent_image=task.agent_image,
            grader_payload=task.grader_payload,
            grader_image=task.grader_image,
        )
        self.staging.write(self.paths.task_dir(slug), task.files)
        self.staging.write(self.paths.source_dir(slug), hud)
        self.staging.write(self.paths.manifest_dir(slug), task.manifests)
        digest = content_digest(task.files, slug)
        return _TaskRecord(
            spec.task_id, slug, digest, task_name(spec), task.agent_image, task.grader_image
        )


_Done = tuple[TaskSpec | None, _TaskRecord | None]
"""A row's outcome from `_TaskStager`."""

_worker_stager: _TaskStager | None = None
"""The stager of a render worker process (set by `_init_render_worker`)."""


def _init_render_worker(stager: _TaskStager) -> None:
    import signal

    global _worker_stager
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _worker_stager = stager


def _render_chunk(rows: list[Mapping[str, Any]]) -> list[_Done]:
    assert _worker_stager is not None, "not a render worker"
    return [_worker_stager(row) for row in rows]


def _read_chunk(
    rows: Iterator[Mapping[str, Any]], size: int
) -> tuple[list[Mapping[str, Any]], PackagerError | None]:
    """Up to `size` rows, and the error that stopped the reading (a bad id), if one did."""
    chunk: list[Mapping[str, Any]] = []
    try:
        for row in rows:
            chunk.append(row)
            if len(chunk) == size:
                break
    except PackagerError as exc:
        return chunk, exc
    return chunk, None


def _stage_in_order(
    rows: Iterator[Mapping[str, Any]], stage: _TaskStager, workers: int
) -> Iterator[_Done]:
    """Adapt, resolve and stage every row, in order: the first RENDER_INLINE_ROWS here, the
    rest in `workers` forked processes. A render is CPU (adapters, templates, hashes) and
    kernel time (file creation, about 30 files per task); separate processes run both on
    every core at once (threads would serialize on the GIL), and a bounded window of chunks
    keeps memory flat. This process only reads rows and checks their ids. Errors come in row
    order: a bad id found while reading ahead waits for the rows before it.
    """
    import itertools
    import multiprocessing
    import sys
    from collections import deque

    for row in itertools.islice(rows, RENDER_INLINE_ROWS):
        yield stage(row)
    first = next(rows, None)
    if first is None:
        return
    rest = itertools.chain([first], rows)
    if workers < 2 or sys.platform != "linux":  # fork is the cheap, safe start method there
        for row in rest:
            yield stage(row)
        return
    stage.staging.folder()  # made before the fork: every worker stages into the same one
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_init_render_worker, initargs=(stage,)) as pool:
        pending: deque[AsyncResult[list[_Done]]] = deque()
        while True:
            chunk, failure = _read_chunk(rest, RENDER_CHUNK)
            if chunk:
                pending.append(pool.apply_async(_render_chunk, (chunk,)))
            if failure is not None or not chunk:
                while pending:  # the rows before: their results, or an earlier error
                    yield from pending.popleft().get()
                if failure is not None:
                    raise failure
                return
            while len(pending) > 2 * workers:
                yield from pending.popleft().get()


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's cpuset, `taskset`), one
    render worker each; `os.cpu_count()` counts the machine's.
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def render_selection(
    sel: Selection,
    out: Path,
    on_task: Callable[[str, Path], None] | None = None,
    *,
    keep_specs: bool = True,
    workers: int | None = None,
    rendered: dict[str, Rendered] | None = None,
) -> list[TaskSpec]:
    """Render every selected row, then put each task's folders in place atomically.

    Rows are streamed once: each is adapted, resolved and rendered into a hidden staging
    folder (by `workers` processes, default one per core, once a render is large), so nothing
    appears in `out` unless every row is good. Then each task's folders are moved into place
    in dataset order, and `on_task(instance_id, task_dir)` is called. Returns the written
    specs in order; with `keep_specs=False` none (memory stays flat over any number of rows).
    `rendered` (by slug) receives what each render decided, for the build and the cache check
    to use instead of rendering the task again.
    """
    written: list[TaskSpec] = []
    paths = OutputPaths(out, sel.dataset.name)
    staged: list[tuple[str, str]] = []
    digests: dict[Path, str] = {}
    names: dict[Path, str] = {}
    scan = RowScan(sel)
    with Staging(paths.base) as staging:
        stage = _TaskStager(paths, staging, sel, sel.context(), keep_specs)
        for spec, done in _stage_in_order(scan.rows(), stage, workers or _usable_cpus()):
            if done is None:
                continue  # left out by --repo / --language
            scan.matched += 1
            task_dir = paths.task_dir(done.slug)
            digests[task_dir] = done.digest
            names[task_dir] = done.name
            if rendered is not None:
                tags = ImageTags(done.agent_image, done.grader_image)
                rendered[done.slug] = Rendered(tags, done.digest)
            staged.append((done.task_id, done.slug))
            if spec is not None:
                written.append(spec)
        scan.finish()
        # Into an empty output, each of tasks/, sources/ and manifests/ moves in one rename.
        kinds = (paths.task_dir, paths.source_dir, paths.manifest_dir)
        whole = [bool(staged) and staging.place_new(kind(staged[0][1]).parent) for kind in kinds]
        for task_id, slug in staged:
            for kind, placed in zip(kinds, whole, strict=True):
                if not placed:
                    staging.place(kind(slug))
            if on_task is not None:
                on_task(task_id, paths.task_dir(slug))
    # The Harbor dataset manifest covers every task folder of the dataset, not only this run's.
    write_harbor_dataset(paths, known_digests=digests, known_names=names)
    return written
