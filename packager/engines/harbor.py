"""The `harbor` verification engine: the real `harbor run` on a rendered, built task folder.

`make_engine(environment=...)` is the engine `packager.engines` hands out; `environment` is
Harbor's environment type (`harbor run --env`, `--harbor-env` on the command line): `docker`
(the default, the local Docker engine) or a cloud sandbox type such as `daytona`, `modal` or
`e2b`, or a custom environment's import path (`module.path:ClassName`).

`harbor run` exits 0 even when every trial errored, so its exit code is never trusted: every
trial's `result.json` is read instead (`verifier_result.rewards`, `exception_info`), and the
task status comes from `packager.engines.containers.make_result`, exactly as for the local engine.

Harbor 0.25 lives in its own Python 3.12 virtualenv (`make harbor`); this module only runs its
command (`PACKAGER_HARBOR`, default `.harbor/venv/bin/harbor` under the project root) with
`DOCKER_CONFIG` pointing at the Compose v2 plugin it drives. Job folders go to
`<out>/<dataset>/harbor-jobs/<task>/<agent>/`. The dataset those runs read (`dataset.toml`,
`registry.json`) is rendered by `packager.render.harbor_dataset`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packager.context import RunContext
from packager.defaults import DEFAULT_ENVIRONMENT
from packager.engines import VerifyRequest
from packager.engines.containers import excerpt, judge_record
from packager.engines.excerpts import run_evidence
from packager.engines.verdict import make_result
from packager.errors import EngineUnavailableError, InputError, RunError
from packager.judge.endpoint import judge_grader_env
from packager.models.spec import RunResult, TaskResult, TaskSpec
from packager.render import naming
from packager.render.harbor import RUN_ID_VARIABLE

if TYPE_CHECKING:
    from packager.storage import OutputPaths

Kind = Literal["oracle", "nop"]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
HARBOR_VARIABLE = "PACKAGER_HARBOR"
DEFAULT_HARBOR = PROJECT_ROOT / ".harbor" / "venv" / "bin" / "harbor"
JOBS_DIR = "harbor-jobs"
DATASET_JOBS = "@dataset"
"""Job folder of dataset-wide runs (`@` never occurs in a task slug)."""
ORACLE_CONCURRENCY = 2
ENV_START_SEC = 600.0
"""Allowance per trial for starting (not building: images are prebuilt) its two environments."""
STOP_GRACE_SEC = 30.0
ENV_TYPES = (
    "docker",
    "sbx",
    "podman",
    "daytona",
    "e2b",
    "modal",
    "runloop",
    "langsmith",
    "ec2",
    "gke",
    "ack",
    "openshift",
    "novita",
    "apple-container",
    "singularity",
    "islo",
    "tensorlake",
    "cwsandbox",
    "use-computer",
    "cua-cloud",
    "blaxel",
    "opensandbox",
    "beam",
    "skypilot",
    "hf-sandbox",
    "hyperbrowser",
    "vercel",
    "runta",
    "prime",
    "kata",
    "mosaic",
    "smol",
    "sail",
    "kernel",
)
"""Harbor 0.25's environment types (`harbor run --env`; its `EnvironmentType`)."""


def check_env_type(env_type: str) -> str:
    """`env_type` when Harbor 0.25 knows it (or it is an import path `module.path:ClassName`);
    else InputError naming the known types, before anything is built.
    """
    if env_type in ENV_TYPES:
        return env_type
    module, _, cls = env_type.partition(":")
    if module and cls and all(part.isidentifier() for part in [*module.split("."), cls]):
        return env_type
    raise InputError(
        f"unknown Harbor environment type {env_type!r} (Harbor 0.25 knows: "
        f"{', '.join(sorted(ENV_TYPES))}; or a custom one as module.path:ClassName)"
    )


# --------------------------------------------------------------------------- the harbor command


def harbor_path() -> Path:
    """The harbor executable: $PACKAGER_HARBOR (a path, or a name on PATH), else the pinned one."""
    value = os.environ.get(HARBOR_VARIABLE, "").strip()
    if not value:
        return DEFAULT_HARBOR
    if os.sep not in value:
        found = shutil.which(value)
        if found:
            return Path(found)
    return Path(value).expanduser()


def docker_config_dir(harbor: Path | None = None) -> Path | None:
    """A DOCKER_CONFIG folder holding the Compose v2 plugin Harbor drives, if one exists."""
    candidates = []
    if os.environ.get("DOCKER_CONFIG"):
        candidates.append(Path(os.environ["DOCKER_CONFIG"]))
    harbor = harbor or harbor_path()
    if len(harbor.parents) > 2:
        candidates.append(harbor.parents[2] / "docker-config")  # <dir>/venv/bin/harbor
    candidates += [PROJECT_ROOT / ".harbor" / "docker-config", Path.home() / ".docker"]
    for folder in candidates:
        if (folder / "cli-plugins" / "docker-compose").exists():
            return folder.resolve()
    return None


def harbor_env(run_id: str | None = None) -> dict[str, str]:
    """The environment of every harbor command: Compose plugin, no telemetry, and the run
    label of the containers it starts (`run_id`; without one the tasks' own default).
    """
    env = {
        **os.environ,
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "200",
    }
    if run_id is not None:
        env[RUN_ID_VARIABLE] = run_id
    config = docker_config_dir()
    if config is not None:
        env["DOCKER_CONFIG"] = str(config)
    return env


def require_harbor() -> Path:
    """The harbor executable, or an error that says how to get it."""
    harbor = harbor_path()
    if not (harbor.is_file() and os.access(harbor, os.X_OK)):
        raise EngineUnavailableError(
            f"harbor not found at {harbor}. Fix: `make harbor` (or set {HARBOR_VARIABLE})"
        )
    if docker_config_dir(harbor) is None:
        raise EngineUnavailableError(
            "no Docker Compose v2 plugin for Harbor (DOCKER_CONFIG/cli-plugins/docker-compose). "
            "Fix: `make harbor`"
        )
    return harbor


def _remove_containers(labels: dict[str, str]) -> None:
    """Force-remove the containers that carry all `labels` (after a killed harbor run)."""
    filters = [arg for k, v in sorted(labels.items()) for arg in ("--filter", f"label={k}={v}")]
    try:
        ids = subprocess.run(
            ["docker", "ps", "-aq", *filters], capture_output=True, text=True, timeout=60
        ).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        pass  # the daemon is gone: nothing more to undo


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the harbor process group (Harbor stops its environments), then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_SEC), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass(frozen=True)
class HarborJob:
    """One `harbor run` whose trials are read from `job_dir` when it ends."""

    args: tuple[str, ...]
    job_dir: Path
    cwd: Path
    log_path: Path
    timeout_sec: float
    cleanup_labels: dict[str, str]


def run_jobs(
    jobs: Sequence[HarborJob],
    *,
    label: str,
    run: RunContext,
    extra_env: Mapping[str, str] | None = None,
) -> list[int]:
    """Run harbor jobs side by side for `run` (its id labels their containers); returns their
    exit codes. `extra_env` reaches Harbor's process (a task's `[verifier].env` reads
    `${PACKAGER_JUDGE_...}` from it).

    A job past its deadline is stopped and its containers removed; RunError is raised once
    every job has ended.
    """
    harbor = require_harbor()
    env = {**harbor_env(run.run_id), **(extra_env or {})}
    procs: list[tuple[HarborJob, subprocess.Popen[bytes], float]] = []
    try:
        for job in jobs:
            if job.job_dir.exists():
                shutil.rmtree(job.job_dir)  # Harbor would resume an existing job instead
            job.job_dir.parent.mkdir(parents=True, exist_ok=True)
            job.log_path.parent.mkdir(parents=True, exist_ok=True)
            with job.log_path.open("wb") as log:
                proc = subprocess.Popen(
                    [str(harbor), *job.args],
                    cwd=job.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            procs.append((job, proc, time.monotonic() + job.timeout_sec))
        codes: list[int] = []
        late: list[HarborJob] = []
        for job, proc, deadline in procs:
            try:
                codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                _stop(proc)
                _remove_containers(job.cleanup_labels)
                late.append(job)
                codes.append(-1)
    except BaseException:
        for job, proc, _ in procs:
            if proc.poll() is None:
                _stop(proc)
                _remove_containers(job.cleanup_labels)
        raise
    if late:
        job = late[0]
        raise RunError(
            label,
            f"harbor run did not finish within {job.timeout_sec:.0f} s (log: {job.log_path})",
            job.log_path,
        )
    return codes


# --------------------------------------------------------------------------- trials


@dataclass(frozen=True)
class Trial:
    """What one trial's result.json says."""

    name: str
    task: str
    path: Path
    rewards: dict[str, float] | None
    error: str | None
    started_at: str
    duration_sec: float


def _seconds(result: dict[str, Any]) -> float:
    try:
        start = datetime.fromisoformat(str(result["started_at"]))
        end = datetime.fromisoformat(str(result["finished_at"]))
    except (KeyError, TypeError, ValueError):
        return 0.0
    return round(max(0.0, (end - start).total_seconds()), 3)


def _shorten(text: str, limit: int = 600) -> str:
    """Harbor's messages quote whole compose commands: keep the start and the cause (end)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} … {text[-half:]}"


def read_trials(job_dir: Path) -> list[Trial]:
    """Every trial of a job folder (subfolders with result.json), oldest first."""
    trials = []
    for result_file in sorted(job_dir.glob("*/result.json")):
        data = json.loads(result_file.read_text())
        verifier = data.get("verifier_result") or {}
        rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
        info = data.get("exception_info")
        error = None
        if info:
            error = f"{info.get('exception_type', 'Error')}: {info.get('exception_message', '')}"
        trials.append(
            Trial(
                name=result_file.parent.name,
                task=str(data.get("task_name") or result_file.parent.name.rsplit("__", 1)[0]),
                path=result_file.parent,
                rewards={k: float(v) for k, v in rewards.items()} if rewards else None,
                error=_shorten(error.strip().rstrip(":")) if error else None,
                started_at=str(data.get("started_at") or ""),
                duration_sec=_seconds(data),
            )
        )
    return sorted(trials, key=lambda t: (t.started_at, t.name))


def trial_run(kind: Kind, trial: Trial) -> RunResult:
    """A trial as a RunResult; grade status and reason come from the grader's report.json."""
    reward = trial.rewards.get("reward") if trial.rewards else None
    subscores = {k: v for k, v in sorted((trial.rewards or {}).items()) if k != "reward"}
    common: dict[str, Any] = {
        "kind": kind,
        "subscores": subscores,
        "duration_sec": trial.duration_sec,
        "log_dir": str(trial.path),
    }
    if trial.error is not None:
        return RunResult(reward=reward, grade_status="infra_error", reason=trial.error, **common)
    if reward is None:
        return RunResult(
            reward=None,
            grade_status="infra_error",
            reason="harbor recorded no `reward` for this trial",
            **common,
        )
    report: dict[str, Any] = {}
    report_file = trial.path / "verifier" / "report.json"
    if report_file.is_file():
        try:
            loaded = json.loads(report_file.read_text())
            report = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            report = {}
    return RunResult(
        reward=reward,
        grade_status=str(report.get("status", "graded")),
        reason=report.get("reason"),
        judge=judge_record(report.get("judge"), trial.path / "verifier" / "judge"),
        **run_evidence(report, trial.path / "verifier" / "test-output.txt"),
        **_apply_logs(trial.path, report),
        **common,
    )


def _apply_logs(trial_dir: Path, report: dict[str, Any]) -> dict[str, str]:
    """As the local engine: solve.sh's output when it failed, else the grader's apply log when
    the patch did not apply (written next to the trial's result.json as apply.log).
    """
    exit_file = trial_dir / "agent" / "exit-code.txt"
    solve_log = trial_dir / "agent" / "oracle.txt"
    code = exit_file.read_text().strip() if exit_file.is_file() else ""
    if code not in ("", "0"):
        text = solve_log.read_text(errors="replace") if solve_log.is_file() else ""
        return {
            "apply_log": str(solve_log),
            "apply_excerpt": f"solve.sh exit {code}: {excerpt(text)}",
        }
    apply = report.get("apply")
    if report.get("status") == "patch_failed" and isinstance(apply, dict) and apply.get("log"):
        apply_log = trial_dir / "apply.log"
        apply_log.write_text(str(apply["log"]))
        return {"apply_log": str(apply_log), "apply_excerpt": excerpt(str(apply["log"]))}
    return {}


def _no_trial(job: HarborJob, code: int) -> str:
    """Why a job has no trial: harbor's exit code and the end of its output."""
    tail = ""
    if job.log_path.is_file():
        lines = [ln for ln in job.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        tail = " | ".join(lines[-3:])
    return f"harbor run (exit {code}) left no trial result: {tail[-400:]}"


def _missing_run(kind: Kind, job: HarborJob, code: int) -> RunResult:
    return RunResult(
        kind=kind,
        reward=None,
        grade_status="infra_error",
        reason=_no_trial(job, code),
        duration_sec=0.0,
        log_dir=str(job.job_dir),
    )


def job_timeout(spec: TaskSpec, trials: int, concurrency: int) -> float:
    """A deadline for a job of `trials` trials of one task, `concurrency` at a time."""
    per_trial = ENV_START_SEC * 2 + spec.agent_timeout_sec + spec.grading.timeout_sec + 300 + 120
    return math.ceil(trials / max(1, concurrency)) * per_trial + 120.0


def task_job(
    task_dir: Path,
    agent: str,
    jobs_root: Path,
    *,
    attempts: int = 1,
    concurrency: int = 1,
    timeout_sec: float,
    cleanup_labels: dict[str, str],
    extra_args: Sequence[str] = (),
    env_type: str = DEFAULT_ENVIRONMENT,
) -> HarborJob:
    """`harbor run -p <task> -a <agent> -k <attempts> --env <env_type>` into
    `<jobs_root>/<agent>/`.
    """
    task_dir = task_dir.resolve()
    return HarborJob(
        args=(
            "run",
            "-p",
            str(task_dir),
            "-a",
            agent,
            "--env",
            env_type,
            "-k",
            str(attempts),
            "-n",
            str(max(1, concurrency)),
            "-o",
            str(jobs_root.resolve()),
            "--job-name",
            agent,
            "-y",
            "-q",
            *extra_args,
        ),
        job_dir=jobs_root.resolve() / agent,
        cwd=task_dir.parent,
        log_path=jobs_root.resolve() / f"{agent}.log",
        timeout_sec=timeout_sec,
        cleanup_labels=cleanup_labels,
    )


def _task_labels(spec: TaskSpec, run: RunContext) -> dict[str, str]:
    return {
        naming.LABEL_TOOL: "packager",
        naming.LABEL_RUN: run.run_id,
        naming.LABEL_TASK: f"{spec.provenance.dataset}/{spec.provenance.slug}",
    }


def _check_images(task_dir: Path, images: dict[str, str]) -> None:
    config = tomllib.loads((task_dir / "task.toml").read_text())
    found = {
        "agent": config.get("environment", {}).get("docker_image"),
        "grader": config.get("verifier", {}).get("environment", {}).get("docker_image"),
    }
    for role, tag in found.items():
        if role in images and tag != images[role]:
            raise RunError(
                task_dir.name,
                f"task.toml names {role} image {tag!r}, but "
                f"{images[role]!r} was built: render the task again",
            )


def verify_task_harbor(
    spec: TaskSpec,
    paths: OutputPaths,
    *,
    images: dict[str, str],
    oracle_runs: int = 2,
    durations: dict[str, float] | None = None,
    extra_logs: dict[str, str] | None = None,
    timeout_sec: float | None = None,
    judge_env: Mapping[str, str] | None = None,
    env_type: str = DEFAULT_ENVIRONMENT,
    run: RunContext | None = None,
) -> TaskResult:
    """Oracle `oracle_runs` times (one job, `-k`) and nop once (a second job, run alongside)
    through the real `harbor run` in Harbor environments of type `env_type`, their containers
    labelled with `run`; the TaskResult is decided as for the local engine.
    """
    run = run or RunContext()
    slug = spec.provenance.slug
    task_dir = paths.task_dir(slug)
    _check_images(task_dir, images)
    jobs_root = paths.base / JOBS_DIR / slug
    labels = _task_labels(spec, run)
    concurrency = min(oracle_runs, ORACLE_CONCURRENCY)
    oracle_job = task_job(
        task_dir,
        "oracle",
        jobs_root,
        attempts=oracle_runs,
        concurrency=concurrency,
        cleanup_labels=labels,
        timeout_sec=timeout_sec or job_timeout(spec, oracle_runs, concurrency),
        env_type=env_type,
    )
    nop_job = task_job(
        task_dir,
        "nop",
        jobs_root,
        cleanup_labels=labels,
        timeout_sec=timeout_sec or job_timeout(spec, 1, 1),
        env_type=env_type,
    )
    codes = run_jobs(
        [oracle_job, nop_job],
        label=f"{spec.provenance.dataset}/{slug}",
        run=run,
        extra_env=dict(judge_grader_env(judge_env)) if spec.grading.browser_judged else None,
    )
    oracle = [trial_run("oracle", t) for t in read_trials(oracle_job.job_dir)][:oracle_runs]
    while len(oracle) < oracle_runs:
        oracle.append(_missing_run("oracle", oracle_job, codes[0]))
    nop_trials = read_trials(nop_job.job_dir)
    nop = trial_run("nop", nop_trials[0]) if nop_trials else _missing_run("nop", nop_job, codes[1])
    return make_result(
        task=slug,
        instance_id=spec.task_id,
        dataset=spec.provenance.dataset,
        engine="harbor",
        images=images,
        oracle=oracle,
        nop=nop,
        expected_nop=spec.expectations.nop_reward,
        durations=durations or {},
        logs={"dir": str(jobs_root), **(extra_logs or {})},
    )


def run_dataset(
    paths: OutputPaths,
    agent: str,
    *,
    name: str | None = None,
    version: str = "1.0",
    exclude: Sequence[str] = (),
    attempts: int = 1,
    concurrency: int = 2,
    timeout_sec: float = 3600.0,
    env_type: str = DEFAULT_ENVIRONMENT,
    run: RunContext | None = None,
) -> list[Trial]:
    """`harbor run -d <name>@<version> --registry-path registry.json -a <agent> --env
    <env_type>` from `<out>/<dataset>`; returns every trial (job in
    `harbor-jobs/@dataset/<agent>/`).
    """
    run = run or RunContext()
    base = paths.base.resolve()
    jobs_root = base / JOBS_DIR / DATASET_JOBS
    args = [
        "run",
        "-d",
        f"{name or paths.dataset}@{version}",
        "--registry-path",
        "registry.json",
        "-a",
        agent,
        "--env",
        env_type,
        "-k",
        str(attempts),
        "-n",
        str(concurrency),
        "-o",
        str(jobs_root),
        "--job-name",
        agent,
        "-y",
        "-q",
    ]
    for pattern in exclude:
        args += ["-x", pattern]
    job = HarborJob(
        args=tuple(args),
        job_dir=jobs_root / agent,
        cwd=base,
        log_path=jobs_root / f"{agent}.log",
        timeout_sec=timeout_sec,
        cleanup_labels={"packager.tool": "packager", "packager.run": run.run_id},
    )
    code = run_jobs([job], label=f"{paths.dataset}@{version}", run=run)[0]
    trials = read_trials(job.job_dir)
    if not trials:
        raise RunError(paths.dataset, _no_trial(job, code), job.log_path)
    return trials


# --------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class HarborEngine:
    """`verify_task_harbor` as an engine, in Harbor environments of type `environment`."""

    environment: str = DEFAULT_ENVIRONMENT
    name: str = field(default="harbor", init=False)

    def verify(self, request: VerifyRequest) -> TaskResult:
        """Harbor starts the containers itself: `client` and the container limits are unused."""
        return verify_task_harbor(
            request.spec,
            request.paths,
            images=request.images,
            oracle_runs=request.config.oracle_runs,
            durations=request.durations,
            extra_logs=request.extra_logs,
            judge_env=request.judge_env,
            env_type=self.environment,
            run=request.run,
        )


def make_engine(*, environment: str = DEFAULT_ENVIRONMENT) -> HarborEngine:
    """The harbor engine for Harbor environment type `environment` (checked here)."""
    return HarborEngine(check_env_type(environment))
