"""A real Ray cluster on this machine, for the Ray executor's tests and benchmark: a head node
(`ray start --head`) and worker node processes (`ray start --block`, each in a session of its
own, so killing one loses that node at once), all on loopback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.services import free_port

RAY = Path(sys.executable).parent / "ray"
WORKER_MARK = "packager_test_worker"
RAY_SERVICE_TITLES = frozenset({"ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent"})
"""Titles of a node's processes that are not running a job."""
"""A custom resource only the second node advertises: the test tells the nodes apart by it."""


def ray_command(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RAY), *args],
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Cluster:
    """A head node and worker node processes on loopback."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.tmp = tmp
        self.workers: list[subprocess.Popen[bytes]] = []
        self.node_ids: dict[int, str] = {}
        """Worker process id → the Ray node id it registered as."""

    def start_head(self) -> None:
        started = ray_command(
            "start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
            "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
            "--object-store-memory=200000000",
        )  # fmt: skip
        assert started.returncode == 0, started.stdout + started.stderr

    def add_worker(self) -> subprocess.Popen[bytes]:
        """Another node: `ray start --block` in a session of its own (killed as a group).
        Returns once the cluster lists it: a node id it did not list before (a node killed
        moments ago is still listed alive until its heartbeats time out).
        """
        before = set(self.live_worker_ids())
        with (self.tmp / f"worker-{len(self.workers)}.log").open("wb") as log:
            proc = subprocess.Popen(
                [
                    str(RAY),
                    "start",
                    f"--address={self.address}",
                    "--node-ip-address=127.0.0.1",
                    "--num-cpus=2",
                    "--object-store-memory=200000000",
                    "--block",
                    f"--resources={json.dumps({WORKER_MARK: 1})}",
                ],  # fmt: skip
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.workers.append(proc)
        deadline = time.monotonic() + 90
        while not (new := set(self.live_worker_ids()) - before):
            assert proc.poll() is None, (
                self.tmp / f"worker-{len(self.workers) - 1}.log"
            ).read_text()
            assert time.monotonic() < deadline, "the worker node did not join within 90 s"
            time.sleep(1)
        self.node_ids[proc.pid] = new.pop()
        return proc

    def live_worker_ids(self) -> list[str]:
        """Worker nodes the cluster lists as alive."""
        return [str(n["id"]) for n in self.nodes() if n["alive"] and WORKER_MARK in n["res"]]

    def running_workers(self) -> list[subprocess.Popen[bytes]]:
        return [proc for proc in self.workers if proc.poll() is None]

    def settle(self, timeout: float = 180) -> None:
        """Wait until the cluster lists as alive exactly the worker nodes whose processes run
        (a killed node is listed until its heartbeats time out).
        """
        deadline = time.monotonic() + timeout
        while True:
            running = {self.node_ids[p.pid] for p in self.running_workers()}
            listed = set(self.live_worker_ids())
            if listed == running:
                return
            assert time.monotonic() < deadline, f"cluster lists {listed}, running {running}"
            time.sleep(1)

    def nodes(self) -> list[dict[str, Any]]:
        probe = (
            f"import json, ray; ray.init(address={self.address!r}, logging_level='ERROR', "
            "log_to_driver=False); print(json.dumps([{'id': n['NodeID'], 'alive': n['Alive'], "
            "'res': n['Resources']} for n in ray.nodes()]))"
        )
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", probe],
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            # Ray may print its own lines around the answer (a node just lost, say).
            for line in reversed(out.stdout.splitlines()):
                if line.startswith("[{") or line == "[]":
                    nodes: list[dict[str, Any]] = json.loads(line)
                    return nodes
            time.sleep(1)
        raise AssertionError(f"no node list from the cluster: {out.stdout}{out.stderr}")

    def worker_node_id(self) -> str | None:
        """The node id of the newest worker process still running (None: none runs)."""
        running = self.running_workers()
        return self.node_ids[running[-1].pid] if running else None

    @staticmethod
    def jobs_on(proc: subprocess.Popen[bytes]) -> set[str]:
        """The names of the Ray jobs running on the node `proc` started now: its worker
        processes (in its session) retitle themselves `ray::<job name>` while they run one and
        `ray::IDLE` between jobs.
        """
        running: set[str] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.getsid(int(entry.name)) != proc.pid:
                    continue
                title = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode()
            except (OSError, UnicodeDecodeError):
                continue  # gone meanwhile
            if title.startswith("ray::") and title not in RAY_SERVICE_TITLES:
                running.add(title.removeprefix("ray::"))
        return running

    def kill_worker(self, proc: subprocess.Popen[bytes]) -> None:
        """The node is lost: its raylet and every process of it killed at once."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        ray_command("stop", "--force")
