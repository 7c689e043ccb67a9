"""The one path that grades a candidate for a task: `grade_patch` puts together the task's run
plan (`engines.local.make_run_plan`: images, workdir, collect hook, timeouts, network, memory,
a browser judge's endpoint) and one local-engine run (`engines.containers.run_once`) in a
fresh grader container. `packager verify --patch`, the quality ablations and the benchmarks
grade through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from packager.context import RunContext
    from packager.images.build import DockerClient
    from packager.models.spec import RunResult, TaskSpec
    from packager.settings import VerifyConfig
    from packager.storage import OutputPaths

AgentKind = Literal["oracle", "nop"]
"""An agent phase whose collected patch is the candidate (solution/solve.sh, or nothing)."""


def grade_patch(
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    images: Mapping[str, str],
    patch: bytes | AgentKind,
    *,
    log_dir: Path | None = None,
    config: VerifyConfig | None = None,
    judge_env: Mapping[str, str] | None = None,
    label: str | None = None,
    run: RunContext | None = None,
) -> RunResult:
    """Grade one candidate of `spec` with its built `images` (`agent`, `grader` tags) in a
    fresh grader container, through the grading runtime that verifies the task.

    `patch` is the candidate's bytes, graded as they are (a `patch` run: no agent container;
    they stand for the model.patch the collect hook leaves, so a setup patch comes first), or
    `"oracle"` / `"nop"`: that agent phase runs and the patch it leaves is graded. Logs go to
    `log_dir` (default `logs/<task>/patch`, or `logs/<task>/<kind>`), under the run's verify
    settings `config` (container memory); the containers are
    labelled `label` when given, else `<dataset>/<task>`. An infrastructure fault is an
    `infra_error` run, never an exception (`run_once`).
    """
    # heavy: the engine modules load the Docker SDK, which importing this module must not
    from packager.engines import containers
    from packager.engines.local import DEFAULTS, make_run_plan

    plan = make_run_plan(
        spec, paths, images, config=config or DEFAULTS, judge_env=judge_env, run=run
    )
    if label is not None:
        plan = replace(plan, task=label)  # containers labelled as a benchmark's own runs
    kind, candidate = ("patch", patch) if isinstance(patch, bytes) else (patch, None)
    where = log_dir or paths.log_dir(spec.provenance.slug) / kind
    return containers.run_once(client, plan, kind, where, patch=candidate)
