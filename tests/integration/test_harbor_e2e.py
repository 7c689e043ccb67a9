"""The rendered sample tasks under the real Harbor 0.25 (`harbor lint`, `harbor run`), on the
real Docker engine: no mocks.

Per gradeable sample: `packager build`, then the local engine and the harbor engine on the same
images; Harbor must give oracle 1.0 every time and the very nop reward the local engine gives.
`packager verify --engine harbor --harbor-env docker|daytona` checks that the type reaches Harbor.
Then one dataset-wide `harbor run -d samples@1.0 --registry-path registry.json -a oracle`
(oracle only, to keep the suite short) must reproduce the oracle rewards. The SWEeper sample
(judged in a browser) is linted but not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from packager.context import RunContext
from packager.models.spec import TaskResult, TaskSpec
from packager.storage import OutputPaths
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.harbor, pytest.mark.slow]

GRADEABLE = [
    "samples__textkit-1",
    "samples__intset-2",
    "samples__kvstore-3",
    "samples__inventory-4",
]
JUDGED = "samples__todo-web-5"

RUN = RunContext()
"""This module's run: the containers it starts (local and Harbor) carry its id."""


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harbor")


@pytest.fixture(scope="module")
def paths(out: Path) -> OutputPaths:
    proc = run_cli("render", "--all", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return OutputPaths(out, "samples")


@pytest.fixture(scope="module")
def harbor_results() -> dict[str, TaskResult]:
    """Filled by the per-task test, compared by the dataset-wide run."""
    return {}


def _spec(task: str) -> TaskSpec:
    from packager.datasets.sources import open_dataset
    from packager.run.resolve import resolve_spec
    from packager.run.select import Selection, iter_specs

    sel = Selection(dataset=open_dataset(None, "test"), task_ids=(task,))
    return resolve_spec(next(iter_specs(sel)), sel.merged_repo_sources)


def _left_behind(docker_client: Any) -> list[Any]:
    """Containers of this test process (local and Harbor ones carry its run label)."""
    containers: list[Any] = docker_client.containers.list(
        all=True, filters={"label": ["packager.tool=packager", f"packager.run={RUN.run_id}"]}
    )
    return containers


def test_harbor_lint_passes_on_every_sample_task(paths: OutputPaths, harbor_python: Path) -> None:
    from packager.engines.harbor import harbor_env

    harbor = harbor_python.parent / "harbor"
    tasks = sorted(p for p in (paths.base / "tasks").iterdir() if p.is_dir())
    assert [t.name for t in tasks] == sorted([*GRADEABLE, JUDGED])
    for task in tasks:
        proc = subprocess.run(
            [str(harbor), "lint", str(task)],
            env=harbor_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{task.name}: {proc.stdout}{proc.stderr}"
    # Every default rule, explicitly: no shared verifier, no test leak into the agent image.
    proc = subprocess.run(
        [str(harbor), "lint", "--json", *map(str, tasks)],
        env=harbor_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []


@pytest.mark.parametrize("task", GRADEABLE)
def test_harbor_engine_matches_local_engine(
    task: str, paths: OutputPaths, docker_client: Any, harbor_results: dict[str, TaskResult]
) -> None:
    from packager.engines.harbor import verify_task_harbor
    from packager.engines.local import verify_task

    proc = run_cli("build", task, "--out", str(paths.root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = json.loads(paths.result_file(task).read_text())
    assert built["status"] == "built"
    images = built["images"]
    spec = _spec(task)

    local = verify_task(docker_client, spec, paths, images=images, run=RUN)
    assert isinstance(local, TaskResult)
    assert local.status == "verified", local.reason
    harbor = verify_task_harbor(spec, paths, images=images, run=RUN)
    harbor_results[task] = harbor

    assert harbor.engine == "harbor"
    assert harbor.status == local.status == "verified", harbor.reason
    assert [r.reward for r in harbor.oracle] == [1.0, 1.0]
    assert harbor.nop is not None and local.nop is not None
    assert harbor.nop.reward == pytest.approx(local.nop.reward)
    assert harbor.nop.subscores == pytest.approx(local.nop.subscores)
    for run in [*harbor.oracle, harbor.nop]:
        assert run.grade_status == "graded", run.reason
        trial = Path(run.log_dir)
        assert json.loads((trial / "result.json").read_text())["exception_info"] is None
        assert (trial / "verifier" / "reward.json").is_file()
        assert run.duration_sec > 0
    # Harbor ran the prebuilt images: nothing built (its own builds are tagged hb__*), and
    # nothing deleted after the trials.
    for tag in images.values():
        docker_client.images.get(tag)
    # One listing call: images.list() inspects each image after listing, racing any concurrent
    # removal on a shared engine.
    tags = [t for i in docker_client.api.images() for t in i.get("RepoTags") or []]
    assert not [t for t in tags if t.startswith("hb__")]
    assert _left_behind(docker_client) == [], "containers left behind"


def test_cli_verify_passes_harbor_env_to_both_jobs(paths: OutputPaths, docker_client: Any) -> None:
    """`--engine harbor --harbor-env TYPE` through the command reaches both of Harbor's jobs.

    docker: the task verifies. Harbor writes each job's config.json without its defaults, and
    docker is its default type, so an absent type there means docker. daytona (no account on
    this machine) tells the two apart: both jobs must fail in Harbor's Daytona environment, and
    the task is infra_error naming it, never a reward of 0 (the verdict of the docker run stays).
    """
    task = GRADEABLE[0]
    proc = run_cli(
        "verify", task, "--out", str(paths.root), "--engine", "harbor", "--harbor-env", "docker",
        "--oracle-runs", "1", "--force",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = TaskResult.model_validate_json(paths.result_file(task).read_text())
    assert (result.engine, result.status) == ("harbor", "verified"), result.reason
    jobs = paths.base / "harbor-jobs" / task
    for agent in ("oracle", "nop"):
        config = json.loads((jobs / agent / "config.json").read_text())
        assert config.get("environment", {}).get("type", "docker") == "docker", config
        assert "Daytona" not in (jobs / f"{agent}.log").read_text()
    assert _left_behind(docker_client) == [], "containers left behind"

    assert not [k for k in os.environ if k.startswith("DAYTONA_")], "a Daytona account is set"
    proc = run_cli(
        "verify", task, "--out", str(paths.root), "--engine", "harbor", "--harbor-env", "daytona",
        "--oracle-runs", "1", "--force",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # An infra_error never replaces the verdict before it: it goes beside it.
    error = paths.base / "results" / f"{task}.error.json"
    result = TaskResult.model_validate_json(error.read_text())
    assert result.status == "infra_error" and "DAYTONA_API_KEY" in result.reason, result.reason
    runs = [*result.oracle, *([result.nop] if result.nop else [])]
    assert runs and all(r.reward is None and r.grade_status == "infra_error" for r in runs), runs
    for agent in ("oracle", "nop"):
        assert "DAYTONA_API_KEY" in (jobs / f"{agent}.log").read_text(), agent
    kept = TaskResult.model_validate_json(paths.result_file(task).read_text())
    assert kept.status == "verified"


def test_harbor_scores_the_oracle_under_the_limits_measured_locally(
    paths: OutputPaths, docker_client: Any
) -> None:
    """A verified task's task.toml states the CPUs, memory, storage and verifier timeout its gold
    runs measured (`stages.calibrate`), and the real `harbor run` of the oracle still scores
    1.0 under them.
    """
    task = GRADEABLE[0]
    proc = run_cli("verify", task, "--out", str(paths.root), "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    local = TaskResult.model_validate_json(paths.result_file(task).read_text())
    assert local.status == "verified" and local.resources, local
    config = tomllib.loads((paths.task_dir(task) / "task.toml").read_text())
    limits = {k: config["environment"][k] for k in ("cpus", "memory_mb", "storage_mb")}
    assert limits == {k: config["verifier"]["environment"][k] for k in limits}
    assert limits["cpus"] >= 1 and limits["memory_mb"] >= 512 and limits["storage_mb"] >= 1024
    assert limits["memory_mb"] >= local.resources["memory_peak_mb"] * 1.5
    assert config["verifier"]["timeout_sec"] == local.resources["verifier_timeout_sec"]

    proc = run_cli(
        "verify", task, "--out", str(paths.root), "--engine", "harbor", "--oracle-runs", "1",
        "--force",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    harbor = TaskResult.model_validate_json(paths.result_file(task).read_text())
    assert (harbor.engine, harbor.status) == ("harbor", "verified"), harbor.reason
    assert [r.reward for r in harbor.oracle] == [1.0]
    assert _left_behind(docker_client) == [], "containers left behind"


def test_dataset_run_through_registry_reproduces_oracle_rewards(
    paths: OutputPaths, docker_client: Any, harbor_results: dict[str, TaskResult]
) -> None:
    from packager.engines.harbor import run_dataset
    from packager.render.harbor_dataset import write_harbor_dataset

    manifest, registry = write_harbor_dataset(paths, name="samples", version="1.0")
    assert manifest == paths.base / "dataset.toml"
    assert [t["path"] for t in json.loads(registry.read_text())[0]["tasks"]] == [
        f"tasks/{t}" for t in sorted([*GRADEABLE, JUDGED])
    ]
    trials = run_dataset(paths, "oracle", name="samples", version="1.0", exclude=[JUDGED], run=RUN)
    by_task = {t.task.split("/")[-1]: t for t in trials}
    assert sorted(by_task) == sorted(GRADEABLE)
    assert len(trials) == len(GRADEABLE)
    for task, trial in by_task.items():
        assert trial.error is None, f"{task}: {trial.error}"
        assert trial.rewards is not None and trial.rewards["reward"] == 1.0, task
        if task in harbor_results:  # same rewards as the per-task runs (all keys)
            assert trial.rewards == {"reward": 1.0, **harbor_results[task].oracle[0].subscores}
    assert _left_behind(docker_client) == [], "containers left behind"


def test_a_trial_error_is_an_infra_error_not_a_zero(
    paths: OutputPaths, tmp_path: Path, docker_client: Any
) -> None:
    """Harbor exits 0 when a trial errors; the engine reads result.json and says why."""
    import shutil

    from packager.engines.harbor import read_trials, run_jobs, task_job, trial_run

    task = tmp_path / GRADEABLE[0]
    shutil.copytree(paths.task_dir(GRADEABLE[0]), task)
    config = (task / "task.toml").read_text()
    grader = json.loads((paths.manifest_dir(GRADEABLE[0]) / "oracle.json").read_text())
    (task / "task.toml").write_text(config.replace(grader["grader_image"], "packager/missing:none"))
    job = task_job(
        task,
        "oracle",
        tmp_path / "jobs",
        timeout_sec=600.0,
        cleanup_labels={"packager.task": f"samples/{GRADEABLE[0]}"},
    )
    assert run_jobs([job], label="missing-grader", run=RUN) == [0]
    [trial] = read_trials(job.job_dir)
    run = trial_run("oracle", trial)
    assert run.reward is None
    assert run.grade_status == "infra_error"
    assert run.reason is not None and run.reason.startswith("RuntimeError: ")
    assert _left_behind(docker_client) == [], "containers left behind"
