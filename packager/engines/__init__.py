"""Verification engines: what runs a built task's oracle and nop runs and decides its result.

An engine is one module of this package holding a factory

    def make_engine(*, environment: str = "docker") -> Engine

and one member of `registry.EngineName` with its entry in `registry.ENGINES`. Modules are
imported only when their engine is asked for, so `harbor` costs nothing to a local run.
`environment` is the environment type the engine's trials run in (`--harbor-env`): an engine
that only runs on the local Docker engine accepts `docker` and raises `InputError` for any
other type.

* `local` (`packager.engines.local`): the Docker SDK, Harbor's separate-verifier protocol
  reproduced in a few seconds per run.
* `harbor` (`packager.engines.harbor`): the real `harbor run` of the pinned Harbor 0.25.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from packager.context import RunContext
from packager.errors import UnknownEngineError
from packager.registry import ENGINES, EngineName, load, parse
from packager.settings import VerifyConfig

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import TaskResult, TaskSpec
    from packager.storage import OutputPaths

DEFAULT_ENGINE = EngineName.LOCAL


@dataclass(frozen=True)
class VerifyRequest:
    """What an engine verifies: a built task and its images, under the run's verify settings
    (`config`: the command line's `RunConfig.verify` as it is; oracle runs, container memory).

    `durations` and `extra_logs` (build and audit figures) are carried into the result;
    `client` is for engines that start the containers themselves; `judge_env` reaches a browser
    judge's grader.
    """

    spec: TaskSpec
    paths: OutputPaths
    client: DockerClient
    images: dict[str, str]
    config: VerifyConfig
    durations: dict[str, float] | None = None
    extra_logs: dict[str, str] | None = None
    judge_env: Mapping[str, str] | None = None
    run: RunContext = field(default_factory=RunContext)
    """The run the task's containers belong to (labels, Ctrl-C)."""


class Engine(Protocol):
    """Runs the oracle `oracle_runs` times and the nop once on a task's built images."""

    @property
    def name(self) -> str:
        """What results record as their `engine` (and a rerun's cache compares)."""
        ...

    def verify(self, request: VerifyRequest) -> TaskResult:
        """The task's result (status decided by `packager.engines.containers.make_result`)."""
        ...


def get_engine(name: str, **options: Any) -> Engine:
    """The engine called `name`, made with `options` (`environment=`, see the module doc).

    Raises UnknownEngineError (naming the available engines) for a name not in ENGINES, and
    InputError for an option the engine cannot honour.
    """
    member = parse(EngineName, name)
    if member is None:
        raise UnknownEngineError(name, ENGINES)
    engine: Engine = load(ENGINES[member])(**options)
    return engine
