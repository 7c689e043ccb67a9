"""`--executor ray` on a real local Ray cluster: a head node (`ray start --head`) and a second
worker node process, both on this machine, started and stopped here, with a loopback registry.

1. The samples packaged through Ray: every gradeable task verified on the cluster, both nodes
   used, the images in the registry under the digests the results name, logs on the driver.
   A rerun is all cached, and `publish --executor ray` pushes nothing: the release names the
   digests the jobs pushed. The SWEeper sample is left out: test_judge_e2e.py tests its
   browser judge, and its Chromium grader image is by far the largest to push.
2. A worker node killed mid-run: its task is `infra_error` naming the node, the other tasks are
   verified, and a rerun (cluster of the head alone) finishes the lost task without touching
   the others.
3. Ctrl-C to the driver while jobs run on both nodes: exit 130, the jobs cancelled, and no
   container of the run left on the engine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from packager.samples.generate import generate
from tests.conftest import QUICK_PERTURB, QUICK_RUNS, ROOT, run_cli
from tests.raycluster import RAY, Cluster, ray_command

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GRADEABLE = [
    "samples__inventory-4",
    "samples__intset-2",
    "samples__kvstore-3",
    "samples__textkit-1",
]
"""The samples graded without a model (the SWEeper sample's browser judge: test_judge_e2e.py)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert RAY.is_file(), f"no ray command at {RAY}. Fix: make install (packager[ray])"
    made = Cluster(tmp_path_factory.mktemp("ray"))
    ray_command("stop", "--force")  # a cluster left by an earlier run that died
    made.start_head()
    try:
        made.add_worker()
        yield made
    finally:
        made.stop()


def _catalog(host: str) -> list[str]:
    with urllib.request.urlopen(f"http://{host}/v2/_catalog", timeout=10) as response:
        repos: list[str] = json.load(response)["repositories"]
    return repos


def _digest(host: str, repository: str, tag: str) -> str | None:
    request = urllib.request.Request(
        f"http://{host}/v2/{repository}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Docker-Content-Digest")


def _results(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        p.stem: json.loads(p.read_text())
        for p in sorted(folder.glob("*.json"))
        if not p.name.endswith((".audit.json", ".error.json", ".quality.json"))
    }


def _start_driver(command: list[str]) -> subprocess.Popen[str]:
    """The packager command as a user runs it, in the background (the test acts meanwhile)."""
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop_driver(proc: subprocess.Popen[str]) -> None:
    """Kill the driver if it still runs and close its pipes (an open pipe fails a later test
    with a ResourceWarning).
    """
    proc.kill()
    proc.communicate()


def _listed(docker_client: Any, filters: dict[str, Any]) -> list[Any]:
    """Containers matching `filters`, in one listing call (a full listing inspects each one and
    fails when a job removes it in between).
    """
    found: list[Any] = docker_client.containers.list(all=True, sparse=True, filters=filters)
    return found


def test_samples_packaged_through_ray(
    cluster: Cluster, registry: str, tmp_path: Path, docker_client: Any
) -> None:
    out = tmp_path / "out"
    target = f"{registry}/raytest"
    result = run_cli(
        "package", *GRADEABLE, "--out", str(out),
        "--executor", "ray", "--ray-address", cluster.address, "--workers-per-node", "1",
        "--registry", target,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    results = _results(out / "samples" / "results")
    assert sorted(results) == sorted(GRADEABLE)
    assert {r["status"] for r in results.values()} == {"verified"}, {
        t: (r["status"], r["reason"]) for t, r in results.items()
    }
    nodes = {r["node"] for r in results.values()}
    assert len(nodes) == 2, nodes  # both the head and the worker node took jobs
    assert f"{len(GRADEABLE)} verified" in result.stdout
    catalog = _catalog(registry)
    assert "raytest/debian" in catalog  # the base image, pushed by the driver for the nodes
    for task, found in results.items():
        assert set(found["registry_images"]) == {"agent", "grader"}
        for role, reference in found["registry_images"].items():
            repository, _, digest = reference.partition("@")
            name = repository.split("/", 1)[1]
            assert name in catalog
            local_tag = found["images"][role]
            assert _digest(registry, name, local_tag.rsplit(":", 1)[1]) == digest
        # Logs came back to the driver, at the driver's paths.
        log_dir = Path(found["logs"]["dir"])
        assert log_dir.is_relative_to(out) and (log_dir / "oracle-1" / "reward.json").is_file()
        assert (log_dir / "nop").is_dir(), task
        assert found["oracle"][0]["reward"] == 1.0 and found["nop"]["reward"] < 1.0

    # A rerun sends nothing to the cluster: every task is cached.
    again = run_cli(
        "package", *GRADEABLE, "--out", str(out),
        "--executor", "ray", "--ray-address", cluster.address, "--registry", target,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"({len(GRADEABLE)} cached, 0 built or run now)" in again.stdout

    # publish --executor ray: every image is in the registry already (the jobs pushed them,
    # the driver the base image), and the release names them by the digests the results hold.
    published = run_cli(
        "publish", "--all", "--out", str(out), "--registry", target, "--executor", "ray"
    )
    assert published.returncode == 0, published.stdout + published.stderr
    said = " ".join(published.stdout.split())
    # Per task: agent, grader and its base image.
    assert f"0 image(s) pushed, {3 * len(GRADEABLE)} unchanged" in said, said
    for task, found in results.items():
        text = (out / "samples" / "release" / "tasks" / task / "task.toml").read_text()
        refs = [line.split('"')[1] for line in text.splitlines() if "docker_image" in line]
        assert refs == [found["registry_images"]["agent"], found["registry_images"]["grader"]]


def test_lost_worker_node_is_infra_error_and_a_rerun_finishes(
    cluster: Cluster, registry: str, tmp_path: Path, docker_client: Any
) -> None:
    n = 6
    data = generate(tmp_path / "ds", n)
    out = tmp_path / "out"
    worker = cluster.workers[-1] if cluster.workers[-1].poll() is None else cluster.add_worker()
    worker_id = cluster.node_ids[worker.pid]
    cluster.settle()
    command = [
        sys.executable, "-m", "packager", "package", "--all", "--dataset", str(data),
        "--out", str(out), "--executor", "ray", "--ray-address", cluster.address,
        "--workers-per-node", "1", "--registry", f"{registry}/raylost", *QUICK_RUNS,
        *QUICK_PERTURB,
    ]  # fmt: skip
    proc = _start_driver(command)
    results_dir = out / "rows" / "results"
    try:
        deadline = time.monotonic() + 900
        # Once a task is back, kill the worker node the moment it starts a job (a job takes a
        # few seconds; killed between two jobs, the node only loses a placement, which the
        # driver makes again elsewhere, and no task is lost).
        seen: dict[str, float] = {}
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no job started on the worker in 15 minutes"
            now = time.monotonic()
            started = {job: seen.setdefault(job, now) for job in cluster.jobs_on(worker)}
            killed = {job for job, t in started.items() if now - t < 0.5}
            if killed and _results(results_dir):
                break
            time.sleep(0.1)
        cluster.kill_worker(worker)
        stdout, stderr = proc.communicate(timeout=1200)
    finally:
        _stop_driver(proc)
    assert proc.returncode == 1, stdout + stderr  # not every task verified
    results = _results(results_dir)
    assert len(results) == n, sorted(results)
    lost = {t: r for t, r in results.items() if r["status"] == "infra_error"}
    assert len(lost) == 1, {t: (r["status"], r["reason"]) for t, r in results.items()}
    ((task, reason),) = ((t, r["reason"]) for t, r in lost.items())
    assert worker_id[:12] in reason and "lost" in reason, reason
    assert any(job.endswith(f":{task}") for job in killed), (task, killed)
    assert lost[task]["node"] and worker_id[:12] in lost[task]["node"]
    others = {t: r for t, r in results.items() if t not in lost}
    assert all(r["status"] == "verified" for r in others.values()), others
    before = {t: (results_dir / f"{t}.json").read_bytes() for t in others}

    # The rerun (only the head is left) finishes the lost task and leaves the others be.
    rerun = run_cli(*command[3:])
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"({n - 1} cached, 1 built or run now)" in rerun.stdout
    final = _results(results_dir)
    assert all(r["status"] == "verified" for r in final.values())
    assert all((results_dir / f"{t}.json").read_bytes() == before[t] for t in others)
    # Nothing of the killed node's job is left running on the engine.
    left = _listed(docker_client, {"label": ["packager.task", "packager.run"]})
    assert not [c for c in left if "gen__calc" in (c.attrs.get("Labels") or {})["packager.task"]]


def test_ctrl_c_cancels_the_cluster_jobs_and_leaves_no_containers(
    cluster: Cluster, registry: str, tmp_path: Path, docker_client: Any
) -> None:
    if not cluster.running_workers():
        cluster.add_worker()  # the previous test killed it
    cluster.settle()  # the killed node no longer listed: the driver sees the head and one worker
    data = generate(tmp_path / "ds", 4)
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "packager", "package", "--all", "--dataset", str(data),
        "--out", str(out), "--executor", "ray", "--ray-address", cluster.address,
        "--registry", f"{registry}/raystop", *QUICK_RUNS, *QUICK_PERTURB,
    ]  # fmt: skip
    ours = {"label": "packager.tool=packager"}
    # Containers an earlier test left (stopped ones too) are not this run's: were they taken
    # for the run's first container, Ctrl-C would reach the driver before Python is up.
    before = {c.id for c in _listed(docker_client, ours)}

    def this_run() -> list[Any]:
        # This dataset's containers only: another packager run on the same engine is not ours.
        return [
            c
            for c in _listed(docker_client, ours)
            if c.id not in before
            and (c.attrs.get("Labels") or {}).get("packager.task", "").startswith("rows/gen__calc")
        ]

    proc = _start_driver(command)
    try:
        deadline = time.monotonic() + 600
        # Wait until the jobs run containers (builds are cached: they are grading by then).
        while not this_run():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no job started a container within 10 minutes"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        _stop_driver(proc)
    assert proc.returncode == 130, stdout + stderr
    said = " ".join((stdout + stderr).split())
    assert re.search(r"interrupted: removed \d+ container\(s\) on 2 Ray node\(s\)", said), said
    assert this_run() == []
    time.sleep(5)  # a job that was not really stopped would start its next container by now
    assert this_run() == []
    # Interrupted tasks wrote no result; a rerun would run them.
    assert len(_results(out / "rows" / "results")) < 4
