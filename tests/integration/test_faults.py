"""Bad input, infrastructure faults and flakiness, on the real Docker engine (docs/faults.md).

Every case runs small modified sample rows from a `faults.jsonl` in a temporary folder (dataset
`faults`, so images are `packager/faults.*` and container labels `packager.task=faults/...`).
Each one checks the status and reason, that no container of the task is left, and that earlier
results survive a run that did not complete. Images made here are removed at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from packager.images.wheelhouse import bridge_gateway
from packager.samples.make_samples import new_file_diff
from tests.conftest import ROOT, run_cli, sample_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUNDLES = ROOT / "packager" / "samples" / "repos"
DOCKER_SOCK = "/var/run/docker.sock"
INV = "samples__inventory-4"
KV = "samples__kvstore-3"
TEXTKIT = "samples__textkit-1"
SLOW = "sleep 4"
SAMPLES_SRC = ROOT / "packager" / "samples" / "src"

FLIP_TEST = '''

def test_flip() -> None:
    """Passes on even visits: a counter in a volume the test mounts into grader containers."""
    from pathlib import Path

    counter = Path("/flip/count")
    seen = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(seen + 1))
    assert seen % 2 == 0
'''

NETWORK_TEST = '''

def test_fetch() -> None:
    """Reaches for a service by name: grading is offline, so the lookup fails at once (.invalid
    never resolves anywhere, so no packet would leave even with a network)."""
    import urllib.request

    urllib.request.urlopen("http://service.invalid/status", timeout=5)
'''

HOST_TEST = """

def test_fetch_host() -> None:
    \"\"\"Reaches a service on the engine's host by the grader's host-gateway name: only a
    grader given the network (--grader-network public) gets an answer.\"\"\"
    import urllib.request

    url = "http://host.docker.internal:{port}/status"
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.read() == b"up"
"""


class _Status(BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        _Status.asked.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"up")

    def log_message(self, *_args: Any) -> None:
        return


@pytest.fixture(scope="module")
def status_port(docker_client: Any) -> Iterator[int]:
    """A service on the engine's bridge gateway that answers `up` (the public-network row's)."""
    gateway = bridge_gateway(docker_client)
    assert gateway is not None, "the engine's bridge has no gateway"
    server = ThreadingHTTPServer((gateway, 0), _Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def _row(instance: str, new_id: str, **changes: Any) -> dict[str, Any]:
    row = next(r for r in sample_rows() if r.get("instance_id") == instance)
    row = {**row, "instance_id": new_id, **changes}
    return row


def _recipes() -> dict[str, Any]:
    """The samples' recipes, plus per-task test commands (a recipe keyed by instance id wins)."""
    shipped = yaml.safe_load((ROOT / "packager" / "samples" / "recipes.yaml").read_text())
    textkit = dict(shipped["samples/textkit@1.0"])
    pytest_cmd = textkit["test_cmd"]
    return {
        **shipped,
        # The test files of the row's test patch follow the command: sleep first, then pytest.
        "faults__hang": {**textkit, "test_cmd": f"sleep 100000; {pytest_cmd}", "timeout": 5},
        "faults__oom": {
            **textkit,
            "test_cmd": f"python3 -c 'b = bytearray(512 * 1024 * 1024)'; {pytest_cmd}",
        },
        "faults__daemon": {**textkit, "test_cmd": f"{SLOW} && {pytest_cmd}"},
        "faults__int-b": {**textkit, "test_cmd": f"{SLOW} && {pytest_cmd}"},
    }


def _rows(port: int) -> list[dict[str, Any]]:
    inv = _row(INV, "x")
    kv = _row(KV, "x")
    textkit = _row(TEXTKIT, "x")
    hidden_path = "tests/hidden/test_hidden.py"
    hidden = (SAMPLES_SRC / "inventory" / "hidden" / hidden_path).read_text()
    return [
        _row(
            INV,
            "faults__gold-bad",
            patch=inv["patch"].replace('raise ValueError("quantity must be positive")', "pass"),
        ),
        _row(
            KV,
            "faults__setup-bad",
            setup_patch=kv["setup_patch"]
            .replace("new file mode 100644\n", "")
            .replace("--- /dev/null", "--- a/.nvmrc")
            .replace("@@ -0,0 +1 @@", "@@ -1 +1 @@\n-16"),
        ),
        _row(KV, "faults__run-false", dockerfile="FROM debian:bookworm-slim\nRUN false\n"),
        _row(KV, "faults__no-base", dockerfile="FROM no-such-image:404\nRUN true\n"),
        _row(TEXTKIT, "faults__hang"),
        _row(TEXTKIT, "faults__oom"),
        _row(TEXTKIT, "faults__daemon"),
        _row(TEXTKIT, "faults__int-a"),
        _row(TEXTKIT, "faults__int-b"),
        _row(
            INV,
            "faults__flaky",
            test_patch=new_file_diff(hidden_path, hidden + FLIP_TEST),
            FAIL_TO_PASS=[*inv["FAIL_TO_PASS"], f"{hidden_path}::test_flip"],
        ),
        _row(
            INV,
            "faults__network",
            test_patch=new_file_diff(hidden_path, hidden + NETWORK_TEST),
            FAIL_TO_PASS=[*inv["FAIL_TO_PASS"], f"{hidden_path}::test_fetch"],
        ),
        _row(
            TEXTKIT,
            "faults__network-host",
            test_patch=textkit["test_patch"]
            + new_file_diff("tests/test_host.py", HOST_TEST.format(port=port).lstrip()),
            FAIL_TO_PASS=json.dumps(
                [*json.loads(textkit["FAIL_TO_PASS"]), "tests/test_host.py::test_fetch_host"]
            ),
        ),
    ]


@pytest.fixture(scope="module")
def work(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any, status_port: int
) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("faults")
    (tmp / "repos").symlink_to(BUNDLES)  # the samples' repo sources travel with the rows
    (tmp / "faults.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(status_port)))
    (tmp / "recipes.yaml").write_text(yaml.safe_dump(_recipes(), sort_keys=True))
    yield tmp
    _assert_no_containers(docker_client, "")
    for role in ("grader", "agent"):
        for image in docker_client.images.list(filters={"reference": "packager/faults.*"}):
            for tag in image.tags:
                if f":{role}-" in tag:
                    try:
                        docker_client.images.remove(tag)
                    except Exception:  # noqa: BLE001 - shared with another tag: left as is
                        pass


def _package(work: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "package",
        *args,
        "--dataset",
        str(work / "faults.jsonl"),
        "--out",
        str(work / "out"),
        timeout=timeout,
    )


def _result_path(work: Path, task: str) -> Path:
    return work / "out" / "faults" / "results" / f"{task}.json"


def _result(work: Path, task: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_result_path(work, task).read_text())
    return data


def _log_dir(work: Path, task: str) -> Path:
    return work / "out" / "faults" / "logs" / task


def _assert_no_containers(client: Any, task: str) -> None:
    """No container of this dataset (or of this task) is left, running or stopped."""
    left = [
        c["Names"]
        for c in client.api.containers(all=True, filters={"label": "packager.tool=packager"})
        if (c.get("Labels") or {}).get("packager.task", "").startswith(f"faults/{task}")
    ]
    assert left == [], f"containers left behind: {left}"


# --------------------------------------------------------------------------- bad input


def test_gold_patch_that_does_not_apply_is_gold_failed(work: Path, docker_client: Any) -> None:
    task = "faults__gold-bad"
    proc = _package(work, task, "--oracle-runs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "gold_failed"
    assert "gold patch did not apply" in result["reason"]
    assert "solve.sh exit" in result["reason"]
    apply_log = Path(result["logs"]["apply"])
    assert apply_log.is_file() and str(apply_log) in result["reason"]
    assert "patch" in apply_log.read_text()
    assert result["oracle"][0]["apply_excerpt"]
    _assert_no_containers(docker_client, task)


def test_gold_run_that_needs_the_network_is_needs_network(work: Path, docker_client: Any) -> None:
    task = "faults__network"
    proc = _package(work, task, "--oracle-runs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "needs_network", result
    assert "(service.invalid)" in result["reason"], result["reason"]
    assert result["oracle"][0]["network_hosts"] == ["service.invalid"]
    assert result["oracle"][0]["reward"] < 1.0  # the hidden tests weigh in the formula
    assert "needs_network" in proc.stdout
    _assert_no_containers(docker_client, task)


def test_grader_network_public_grades_with_the_network(work: Path, docker_client: Any) -> None:
    """Offline by default (the host's name does not even resolve): needs_network naming it.
    `--grader-network public`: the same tests reach the host's service, and the row verifies;
    task.toml says so in Harbor's terms."""
    task = "faults__network-host"
    proc = _package(work, task, "--oracle-runs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "needs_network", result
    assert "host.docker.internal" in result["reason"], result["reason"]
    assert _Status.asked == []
    task_toml = next((work / "out" / "faults" / "tasks").glob(f"{task}/task.toml")).read_text()
    assert "network_mode" not in task_toml

    proc = _package(work, task, "--oracle-runs", "1", "--grader-network", "public")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "verified", result
    assert _Status.asked and set(_Status.asked) == {"/status"}
    task_toml = next((work / "out" / "faults" / "tasks").glob(f"{task}/task.toml")).read_text()
    assert 'network_mode = "public"' in task_toml and 'grader_network = "public"' in task_toml
    _assert_no_containers(docker_client, task)


def _build_failed(work: Path, task: str) -> tuple[dict[str, Any], str]:
    started = time.monotonic()
    proc = _package(work, task)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "build_failed", result
    log = Path(result["logs"]["build"])
    assert log.is_file() and str(log) in result["reason"]
    assert result["oracle"] == [] and result["nop"] is None
    assert elapsed < 60, f"a failing build took {elapsed:.0f} s"
    return result, log.read_text()


def test_setup_patch_that_does_not_apply_is_build_failed(work: Path, docker_client: Any) -> None:
    result, log = _build_failed(work, "faults__setup-bad")
    assert "git apply" in log and "packager-setup.patch" in log
    assert "returned a non-zero code" in result["reason"]
    _assert_no_containers(docker_client, "faults__setup-bad")


def test_failing_dockerfile_step_is_build_failed(work: Path, docker_client: Any) -> None:
    result, log = _build_failed(work, "faults__run-false")
    assert "RUN false" in log  # the failing step is shown
    assert "ERROR:" in log and "returned a non-zero code: 1" in log
    assert "returned a non-zero code" in result["reason"]


def test_missing_base_image_fails_fast_without_pulling(work: Path, docker_client: Any) -> None:
    started = time.monotonic()
    result, log = _build_failed(work, "faults__no-base")
    assert time.monotonic() - started < 30
    assert "no-such-image:404" in result["reason"]
    assert "pulls are disabled" in result["reason"]
    assert "pulls are disabled" in log


# --------------------------------------------------------------------------- faults


def test_test_command_that_never_ends_is_infra_error(work: Path, docker_client: Any) -> None:
    task = "faults__hang"
    started = time.monotonic()
    proc = _package(work, task, "--oracle-runs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert time.monotonic() - started < 120
    result = _result(work, task)
    assert result["status"] == "infra_error"
    assert "timeout" in result["reason"]
    # The first infra fault ends the task's runs; the run still wrote reward 0 (Harbor reads it).
    assert len(result["oracle"]) == 1 and result["nop"] is None
    run = result["oracle"][0]
    assert run["grade_status"] == "infra_error" and run["reward"] == 0.0
    reward = json.loads(Path(run["log_dir"], "reward.json").read_text())
    assert reward["reward"] == 0
    _assert_no_containers(docker_client, task)


def test_container_killed_for_memory_is_infra_error(work: Path, docker_client: Any) -> None:
    task = "faults__oom"
    proc = _package(work, task, "--oracle-runs", "1", "--memory-mb", "96")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "infra_error", result
    assert "OOMKilled" in result["reason"] and "96 MiB" in result["reason"]
    run = result["oracle"][0]
    assert run["reward"] is None and run["grade_status"] == "infra_error"
    assert json.loads(Path(run["log_dir"], "reward.json").read_text())["reward"] == 0
    _assert_no_containers(docker_client, task)


class SocketProxy:
    """A unix-socket forwarder to the Docker socket that can be cut, as a daemon going away."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        self.open: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(DOCKER_SOCK)
            self.open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Refuse new connections and cut every open one."""
        self.closed.set()
        self.server.close()
        self.path.unlink(missing_ok=True)
        for s in list(self.open):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def _wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_daemon_lost_mid_run_is_infra_error_and_keeps_results(
    work: Path, docker_client: Any, tmp_path: Path
) -> None:
    task = "faults__daemon"
    first = _package(work, task, "--oracle-runs", "1")
    assert first.returncode == 0, first.stdout + first.stderr
    verified = _result_path(work, task).read_bytes()
    assert json.loads(verified)["status"] == "verified"

    logs = _log_dir(work, task)
    for name in ("oracle-1", "nop"):
        for f in (logs / name).glob("*"):
            f.unlink()
    proxy = SocketProxy(tmp_path / "docker.sock")
    env = {**os.environ, "DOCKER_HOST": f"unix://{proxy.path}", "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "packager", "package", task, "--oracle-runs", "1",
         "--perturb", "none", "--force", "--dataset", str(work / "faults.jsonl"),
         "--out", str(work / "out")],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        # The grader container of oracle-1 is running `sleep 4`: cut the engine then.
        _wait_for(lambda: (logs / "oracle-1" / "model.patch").exists(), 120, "the grader phase")
        time.sleep(1.5)
        proxy.close()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, out + err
    assert _result_path(work, task).read_bytes() == verified  # the verdict is untouched
    error = json.loads((_result_path(work, task).parent / f"{task}.error.json").read_text())
    assert error["status"] == "infra_error"
    assert "lost the Docker engine" in error["reason"] or "Connection" in error["reason"]
    assert "earlier result kept" in out
    assert json.loads((logs / "oracle-1" / "reward.json").read_text())["reward"] == 0

    # With the engine back, the next run removes the dead run's containers and resumes:
    # the task is still verified for the same images, so it is not run again.
    rerun = _package(work, task, "--oracle-runs", "1")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "left by an earlier run" in rerun.stderr
    assert f"{task}: verified (cached" in rerun.stdout
    _assert_no_containers(docker_client, task)


def test_ctrl_c_stops_cleanly_and_a_rerun_resumes(work: Path, docker_client: Any) -> None:
    a, b = "faults__int-a", "faults__int-b"
    for task in (a, b):
        _result_path(work, task).unlink(missing_ok=True)
        for f in _log_dir(work, task).glob("*/*"):
            f.unlink()
    proc = subprocess.Popen(
        [sys.executable, "-m", "packager", "package", a, b, "--oracle-runs", "1",
         "--perturb", "none", "--dataset", str(work / "faults.jsonl"), "--out", str(work / "out")],
        cwd=ROOT, env={**os.environ, "COLUMNS": "200"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for(lambda: _result_path(work, a).exists(), 180, f"{a} to finish")
        _wait_for(
            lambda: (_log_dir(work, b) / "oracle-1" / "model.patch").exists(), 120, f"{b} grading"
        )
        time.sleep(1.0)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert time.monotonic() - started < 30
    assert "interrupted: removed" in err
    assert _result(work, a)["status"] == "verified"
    assert not _result_path(work, b).exists()  # an interrupted task writes no result
    _assert_no_containers(docker_client, "faults__int-")

    rerun = _package(work, a, b, "--oracle-runs", "1")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{a}: verified (cached" in rerun.stdout
    assert f"{b}: verified" in rerun.stdout and f"{b}: verified (cached" not in rerun.stdout
    assert _result(work, b)["status"] == "verified"
    _assert_no_containers(docker_client, "faults__int-")


# --------------------------------------------------------------------------- flakiness


class _FlipContainers:
    """`client.containers`, mounting one volume at /flip in every grader container."""

    def __init__(self, inner: Any, volume: str) -> None:
        self.inner = inner
        self.volume = volume

    def create(self, image: str, **kwargs: Any) -> Any:
        if str(kwargs.get("labels", {}).get("packager.role", "")).startswith("grader"):
            kwargs["volumes"] = {
                **kwargs.get("volumes", {}),
                self.volume: {"bind": "/flip", "mode": "rw"},
            }
        return self.inner.create(image, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _FlipClient:
    def __init__(self, inner: Any, volume: str) -> None:
        self.inner = inner
        self.containers = _FlipContainers(inner.containers, volume)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_hidden_test_failing_every_other_run_is_flaky(work: Path, docker_client: Any) -> None:
    """Deterministic flakiness: the hidden test passes on even visits of a counter kept in a
    Docker volume mounted into each (fresh) grader container, so oracle run 1 passes and
    oracle run 2 fails, every time. The volume is the test's doing (a wrapped client); the
    engine itself is unchanged.
    """
    from packager.datasets.sources import open_dataset
    from packager.run.materialize import render_selection
    from packager.run.select import Selection
    from packager.run.store import write_result
    from packager.settings import VerifyConfig
    from packager.stages.build import BuildOptions
    from packager.stages.job import Job, TaskJob
    from packager.storage import OutputPaths

    sel = Selection(dataset=open_dataset(str(work / "faults.jsonl"), "test"),
                    task_ids=("faults__flaky",))  # fmt: skip
    (spec,) = render_selection(sel, work / "out")
    volume = docker_client.volumes.create(name=f"packager-flip-{uuid.uuid4().hex[:8]}")
    try:
        job = Job(
            paths=OutputPaths(work / "out", "faults"),
            repo_sources=sel.merged_repo_sources,
            build_opts=BuildOptions(),
            verify=True,
            settings=VerifyConfig(oracle_runs=2),
        )
        result = TaskJob(job, _FlipClient(docker_client, volume.name))(spec)
    finally:
        volume.remove(force=True)
    write_result(OutputPaths(work / "out", "faults"), result)
    assert result.status == "flaky", result
    assert [r.reward for r in result.oracle][0] == 1.0
    assert result.oracle[1].reward is not None and result.oracle[1].reward < 1.0
    assert "oracle rewards" in (result.reason or "")
    assert _result(work, "faults__flaky")["status"] == "flaky"
    _assert_no_containers(docker_client, "faults__flaky")
