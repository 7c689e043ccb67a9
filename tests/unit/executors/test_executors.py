"""Executors: the registry, the Ray executor's placement and shipping logic (no cluster here;
tests/integration/test_ray_e2e.py runs a real one), and the CLI's executor options."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from packager.executors import ClusterUnavailableError, ExecutorError, get_executor, names
from packager.executors import ray as ray_executor
from packager.executors.local import LocalExecutor
from packager.executors.ray import (
    Node,
    RayExecutor,
    cpu_share,
    materialize_bundle,
    pack_outputs,
    pack_task,
    unpack_files,
)
from packager.storage import OutputPaths
from tests.conftest import run_cli


def test_registry_names_both_and_refuses_an_unknown_one() -> None:
    assert list(names()) == ["local", "ray"]
    assert isinstance(get_executor("local", client=object(), workers=2), LocalExecutor)
    assert isinstance(get_executor("ray", address="127.0.0.1:1"), RayExecutor)
    with pytest.raises(ExecutorError, match=r"unknown executor 'slurm' \(available: local, ray\)"):
        get_executor("slurm")


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ExecutorError, match=r"pip install 'packager\[ray\]' \(ray==2\.60\.0\)"):
        ray_executor.import_ray()


def test_no_cluster_is_its_own_error_with_the_fix() -> None:
    # Nothing listens on port 1: ray.init fails fast and the error says how to start a cluster.
    executor = RayExecutor("127.0.0.1:1")
    with pytest.raises(ClusterUnavailableError, match=r"ray start --head") as info:
        executor.connect()
    assert info.value.exit_code == 3


@pytest.mark.parametrize(
    ("address", "endpoint"),
    [
        ("127.0.0.1:6379", ("127.0.0.1", 6379)),
        ("head.example.invalid:10001", ("head.example.invalid", 10001)),
        ("[::1]:6379", ("::1", 6379)),
        ("auto", None),
        ("ray://head:10001", None),
    ],
)
def test_head_endpoint_of_an_address(address: str, endpoint: tuple[str, int] | None) -> None:
    assert ray_executor.head_endpoint(address) == endpoint


def test_a_malformed_address_is_bad_input() -> None:
    with pytest.raises(ExecutorError, match="is not HOST:PORT"):
        ray_executor.head_endpoint("head-without-port")
    result = run_cli("package", "samples__textkit-1", "--executor", "ray", "--ray-address", "x")
    assert result.returncode == 2 and "is not HOST:PORT" in result.stderr, result.stderr


def test_a_node_with_another_packager_builds_nothing() -> None:
    payload = {"code": "0" * 64, "node": "abc123 (10.0.0.2, two)"}
    answer = ray_executor.run_job(payload, b"not a tar: never opened", {})
    here = ray_executor.code_fingerprint()
    assert answer == {
        "refused": f"packager on Ray node abc123 (10.0.0.2, two) is not the driver's (code "
        f"{here[:12]} on the node, {'0' * 12} on the driver): install the same packager on "
        "every node"
    }
    assert len(here) == 64 and ray_executor.code_fingerprint() == here


@pytest.mark.parametrize(
    ("cpus", "workers", "share"),
    [(2.0, 1, 2.0), (2.0, 2, 1.0), (2.0, 3, 0.6666), (8.0, 3, 2.6666), (0.0, 2, 0.0)],
)
def test_cpu_share_fits_exactly_workers_per_node(cpus: float, workers: int, share: float) -> None:
    assert cpu_share(cpus, workers) == share
    assert share * workers <= cpus  # Ray would refuse the last job otherwise


def test_free_node_balances_and_holds_the_cap() -> None:
    executor = RayExecutor("auto", workers_per_node=2)
    a, b = Node("a" * 56, "10.0.0.1", "one", 4.0), Node("b" * 56, "10.0.0.2", "two", 4.0)
    nodes = {a.node_id: a, b.node_id: b}
    picked = []
    for _ in range(4):
        node = executor._free_node(nodes)
        assert node is not None
        node.running += 1
        picked.append(node.hostname)
    assert sorted(picked) == ["one", "one", "two", "two"]
    assert executor._free_node(nodes) is None  # 2 per node, both full
    a.running -= 1
    a.alive = False
    assert executor._free_node(nodes) is None  # a dead node takes nothing
    b.running -= 1
    assert executor._free_node(nodes) is b
    assert a.label == f"{'a' * 12} (10.0.0.1, one)"


def test_task_folder_and_outputs_travel_and_stay_inside(tmp_path: Path) -> None:
    base = tmp_path / "out" / "ds"
    (base / "tasks" / "t1" / "environment").mkdir(parents=True)
    (base / "tasks" / "t1" / "environment" / "Dockerfile").write_text("FROM x\n")
    (base / "tasks" / "t2").mkdir(parents=True)  # another task: not shipped
    (base / "results").mkdir()
    (base / "results" / "t1.audit.json").write_text("{}\n")
    (base / "logs" / "t1" / "oracle-1").mkdir(parents=True)
    (base / "logs" / "t1" / "oracle-1" / "reward.json").write_text('{"reward": 1.0}')

    node = tmp_path / "node" / "ds"
    unpack_files(pack_task(OutputPaths(tmp_path / "out", "ds"), "t1"), node)
    assert (node / "tasks" / "t1" / "environment" / "Dockerfile").read_text() == "FROM x\n"
    assert (node / "results" / "t1.audit.json").is_file()
    assert not (node / "tasks" / "t2").exists() and not (node / "logs").exists()

    back = tmp_path / "driver" / "ds"
    unpack_files(pack_outputs(OutputPaths(tmp_path / "out", "ds"), "t1"), back)
    assert (back / "logs" / "t1" / "oracle-1" / "reward.json").read_text() == '{"reward": 1.0}'

    # A member that would land outside the folder is refused.
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(tarfile.OutsideDestinationError):
        unpack_files(evil.getvalue(), tmp_path / "x")
    assert not (tmp_path / "escaped.txt").exists()


def test_bundle_shipped_once_per_content_is_a_real_git_bundle(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "a"], check=True, env=env)
    blob = ray_executor.bundle_bytes(repo / ".git")
    cache = tmp_path / "cache"
    first = materialize_bundle(blob, cache)
    assert materialize_bundle(blob, cache) == first and len(list(cache.iterdir())) == 1
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(first), str(clone)], check=True)
    assert (clone / "a.txt").read_text() == "a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers-per-node", "2"], "--workers-per-node needs --executor ray"),
        (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --executor ray"),
        (["--shared-repos"], "--shared-repos needs --executor ray"),
        (["--executor", "slurm"], "unknown executor 'slurm'"),
        (["--executor", "ray", "--quality"], "--quality runs with the local executor only"),
        (["--executor", "ray", "--registry", "no-namespace"], "HOST[:PORT]/NAMESPACE"),
    ],
)
def test_cli_refuses_executor_options_that_do_not_fit(args: list[str], message: str) -> None:
    result = run_cli("package", "samples__textkit-1", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in " ".join(result.stderr.split()), result.stderr


def test_cli_ray_without_cluster_exits_3_naming_the_fix(tmp_path: Path) -> None:
    result = run_cli(
        "package", "samples__textkit-1", "--out", str(tmp_path), "--executor", "ray",
        "--ray-address", "127.0.0.1:1",
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert "no Ray cluster answers at '127.0.0.1:1'" in result.stderr
    assert "ray start --head" in result.stderr


def test_publish_takes_an_image_the_registry_already_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from packager.release.publish import PublishError, Registry, resolve_image

    registry = Registry.parse("127.0.0.1:5999/team")
    served: dict[tuple[str, str], str] = {
        ("127.0.0.1:5999/team/ds.t1", "agent-abc"): "sha256:" + "1" * 64
    }

    def digest(self: Registry, repository: str, tag: str, timeout: float = 30) -> str | None:
        return served.get((repository, tag))

    monkeypatch.setattr(Registry, "manifest_digest", digest)
    reference, pushed = resolve_image(None, registry, "packager/ds.t1:agent-abc", lambda _: None)
    assert reference == "127.0.0.1:5999/team/ds.t1@sha256:" + "1" * 64 and pushed is False
    with pytest.raises(PublishError, match="package the task first"):
        resolve_image(None, registry, "packager/ds.t1:grader-abc", lambda _: None)


class _FailingRay:
    """A stand-in for the `ray` module whose `get` raises one of Ray's own errors."""

    def __init__(self, error: Exception) -> None:
        import ray.exceptions

        self.exceptions = ray.exceptions
        self.error = error

    def get(self, ref: object) -> object:
        raise self.error


def _flight(tmp_path: Path) -> tuple[object, object]:
    from types import SimpleNamespace

    spec = SimpleNamespace(
        task_id="gen__calc-3",
        provenance=SimpleNamespace(slug="gen__calc-3", dataset="rows"),
        expectations=SimpleNamespace(nop_reward=None),
    )
    job = SimpleNamespace(runner=SimpleNamespace(name="local"), paths=OutputPaths(tmp_path, "rows"))
    node = Node("c" * 56, "10.0.0.3", "three", 2.0, running=0)
    return ray_executor._InFlight(spec, node), job  # type: ignore[arg-type]


def test_a_job_its_node_never_started_is_placed_again_not_lost(tmp_path: Path) -> None:
    """A node killed moments before is listed alive until its heartbeats time out; a job pinned
    to it is unschedulable, never started: the driver places it again (None) instead of
    reporting a loss. A job that did start and lost its node is infra_error naming the node.
    """
    import ray.exceptions as errors

    executor = RayExecutor("auto")
    flight, job = _flight(tmp_path)
    gone = _FailingRay(errors.TaskUnschedulableError("the node specified does not exist"))
    assert executor._collect(gone, "ref", flight, job) is None  # type: ignore[arg-type]
    assert flight.node.alive is False  # type: ignore[attr-defined]

    flight, job = _flight(tmp_path)
    crashed = _FailingRay(errors.WorkerCrashedError())
    result = executor._collect(crashed, "ref", flight, job)  # type: ignore[arg-type]
    assert result is not None and result.status == "infra_error"
    assert "c" * 12 in (result.reason or "") and "lost mid-task" in (result.reason or "")
    assert flight.node.alive is False  # type: ignore[attr-defined]
