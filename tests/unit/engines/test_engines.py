"""The engine registry (`packager.engines`) and Harbor's environment type (`--harbor-env`): which
engine a name gives, what a wrong name or type says, and that both `harbor run` command lines
carry `--env <type>`. No Docker and no harbor process: `run_jobs` is replaced by a recorder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from packager import defaults
from packager.engines import get_engine
from packager.engines import harbor as harbor_engine
from packager.errors import InputError, UnknownEngineError
from packager.models.spec import TaskSpec
from packager.registry import ENGINES
from packager.settings import VerifyConfig
from packager.storage import OutputPaths
from tests.conftest import run_cli

TASK = "samples__textkit-1"


def _spec() -> TaskSpec:
    from packager.datasets.sources import open_dataset
    from packager.run.select import Selection, iter_specs

    return next(iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))))


class RecordedJobs:
    """Stands in for `run_jobs`: keeps each job's argv, runs nothing (so no trial exists)."""

    def __init__(self) -> None:
        self.args: list[tuple[str, ...]] = []

    def __call__(self, jobs: Sequence[harbor_engine.HarborJob], **_: Any) -> list[int]:
        self.args += [job.args for job in jobs]
        return [0] * len(jobs)


def _env_of(args: Sequence[str]) -> str:
    assert args.count("--env") == 1, args
    return args[args.index("--env") + 1]


ENGINE_MODULES = (
    "packager.engines.local",
    "packager.engines.harbor",
    "packager.engines.containers",
)
"""The engines the registry loads on demand, and the container runner they share (Docker SDK)."""


def test_registry_names_both_engines_and_stays_lazy() -> None:
    assert list(ENGINES) == ["local", "harbor"]
    assert get_engine("local").name == "local"
    harbor = get_engine("harbor")
    assert harbor.name == "harbor"
    assert isinstance(harbor, harbor_engine.HarborEngine)
    assert harbor.environment == "docker"
    # Importing the registry (as the CLI does) imports no engine.
    code = (
        f"ENGINE_MODULES = {ENGINE_MODULES!r}; "
        "import sys, packager.engines, packager.cli, packager.run.materialize, "
        "packager.stages.job; "
        "print(sorted(m for m in sys.modules if m in ENGINE_MODULES))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_engine_names_the_available_ones() -> None:
    with pytest.raises(
        UnknownEngineError, match=r"unknown engine 'ray' \(available: local, harbor\)"
    ):
        get_engine("ray")
    assert issubclass(UnknownEngineError, InputError)


def test_environment_types() -> None:
    custom = "my_sandboxes.env:SandboxEnvironment"
    for env_type in ("daytona", "modal", "e2b", custom):
        engine = get_engine("harbor", environment=env_type)
        assert isinstance(engine, harbor_engine.HarborEngine)
        assert engine.environment == env_type
    with pytest.raises(InputError, match="unknown Harbor environment type 'dayton'.*daytona"):
        get_engine("harbor", environment="dayton")
    with pytest.raises(InputError, match="local engine runs on the local Docker engine only"):
        get_engine("local", environment="modal")
    assert get_engine("local", environment="docker").name == "local"


def test_env_types_are_harbors(harbor_python: Path) -> None:
    """ENV_TYPES is Harbor 0.25's own list (its EnvironmentType), in its order."""
    code = (
        "import json; from harbor.models.environment_type import EnvironmentType; "
        "print(json.dumps([e.value for e in EnvironmentType]))"
    )
    out = subprocess.run([str(harbor_python), "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert tuple(json.loads(out.stdout)) == harbor_engine.ENV_TYPES


def test_task_job_carries_the_environment_type(tmp_path: Path) -> None:
    common: dict[str, Any] = {"timeout_sec": 60.0, "cleanup_labels": {}}
    default = harbor_engine.task_job(tmp_path / "t", "oracle", tmp_path / "jobs", **common)
    assert default.args[:2] == ("run", "-p")
    assert _env_of(default.args) == "docker"
    modal = harbor_engine.task_job(
        tmp_path / "t", "nop", tmp_path / "jobs", env_type="modal", **common
    )
    assert _env_of(modal.args) == "modal"


def test_run_stage_passes_harbor_env_to_both_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.stages.job import Staged, run_stage

    spec = _spec()
    paths = OutputPaths(tmp_path, spec.provenance.dataset)
    images = {"agent": "packager/agent:x", "grader": "packager/grader:x"}
    task_dir = paths.task_dir(spec.provenance.slug)
    task_dir.mkdir(parents=True)
    (task_dir / "task.toml").write_text(
        f'[environment]\ndocker_image = "{images["agent"]}"\n'
        f'[verifier.environment]\ndocker_image = "{images["grader"]}"\n'
    )
    recorded = RecordedJobs()
    monkeypatch.setattr(harbor_engine, "run_jobs", recorded)

    def finish(status: str, reason: str | None = None) -> Any:
        raise AssertionError(f"the engine failed: {status} {reason}")

    staged = Staged(spec, images, {}, {"build": 1.0}, {}, finish)
    client: Any = None  # the harbor engine starts no container itself
    settings = VerifyConfig(oracle_runs=2, engine="harbor", harbor_env="daytona")
    runner = get_engine("harbor", environment=settings.environment)
    result = run_stage(staged, paths, runner=runner, settings=settings, client=client)
    assert [_env_of(args) for args in recorded.args] == ["daytona", "daytona"]
    assert [args[args.index("-a") + 1] for args in recorded.args] == ["oracle", "nop"]
    assert result.engine == "harbor"
    assert result.status == "infra_error"  # nothing ran: no trial result

    recorded.args.clear()
    runner = get_engine("harbor")
    run_stage(staged, paths, runner=runner, settings=VerifyConfig(oracle_runs=1), client=client)
    assert [_env_of(args) for args in recorded.args] == ["docker", "docker"]

    recorded.args.clear()
    with pytest.raises(UnknownEngineError):
        get_engine("ray")
    with pytest.raises(InputError, match="local Docker engine only"):
        get_engine("local", environment="e2b")
    assert recorded.args == []


def test_run_dataset_carries_the_environment_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = RecordedJobs()
    monkeypatch.setattr(harbor_engine, "run_jobs", recorded)
    trial = harbor_engine.Trial("t__1", "packager/t", tmp_path, {"reward": 1.0}, None, "", 1.0)
    monkeypatch.setattr(harbor_engine, "read_trials", lambda _job_dir: [trial])
    paths = OutputPaths(tmp_path, "ds")
    assert harbor_engine.run_dataset(paths, "oracle", env_type="e2b") == [trial]
    assert harbor_engine.run_dataset(paths, "nop") == [trial]
    assert [_env_of(args) for args in recorded.args] == ["e2b", "docker"]
    assert recorded.args[0][:3] == ("run", "-d", "ds@1.0")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--harbor-env", "modal"], "--harbor-env modal needs --engine harbor"),
        (["--engine", "ray"], "unknown engine 'ray' (available: local, harbor)"),
        (["--engine", "harbor", "--harbor-env", "dayton"], "unknown Harbor environment type"),
    ],
)
@pytest.mark.parametrize("command", ["verify", "package"])
def test_cli_rejects_bad_engine_options(
    command: str, args: list[str], message: str, tmp_path: Path
) -> None:
    """Refused before anything is rendered or built (exit 2, nothing written)."""
    proc = run_cli(command, TASK, "--out", str(tmp_path / "out"), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in " ".join(proc.stderr.split())
    assert not (tmp_path / "out").exists()


def test_cli_help_lists_engines_and_harbor_env() -> None:
    proc = run_cli("package", "--help")
    assert proc.returncode == 0
    assert "local|harbor" in proc.stdout
    assert "--harbor-env" in proc.stdout
    assert defaults.DEFAULT_ENVIRONMENT == "docker"


def _sample_spec(task: str) -> TaskSpec:
    from packager.datasets.sources import open_dataset
    from packager.run.select import Selection, iter_specs

    return next(iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=(task,))))


def test_one_run_plan_for_every_run_of_a_task(tmp_path: Path) -> None:
    """Oracle, nop, `verify --patch` and quality ablations all take `make_run_plan`: a judged
    task's grader gets the model endpoint (loopback made reachable) and a network; others none.
    """
    from packager.engines.local import make_run_plan

    paths = OutputPaths(tmp_path, "samples")
    images = {"agent": "a:1", "grader": "g:1"}
    endpoint = {
        "PACKAGER_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
        "PACKAGER_JUDGE_MODEL": "m",
        "UNRELATED": "x",
    }
    judged = make_run_plan(_sample_spec("samples__todo-web-5"), paths, images, judge_env=endpoint)
    assert judged.grader_network is True
    assert dict(judged.grader_env) == {
        "PACKAGER_JUDGE_BASE_URL": "http://host.docker.internal:9/v1",
        "PACKAGER_JUDGE_MODEL": "m",
    }
    spec = _spec()
    plain = make_run_plan(
        spec, paths, images, config=VerifyConfig(memory_mb=512), judge_env=endpoint
    )
    assert (plain.grader_env, plain.grader_network) == ((), False)
    assert (plain.agent_image, plain.grader_image, plain.memory_mb) == ("a:1", "g:1", 512)
    assert plain.agent_timeout_sec == spec.agent_timeout_sec
    assert plain.grade_timeout_sec == spec.grading.timeout_sec
    assert plain.network == spec.environment.network
    assert plain.solution_dir == paths.task_dir(TASK) / "solution"


def test_verify_patch_of_a_judged_task_without_a_model_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PACKAGER_JUDGE_BASE_URL", "PACKAGER_JUDGE_MODEL", "PACKAGER_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    patch = tmp_path / "x.patch"
    patch.write_text("")
    proc = run_cli(
        "verify", "samples__todo-web-5", "--out", str(tmp_path / "out"), "--patch", str(patch)
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "samples__todo-web-5" in said and "PACKAGER_JUDGE_BASE_URL" in said, said
    assert "--judge replay" in said
