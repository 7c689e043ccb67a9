"""The local executor: this machine's Docker engine, two bounded thread pools.

Builds (and audits) of later tasks overlap the runs of earlier ones; each pool runs at most
`workers` jobs at once. Ctrl-C stops both pools at their next container or build, removes the
containers this run started and raises `Interrupted`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from packager.errors import Interrupted
from packager.executors import Events
from packager.images import build
from packager.models.spec import TaskResult
from packager.stages.job import Job, TaskJob

if TYPE_CHECKING:
    from packager.config import RunConfig
    from packager.images.build import DockerClient
    from packager.models.spec import TaskResult, TaskSpec
    from packager.stages.job import Staged, TaskJob


class LocalExecutor:
    """Jobs on this machine's engine (`client`), `workers` builds and `workers` runs at once."""

    name = "local"

    def __init__(self, client: DockerClient, workers: int = 1) -> None:
        self.client = client
        self.workers = max(1, workers)

    @classmethod
    def from_config(
        cls, config: RunConfig, *, client: DockerClient | None, log: Callable[[str], None]
    ) -> LocalExecutor:
        """`--workers` builds and runs at once on the local engine (`client`)."""
        if client is None:
            raise ValueError("the local executor runs on the local engine: connect first")
        return cls(client, config.build.workers)

    def run(self, specs: Sequence[TaskSpec], job: Job, events: Events) -> None:
        task_job = TaskJob(job, self.client)
        build_pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="build")
        run_pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="run")
        stage_of: dict[Future[Any], str] = {}
        try:
            pending: set[Future[Any]] = set()
            for spec in specs:
                future = build_pool.submit(task_job.build, spec)
                stage_of[future] = "build"
                pending.add(future)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    stage = stage_of.pop(future)
                    outcome = future.result()
                    if stage == "run":
                        assert isinstance(outcome, TaskResult)
                        events.result(outcome)
                        continue
                    events.built()
                    if isinstance(outcome, TaskResult):
                        events.result(outcome)  # ended at build: nothing to run
                    elif not job.verify:
                        events.result(task_job.verify(outcome))  # built only: nothing runs
                    else:
                        run = run_pool.submit(self._run, task_job, outcome, events)
                        stage_of[run] = "run"
                        pending.add(run)
        except KeyboardInterrupt:
            job.run.cancel.set()
            for pool in (build_pool, run_pool):
                pool.shutdown(wait=False, cancel_futures=True)
            removed = build.remove_run_containers(self.client, job.run)
            # Workers stop at their next container or build; wait for them, then sweep again.
            for future in list(stage_of):
                try:
                    future.exception(timeout=60)
                except BaseException:  # noqa: BLE001 - cancelled, timed out or interrupted again
                    pass
            removed += build.remove_run_containers(self.client, job.run)
            raise Interrupted(removed) from None
        for pool in (build_pool, run_pool):
            pool.shutdown(wait=True)

    def _run(self, task_job: TaskJob, staged: Staged, events: Events) -> TaskResult:
        result = task_job.verify(staged)
        if events.ran is not None:
            events.ran(staged, result)
        return result
