"""Orchestration: select rows, adapt, resolve against repo sources, render, write; later build
and verify. Errors of one task are caught here, per task, into that task's result.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from packager.adapters import Context, Prebuilt, Prompt, row_id, to_spec
from packager.datasets.recipes import Recipes
from packager.datasets.sources import DatasetSource, iter_rows
from packager.errors import PackagerError, RepoSourceError, RowError, UnknownTasksError
from packager.images.locks import machine_lock
from packager.models.spec import Environment, Grading, TaskSpec
from packager.run.store import OutputPaths

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

    from packager.errors import BuildError
    from packager.images import build as build_module
    from packager.images.build import DockerClient
    from packager.images.flatten import FlatBase
    from packager.models.spec import TaskResult
    from packager.render.write import Staging


@dataclass(frozen=True)
class Selection:
    """Which rows of which dataset to work on, and the options that shape their tasks."""

    dataset: DatasetSource
    task_ids: tuple[str, ...] = ()
    all_tasks: bool = False
    schema: str | None = None
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
        )


@functools.lru_cache(maxsize=64)
def _engine_can_pull(name: str) -> bool:
    """Whether a reachable engine's registry knows the image (packager.images.bases.can_pull: asked
    without downloading, once per image per process; False when no engine answers).
    """
    try:
        import docker

        from packager.images.bases import can_pull

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


class _RowScan:
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
    scan = _RowScan(sel)
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
    from packager.adapters import detect_schema

    try:
        return detect_schema(row) != schema
    except RowError:
        return False


def resolve_spec(
    spec: TaskSpec, repo_sources: dict[str, str], mirror_dirs: tuple[str, ...] = ()
) -> TaskSpec:
    """Complete a spec from its repository source (the only reads adapters cannot do): check
    the commits exist, read a commit-given gold patch (SWEeper), requirement files named by a
    recipe, the base-only commit id, and how a web app starts.
    """
    if spec.repo.files is not None:
        return spec
    from packager import repos

    name = spec.repo.name
    env = spec.environment
    needs_source = bool(
        spec.repo.reference_commit is not None
        or env.requirements_paths
        or env.conda_env_paths
        or spec.repo.history == "base-only"
        or spec.grading.rule == "judge"
    )
    if name not in repo_sources and not mirror_dirs and not needs_source:
        # A remote source is only contacted when the image is built.
        return spec
    try:
        git_dir = repos.git_dir_for(repos.source_for(name, repo_sources, mirror_dirs=mirror_dirs))
    except RepoSourceError as exc:
        raise RowError(spec.task_id, "repo", str(exc).split(": ", 2)[-1]) from exc
    for field_name, sha in (
        ("base_commit", spec.repo.base_commit),
        ("reference_commit", spec.repo.reference_commit),
    ):
        if sha is not None and not repos.has_commit(git_dir, sha):
            raise RowError(
                spec.task_id, field_name, f"commit {sha} not found in repo source for {name}"
            )
    update: dict[str, object] = {}
    if spec.repo.reference_commit is not None and spec.gold_patch is None:
        diff = repos.read_diff(git_dir, spec.repo.base_commit, spec.repo.reference_commit)
        if not diff.strip():
            raise RowError(spec.task_id, "reference_commit", "no change from base_commit")
        update["gold_patch"] = diff
    if env.requirements_paths or env.conda_env_paths:
        update["environment"] = _read_recipe_files(spec, git_dir)
    if spec.repo.history == "base-only":
        from packager.repos.objects import base_only_commit_sha
        from packager.repos.read import tree_sha

        tree = tree_sha(git_dir, spec.repo.base_commit)
        if tree is None:
            raise RowError(spec.task_id, "base_commit", "cannot read its tree in the repo source")
        head = base_only_commit_sha(tree, spec.repo.base_commit)
        update["repo"] = spec.repo.model_copy(update={"diff_base": head})
    if spec.grading.rule == "judge":
        grading, environment = _web_app(spec, git_dir)
        update["grading"] = grading
        update["environment"] = environment
    return spec.model_copy(update=update) if update else spec


def _read_recipe_files(spec: TaskSpec, git_dir: Path) -> Environment:
    """The recipe's requirement file and environment.yml, read from the repository at the
    environment setup commit as the harness reads them: the first of the candidate paths that
    exists, `-r` includes inlined, lines that install the repository itself dropped, yanked
    names replaced; an environment.yml becomes pip requirements (packager.datasets.conda).
    """
    from packager.adapters import assumptions as A
    from packager.datasets.conda import CondaError, from_environment_yml
    from packager.repos.read import read_file

    env = spec.environment
    commit = env.source_commit or spec.repo.base_commit

    def first(paths: tuple[str, ...], key: str) -> tuple[str, bytes]:
        for path in paths:
            data = read_file(git_dir, commit, path)
            if data is not None:
                return path, data
        raise RowError(
            spec.task_id,
            key,
            f"none of {', '.join(paths)} is in {spec.repo.name} at {commit[:12]} (the "
            "environment setup commit); files are read from the repository, never downloaded",
        )

    def inline(path: str, data: bytes, depth: int = 0) -> list[str]:
        lines = []
        for line in data.decode("utf-8", "replace").splitlines():
            words = line.strip().split()
            if depth < 5 and len(words) == 2 and words[0] in ("-r", "--requirement"):
                included = os.path.normpath(os.path.join(os.path.dirname(path), words[1]))
                found = read_file(git_dir, commit, included)
                if found is not None:  # the harness skips an include it cannot fetch
                    lines += inline(included, found, depth + 1)
            elif not line.strip().startswith(A.REQUIREMENT_LINES_DROPPED):
                lines.append(line)
        return lines

    requirements = dict(env.requirements)
    if env.requirements_paths:
        path, data = first(env.requirements_paths, "install_config.reqs_path")
        lines = replace_yanked(inline(path, data))
        requirements[path.replace("/", "__")] = ("\n".join(lines).strip("\n") + "\n").encode()
    if env.conda_env_paths:
        path, data = first(env.conda_env_paths, "install_config.env_yml_path")
        try:
            converted = from_environment_yml(data.decode("utf-8", "replace"))
        except CondaError as exc:
            raise RowError(spec.task_id, "install_config.env_yml_path", f"{path}: {exc}") from exc
        text = "".join(f"{line}\n" for line in replace_yanked(list(converted.requirements)))
        requirements[path.replace("/", "__") + ".txt"] = text.encode()
    return env.model_copy(
        update={"requirements": requirements, "requirements_paths": (), "conda_env_paths": ()}
    )


def replace_yanked(lines: list[str]) -> list[str]:
    """Requirement lines with the names the harness replaces (yanked from the index) replaced,
    as the harness does (its replacement drops the version of the yanked name).
    """
    import re

    from packager.datasets.harness_specs import replacements

    out = []
    for line in lines:
        for old, new in replacements():
            if re.match(rf"^{re.escape(old)}([<>=!~]=?.*|$)", line.strip()):
                line = new or ""
        if line:
            out.append(line)
    return out


def _web_app(spec: TaskSpec, git_dir: Path) -> tuple[Grading, Environment]:
    """How a SWEeper app starts (the recipe's command, else detected from the repository's
    top-level files) and the runtimes its image needs.
    """
    import json as _json

    from packager.adapters import assumptions as A
    from packager.checks.webapp import AppStart, detect_start
    from packager.repos.read import list_files, read_file

    top = [p for p in list_files(git_dir, spec.repo.base_commit) if "/" not in p]
    files = {p: read_file(git_dir, spec.repo.base_commit, p) or b"" for p in top}
    g = spec.grading
    start: AppStart | None
    if g.app_start:
        start = AppStart(g.app_start, g.app_port or A.SWEEPER_DEFAULT_PORT, "recipe")
    else:
        start = detect_start(files, default_port=A.SWEEPER_DEFAULT_PORT)
    if start is None:
        raise RowError(
            spec.task_id,
            "repo",
            "cannot tell how to start the app (no package.json start script, Compose file, "
            "manage.py or Flask app at the top of the repository); give a --recipes entry keyed "
            "by case_id or slug with start_command and port",
        )
    packages: list[str] = []
    install: list[str] = []
    python = None
    requirements: dict[str, bytes] = {}
    if "package.json" in files:
        packages.append("nodejs")
        try:
            manifest = _json.loads(files["package.json"] or b"{}")
        except ValueError:
            manifest = {}
        deps = isinstance(manifest, dict) and (
            manifest.get("dependencies") or manifest.get("devDependencies")
        )
        if deps:
            packages.append("npm")
        if deps:
            install.append("npm install --no-audit --no-fund")
        scripts = manifest.get("scripts") if isinstance(manifest, dict) else None
        script_name = start.how.removeprefix("package.json scripts.")
        if (
            not deps
            and start.how.startswith("package.json scripts.")
            and isinstance(scripts, dict)
            and isinstance(scripts.get(script_name), str)
        ):
            # What `npm run` would do, without needing npm for an app with no dependencies.
            start = AppStart(
                f'export PATH="$PWD/node_modules/.bin:$PATH"; {scripts[script_name]}',
                start.port,
                start.how,
            )
    if any(p in files for p in ("manage.py", "app.py", "wsgi.py", "requirements.txt")):
        python = A.DEBIAN_PYTHON
        if files.get("requirements.txt"):
            requirements["requirements.txt"] = files["requirements.txt"]
    environment = spec.environment.model_copy(
        update={
            "packages": tuple(packages),
            "install": tuple(install),
            "python": python,
            "requirements": requirements,
        }
    )
    grading = g.model_copy(
        update={"app_start": start.command, "app_port": start.port, "app_start_how": start.how}
    )
    return grading, environment


RENDER_INLINE_ROWS = 200
"""Rows rendered in this process before render workers take over: a small render never forks."""
RENDER_CHUNK = 16
"""Specs sent to a render worker at a time."""


class _Staged(NamedTuple):
    """What is kept of a task once its folders are staged (a few strings: memory stays flat)."""

    task_id: str
    slug: str
    digest: str
    name: str


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

    def __call__(self, row: Mapping[str, Any]) -> tuple[TaskSpec | None, _Staged | None]:
        """The spec (when kept) and what was staged; (None, None) for a row the repository
        and language filters leave out.
        """
        spec = to_spec(row, self.ctx, self.sel.schema)
        if not self.sel.wants(spec):
            return None, None
        spec = resolve_spec(spec, self.sel.merged_repo_sources, self.sel.mirror_dirs)
        return (spec if self.keep_specs else None), self.stage(spec)

    def stage(self, spec: TaskSpec) -> _Staged:
        from packager.render.harbor import make_harbor_task, task_name
        from packager.render.harbor_dataset import content_digest
        from packager.render.hud import make_hud_files

        task = make_harbor_task(spec)
        slug = spec.provenance.slug
        hud = make_hud_files(
            spec,
            dataset=self.paths.dataset,
            agent_image=task.agent_image,
            grader_payload=task.grader_payload,
        )
        self.staging.write(self.paths.task_dir(slug), task.files)
        self.staging.write(self.paths.source_dir(slug), hud)
        self.staging.write(self.paths.manifest_dir(slug), task.manifests)
        return _Staged(spec.task_id, slug, content_digest(task.files, slug), task_name(spec))


_Done = tuple[TaskSpec | None, _Staged | None]
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


def render_selection(
    sel: Selection,
    out: Path,
    on_task: Callable[[str, Path], None] | None = None,
    *,
    keep_specs: bool = True,
    workers: int | None = None,
) -> list[TaskSpec]:
    """Render every selected row, then put each task's folders in place atomically.

    Rows are streamed once: each is adapted, resolved and rendered into a hidden staging
    folder (by `workers` processes, default one per core, once a render is large), so nothing
    appears in `out` unless every row is good. Then each task's folders are moved into place
    in dataset order, and `on_task(instance_id, task_dir)` is called. Returns the written
    specs in order; with `keep_specs=False` none (memory stays flat over any number of rows).
    """
    from packager.render.harbor_dataset import write_harbor_dataset
    from packager.render.write import Staging

    written: list[TaskSpec] = []
    paths = OutputPaths(out, sel.dataset.name)
    staged: list[tuple[str, str]] = []
    digests: dict[Path, str] = {}
    names: dict[Path, str] = {}
    scan = _RowScan(sel)
    with Staging(paths.base) as staging:
        stage = _TaskStager(paths, staging, sel, sel.context(), keep_specs)
        for spec, done in _stage_in_order(scan.rows(), stage, workers or os.cpu_count() or 1):
            if done is None:
                continue  # left out by --repo / --language
            scan.matched += 1
            task_dir = paths.task_dir(done.slug)
            digests[task_dir] = done.digest
            names[task_dir] = done.name
            staged.append((done.task_id, done.slug))
            if spec is not None:
                written.append(spec)
        scan.finish()
        for task_id, slug in staged:
            staging.place(paths.task_dir(slug))
            staging.place(paths.source_dir(slug))
            staging.place(paths.manifest_dir(slug))
            if on_task is not None:
                on_task(task_id, paths.task_dir(slug))
    # The Harbor dataset manifest covers every task folder of the dataset, not only this run's.
    write_harbor_dataset(paths, known_digests=digests, known_names=names)
    return written


# --------------------------------------------------------------------------- build and verify


@dataclass(frozen=True)
class BuildOptions:
    """Knobs of the build stage."""

    timeout_sec: float = 1800.0
    ca_bundle: Path | None = None
    pull: bool = False
    """Let the engine pull missing base images; off by default, so a missing base fails fast."""
    mirror_dirs: tuple[str, ...] = ()
    """Folders of repository mirrors (`--repo-source DIR`)."""


def _flat_base(
    client: DockerClient,
    spec: TaskSpec,
    dockerfile_text: str,
    label: str,
    opts: BuildOptions,
    flatten_log: Path,
) -> FlatBase | None:
    """How a published harness image is flattened (None for other environments). What its
    own layers hold (later commits, branches, tags, unreachable objects) no later layer can
    remove, so the agent image is built FROM a copy of its file system in one layer, without
    the workdir's .git (docs/datasets.md).
    """
    from packager.errors import BuildError
    from packager.images import build, flatten

    if not spec.environment.prebuilt:
        return None
    published = build.first_from(dockerfile_text)
    if opts.pull:
        build.pull_missing(client, published, task=label, log_path=flatten_log)
    build.check_base_images(
        client, dockerfile_text, task=label, log_path=flatten_log, pull=opts.pull
    )
    try:
        return flatten.flatten_plan(client, published, spec.repo.workdir)
    except ValueError as exc:
        flatten_log.parent.mkdir(parents=True, exist_ok=True)
        flatten_log.write_text(f"ERROR: {exc}\n")
        raise BuildError(label, published, f"cannot flatten it: {exc}", flatten_log) from exc


ENVIRONMENT_REPOSITORY = "packager/environment"
"""Tags of environment images: an agent Dockerfile's steps before the snapshot, built alone
once per machine (`ensure_environment`); the agent builds then take those layers from cache."""


def _environment_dockerfile(dockerfile: str, snapshot_file: str) -> str | None:
    """The Dockerfile's instructions before the one that adds the snapshot, without comments
    (a task's own header comment would make every environment differ; the engine's build
    cache ignores comments too) but with parser directives (None: no snapshot line).
    """
    head: list[str] = []
    preamble = True
    for line in dockerfile.splitlines():
        comment = line.lstrip().startswith("#")
        if comment and preamble and re.match(r"#\s*(syntax|escape|check)\s*=", line.lstrip()):
            head.append(line)
            continue
        preamble = False
        if comment or not line.strip():
            continue
        if snapshot_file in line:
            return "\n".join(head) + "\n"
        head.append(line)
    return None


def _environment_files(context: Path, snapshot_file: str, head: str) -> dict[str, bytes]:
    """The context's files the environment steps (`head`) copy: those their COPY and ADD
    lines name, or every file but the snapshot when one names a pattern or a folder of
    files (the Harbor compose file, which names the task, is in no environment otherwise).
    """
    import shlex

    everything = {
        p.relative_to(context).as_posix(): p
        for p in sorted(context.rglob("*"))
        if p.is_file() and p.relative_to(context).as_posix() not in (snapshot_file, "Dockerfile")
    }
    named: set[str] = set()
    for line in head.splitlines():
        words = line.split(None, 1)
        if len(words) < 2 or words[0].upper() not in ("COPY", "ADD"):
            continue
        try:
            args = [a for a in shlex.split(words[1]) if not a.startswith("--")]
        except ValueError:
            args = ["*"]
        for source in args[:-1]:
            source = posixpath.normpath(source.strip("/")) if source.strip("/") else "."
            if any(c in source for c in "*?[") or source == "." or source not in everything:
                named = set(everything)  # a pattern, the whole context, a folder: all of it
                break
            named.add(source)
    return {rel: path.read_bytes() for rel, path in everything.items() if rel in named}


def environment_key(
    dockerfile: str, files: Mapping[str, bytes], buildargs: Mapping[str, str], bases: str
) -> str:
    """What environment layers are made of: the steps before the snapshot, the context files
    they may copy, the build arguments and the base images' ids.
    """
    import hashlib

    digest = hashlib.sha256(dockerfile.encode())
    for rel, data in sorted(files.items()):
        digest.update(f"\0{rel}\0{len(data)}\0".encode() + data)
    for key, value in sorted(buildargs.items()):
        digest.update(f"\0{key}={value}".encode())
    digest.update(f"\0{bases}".encode())
    return digest.hexdigest()[:24]


def ensure_environment(
    client: DockerClient,
    context: Path,
    snapshot_file: str,
    buildargs: Mapping[str, str],
    bases: str,
    *,
    task: str,
    log_path: Path,
    timeout_sec: float,
) -> build_module.BuildOutcome | None:
    """Build the agent Dockerfile's steps before the snapshot on their own, once per machine
    (their tag says they exist): two workers or runs whose tasks share a cold environment
    build it once, the second waiting for the first. None when the Dockerfile adds no
    snapshot; else the environment image's build (`built` False when it was there).
    """
    from packager.images import build
    from packager.images.tar import make_tar

    head = _environment_dockerfile((context / "Dockerfile").read_text(), snapshot_file)
    if head is None:
        return None
    files = _environment_files(context, snapshot_file, head)
    tag = f"{ENVIRONMENT_REPOSITORY}:{environment_key(head, files, buildargs, bases)}"
    if build.image_exists(client, tag):
        return build.BuildOutcome(tag, False, 0.0, None)
    with machine_lock(f"env-{tag.rsplit(':', 1)[1]}", build.check_cancelled):
        return build.build_image(  # returns at once when the holder before us built it
            client,
            task=task,
            role="environment",
            context=context,
            tag=tag,
            log_path=log_path,
            timeout_sec=timeout_sec,
            buildargs=dict(buildargs),
            context_tar=make_tar({**files, "Dockerfile": head.encode()}),
        )


def build_task(
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    repo_sources: dict[str, str],
    opts: BuildOptions,
) -> dict[str, object]:
    """Snapshot the repository into the agent context, then build agent and grader images.

    Returns a summary dict (tags, built or cached, durations, log paths).
    """
    import shutil
    import tempfile

    from packager import repos
    from packager.errors import RepoSourceError
    from packager.images import build, flatten
    from packager.render.harbor import SNAPSHOT_FILE, make_harbor_task

    task = make_harbor_task(spec)
    slug = spec.provenance.slug
    task_dir = paths.task_dir(slug)
    logs = paths.log_dir(slug)
    label = f"{spec.provenance.dataset}/{slug}"
    outcome: dict[str, object] = {
        "agent_image": task.agent_image,
        "grader_image": task.grader_image,
    }
    buildargs: dict[str, str] = {}
    dockerfile_text = (task_dir / "environment" / "Dockerfile").read_text()
    agent_labels: dict[str, str] = {}
    flattened: flatten.FlattenOutcome | None = None
    flatten_log = logs / "build-flatten.log"
    flat = _flat_base(client, spec, dockerfile_text, label, opts, flatten_log)
    if flat is not None:
        buildargs["PACKAGER_BASE"] = flat.tag
        agent_labels = flat.agent_labels

    def ensure_flat() -> flatten.FlattenOutcome:
        assert flat is not None
        return flattened or flatten.flatten_image(
            client, flat, task=label, log_path=flatten_log, timeout_sec=opts.timeout_sec
        )

    if opts.ca_bundle is not None:
        # The image trusting the extra CA stands in for the first base (made FROM the flat
        # image of a published one): it is the one recorded, so an agent image built without
        # that CA (or with another, or on another published image) is rebuilt.
        build.check_base_images(
            client, dockerfile_text, task=label, log_path=logs / "build-agent.log", pull=opts.pull
        )
        if flat is not None:
            flattened = ensure_flat()
        buildargs["PACKAGER_BASE"] = build.ca_base_image(
            client,
            flat.tag if flat is not None else build.first_from(dockerfile_text),
            opts.ca_bundle,
            logs,
        )
        bases = build.base_ids(client, f"FROM {buildargs['PACKAGER_BASE']}\n")
    else:
        # For a published image: its id, not the flat image's (which is derived from it), so
        # a re-pulled image makes the agent image stale here and in `cached_result` alike.
        bases = build.base_ids(client, dockerfile_text)
    rebuild = build.image_exists(client, task.agent_image) and (
        build.stale_bases(client, task.agent_image, bases)
        or (
            flat is not None
            and build.image_label(client, task.agent_image, flatten.LABEL_FLAT_BASE) != flat.tag
        )
    )
    if rebuild or not build.image_exists(client, task.agent_image):
        with tempfile.TemporaryDirectory(prefix="packager-snap-") as tmp:
            snap = Path(tmp) / "repo"
            git_dir = None
            if spec.repo.files is None:
                git_dir = repos.git_dir_for(
                    repos.source_for(spec.repo.name, repo_sources, mirror_dirs=opts.mirror_dirs)
                )
                if not repos.has_commit(git_dir, spec.repo.base_commit):
                    raise RowError(
                        spec.task_id,
                        "base_commit",
                        f"commit {spec.repo.base_commit} not found in repo source",
                    )
            head = repos.write_snapshot_repo(
                snap,
                git_dir=git_dir,
                base_commit=spec.repo.base_commit,
                files=spec.repo.files,
                history=spec.repo.history,
                log_path=logs / "snapshot.log",
                task=spec.task_id,
            )
            if head != spec.repo.head:
                raise RepoSourceError(
                    spec.task_id,
                    "base_commit",
                    f"the snapshot's HEAD is {head}, expected {spec.repo.head}",
                )
            repos.write_snapshot_tar(snap, task_dir / "environment" / SNAPSHOT_FILE)
        context = task_dir / "environment"
        build.check_base_images(
            client,
            (context / "Dockerfile").read_text(),
            task=label,
            log_path=logs / "build-agent.log",
            pull=opts.pull,
        )
        if flat is not None:
            flattened = ensure_flat()
        if "PACKAGER_BASE" in buildargs:
            ca_ctx = Path(tempfile.mkdtemp(prefix="packager-ctx-"))
            shutil.copytree(context, ca_ctx, dirs_exist_ok=True)
            (ca_ctx / "Dockerfile").write_text(build.with_base_override(dockerfile_text))
            context = ca_ctx
        try:
            # The environment first, once per machine: the agent build then takes its layers
            # from the engine's cache and only adds the snapshot and what follows it.
            environment = ensure_environment(
                client,
                context,
                SNAPSHOT_FILE,
                buildargs,
                bases,
                task=label,
                log_path=logs / "build-environment.log",
                timeout_sec=opts.timeout_sec,
            )
            agent = build.build_image(
                client,
                task=label,
                role="agent",
                context=context,
                tag=task.agent_image,
                log_path=logs / "build-agent.log",
                timeout_sec=opts.timeout_sec,
                buildargs=buildargs,
                labels={build.LABEL_BASES: bases, **agent_labels},
                force=rebuild,
            )
        finally:
            if context != task_dir / "environment":
                shutil.rmtree(context, ignore_errors=True)
        if environment is not None and environment.built:
            outcome["environment_build_sec"] = round(environment.duration_sec, 3)
            outcome["environment_log"] = str(environment.log_path)
        outcome["agent_built"] = agent.built
        outcome["agent_build_sec"] = round(agent.duration_sec, 3)
        outcome["agent_log"] = str(agent.log_path)
    else:
        outcome["agent_built"] = False
    if spec.grading.rule == "judge" and (
        rebuild or not build.image_exists(client, task.grader_image)
    ):
        from packager.judge.image import ensure_judge_image

        ensure_judge_image(client, logs)
    grader = build.build_image(
        client,
        task=label,
        role="grader",
        context=task_dir / "tests",
        tag=task.grader_image,
        log_path=logs / "build-grader.log",
        timeout_sec=opts.timeout_sec,
        force=rebuild,
    )
    outcome["agent_rebuilt_for_new_base"] = rebuild
    if flat is not None:
        # The agent image carries this flat image's label (built now, or checked above).
        outcome["flattened_from"] = flat.source
        outcome["flatten_sec"] = round(flattened.duration_sec, 3) if flattened else 0.0
        if flattened is not None:
            outcome["flatten_mb"] = flattened.size_mb
        elif build.image_exists(client, flat.tag):
            outcome["flatten_mb"] = build.image_size_mb(client, flat.tag)
        if flattened is not None and flattened.log_path is not None:
            outcome["flatten_log"] = str(flattened.log_path)
    outcome["grader_built"] = grader.built
    outcome["grader_build_sec"] = round(grader.duration_sec, 3)
    if grader.log_path:
        outcome["grader_log"] = str(grader.log_path)
    return outcome


@dataclass(frozen=True)
class Staged:
    """A task whose images are built and audited, ready for its runs (the run stage)."""

    spec: TaskSpec
    images: dict[str, str]
    image_ids: dict[str, str]
    durations: dict[str, float]
    logs: dict[str, str]
    finish: Callable[..., TaskResult]
    """The task's result with its images, durations and logs: finish(status, reason=None)."""
    environment: dict[str, str] = field(default_factory=dict)
    """Facts of the agent image's environment (TaskResult.environment)."""


def package_one(
    spec: TaskSpec,
    paths: OutputPaths,
    repo_sources: dict[str, str],
    *,
    build_opts: BuildOptions,
    verify: bool,
    oracle_runs: int,
    client: DockerClient,
    memory_mb: int | None = None,
    engine: str = "local",
    judge_env: Mapping[str, str] | None = None,
    harbor_env: str = "docker",
) -> TaskResult:
    """Build and (optionally) verify one task; every failure becomes this task's result.

    `judge_env` names a browser judge's model endpoint (PACKAGER_JUDGE_*): without it a
    judge task stops at `needs_judge` after its app check. `engine` and `harbor_env` (Harbor's
    environment type) are as for `run_stage`.

    Only an interruption (Ctrl-C: `build.Cancelled`) escapes: an interrupted task has no result.
    """
    from packager.models.spec import TaskResult

    staged = build_stage(
        spec,
        paths,
        repo_sources,
        build_opts=build_opts,
        verify=verify,
        client=client,
        engine=engine,
        judge_env=judge_env,
    )
    if isinstance(staged, TaskResult):
        return staged
    if not verify:
        return staged.finish("built")
    return run_stage(
        staged,
        paths,
        oracle_runs=oracle_runs,
        client=client,
        memory_mb=memory_mb,
        engine=engine,
        judge_env=judge_env,
        harbor_env=harbor_env,
    )


def build_stage(
    spec: TaskSpec,
    paths: OutputPaths,
    repo_sources: dict[str, str],
    *,
    build_opts: BuildOptions,
    verify: bool,
    client: DockerClient,
    engine: str = "local",
    judge_env: Mapping[str, str] | None = None,
) -> TaskResult | Staged:
    """Build and audit one task (and prove a web app answers): its final result when it ends
    here (build_failed, leak, needs_judge, ...), else what its runs need.
    """
    import time

    from packager.errors import BuildError, PackagerError, RepoSourceError
    from packager.images.build import Cancelled, check_cancelled
    from packager.models.spec import Status, TaskResult

    check_cancelled()

    slug = spec.provenance.slug
    base = {
        "task": slug,
        "instance_id": spec.task_id,
        "dataset": spec.provenance.dataset,
        "engine": engine,
        "expected_nop": spec.expectations.nop_reward,
    }
    started = time.monotonic()
    try:
        built = build_task(client, spec, paths, repo_sources, build_opts)
    except BuildError as exc:
        return TaskResult(
            **base,
            status="build_failed",
            reason=build_failure_reason(exc, spec),
            logs={"dir": str(paths.log_dir(slug)), "build": str(exc.log_path)},
            environment=environment_facts(spec, {}),
        )
    except (RepoSourceError, RowError) as exc:
        snapshot_log = paths.log_dir(slug) / "snapshot.log"
        return TaskResult(
            **base,
            status="build_failed",
            reason=str(exc),
            logs={
                "dir": str(paths.log_dir(slug)),
                **({"snapshot": str(snapshot_log)} if snapshot_log.is_file() else {}),
            },
        )
    except PackagerError as exc:
        return TaskResult(
            **base,
            status="infra_error",
            reason=str(exc),
            logs={"dir": str(paths.log_dir(slug))},
        )
    except Cancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - docker/requests errors: the daemon went away
        return TaskResult(
            **base,
            status="infra_error",
            reason=f"{type(exc).__name__}: {exc}",
            logs={"dir": str(paths.log_dir(slug))},
        )
    check_cancelled()
    images = {"agent": str(built["agent_image"]), "grader": str(built["grader_image"])}
    try:
        image_ids = {k: str(client.images.get(v).id) for k, v in images.items()}
    except Exception:  # noqa: BLE001 - a fake or failing engine: ids are only a cache key
        image_ids = {}
    durations = {"build": round(time.monotonic() - started, 3)}
    # A published image's flattening, an environment this task built (not found built).
    extra = tuple(k for k in ("flatten_sec", "environment_build_sec") if k in built)
    for key in ("agent_build_sec", "grader_build_sec", *extra):  # 0 when it was there
        seconds = built.get(key)
        durations[key.removesuffix("_sec")] = (
            float(seconds) if isinstance(seconds, int | float) else 0.0
        )
    logs = {k: str(v) for k, v in built.items() if k.endswith("_log")}
    environment = environment_facts(spec, built)
    from packager.checks.audit import AuditError, audit_path, audit_task

    def finish(status: Status, reason: str | None = None) -> TaskResult:
        """The task's result once its images exist (with them, its durations and logs)."""
        return TaskResult(
            **base,
            status=status,
            reason=reason,
            images=images,
            image_ids=image_ids,
            durations=durations,
            logs={"dir": str(paths.log_dir(slug)), **logs},
            environment=environment,
        )

    try:
        audit = audit_task(client, spec, paths)
    except AuditError as exc:
        return finish("infra_error", str(exc))
    durations["audit"] = float(audit.stats["seconds"])
    logs["audit"] = str(audit_path(paths, slug))
    if not audit.clean:
        return finish("leak", audit.summary())
    if spec.grading.rule == "judge":
        from packager.checks.webapp import AppStart, check_app_answers
        from packager.errors import RunError

        g = spec.grading
        assert g.app_start is not None and g.app_port is not None
        start = AppStart(g.app_start, g.app_port, g.app_start_how or "")
        try:
            durations["app_check"] = round(
                check_app_answers(
                    client,
                    images["agent"],
                    start,
                    workdir=spec.repo.workdir,
                    log_path=paths.log_dir(slug) / "app-check.log",
                    task=f"{spec.provenance.dataset}/{slug}",
                ),
                3,
            )
        except RunError as exc:
            logs["app_check"] = str(paths.log_dir(slug) / "app-check.log")
            return finish("infra_error", f"the app does not answer HTTP: {exc.reason}")
        logs["app_check"] = str(paths.log_dir(slug) / "app-check.log")
        from packager.judge.endpoint import missing_judge_env

        missing = missing_judge_env(judge_env)
        if verify and missing:
            return finish(
                "needs_judge",
                f"the app starts and answers HTTP on port {g.app_port} ({g.app_start_how}: "
                f"{g.app_start}); its workflows are judged by a model in a browser: set "
                f"{' and '.join(missing)} (the model's OpenAI-compatible endpoint and name; "
                "PACKAGER_JUDGE_API_KEY if it needs a key), or pass --judge replay for the "
                "recorded turns of a sample",
            )
    return Staged(spec, images, image_ids, durations, logs, finish, environment)


def build_failure_reason(exc: BuildError, spec: TaskSpec) -> str:
    """A build error's text, followed by the environment step that failed (with the package
    and the step's last lines) when the agent image's log shows it.
    """
    from packager.images.failures import explain

    log_path = exc.log_path
    if log_path is None or log_path.name != "build-agent.log" or not log_path.is_file():
        return str(exc)
    failure = explain(log_path.read_text(encoding="utf-8", errors="replace"), spec.environment)
    return f"{failure.sentence()} ({exc})" if failure is not None else str(exc)


def environment_facts(spec: TaskSpec, built: Mapping[str, object]) -> dict[str, str]:
    """What a task's result says of its environment: where it came from (task metadata, set
    by the adapter) and what the build did to it (a published image flattened).
    """
    meta = spec.provenance.metadata
    facts = {fact: str(meta[key]) for key, fact in ENVIRONMENT_KEYS.items() if meta.get(key)}
    flattened = built.get("flattened_from")
    if flattened:
        facts["flattened_from"] = str(flattened)
    return facts


ENVIRONMENT_KEYS = {
    "environment_source": "source",
    "python_requested": "python_requested",
    "python_used": "python_used",
    "python_base": "python_base",
}
"""Task metadata key -> the result's `environment` fact it becomes."""


def run_stage(
    staged: Staged,
    paths: OutputPaths,
    *,
    oracle_runs: int,
    client: DockerClient,
    memory_mb: int | None = None,
    engine: str = "local",
    judge_env: Mapping[str, str] | None = None,
    harbor_env: str = "docker",
) -> TaskResult:
    """Oracle and nop runs of a built task by the engine named `engine` (`packager.engines`),
    its trials in environments of type `harbor_env` (Harbor's `--env`; only `docker` for the
    local engine); every failure of a run becomes the task's result.

    An unknown engine, or an environment type the engine cannot use, raises InputError before
    anything runs: that is the command line's fault, not the task's.
    """
    from packager.engines import VerifyRequest, get_engine
    from packager.errors import PackagerError
    from packager.images.build import Cancelled, check_cancelled

    spec, finish = staged.spec, staged.finish
    check_cancelled()
    runner = get_engine(engine, environment=harbor_env)
    try:
        verified = runner.verify(
            VerifyRequest(
                spec,
                paths,
                client=client,
                images=staged.images,
                oracle_runs=oracle_runs,
                durations=staged.durations,
                extra_logs=staged.logs,
                memory_mb=memory_mb,
                judge_env=judge_env,
            )
        )
        return verified.model_copy(
            update={"image_ids": staged.image_ids, "environment": staged.environment}
        )
    except Cancelled:
        raise
    except PackagerError as exc:
        return finish("infra_error", str(exc))
    except Exception as exc:  # noqa: BLE001 - docker/requests errors: the daemon went away
        return finish("infra_error", f"{type(exc).__name__}: {exc}")


def error_file(paths: OutputPaths, slug: str) -> Path:
    """results/<task>.error.json: an infra_error that did not replace an earlier verdict."""
    return paths.base / "results" / f"{slug}.error.json"


def write_result(paths: OutputPaths, result: TaskResult) -> Path:
    """results/<task>.json, atomically; returns the path written.

    An `infra_error` (the run did not complete) never replaces an earlier verdict: when
    results/<task>.json holds a result of another status it stays untouched, and the error goes
    to results/<task>.error.json. Any other result replaces results/<task>.json and removes a
    stale error file.
    """
    from packager.models.spec import TaskResult
    from packager.render.write import write_json

    target = paths.result_file(result.task)
    if result.status == "infra_error" and target.is_file():
        try:
            previous = TaskResult.model_validate_json(target.read_text())
        except ValueError:
            previous = None
        if previous is not None and previous.status != "infra_error":
            target = error_file(paths, result.task)
    elif result.status != "infra_error":
        error_file(paths, result.task).unlink(missing_ok=True)
    write_json(target, result.model_dump(mode="json"))
    return target


def cached_result(
    paths: OutputPaths,
    spec: TaskSpec,
    *,
    oracle_runs: int,
    engine: str = "local",
    client: DockerClient | None = None,
) -> TaskResult | None:
    """The task's saved result when it is `verified` for the very images this spec renders to,
    by the same engine, with at least `oracle_runs` oracle runs: a rerun skips such a task.

    With a client, the images must also still be the ones verified (same ids) and the agent
    image's base images unchanged since it was built.
    """
    from packager.models.spec import TaskResult
    from packager.render.harbor import make_harbor_task

    target = paths.result_file(spec.provenance.slug)
    if not target.is_file():
        return None
    try:
        previous = TaskResult.model_validate_json(target.read_text())
    except ValueError:
        return None
    task = make_harbor_task(spec)
    same = previous.images == {"agent": task.agent_image, "grader": task.grader_image}
    if not (
        previous.status == "verified"
        and same
        and previous.engine == engine
        and len(previous.oracle) >= oracle_runs
    ):
        return None
    if client is not None and previous.image_ids:
        from packager.images import build

        try:
            current = {k: client.images.get(v).id for k, v in previous.images.items()}
            dockerfile = paths.task_dir(spec.provenance.slug) / "environment" / "Dockerfile"
            stale = build.stale_bases(
                client, task.agent_image, build.base_ids(client, dockerfile.read_text())
            )
        except Exception:  # noqa: BLE001 - an image is gone: verify again
            return None
        if current != previous.image_ids or stale:
            return None
    return previous


def read_results(paths: OutputPaths) -> list[TaskResult]:
    """Every results/<task>.json of a dataset, sorted by task."""
    from packager.models.spec import TaskResult

    folder = paths.base / "results"
    if not folder.is_dir():
        return []
    return [
        TaskResult.model_validate_json(p.read_text())
        for p in sorted(folder.glob("*.json"))
        if not p.name.endswith((".audit.json", ".error.json", ".quality.json"))
    ]


def write_report(paths: OutputPaths, disk: dict[str, int] | None = None) -> Path:
    """report.md and report.html (self-contained: a status chart and seconds per stage per
    task) from every result of the dataset, with `disk`: the tool's Docker disk use.
    """
    from packager.checks.quality import read_quality
    from packager.release.report import QualityRow, make_html, make_markdown, quality_markdown
    from packager.render.write import write_text

    results = read_results(paths)
    text = make_markdown(paths.dataset, results)
    quality: list[QualityRow] = []
    for result in results:
        found = read_quality(paths, result.task)
        if found is None:
            continue
        covered = f"{found.covered}/{found.total}" if found.covered is not None else "-"
        uncovered = "; ".join(h.where for h in found.hunks if h.covered is False)
        leaks = "; ".join(f"{leak.kind}: {leak.text[:60]}" for leak in found.leaks)
        quality.append((result.instance_id, covered, uncovered, leaks or "no"))
    text += quality_markdown(quality)
    if disk is not None:
        from packager.release.clean import human

        text += (
            f"\nDocker disk use of packager images: {disk['images']} images, "
            f"{human(disk['size_bytes'])} ({human(disk['unique_bytes'])} not shared).\n"
        )
    write_text(paths.report_file, text)
    write_text(
        paths.report_file.with_suffix(".html"), make_html(paths.dataset, results, disk, quality)
    )
    return paths.report_file
