"""Executors: where each task's build → audit → verify job runs.

Rendering always happens on the driver (the process the user started); an executor takes the
rendered tasks and schedules their jobs (`packager.stages.job.TaskJob`: the one composition of a
task's stages), reporting back through `Events` as each stage ends:

- `local`: two bounded thread pools on this machine's Docker engine (builds and audits of
  later tasks overlap the runs of earlier ones).
- `ray`: one job per task on a Ray cluster, at most `--workers-per-node` at once per node, each
  on its own node's Docker engine (packager[ray]; docs/scale.md).

A third executor is one new module with a class like these, one member of
`registry.ExecutorName` and its entry in `registry.EXECUTORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from packager.errors import InputError, PackagerError
from packager.registry import EXECUTORS, Entry, find, load

if TYPE_CHECKING:
    from packager.config import RunConfig
    from packager.images.build import DockerClient
    from packager.models.spec import TaskResult, TaskSpec
    from packager.stages.job import Job, Staged


@dataclass
class Events:
    """What an executor reports to the driver as a task's stages end (called on the driver)."""

    built: Callable[[], None]
    """A task's build and audit ended (whatever its outcome)."""
    result: Callable[[TaskResult], None]
    """A task has its final result (built, verified, failed, infra_error, ...)."""
    ran: Callable[[Staged, TaskResult], None] | None = None
    """After a task's runs, with its staged images (the local engine's quality checks)."""


class Executor(Protocol):
    """Runs the jobs of rendered tasks; returns when every task has its result."""

    name: str

    @classmethod
    def from_config(
        cls, config: RunConfig, *, client: DockerClient | None, log: Callable[[str], None]
    ) -> Executor:
        """The executor a run's configuration asks for (`client`: the local engine, when the
        registry entry says the jobs run there).
        """
        ...

    def run(self, specs: Sequence[TaskSpec], job: Job, events: Events) -> None:
        """Run each task's job; raise `Interrupted` after cleaning up on Ctrl-C."""
        ...


class ExecutorError(InputError):
    """An executor cannot be used as asked (exit 2; the message says why and how to fix it)."""


class ClusterUnavailableError(PackagerError):
    """The cluster does not answer (exit 3, like a missing Docker engine)."""

    exit_code = 3


def executor_entry(name: str) -> Entry:
    """The registry entry of executor `name` (ExecutorError, naming the available ones)."""
    entry = find(EXECUTORS, name)
    if entry is None:
        raise ExecutorError(f"unknown executor {name!r} (available: {', '.join(EXECUTORS)})")
    return entry


def from_config(
    config: RunConfig, *, client: DockerClient | None, log: Callable[[str], None]
) -> Executor:
    """The executor of a run: its registry entry's class, made from the configuration."""
    made: Executor = load(executor_entry(config.executor.name)).from_config(
        config, client=client, log=log
    )
    return made


def get_executor(name: str, **options: Any) -> Executor:
    """The executor called `name`, made with `options` (its own keyword arguments)."""
    made: Executor = load(executor_entry(name))(**options)
    return made


def names() -> Sequence[str]:
    """Every executor's name, for help texts and errors."""
    return tuple(EXECUTORS)
