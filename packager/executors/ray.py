"""The Ray executor: each task's build → audit → verify job on a Ray cluster (`packager[ray]`).

The driver (this process) renders, then sends one job per task to the cluster. A job carries
its rendered task folder (a tar of `tasks/<task>`, plus the task's saved audit so a clean audit
of the very same image is not repeated) and references to its repository's git bundle, shipped
once per repository through Ray's object store (or, with `shared_repos`, the repo sources'
own paths, which every node must then see). On its node the job:

1. uses that node's Docker engine (`DOCKER_HOST` of the node, else its default socket);
2. pulls from `--registry` any base image the engine lacks;
3. builds, audits and verifies exactly as the local executor does;
4. pushes the task's agent and grader images to `--registry` (verified or built tasks);
5. returns the result and the task's logs, which the driver writes under its output folder
   (paths rewritten to the driver's).

Placement: at most `workers_per_node` jobs at once per node. The driver pins each job to a node
(node affinity, not soft) and asks Ray for `CPU / workers_per_node` of that node, so Ray's own
resource accounting holds the cap even beside other work on the cluster. Nodes with no CPU
(a head started with `--num-cpus 0`) take no jobs. Nodes that join during a run are used.

Failures: a job whose node dies is `infra_error` naming the node; the node gets no further
jobs and the other tasks go on. Jobs are never retried by Ray (a rerun resumes instead, from
the results already returned). Ctrl-C cancels the jobs (each removes its containers as it
stops), then a cleanup job on every live node removes whatever containers of this run remain.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import os
import shutil
import socket
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packager import repos
from packager.config import ray_head
from packager.context import Cancelled
from packager.errors import Interrupted, RepoSourceError
from packager.executors import (
    ClusterUnavailableError,
    Events,
    ExecutorError,
)
from packager.images import build
from packager.models.spec import TaskResult, TaskSpec
from packager.release.publish import Registry, push_image
from packager.render import naming
from packager.repos.git import run_git
from packager.stages.job import Job, TaskJob
from packager.storage import RAY_REPOS, OutputPaths

if TYPE_CHECKING:
    from packager.config import RunConfig
    from packager.images.build import DockerClient
    from packager.models.spec import TaskResult, TaskSpec

RAY_VERSION = "2.60.0"
EXTRA_HINT = (
    "--executor ray needs Ray on this machine and on every node: "
    f"pip install 'packager[ray]' (ray=={RAY_VERSION})"
)
CLEANUP_TIMEOUT_SEC = 60.0
CONNECT_TIMEOUT_SEC = 5.0
NODE_REFRESH_SEC = 10.0


def head_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a `HOST:PORT` address (`config.ray_head`); ExecutorError when malformed."""
    try:
        return ray_head(address)
    except ValueError as exc:
        raise ExecutorError(str(exc)) from None


def import_ray() -> Any:
    """The `ray` module, or ExecutorError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(EXTRA_HINT) from None
    return ray


@dataclass
class Node:
    """A node of the cluster that takes jobs."""

    node_id: str
    address: str
    hostname: str
    cpus: float
    running: int = 0
    alive: bool = True

    @property
    def label(self) -> str:
        return f"{self.node_id[:12]} ({self.address}, {self.hostname})"


@dataclass
class _InFlight:
    spec: TaskSpec
    node: Node
    started: float = field(default_factory=time.monotonic)


def cpu_share(cpus: float, workers_per_node: int) -> float:
    """The CPU a job asks for on a node of `cpus`, so that exactly `workers_per_node` fit.

    Rounded down to Ray's resource precision (1e-4): 2 CPUs / 3 workers asks 0.6666 each, which
    fits three times (0.6667 would not).
    """
    if cpus <= 0:
        return 0.0
    return math.floor(cpus / workers_per_node * 10_000) / 10_000


def live_nodes(ray: Any) -> dict[str, Node]:
    """Every live node with CPUs (the ones that take jobs), by node id."""
    found = {}
    for info in ray.nodes():
        cpus = float((info.get("Resources") or {}).get("CPU", 0.0))
        if info.get("Alive") and cpus > 0:
            node_id = str(info["NodeID"])
            found[node_id] = Node(
                node_id,
                str(info.get("NodeManagerAddress", "?")),
                str(info.get("NodeManagerHostname", "?")),
                cpus,
            )
    return found


class RayExecutor:
    """Jobs on a Ray cluster at `address` (`auto`: the one this machine belongs to)."""

    name = "ray"

    def __init__(
        self,
        address: str,
        *,
        workers_per_node: int = 1,
        registry: Registry | None = None,
        shared_repos: bool = False,
        local_client: DockerClient | None = None,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.address = address
        self.workers_per_node = max(1, workers_per_node)
        self.registry = registry
        self.shared_repos = shared_repos
        self.local_client = local_client
        self.log = log

    @classmethod
    def from_config(
        cls, config: RunConfig, *, client: DockerClient | None, log: Callable[[str], None]
    ) -> RayExecutor:
        """The cluster at `--ray-address` (auto when not given), with the run's Ray options; the
        local engine, when one answers, pushes base images the nodes lack.
        """
        choice = config.executor
        return cls(
            choice.ray_address or "auto",
            workers_per_node=choice.workers_per_node,
            registry=Registry.parse(choice.registry) if choice.registry else None,
            shared_repos=choice.shared_repos,
            local_client=client if client is not None else build.local_engine_or_none(),
            log=log,
        )

    # -- driver ---------------------------------------------------------------------------

    def connect(self) -> Any:
        """`ray.init` against the cluster; ClusterUnavailableError when it does not answer."""
        ray = import_ray()
        if ray.is_initialized():
            return ray
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        head = head_endpoint(self.address)
        if head is not None:
            # ray.init retries an address that refuses connections for minutes: ask first.
            try:
                socket.create_connection(head, timeout=CONNECT_TIMEOUT_SEC).close()
            except OSError as exc:
                cause = f"{type(exc).__name__}: {exc}"
                raise ClusterUnavailableError(self._unavailable(cause)) from None
        try:
            ray.init(
                address=self.address,
                logging_level="ERROR",
                log_to_driver=False,
                namespace="packager",
            )
        except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError ...
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ClusterUnavailableError(
                self._unavailable(f"{type(exc).__name__}: {first}")
            ) from None
        return ray

    def _unavailable(self, cause: str) -> str:
        return (
            f"no Ray cluster answers at {self.address!r} ({cause}); start one with "
            "`ray start --head` (and `ray start --address HEAD:PORT` on each worker node), "
            "then pass --ray-address HEAD:PORT"
        )

    def run(self, specs: Sequence[TaskSpec], job: Job, events: Events) -> None:
        if not specs:
            return
        ray = self.connect()
        try:
            nodes = live_nodes(ray)
            if not nodes:
                raise ClusterUnavailableError(
                    f"the Ray cluster at {self.address!r} has no live node with CPUs to take jobs"
                )
            self.log(
                f"ray: {len(nodes)} node(s), at most {self.workers_per_node} job(s) per node: "
                + ", ".join(n.label for n in nodes.values())
            )
            repos = self._ship_repos(ray, specs, job)
            self._push_bases(specs, job)
            remote = ray.remote(max_retries=0, retry_exceptions=False)(run_job)
            payload = self._payload(job)
            queue: deque[TaskSpec] = deque(specs)
            inflight: dict[Any, _InFlight] = {}
            refreshed = time.monotonic()
            try:
                while queue or inflight:
                    if time.monotonic() - refreshed > NODE_REFRESH_SEC:
                        refreshed = time.monotonic()
                        for node_id, node in live_nodes(ray).items():
                            nodes.setdefault(node_id, node)  # joined during the run
                    while queue:
                        free = self._free_node(nodes)
                        if free is None:
                            break
                        spec = queue.popleft()
                        ref = self._submit(ray, remote, spec, free, job, payload, repos)
                        inflight[ref] = _InFlight(spec, free)
                        free.running += 1
                    if not inflight:
                        for spec in queue:  # no node left alive: nothing can run them
                            events.built()
                            events.result(
                                lost_result(spec, job, None, "no live Ray node left to run it")
                            )
                        queue.clear()
                        break
                    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                    for ref in ready:
                        flight = inflight.pop(ref)
                        flight.node.running -= 1
                        result = self._collect(ray, ref, flight, job)
                        if result is None:  # never started: its node was gone already
                            self.log(
                                f"ray: node {flight.node.label} was gone before "
                                f"{flight.spec.task_id} started there; placing it again"
                            )
                            queue.appendleft(flight.spec)
                            continue
                        events.built()
                        events.result(result)
            except KeyboardInterrupt:
                raise self._interrupt(ray, inflight, job) from None
        finally:
            if ray.is_initialized():
                ray.shutdown()

    def _free_node(self, nodes: Mapping[str, Node]) -> Node | None:
        """The live node with the most free slots (None when all are full or dead)."""
        candidates = [n for n in nodes.values() if n.alive and n.running < self.workers_per_node]
        if not candidates:
            return None
        return min(candidates, key=lambda n: (n.running, n.node_id))

    def _payload(self, job: Job) -> dict[str, Any]:
        from dataclasses import replace

        # Repo sources are the driver's paths: sent only when every node sees them.
        sources = dict(job.repo_sources) if self.shared_repos else {}
        return {
            "code": code_fingerprint(),
            "job": replace(job, repo_sources=sources, judge_env=dict(job.judge_env)),
            "registry": self.registry,
            "shared_repos": self.shared_repos,
        }

    def _submit(
        self,
        ray: Any,
        remote: Any,
        spec: TaskSpec,
        node: Node,
        job: Job,
        payload: dict[str, Any],
        repos: Mapping[str, Any],
    ) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        slug = spec.provenance.slug
        shipped = {spec.repo.name: repos[spec.repo.name]} if spec.repo.name in repos else {}
        return remote.options(
            num_cpus=cpu_share(node.cpus, self.workers_per_node),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            name=f"packager:{slug}",
        ).remote(
            {**payload, "spec": spec.model_dump_json(), "node": node.label},
            pack_task(job.paths, slug),
            shipped,
        )

    def _collect(self, ray: Any, ref: Any, flight: _InFlight, job: Job) -> TaskResult | None:
        """The job's result written into the driver's output folder, or its node's loss; None
        when the job never started because its node was gone before Ray could place it there
        (a node killed moments before is still listed alive until its heartbeats time out):
        nothing ran, so nothing is hidden by placing the job on another node.
        """
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayError as exc:
            if isinstance(exc, ray.exceptions.TaskUnschedulableError):
                flight.node.alive = False
                return None
            cause = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            node_lost = isinstance(
                exc,
                ray.exceptions.NodeDiedError
                | ray.exceptions.WorkerCrashedError
                | ray.exceptions.ObjectLostError,
            )
            if node_lost or flight.node.node_id not in live_nodes(ray):
                flight.node.alive = False
                why = f"Ray worker node {flight.node.label} was lost mid-task ({cause})"
            else:
                why = f"its job failed on Ray node {flight.node.label} ({cause})"
            return lost_result(flight.spec, job, flight.node.label, why)
        if "refused" in answer:
            return lost_result(flight.spec, job, flight.node.label, str(answer["refused"]))
        unpack_files(answer["files"], job.paths.base)
        text = str(answer["result"]).replace(str(answer["root"]), str(job.paths.root.resolve()))
        return TaskResult.model_validate_json(text)

    def _ship_repos(self, ray: Any, specs: Sequence[TaskSpec], job: Job) -> dict[str, Any]:
        """Each repository the jobs need, as one git bundle in the object store (by name)."""
        if self.shared_repos:
            return {}

        shipped: dict[str, Any] = {}
        made: dict[Path, Any] = {}
        for spec in specs:
            name = spec.repo.name
            if spec.repo.files is not None or name in shipped:
                continue
            source = repos.source_for(
                name, dict(job.repo_sources), mirror_dirs=job.build_opts.mirror_dirs
            )
            location = Path(source.location)
            if not source.is_url and location.is_file():
                key = location.resolve()
                if key not in made:
                    made[key] = ray.put(location.read_bytes())
            else:
                git_dir = repos.git_dir_for(source)
                key = git_dir
                if key not in made:
                    made[key] = ray.put(bundle_bytes(git_dir))
            shipped[name] = made[key]
        if made:
            self.log(f"ray: shipped {len(made)} repository bundle(s) through the object store")
        return shipped

    def _push_bases(self, specs: Sequence[TaskSpec], job: Job) -> None:
        """Push the base images the tasks start from, so nodes that lack them pull them."""
        if self.registry is None or self.local_client is None:
            return

        wanted: set[str] = set()
        for spec in specs:
            dockerfile = job.paths.task_dir(spec.provenance.slug) / "environment" / "Dockerfile"
            if dockerfile.is_file():
                wanted.update(build.base_images(dockerfile.read_text()))
        for image in sorted(wanted):
            if "@sha256:" in image or not build.image_exists(self.local_client, image):
                continue
            reference, pushed = push_image(self.local_client, self.registry, image, self.log)
            self.log(f"ray: base image {image} {'pushed' if pushed else 'already'} at {reference}")

    def _interrupt(self, ray: Any, inflight: Mapping[Any, _InFlight], job: Job) -> Interrupted:
        """Cancel the jobs (each removes its containers), then sweep every live node for the
        containers of `job`'s run.
        """
        for ref in inflight:
            try:
                ray.cancel(ref, force=False)
            except Exception:  # noqa: BLE001 - finished or gone meanwhile
                pass
        removed = 0
        ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=CLEANUP_TIMEOUT_SEC)
        for ref in ready:
            try:
                ray.get(ref)
            except ray.exceptions.TaskCancelledError:
                pass
            except Exception:  # noqa: BLE001 - the job's own error: it stopped anyway
                pass
        sweep = ray.remote(max_retries=0)(remove_run_containers)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = live_nodes(ray)
        refs = [
            sweep.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)
            ).remote(job.run.run_id)
            for n in alive
        ]
        try:
            removed += sum(ray.get(refs, timeout=CLEANUP_TIMEOUT_SEC))
        except Exception:  # noqa: BLE001 - a node that does not answer keeps its containers
            pass
        return Interrupted(removed, f" on {len(alive)} Ray node(s)")


def lost_result(spec: TaskSpec, job: Job, node: str | None, why: str) -> TaskResult:
    """`infra_error` for a task whose job did not return (its node named)."""
    slug = spec.provenance.slug
    return TaskResult(
        task=slug,
        instance_id=spec.task_id,
        dataset=spec.provenance.dataset,
        engine=job.runner.name,
        expected_nop=spec.expectations.nop_reward,
        status="infra_error",
        reason=why,
        node=node,
        logs={"dir": str(job.paths.log_dir(slug))},
    )


@functools.cache
def code_fingerprint() -> str:
    """A hash of this packager's own files (code, templates, samples), to tell a node that runs
    another packager than the driver's.
    """
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# -- shipping -----------------------------------------------------------------------------


def _tar(members: Sequence[tuple[Path, str]]) -> bytes:
    """A gzip tar of (path on disk, name in the archive) pairs; missing paths are left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for path, name in members:
            if path.exists():
                tar.add(path, arcname=name)
    return buffer.getvalue()


def pack_task(paths: OutputPaths, slug: str) -> bytes:
    """The rendered task folder and its saved audit (relative to `<out>/<dataset>`)."""
    members = (paths.task_dir(slug), paths.audit_file(slug))
    return _tar([(path, paths.relative(path)) for path in members])


def pack_outputs(paths: OutputPaths, slug: str) -> bytes:
    """What a job returns besides its result: the task's logs, its audit report, and the
    calibration a verified task's runs gave with the task.toml that states it.
    """
    members = (
        paths.log_dir(slug),
        paths.audit_file(slug),
        paths.calibration_file(slug),
        paths.task_dir(slug) / "task.toml",
    )
    return _tar([(path, paths.relative(path)) for path in members])


def unpack_files(blob: bytes, base: Path) -> None:
    """Extract a job's tar under `base` (members must stay inside it)."""
    base.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(base, filter="data")


def bundle_bytes(git_dir: Path) -> bytes:
    """Every ref and object of a git directory as one git bundle."""
    with tempfile.TemporaryDirectory(prefix="packager-bundle-") as tmp:
        out = Path(tmp) / "repo.bundle"
        proc = run_git(f"--git-dir={git_dir}", "bundle", "create", str(out), "--all")
        if proc.returncode != 0:
            raise RepoSourceError(
                str(git_dir), "repo", "git bundle failed", stderr=proc.stderr.decode()[-2000:]
            )
        return out.read_bytes()


def materialize_bundle(blob: bytes, cache: Path | None = None) -> Path:
    """The shipped bundle as a file in this node's cache (written once per content)."""
    if cache is None:
        cache = RAY_REPOS.path()
    digest = hashlib.sha256(blob).hexdigest()[:24]
    path = cache / f"{digest}.bundle"
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=".bundle-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        os.replace(tmp, path)
    return path


# -- on the node --------------------------------------------------------------------------


def pull_missing_bases(
    client: DockerClient, dockerfile: str, registry: Registry | None
) -> list[str]:
    """Pull from `registry` (and tag as named) every base image this engine lacks; returns the
    images pulled. Images the registry does not have are left to the build's own check.
    """
    pulled: list[str] = []
    if registry is None:
        return pulled
    for image in build.base_images(dockerfile):
        if "@sha256:" in image or build.image_exists(client, image):
            continue
        repository, tag = registry.remote(image)
        if registry.manifest_digest(repository, tag) is None:
            continue
        client.images.pull(repository, tag=tag)
        name, own_tag = image, "latest"
        if ":" in image.rsplit("/", 1)[-1]:
            name, own_tag = image.rsplit(":", 1)
        client.images.get(f"{repository}:{tag}").tag(name, own_tag)
        pulled.append(image)
    return pulled


def remove_run_containers(run_id: str) -> int:
    """On a node: remove every container of the driver's run `run_id` (after Ctrl-C)."""
    try:
        client = build.connect(timeout=30)
    except Exception:  # noqa: BLE001 - no engine on this node: nothing of ours runs there
        return 0
    found = client.containers.list(
        all=True, sparse=True, filters={"label": f"{naming.LABEL_RUN}={run_id}"}
    )
    removed = 0
    for container in found:
        try:
            container.remove(force=True)
            removed += 1
        except Exception:  # noqa: BLE001 - gone already
            pass
    return removed


def _node_job(payload: dict[str, Any], root: Path, shipped: dict[str, Any]) -> Job:
    """The driver's job as this node runs it: outputs under `root`, repository sources the
    bundles shipped to this node (or the driver's own, with `shared_repos`).
    """
    from dataclasses import replace

    import ray

    job: Job = payload["job"]
    paths = OutputPaths(root, job.paths.dataset)
    if payload["shared_repos"]:
        return replace(job, paths=paths)
    repo_sources = {
        name: str(materialize_bundle(ray.get(ref) if not isinstance(ref, bytes) else ref))
        for name, ref in shipped.items()
    }
    build_opts = replace(job.build_opts, mirror_dirs=())
    return replace(job, paths=paths, repo_sources=repo_sources, build_opts=build_opts)


def _pull_bases(client: DockerClient, job: Job, slug: str, registry: Registry | None) -> None:
    """Pull the task's missing base images from `registry`; a failure is logged, and left to
    the build's own check, which names what is missing.
    """
    dockerfile = job.paths.task_dir(slug) / "environment" / "Dockerfile"
    try:
        pull_missing_bases(client, dockerfile.read_text(), registry)
    except Exception as exc:  # noqa: BLE001 - the build's own check names what is missing
        (job.paths.log_dir(slug)).mkdir(parents=True, exist_ok=True)
        (job.paths.log_dir(slug) / "pull.log").write_text(f"{type(exc).__name__}: {exc}\n")


def _push_images(
    client: DockerClient, registry: Registry | None, result: TaskResult
) -> dict[str, str]:
    """Push a verified or built task's images to `registry`: role -> pushed reference."""
    pushed: dict[str, str] = {}
    if registry is not None and result.status in ("verified", "built") and result.images:
        for role, image in sorted(result.images.items()):
            pushed[role], _ = push_image(client, registry, image, lambda _: None)
    return pushed


def run_job(payload: dict[str, Any], task_tar: bytes, shipped: dict[str, Any]) -> dict[str, Any]:
    """One task's build → audit → verify on this node (runs in a Ray worker process)."""
    here = code_fingerprint()
    if payload["code"] != here:
        # Another packager renders other images and grades differently: build nothing.
        return {
            "refused": f"packager on Ray node {payload['node']} is not the driver's (code "
            f"{here[:12]} on the node, {str(payload['code'])[:12]} on the driver): install "
            "the same packager on every node"
        }
    spec = TaskSpec.model_validate_json(payload["spec"])
    slug = spec.provenance.slug
    root = Path(tempfile.mkdtemp(prefix="packager-ray-")).resolve()
    client: Any = None
    job: Job | None = None
    try:
        job = _node_job(payload, root, shipped)
        unpack_files(task_tar, job.paths.base)
        client = build.connect()
        build.remove_orphan_containers(client, job.run)
        _pull_bases(client, job, slug, payload["registry"])
        result = TaskJob(job, client)(spec)
        pushed = _push_images(client, payload["registry"], result)
        result = result.model_copy(update={"node": str(payload["node"]), "registry_images": pushed})
        return {
            "result": result.model_dump_json(),
            "root": str(root),
            "files": pack_outputs(job.paths, slug),
            "host": socket.gethostname(),
        }
    except (KeyboardInterrupt, Cancelled):
        # The job arrived with the driver's run id (its containers carry it: one sweep finds
        # every node's) and a cancellation of its own, unset: this job's alone.
        if job is not None:
            job.run.cancel.set()
            if client is not None:
                build.remove_run_containers(client, job.run)
        raise
    finally:
        if job is not None:
            job.run.close()  # this job's services (its wheelhouse server)
        shutil.rmtree(root, ignore_errors=True)
