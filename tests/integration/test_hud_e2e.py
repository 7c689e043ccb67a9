"""The rendered HUD environments under the real `hud` 0.6.21 SDK, on the real Docker engine.

Per gradeable sample:
(a) `tasks.py` imports on the host with the real hud (`.hud/venv`, see scripts/ensure-hud.sh)
    and lists exactly one task, with the task's slug and the env name of `env.py`;
(b) `Dockerfile.hud` builds locally (`packager.images.hud_build`; cached by a content-hash tag; the
    samples' images are built three at a time, first), and the build-only CA bundle and
    wheelhouse are not in the image;
(c) a gold and a no-op rollout through HUD's own runtime (`Taskset.run` + `DockerRuntime`, a
    scripted agent, no model; tests/integration/hud_rollout.py under the hud interpreter) give
    the rewards and subscores the local engine gives (oracle 1.0, the row's nop);
(d) the agent uid cannot read the grader payload in that container: through the agent shell
    (bubblewrap: /hud does not exist) and with `docker exec -u 1000` (Permission denied).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from packager.context import RunContext
from packager.images.build import BuildOutcome
from packager.models.spec import TaskResult, TaskSpec
from packager.render.naming import make_hud_env_name
from packager.settings import VerifyConfig
from packager.storage import OutputPaths
from tests.conftest import ROOT, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GRADEABLE = [
    "samples__textkit-1",
    "samples__intset-2",
    "samples__kvstore-3",
    "samples__inventory-4",
]
JUDGED = "samples__todo-web-5"
HUD_VENV = ROOT / ".hud" / "venv"
HUD_STAMP = HUD_VENV / ".packager-hud-0.6.21"
ROLLOUT = Path(__file__).with_name("hud_rollout.py")
SECRET = "/hud/grader/plan.json"
HUD_ENV = {
    **os.environ,
    "HUD_CLI_ANALYTICS_ENABLED": "0",
    "HUD_SKIP_VERSION_CHECK": "1",
    "HUD_TELEMETRY_ENABLED": "0",
}

RUN = RunContext()
"""This module's run: its rollouts' containers carry its id."""


@pytest.fixture(scope="session")
def hud_python() -> Path:
    """The pinned HUD interpreter; installed on first use (scripts/ensure-hud.sh is idempotent)."""
    if not HUD_STAMP.is_file():
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "ensure-hud.sh")],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            pytest.fail(f"scripts/ensure-hud.sh failed:\n{proc.stderr[-3000:]}", pytrace=False)
    return HUD_VENV / "bin" / "python"


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> OutputPaths:
    out = tmp_path_factory.mktemp("hud")
    proc = run_cli("render", "--all", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return OutputPaths(out, "samples")


@dataclass(frozen=True)
class HudImage:
    images: dict[str, str]
    tag: str
    outcome: BuildOutcome


@pytest.fixture(scope="module")
def hud_images(paths: OutputPaths, docker_client: Any) -> dict[str, HudImage]:
    """Every sample's agent and grader images (`packager build`, cached), then its HUD image,
    three builds at a time: a cold HUD build mostly waits on apt and pip downloads.
    """
    from packager.images.hud_build import build_hud_image, download_hud_wheels, hud_image_tag

    tasks = [*GRADEABLE, JUDGED]
    proc = run_cli("build", *tasks, "--out", str(paths.root), "-j", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    download_hud_wheels(paths.base / "logs" / "hud-wheels.log")  # once, before the builds

    def build(task: str) -> HudImage:
        images = json.loads(paths.result_file(task).read_text())["images"]
        source = paths.source_dir(task)
        tag = hud_image_tag(source, "samples")
        log = paths.log_dir(task) / "hud-build.log"
        outcome = build_hud_image(docker_client, source, images["agent"], tag, log)
        return HudImage(images, tag, outcome)

    with ThreadPoolExecutor(3) as pool:
        futures = {task: pool.submit(build, task) for task in tasks}
    return {task: future.result() for task, future in futures.items()}


def _spec(task: str) -> TaskSpec:
    from packager.datasets.sources import open_dataset
    from packager.run.resolve import resolve_spec
    from packager.run.select import Selection, iter_specs

    sel = Selection(dataset=open_dataset(None, "test"), task_ids=(task,))
    return resolve_spec(next(iter_specs(sel)), sel.merged_repo_sources)


def _rollout(
    hud_python: Path, paths: OutputPaths, task: str, image: str, agent: str, *extra: str
) -> dict[str, Any]:
    from packager.render import naming

    labels = {
        naming.LABEL_TOOL: "packager",
        naming.LABEL_TASK: task,
        naming.LABEL_ROLE: "hud-rollout",
        naming.LABEL_RUN: RUN.run_id,
    }
    argv = [str(hud_python), str(ROLLOUT), "--source", str(paths.source_dir(task))]
    argv += ["--image", image, "--agent", agent, "--workdir", _spec(task).repo.workdir]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    proc = subprocess.run(
        [*argv, *extra], capture_output=True, text=True, env=HUD_ENV, timeout=1200
    )
    assert proc.returncode == 0, f"{agent} rollout failed:\n{proc.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _left_behind(docker_client: Any) -> list[Any]:
    containers: list[Any] = docker_client.containers.list(
        all=True, filters={"label": ["packager.role=hud-rollout", f"packager.run={RUN.run_id}"]}
    )
    return containers


@pytest.mark.parametrize("task", GRADEABLE)
def test_tasks_py_imports_with_real_hud(task: str, paths: OutputPaths, hud_python: Path) -> None:
    code = (
        "import json; from hud.eval.taskset import Taskset; ts = Taskset.from_file('tasks.py'); "
        "import env; print(json.dumps({'slugs': [s for s, _ in ts.items()], "
        "'rows': [t.env for t in ts], 'envs': sorted(ts.environment_names()), "
        "'env_py': env.env.name}))"
    )
    proc = subprocess.run(
        [str(hud_python), "-c", code],
        cwd=paths.source_dir(task),
        capture_output=True,
        text=True,
        env=HUD_ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout.strip().splitlines()[-1])
    name = make_hud_env_name("samples", task)
    assert listed == {"slugs": [task], "rows": [name], "envs": [name], "env_py": name}
    # The CLI too (it crashes at start-up unless typer < 0.29): `hud task list`.
    proc = subprocess.run(
        [str(hud_python.parent / "hud"), "task", "list"],
        cwd=paths.source_dir(task),
        capture_output=True,
        text=True,
        env=HUD_ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split() for line in proc.stdout.splitlines() if line.strip()] == [[task, "solve"]]


@pytest.mark.parametrize("task", GRADEABLE)
def test_hud_image_rollouts_match_local_engine(
    task: str,
    paths: OutputPaths,
    docker_client: Any,
    hud_python: Path,
    hud_images: dict[str, HudImage],
) -> None:
    from packager.engines.local import verify_task
    from packager.render.hud import BUILD_CA_NAME, BUILD_WHEELS_NAME

    # The agent image (built by the fixture), then the local engine as the reference.
    built = hud_images[task]
    images, tag = built.images, built.tag
    spec = _spec(task)
    local = verify_task(
        docker_client,
        spec,
        paths,
        images=images,
        config=VerifyConfig(oracle_runs=1, perturb="none"),  # type: ignore[arg-type]
        run=RUN,
    )
    assert isinstance(local, TaskResult)
    assert local.status == "verified", local.reason
    assert local.nop is not None and [r.reward for r in local.oracle] == [1.0]

    # (b) Dockerfile.hud builds here; the build-only CA bundle and wheelhouse are in no layer.
    image = docker_client.images.get(tag)
    assert image.labels["packager.role"] == "hud"
    assert image.labels["packager.task"] == task
    history = json.dumps(image.history())
    assert BUILD_CA_NAME[:-1] not in history  # the pip stage is not part of the image
    assert BUILD_WHEELS_NAME[:-1] not in history and "--find-links" not in history
    assert "PIP_INDEX_URL" not in history and "PIP_CERT" not in history
    found = docker_client.containers.run(
        tag,
        [
            "find",
            "/",
            "-xdev",
            "(",
            "-name",
            BUILD_CA_NAME,
            "-o",
            "-name",
            "hud-*.whl",
            "-o",
            "-name",
            BUILD_WHEELS_NAME,
            "-o",
            "-path",
            "/tmp/hud-build",
            ")",
        ],
        entrypoint=[],
        remove=True,
        labels={"packager.role": "hud-rollout", "packager.task": task},
    )
    assert found.strip() == b"", found
    print(f"{task}: HUD image {tag} ({'built' if built.outcome.built else 'cached'})")

    # (c) + (d) through HUD's runtime: a no-op agent that probes the payload, then gold.
    volumes_before = {v.name for v in docker_client.volumes.list()}
    gold_patch = str(paths.task_dir(task) / "solution" / "gold.patch")
    with ThreadPoolExecutor(2) as pool:  # two independent containers
        nop_run = pool.submit(_rollout, hud_python, paths, task, tag, "nop", "--probe")
        gold_run = pool.submit(
            _rollout, hud_python, paths, task, tag, "gold", "--patch", gold_patch
        )
        nop, gold = nop_run.result(), gold_run.result()
    for run in (nop, gold):
        assert run["slugs"] == [task] and run["slug"] == task
        assert run["envs"] == [make_hud_env_name("samples", task)]
        assert run["status"] == "completed" and run["errors"] == [], run
        assert run["is_error"] is False and run["info"]["status"] == "graded", run["content"]
    assert gold["reward"] == pytest.approx(1.0)
    assert nop["reward"] == pytest.approx(local.nop.reward)
    if spec.expectations.nop_reward is not None:
        assert nop["reward"] == pytest.approx(spec.expectations.nop_reward)
    for run, reference in ((nop, local.nop), (gold, local.oracle[0])):
        scores = {s["name"]: s["value"] for s in run["subscores"] or []}
        assert scores == pytest.approx(reference.subscores), run["agent"]
    print(f"{task}: HUD gold {gold['reward']}, nop {nop['reward']} (local nop {local.nop.reward})")

    probe = nop["probe"]
    assert probe["whoami"]["stdout"].split()[0] == "1000"
    shell = probe["shell_cat"]
    assert shell["exit"] != 0 and shell["stdout"] == ""
    assert f"cat: {SECRET}: No such file or directory" in shell["stderr"]  # bwrap: no /hud
    docker_exec = probe["docker_exec"]
    assert docker_exec["exit"] != 0 and docker_exec["stdout"] == ""
    assert docker_exec["stderr"] == f"cat: {SECRET}: Permission denied"
    print(f"{task}: agent shell `cat {SECRET}` -> {shell['stderr'].strip()}")
    print(f"{task}: `{docker_exec['command']}` -> {docker_exec['stderr']}")

    assert _left_behind(docker_client) == [], "containers left behind"
    leaked = {v.name for v in docker_client.volumes.list()} - volumes_before
    assert not [v for v in leaked if v.startswith("hud-runtime-sessions-")], leaked


def test_hud_rollouts_of_the_browser_judged_sample(
    paths: OutputPaths, docker_client: Any, hud_python: Path, hud_images: dict[str, HudImage]
) -> None:
    """The SWEeper sample under HUD's runtime: the same judge (Chromium, browser-use) runs in
    the HUD container, its model the replay server on this host (by the host-gateway name)."""
    from packager.judge.endpoint import REPLAY_DIR, REPLAY_MODEL
    from packager.judge.replay import ReplayScript, ReplayServer

    task = JUDGED
    tag = hud_images[task].tag
    gold_patch = str(paths.task_dir(task) / "solution" / "gold.patch")
    with ReplayServer(ReplayScript.load(REPLAY_DIR / f"{task}.yaml"), host="0.0.0.0") as server:
        judge = [
            "--add-host",
            "host.docker.internal:host-gateway",
            "--env",
            f"PACKAGER_JUDGE_BASE_URL=http://host.docker.internal:{server.port}/v1",
            "--env",
            f"PACKAGER_JUDGE_MODEL={REPLAY_MODEL}",
        ]
        with ThreadPoolExecutor(2) as pool:
            nop_run = pool.submit(_rollout, hud_python, paths, task, tag, "nop", *judge)
            gold_run = pool.submit(
                _rollout, hud_python, paths, task, tag, "gold", "--patch", gold_patch, *judge
            )
            nop, gold = nop_run.result(), gold_run.result()
    for run in (nop, gold):
        assert run["status"] == "completed" and run["errors"] == [], run
        assert run["info"]["status"] == "graded", run["content"]
    scores = {s["name"]: s["value"] for s in gold["subscores"] or []}
    assert gold["reward"] == pytest.approx(1.0)
    assert scores == {"target": 1.0, "preservation": 1.0}
    scores = {s["name"]: s["value"] for s in nop["subscores"] or []}
    assert nop["reward"] == pytest.approx(0.0)
    assert scores == {"target": 0.0, "preservation": 1.0}
    assert _left_behind(docker_client) == [], "containers left behind"


def _pip_stage_script(dockerfile: str) -> str:
    """The shell of the `hud-venv` stage's RUN, as the builder runs it (each backslash-newline
    removed, so the lines are one)."""
    stage = dockerfile.split("\nFROM hud-base AS hud-venv\n", 1)[1]
    lines = stage[stage.index("\nRUN ") + len("\nRUN ") :].splitlines()
    script = []
    for line in lines:
        script.append(line.removesuffix("\\"))
        if not line.endswith("\\"):
            break
    return "".join(script)


@pytest.mark.parametrize("wheelhouse", ["complete", "lacking-a-wheel"])
def test_pip_stage_installs_offline_from_a_complete_wheelhouse_else_from_the_index(
    wheelhouse: str,
    paths: OutputPaths,
    docker_client: Any,
    hud_images: dict[str, HudImage],
    tmp_path: Path,
) -> None:
    """The pip stage's own shell, with the small `typer<0.29` for its requirements: a complete
    wheelhouse installs with no network at all; one that lacks a wheel falls back to the index.
    """
    from packager.images.hud_build import WHEELS_PYTHON, host_ca_bundle, host_index_url
    from packager.render.hud import BUILD_CA_NAME, HUD_VERSION

    task = GRADEABLE[0]
    script = _pip_stage_script((paths.source_dir(task) / "Dockerfile.hud").read_text())
    assert f"hud=={HUD_VERSION} " in script
    script = script.replace(f"hud=={HUD_VERSION} ", "")
    wheels = tmp_path / "wheels"
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
         "--python-version", WHEELS_PYTHON, "-d", str(wheels), "typer<0.29"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    if wheelhouse == "lacking-a-wheel":
        (mdurl,) = wheels.glob("mdurl-*.whl")  # rich needs markdown-it-py, which needs mdurl
        mdurl.unlink()
    ca = host_ca_bundle()
    if ca is not None:
        (wheels / BUILD_CA_NAME).write_bytes(ca.read_bytes())
    index = host_index_url()
    prepare = "cp -r /wheels /tmp/hud-build && export PIP_INDEX_URL=" + (index or "")
    check = "/hud/venv/bin/python -c 'import typer, rich, mdurl' && stat -c '%u %a' /hud/venv"
    output = docker_client.containers.run(
        hud_images[task].tag,
        ["sh", "-c", f"{prepare}\n{script}\n{check}"],
        entrypoint=[],
        remove=True,
        volumes={str(wheels): {"bind": "/wheels", "mode": "ro"}},
        network_mode="none" if wheelhouse == "complete" else "bridge",
        labels={"packager.role": "hud-rollout", "packager.task": task},
        stderr=True,
    ).decode()
    assert "Looking in links: /tmp/hud-build" in output, output  # the offline attempt, first
    if wheelhouse == "complete":
        assert "No matching distribution" not in output, output
    else:
        assert "No matching distribution found for mdurl" in output, output
        assert re.search(r"Successfully installed .*mdurl-", output), output
    assert output.strip().splitlines()[-1] == "0 700", output  # root-only venv
