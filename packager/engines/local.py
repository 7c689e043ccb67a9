"""The `local` verification engine: Harbor's separate-verifier protocol reproduced with the
Docker SDK (`packager.engines.containers`), a few seconds per run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packager.context import RunContext
from packager.defaults import DEFAULT_ENVIRONMENT
from packager.engines import VerifyRequest
from packager.engines.containers import RunPlan, run_once, wait_for_removals
from packager.engines.perturb import PerturbationUnavailable, make_perturbation, perturbed
from packager.engines.verdict import NOT_RUN, make_result
from packager.errors import InputError
from packager.judge.endpoint import judge_grader_env
from packager.models.spec import RunResult, TaskResult, TaskSpec
from packager.render.harbor import collect_command, grader_has_network
from packager.settings import VerifyConfig

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.storage import OutputPaths


DEFAULTS = VerifyConfig()
"""The verify settings of a run told nothing (two oracle runs, the engine's memory)."""


def make_run_plan(
    spec: TaskSpec,
    paths: OutputPaths,
    images: Mapping[str, str],
    *,
    config: VerifyConfig = DEFAULTS,
    judge_env: Mapping[str, str] | None = None,
    run: RunContext | None = None,
) -> RunPlan:
    """How every run of `spec` is made (oracle, nop, a candidate patch, a quality ablation):
    its images, workdir, collect hook, timeouts, network, the run's container limits
    (`config`) and, for a browser-judged task, the grader's model endpoint (`judge_env`) and
    network.
    """
    slug = spec.provenance.slug
    judged = spec.grading.browser_judged
    networked = grader_has_network(spec)
    return RunPlan(
        task=f"{spec.provenance.dataset}/{slug}",
        agent_image=images["agent"],
        grader_image=images["grader"],
        workdir=spec.repo.workdir,
        collect=collect_command(spec),
        solution_dir=paths.task_dir(slug) / "solution",
        grade_timeout_sec=spec.grading.timeout_sec,
        agent_timeout_sec=spec.agent_timeout_sec,
        network=spec.environment.network,
        memory_mb=config.memory_mb,
        grader_env=judge_grader_env(judge_env) if judged else (),
        grader_network=networked,
        grader_caps=("NET_ADMIN",)
        if spec.grading.unroutable and not grader_has_network(spec)
        else (),
        cpus=spec.environment.cpus,
        run=run or RunContext(),
    )


def verify_task(
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    *,
    config: VerifyConfig = DEFAULTS,
    images: dict[str, str],
    engine: str = "local",
    durations: dict[str, float] | None = None,
    extra_logs: dict[str, str] | None = None,
    judge_env: Mapping[str, str] | None = None,
    run: RunContext | None = None,
) -> TaskResult:
    """Run the oracle `config.oracle_runs` times and the nop `config.nop_runs` times, then,
    when every gold run solved the task and no nop run did, one perturbed gold run for each of
    `config.perturbations` (`engines.perturb`); return the TaskResult.

    The first run that hits an infrastructure fault ends the task's runs (its status is
    `infra_error` whatever the other runs would say).
    """
    slug = spec.provenance.slug
    logs = paths.log_dir(slug)
    plan = make_run_plan(spec, paths, images, config=config, judge_env=judge_env, run=run)
    oracle: list[RunResult] = []
    nops: list[RunResult] = []
    shaken: list[RunResult] = []
    wanted = [("oracle", f"oracle-{i + 1}") for i in range(config.oracle_runs)]
    wanted += [("nop", "nop" if i == 0 else f"nop-{i + 1}") for i in range(config.nop_runs)]
    for kind, folder in wanted:
        done = run_once(client, plan, kind, logs / folder)
        (oracle if kind == "oracle" else nops).append(done)
        if done.grade_status == "infra_error":
            break
    else:
        if all(r.reward == 1.0 for r in oracle) and all((r.reward or 0) < 1.0 for r in nops):
            shaken = perturbed_runs(client, spec, plan, config.perturbations, logs)
    nop = nops[0] if nops else None
    # Each run's containers were removed in the background while the next one ran; the
    # task's are all gone before its result is (a caller may remove a volume or an image).
    wait_for_removals()
    apply_logs = next(({"apply": r.apply_log} for r in oracle if r.apply_log), {})
    return make_result(
        task=slug,
        instance_id=spec.task_id,
        dataset=spec.provenance.dataset,
        engine=engine,
        images=images,
        oracle=oracle,
        nop=nop,
        more_nops=nops[1:],
        perturbed=shaken,
        expected_nop=spec.expectations.nop_reward,
        durations=durations or {},
        logs={"dir": str(logs), **(extra_logs or {}), **apply_logs},
    )


def perturbed_runs(
    client: DockerClient,
    spec: TaskSpec,
    plan: RunPlan,
    names: Sequence[str],
    logs: Path,
) -> list[RunResult]:
    """One gold run per perturbation of `names`, each in `logs/oracle-<name>`; a perturbation
    that cannot be made here (no libfaketime) or that breaks the run itself (an infrastructure
    fault of the perturbed run) is a run `NOT_RUN` that says why: no verdict either way.
    """
    done: list[RunResult] = []
    for name in names:
        folder = logs / f"oracle-{name}"
        try:
            change = make_perturbation(name, spec.task_id, client)
        except PerturbationUnavailable as exc:
            # Not a verdict on the task: the run is not made, and the record says why.
            note = f"the {name} perturbation cannot be made here: {exc}"
            done.append(
                RunResult(
                    kind="oracle",
                    reward=None,
                    grade_status=NOT_RUN,
                    reason=note,
                    duration_sec=0.0,
                    log_dir=str(folder),
                    perturbation=name,
                    perturbation_note=note,
                )
            )
            continue
        result = run_once(client, perturbed(plan, change), "oracle", folder)
        if result.grade_status == "infra_error":
            # The perturbation broke the run itself (Node under libfaketime prints nothing):
            # no verdict on the tests, and the record says why.
            note = f"the {name} perturbation broke the run: {result.reason}"
            result = result.model_copy(update={"grade_status": NOT_RUN, "reason": note})
            done.append(result.model_copy(update={"perturbation": name, "perturbation_note": note}))
            continue
        done.append(result.model_copy(update={"perturbation": name, **_took(name, folder)}))
    return done


def _took(name: str, folder: Path) -> dict[str, str]:
    """Why a perturbation did not take in its run: a shuffle the runner could not make."""
    if name != "shuffle":
        return {}
    try:
        report = json.loads((folder / "report.json").read_text())
    except (OSError, ValueError):
        return {}
    if isinstance(report, dict) and report.get("shuffled") is True:
        return {}
    return {"perturbation_note": "the runner does not shuffle its tests here: a plain repeat"}


@dataclass(frozen=True)
class LocalEngine:
    """`verify_task` as an engine."""

    name: str = "local"

    def verify(self, request: VerifyRequest) -> TaskResult:
        """`verify_task` on the request's client, recording this engine's name."""
        return verify_task(
            request.client,
            request.spec,
            request.paths,
            config=request.config,
            images=request.images,
            engine=self.name,
            durations=request.durations,
            extra_logs=request.extra_logs,
            judge_env=request.judge_env,
            run=request.run,
        )


def make_engine(*, environment: str = DEFAULT_ENVIRONMENT) -> LocalEngine:
    """The local engine; it runs on the local Docker engine only (environment type `docker`)."""
    if environment != DEFAULT_ENVIRONMENT:
        raise InputError(
            f"the local engine runs on the local Docker engine only, not on environment type "
            f"{environment!r}: use --engine harbor --harbor-env {environment}"
        )
    return LocalEngine()
