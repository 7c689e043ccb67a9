"""An agent image's environment (its Dockerfile's steps before the snapshot) is built once per
machine: what its key is made of, where the Dockerfile is cut, and the lock that makes a
second worker wait (the builds themselves: tests/integration/test_environment_builds.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from packager.images.locks import machine_lock
from packager.stages.environment import _environment_dockerfile, _environment_files, environment_key

DOCKERFILE = """\
# Agent image: repo.tar is added below.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y git
COPY packager-venv.pth /tmp/packager-venv.pth
# repo.tar is the snapshot
ADD repo.tar /testbed
WORKDIR /testbed
RUN pip install -e .
"""


def test_the_environment_is_the_dockerfile_before_the_snapshot(tmp_path: Path) -> None:
    head = _environment_dockerfile(DOCKERFILE, "repo.tar")
    assert head == (
        "FROM debian:bookworm-slim\n"
        "RUN apt-get update && apt-get install -y git\n"
        "COPY packager-venv.pth /tmp/packager-venv.pth\n"
    )  # comments (a task's own header among them) neither cut nor count
    other_task = DOCKERFILE.replace("# Agent image:", "# Another task's agent image:")
    assert _environment_dockerfile(other_task, "repo.tar") == head
    directive = "# escape=`\n" + DOCKERFILE
    assert _environment_dockerfile(directive, "repo.tar") == "# escape=`\n" + head
    assert _environment_dockerfile("FROM x\nRUN true\n", "repo.tar") is None

    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "repo.tar").write_bytes(b"snapshot")
    (tmp_path / "packager-venv.pth").write_text("import x\n")
    (tmp_path / "docker-compose.yaml").write_text("labels: {task: this one}\n")
    (tmp_path / "reqs").mkdir()
    (tmp_path / "reqs" / "requirements.txt").write_text("six\n")
    # Only what the steps copy: the compose file (naming the task) is no part of it.
    assert _environment_files(tmp_path, "repo.tar", head) == {"packager-venv.pth": b"import x\n"}
    copies = head + "COPY --chmod=644 reqs/requirements.txt /tmp/\n"
    assert _environment_files(tmp_path, "repo.tar", copies) == {
        "packager-venv.pth": b"import x\n",
        "reqs/requirements.txt": b"six\n",
    }
    # A folder: the files under it (not the compose file, which names the task).
    for source in ("reqs", "reqs/", "./reqs"):
        found = _environment_files(tmp_path, "repo.tar", head + f"COPY {source} /tmp/x/\n")
        assert sorted(found) == ["packager-venv.pth", "reqs/requirements.txt"]
    # A pattern, the whole context or a path the context lacks: every file but the snapshot.
    for source in ("*.pth", ".", "nothing-here"):
        found = _environment_files(tmp_path, "repo.tar", head + f"COPY {source} /tmp/x/\n")
        assert sorted(found) == [
            "docker-compose.yaml",
            "packager-venv.pth",
            "reqs/requirements.txt",
        ]


def test_the_environment_key_changes_with_each_ingredient() -> None:
    files = {"packager-venv.pth": b"a"}
    args = {"PACKAGER_BASE": "b"}
    key = environment_key("FROM x\n", files, args, "x=sha256:1")
    assert key == environment_key("FROM x\n", dict(files), dict(args), "x=sha256:1")
    others = {
        environment_key("FROM y\n", files, args, "x=sha256:1"),
        environment_key("FROM x\n", {"packager-venv.pth": b"b"}, args, "x=sha256:1"),
        environment_key("FROM x\n", {"other.pth": b"a"}, args, "x=sha256:1"),
        environment_key("FROM x\n", files, {"PACKAGER_BASE": "c"}, "x=sha256:1"),
        environment_key("FROM x\n", files, args, "x=sha256:2"),
    }
    assert key not in others and len(others) == 5


def test_a_second_holder_waits_and_a_check_can_stop_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path))
    order: list[str] = []
    entered = threading.Event()

    def first() -> None:
        with machine_lock("env-test"):
            order.append("first in")
            entered.set()
            time.sleep(0.5)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    entered.wait(5)
    with machine_lock("env-test", check=lambda: None):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    assert (tmp_path / "locks" / "env-test.lock").is_file()

    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop

    with machine_lock("env-test"):  # held here: another thread's wait is stopped by its check
        failed: list[BaseException] = []

        def waiter() -> None:
            try:
                with machine_lock("env-test", check=stop):
                    pass
            except Stop as exc:
                failed.append(exc)

        other = threading.Thread(target=waiter)
        other.start()
        other.join(5)
        assert len(failed) == 1
    with machine_lock("env-test", check=stop):  # free again: no wait, no check
        pass


def test_drops_are_read_from_the_build_log_with_their_spec_key() -> None:
    from packager.stages.environment import dropped_in_log

    log = (
        "Step 9/14 : RUN python /tmp/packager-pip.py --drop-unavailable -r "
        "/tmp/packager-requirements/ci__requirements__environment.yml.txt\n"
        "ERROR: No matching distribution found for cdms2\n"
        "packager-pip: dropped cdms2 from ci__requirements__environment.yml.txt: no "
        "distribution pip can install here\n"
        "packager-pip: dropped hdf5 from ci__requirements__environment.yml.txt: no "
        "distribution pip can install here\n"
        "packager-pip: dropped cdms2 from ci__requirements__environment.yml.txt: again\n"
    )
    key = "packages (environment.yml: ci/requirements/environment.yml, as pip requirements)"
    assert dropped_in_log(log) == [f"cdms2 ({key})", f"hdf5 ({key})"]
    assert dropped_in_log("Step 1/2 : FROM x\n") == []
