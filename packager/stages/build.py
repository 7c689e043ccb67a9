"""Building one task's images: the repository snapshot into the agent context, the agent image
(FROM a flattened copy of a published image, or through an extra CA, when asked; its environment
first, once per machine), the grader image. `build_task` says what it did in a `BuildOutcome`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from packager import repos
from packager.context import RunContext
from packager.defaults import BUILD_TIMEOUT_SEC
from packager.errors import BuildError, RepoSourceError, RowError
from packager.images import build, flatten, wheelhouse
from packager.images.failures import explain
from packager.images.flatten import LABEL_FLAT_BASE, flatten_image
from packager.images.judge_build import ensure_judge_image
from packager.models.spec import TaskSpec
from packager.render.harbor import HISTORY_FILE, SNAPSHOT_FILE, SNAPSHOT_FILES, make_harbor_task
from packager.repos.git import Git
from packager.repos.read import read_file
from packager.repos.sources import RepoSource, RepoSources
from packager.repos.stored import write_snapshot
from packager.repos.submodules import resolve_submodules
from packager.stages.environment import dropped_in_log, dropped_packages, ensure_environment
from packager.storage import OutputPaths
from packager.toolchains import first_need, uses_npm_registry

if TYPE_CHECKING:
    from collections.abc import Callable

    from packager.errors import BuildError
    from packager.images.build import DockerClient
    from packager.images.flatten import FlatBase, FlattenOutcome


class ImageTags(NamedTuple):
    """The agent and grader image tags a spec renders to (content digests of their contexts)."""

    agent: str
    grader: str

    @property
    def images(self) -> dict[str, str]:
        """As a result's `images`: role -> tag."""
        return {"agent": self.agent, "grader": self.grader}


class Rendered(NamedTuple):
    """What a task's render decided, carried from the render to its build, its cache check and
    its results (the task is rendered once per run): its image tags and its folder's digest.
    """

    tags: ImageTags
    digest: str


def image_tags(spec: TaskSpec) -> ImageTags:
    """The spec's image tags. It renders the task tree: compute them once per task and pass
    them on.
    """
    task = make_harbor_task(spec)
    return ImageTags(task.agent_image, task.grader_image)


@dataclass(frozen=True)
class ImageBuild:
    """One image of a task's build: its tag, whether this build made it, its seconds (0 when it
    was there) and its build log (None when nothing was logged).
    """

    tag: str
    built: bool = False
    seconds: float = 0.0
    log: str | None = None


@dataclass(frozen=True)
class Flattening:
    """The flat copy of a published image the agent image is built FROM."""

    source: str
    """The published image, by id (`flattened_from`)."""
    seconds: float
    """0 when it was there already."""
    mb: float | None
    log: str | None


@dataclass(frozen=True)
class BuildOutcome:
    """What `build_task` did: the task's two images, the environment image it built (None when
    it was there or there is none), the flattening of a published image.
    """

    agent: ImageBuild
    grader: ImageBuild
    environment: ImageBuild | None = None
    flattening: Flattening | None = None
    rebuilt_for_new_base: bool = False
    """The agent image existed but its bases (or its flat image) had changed."""
    snapshot_seconds: float | None = None
    """Seconds the repository snapshot took (None when the agent image was there)."""
    environment_image: str | None = None
    """The environment image's tag, built now or there before (None when the agent image was
    there, or its Dockerfile adds no snapshot)."""

    @property
    def images(self) -> dict[str, str]:
        return {"agent": self.agent.tag, "grader": self.grader.tag}

    @property
    def flattened_from(self) -> str | None:
        return self.flattening.source if self.flattening is not None else None

    def durations(self) -> dict[str, float]:
        """Seconds per build step, as a result's `durations` keys them."""
        seconds = {"agent_build": self.agent.seconds, "grader_build": self.grader.seconds}
        if self.flattening is not None:
            seconds["flatten"] = self.flattening.seconds
        if self.environment is not None:
            seconds["environment_build"] = self.environment.seconds
        if self.snapshot_seconds is not None:
            seconds["snapshot"] = self.snapshot_seconds
        return seconds

    @property
    def dropped(self) -> list[str]:
        """Requirements the environment's build dropped (pip could not install them), each
        with the spec key it came from: recorded per environment image, so a task built on an
        image another task built reports them too.
        """
        if self.environment_image is not None:
            return dropped_packages(self.environment_image)
        if self.agent.built and self.agent.log:  # no environment image: its own log says
            return dropped_in_log(Path(self.agent.log).read_text(errors="replace"))
        return []

    def logs(self) -> dict[str, str]:
        """Build logs, as a result's `logs` keys them."""
        logs = {
            "environment_log": self.environment.log if self.environment else None,
            "agent_log": self.agent.log,
            "flatten_log": self.flattening.log if self.flattening else None,
            "grader_log": self.grader.log,
        }
        return {key: log for key, log in logs.items() if log is not None}


@dataclass(frozen=True)
class BuildOptions:
    """Knobs of the build stage."""

    timeout_sec: float = BUILD_TIMEOUT_SEC
    ca_bundle: Path | None = None
    pull: bool = False
    """Let the engine pull missing base images; off by default, so a missing base fails fast."""
    mirror_dirs: tuple[str, ...] = ()
    """Folders of repository mirrors (`--repo-source DIR`)."""
    run: RunContext = field(default_factory=RunContext)
    """The run the builds belong to (they stop waiting when it is cancelled); every build step
    has the build options, so the run's context travels with them."""


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


@dataclass
class _AgentPlan:
    """How a task's agent image is built: its Dockerfile, build arguments and labels, the ids
    of its bases, whether an existing image must be rebuilt, its flat base (flattened once).
    """

    client: DockerClient
    label: str
    logs: Path
    opts: BuildOptions
    dockerfile: str
    flat: FlatBase | None
    buildargs: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    bases: str = ""
    rebuild: bool = False
    flattened: FlattenOutcome | None = None
    snapshot_seconds: float | None = None
    """Seconds the snapshot took (None: not written, the agent image was there)."""
    environment_image: str | None = None
    """The environment image the agent image was built on (None: not built now, or none)."""

    def ensure_flat(self) -> None:
        """Flatten the published image (once; it returns at once when the flat image exists)."""
        assert self.flat is not None
        self.flattened = self.flattened or flatten_image(
            self.client,
            self.flat,
            task=self.label,
            log_path=self.logs / "build-flatten.log",
            timeout_sec=self.opts.timeout_sec,
            run=self.opts.run,
        )

    def check_bases(self, dockerfile: str) -> None:
        build.check_base_images(
            self.client,
            dockerfile,
            task=self.label,
            log_path=self.logs / "build-agent.log",
            pull=self.opts.pull,
        )


def _plan_agent(
    client: DockerClient, spec: TaskSpec, paths: OutputPaths, opts: BuildOptions, agent_tag: str
) -> _AgentPlan:
    """The agent image's plan: its flat base, the CA image standing in for its first base, the
    ids of its bases and whether the existing image is stale.
    """
    slug = spec.provenance.slug
    logs = paths.log_dir(slug)
    label = f"{spec.provenance.dataset}/{slug}"
    dockerfile = (paths.task_dir(slug) / "environment" / "Dockerfile").read_text()
    flat = _flat_base(client, spec, dockerfile, label, opts, logs / "build-flatten.log")
    plan = _AgentPlan(client, label, logs, opts, dockerfile, flat)
    if uses_npm_registry(spec.environment.toolchain):
        registry = host_npm_registry()
        if registry:
            plan.buildargs["NPM_CONFIG_REGISTRY"] = registry
    if flat is not None:
        plan.buildargs["PACKAGER_BASE"] = flat.tag
        plan.labels = flat.agent_labels
    if opts.ca_bundle is not None:
        # The image trusting the extra CA stands in for the first base (made FROM the flat
        # image of a published one): it is the one recorded, so an agent image built without
        # that CA (or with another, or on another published image) is rebuilt.
        plan.check_bases(dockerfile)
        if flat is not None:
            plan.ensure_flat()
        plan.buildargs["PACKAGER_BASE"] = build.ca_base_image(
            client,
            flat.tag if flat is not None else build.first_from(dockerfile),
            opts.ca_bundle,
            logs,
        )
        plan.bases = build.base_ids(client, f"FROM {plan.buildargs['PACKAGER_BASE']}\n")
    else:
        # For a published image: its id, not the flat image's (which is derived from it), so
        # a re-pulled image makes the agent image stale here and in `cached_result` alike.
        plan.bases = build.base_ids(client, dockerfile)
    plan.rebuild = build.image_exists(client, agent_tag) and (
        build.stale_bases(client, agent_tag, plan.bases)
        or (flat is not None and build.image_label(client, agent_tag, LABEL_FLAT_BASE) != flat.tag)
    )
    return plan


@functools.cache
def host_npm_registry() -> str | None:
    """The npm registry this machine's npm uses (`NPM_CONFIG_REGISTRY`, else `npm config get
    registry`), read once; None when npm is not installed or says nothing.
    """
    import subprocess

    named = os.environ.get("NPM_CONFIG_REGISTRY") or os.environ.get("npm_config_registry")
    if named:
        return named
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        done = subprocess.run(
            [npm, "config", "get", "registry"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value.startswith(("http://", "https://")) else None


def _write_snapshot(
    spec: TaskSpec, paths: OutputPaths, repo_sources: dict[str, str], opts: BuildOptions
) -> float:
    """The repository at the task's base commit, as the snapshot tar of the agent context
    (from the machine's snapshot cache when this repository state was written before);
    returns its seconds.
    """
    import time

    started = time.monotonic()
    slug = spec.provenance.slug
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
    context = paths.task_dir(slug) / "environment"
    written = write_snapshot(
        context / SNAPSHOT_FILE,
        history_path=context / HISTORY_FILE if layered(context / "Dockerfile") else None,
        git_dir=git_dir,
        repo=spec.repo.name,
        submodules=_submodule_resolver(repo_sources, opts),
        submodules_required=_fetches_submodules(spec),
        base_commit=spec.repo.base_commit,
        files=spec.repo.files,
        history=spec.repo.history,
        log_path=paths.log_dir(slug) / "snapshot.log",
        task=spec.task_id,
    )
    if written.head != spec.repo.head:
        raise RepoSourceError(
            spec.task_id,
            "base_commit",
            f"the snapshot's HEAD is {written.head}, expected {spec.repo.head}",
        )
    return round(time.monotonic() - started, 3)


def layered(dockerfile: Path) -> bool:
    """Whether an agent Dockerfile adds the snapshot as a history layer and a row layer
    (`repos.layers`; a recipe's Dockerfile that adds the snapshot itself does not).
    """
    return re.search(rf"^ADD {re.escape(HISTORY_FILE)} ", dockerfile.read_text(), re.M) is not None


def drop_snapshot(context: Path) -> None:
    """Take the snapshot's tars out of a task's agent context once its build is over: the
    machine's snapshot cache keeps them (once per repository state, the history layer once
    per tag) and the next build links them in again, so an output folder holds no
    repository; Harbor and HUD run the built images. Task digests never included them.
    """
    for name in SNAPSHOT_FILES:
        (context / name).unlink(missing_ok=True)


def _link_or_copy(src: str, dst: str) -> None:
    """A file of a build context copied for one build: hard-linked (the snapshot tar is
    hundreds of MB), or copied across file systems.
    """
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _build_agent(
    spec: TaskSpec,
    paths: OutputPaths,
    repo_sources: dict[str, str],
    plan: _AgentPlan,
    tag: str,
) -> tuple[ImageBuild, ImageBuild | None]:
    """Snapshot the repository, then build the environment (when this task must) and the agent
    image; returns the agent's build and the environment's when this task built it.
    """
    own_context = paths.task_dir(spec.provenance.slug) / "environment"
    try:
        plan.snapshot_seconds = _write_snapshot(spec, paths, repo_sources, plan.opts)
        return _build_agent_context(spec, plan, tag, own_context)
    finally:
        drop_snapshot(own_context)


def _build_agent_context(
    spec: TaskSpec, plan: _AgentPlan, tag: str, own_context: Path
) -> tuple[ImageBuild, ImageBuild | None]:
    """`_build_agent` once the snapshot is in the task's agent context."""
    context = own_context
    plan.check_bases((context / "Dockerfile").read_text())
    if plan.flat is not None:
        plan.ensure_flat()
    if "PACKAGER_BASE" in plan.buildargs:
        context = Path(tempfile.mkdtemp(prefix="packager-ctx-"))
        shutil.copytree(own_context, context, dirs_exist_ok=True, copy_function=_link_or_copy)
        (context / "Dockerfile").unlink()  # never written through a link to the task's own
        (context / "Dockerfile").write_text(build.with_base_override(plan.dockerfile))
    try:
        # The environment first, once per machine: the agent build then takes its layers
        # from the engine's cache and only adds the snapshot and what follows it.
        environment = ensure_environment(
            plan.client,
            context,
            SNAPSHOT_FILES,
            plan.buildargs,
            plan.bases,
            task=plan.label,
            log_path=plan.logs / "build-environment.log",
            timeout_sec=plan.opts.timeout_sec,
            run=plan.opts.run,
        )
        agent = build.build_image(
            plan.client,
            task=plan.label,
            role="agent",
            context=context,
            tag=tag,
            log_path=plan.logs / "build-agent.log",
            timeout_sec=plan.opts.timeout_sec,
            buildargs=plan.buildargs,
            labels={build.LABEL_BASES: plan.bases, **plan.labels},
            force=plan.rebuild,
            # Environment steps the cache lacks (no snapshot line: no environment image) then
            # take the machine's wheels too; the hosts entry is in no cache key.
            extra_hosts=wheelhouse.build_hosts(plan.client, plan.opts.run),
            run=plan.opts.run,
        )
    finally:
        if context != own_context:
            shutil.rmtree(context, ignore_errors=True)
    env_build = None
    if environment is not None:
        plan.environment_image = environment.tag
    if environment is not None and environment.built:
        env_build = ImageBuild(
            environment.tag, True, round(environment.duration_sec, 3), str(environment.log_path)
        )
    return ImageBuild(
        tag, agent.built, round(agent.duration_sec, 3), str(agent.log_path)
    ), env_build


def _build_grader(
    client: DockerClient, spec: TaskSpec, paths: OutputPaths, plan: _AgentPlan, tag: str
) -> ImageBuild:
    """The grader image (and the browser judge's image it starts FROM, for a judge task)."""
    if spec.grading.browser_judged and (plan.rebuild or not build.image_exists(client, tag)):
        ensure_judge_image(client, plan.logs)
    grader = build.build_image(
        client,
        task=plan.label,
        role="grader",
        context=paths.task_dir(spec.provenance.slug) / "tests",
        tag=tag,
        log_path=plan.logs / "build-grader.log",
        timeout_sec=plan.opts.timeout_sec,
        force=plan.rebuild,
        # Wheels of what the gold patch declares, and the installers an agent image holds none
        # of, come through the machine's wheelhouse (and the index as of the environment's
        # date); the hosts entry is in no cache key.
        extra_hosts=(
            wheelhouse.build_hosts(client, plan.opts.run)
            if spec.grading.refresh_requirements or spec.environment.installers_out
            else None
        ),
        run=plan.opts.run,
    )
    log = str(grader.log_path) if grader.log_path else None
    return ImageBuild(tag, grader.built, round(grader.duration_sec, 3), log)


def _flattening(client: DockerClient, plan: _AgentPlan) -> Flattening | None:
    """The agent image's flat base (it carries that label: built now, or checked above)."""
    if plan.flat is None:
        return None
    done = plan.flattened
    mb: float | None = None
    if done is not None:
        mb = done.size_mb
    elif build.image_exists(client, plan.flat.tag):
        mb = build.image_size_mb(client, plan.flat.tag)
    return Flattening(
        source=plan.flat.source,
        seconds=round(done.duration_sec, 3) if done else 0.0,
        mb=mb,
        log=str(done.log_path) if done is not None and done.log_path is not None else None,
    )


def build_task(
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    repo_sources: dict[str, str],
    opts: BuildOptions,
    tags: ImageTags | None = None,
) -> BuildOutcome:
    """Snapshot the repository into the agent context, then build agent and grader images
    (`tags`: the spec's, when the caller has them already).
    """
    tags = tags or image_tags(spec)
    _check_registries(spec, repo_sources, opts)
    plan = _plan_agent(client, spec, paths, opts, tags.agent)
    agent, environment = ImageBuild(tags.agent), None
    if plan.rebuild or not build.image_exists(client, tags.agent):
        agent, environment = _build_agent(spec, paths, repo_sources, plan, tags.agent)
    grader = _build_grader(client, spec, paths, plan, tags.grader)
    return BuildOutcome(
        agent,
        grader,
        environment,
        _flattening(client, plan),
        plan.rebuild,
        plan.snapshot_seconds,
        plan.environment_image,
    )


def _fetches_submodules(spec: TaskSpec) -> bool:
    env = spec.environment
    return any("submodule" in command for command in (*env.pre_install, *env.install))


def _submodule_resolver(
    repo_sources: dict[str, str], opts: BuildOptions
) -> Callable[[str], Path | None]:
    """A submodule's URL -> the git directory of the repository source holding it (an
    explicit `--repo-source` or a folder of mirrors; never its URL: builds cannot reach it).
    """
    sources = RepoSources(dict(repo_sources), tuple(opts.mirror_dirs))

    def resolve(url: str) -> Path | None:
        location = sources.location_for(url)
        if location is None:
            return None
        name = repos.canonical_repo_name(url)
        return repos.git_dir_for(RepoSource(name, location))

    return resolve


def _check_registries(spec: TaskSpec, repo_sources: dict[str, str], opts: BuildOptions) -> None:
    """Fail at once (build_failed) when the repository's manifests at the base commit need a
    package registry this machine cannot reach, or its build fetches a submodule no
    repository source holds (naming its URL), rather than after a long build
    (packager.toolchains, packager.repos.submodules).
    """
    env = spec.environment
    fetches = _fetches_submodules(spec)
    if spec.repo.files is not None or (env.toolchain is None and not fetches):
        return

    git_dir = repos.git_dir_for(
        repos.source_for(spec.repo.name, repo_sources, mirror_dirs=opts.mirror_dirs)
    )
    if fetches:
        try:
            resolve_submodules(
                Git(spec.task_id), git_dir, spec.repo.base_commit, spec.repo.name,
                _submodule_resolver(repo_sources, opts), required=True,
            )  # fmt: skip
        except RepoSourceError as exc:
            raise BuildError(spec.task_id, "agent image", exc.problem, None) from None
    need = first_need(env.toolchain, lambda path: read_file(git_dir, spec.repo.base_commit, path))
    if need is not None:
        raise BuildError(spec.task_id, "agent image", need.sentence(), None)


BUILD_LOGS = ("build-agent.log", "build-environment.log")
"""Logs of builds made from the task's Environment, whose failed step `explain` can name."""


def build_failure_reason(exc: BuildError, spec: TaskSpec) -> str:
    """A build error's text, followed by the environment step that failed (with the package
    and the step's last lines) when the agent image's log shows it.
    """
    log_path = exc.log_path
    if log_path is None or log_path.name not in BUILD_LOGS or not log_path.is_file():
        return str(exc)
    failure = explain(log_path.read_text(encoding="utf-8", errors="replace"), spec.environment)
    return f"{failure.sentence()} ({exc})" if failure is not None else str(exc)


def environment_facts(spec: TaskSpec, flattened_from: str | None = None) -> dict[str, str]:
    """What a task's result says of its environment: where it came from (task metadata, set
    by the adapter) and what the build did to it (a published image flattened).
    """
    meta = spec.provenance.metadata
    facts = {
        fact: "; ".join(map(str, value)) if isinstance(value, list) else str(value)
        for key, fact in ENVIRONMENT_KEYS.items()
        if (value := meta.get(key))
    }
    if flattened_from:
        facts["flattened_from"] = flattened_from
    return facts


ENVIRONMENT_KEYS = {
    "environment_source": "source",
    "python_requested": "python_requested",
    "python_used": "python_used",
    "python_base": "python_base",
    "toolchain_requested": "toolchain_requested",
    "toolchain_used": "toolchain_used",
    "toolchain_base": "toolchain_base",
    "resolved_as_of": "resolved_as_of",
    "as_of_raised_by": "as_of_raised_by",
    "pins_moved_for_python": "pins_moved_for_python",
}
"""Task metadata key -> the result's `environment` fact it becomes."""
