"""Run folders (packager/engines/mounts.py): what a container leaves in its /logs folder is
read only from regular files reached without a symbolic link, a patch is handed over only
into a fresh file, and only an engine that sees this host's files gets folders at all.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from packager.engines import mounts


def test_reads_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "reward.json").write_bytes(b'{"reward": 1}')
    assert mounts.read_confined(tmp_path, "verifier/reward.json") == b'{"reward": 1}'
    assert mounts.read_confined(tmp_path, "verifier/report.json") is None


def test_never_reads_through_a_symlink(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("root:x:0:0")
    root = tmp_path / "run"
    (root / "verifier").mkdir(parents=True)
    (root / "verifier" / "reward.json").symlink_to(secret)
    assert mounts.read_confined(root, "verifier/reward.json") is None
    # A folder on the way that is a link: refused too.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "model.patch").write_text("from the host")
    (root / "artifacts").symlink_to(tmp_path / "elsewhere")
    assert mounts.read_confined(root, "artifacts/model.patch") is None
    assert mounts.read_confined(root, "../host-secret") is None


def test_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "reward.json")
    assert mounts.read_confined(tmp_path, "reward.json") is None


def test_copies_a_tree_without_links(tmp_path: Path) -> None:
    root = tmp_path / "run"
    judge = root / "verifier" / "judge"
    (judge / "w1").mkdir(parents=True)
    (judge / "w1" / "agent.log").write_text("steps")
    (judge / "w1" / "stolen").symlink_to("/etc/hostname")
    (judge / "w2").symlink_to("/etc")
    copied = mounts.copy_confined_tree(root, "verifier/judge", tmp_path / "out")
    assert copied == 1
    assert (tmp_path / "out" / "w1" / "agent.log").read_text() == "steps"
    assert not (tmp_path / "out" / "w1" / "stolen").exists()
    assert not (tmp_path / "out" / "w2").exists()
    assert mounts.copy_confined_tree(root, "verifier/missing", tmp_path / "none") == 0


def test_hands_over_into_a_fresh_file_only(tmp_path: Path) -> None:
    mounts.write_new(tmp_path, "artifacts/model.patch", b"diff")
    assert (tmp_path / "artifacts" / "model.patch").read_bytes() == b"diff"
    assert (tmp_path / "artifacts").stat().st_mode & 0o777 == 0o777
    with pytest.raises(FileExistsError):
        mounts.write_new(tmp_path, "artifacts/model.patch", b"again")
    (tmp_path / "grade-now").symlink_to(tmp_path / "target")
    with pytest.raises(FileExistsError):
        mounts.write_new(tmp_path, "grade-now", b"")
    assert not (tmp_path / "target").exists()


def test_folders_are_removed(tmp_path: Path) -> None:
    with mounts.run_folders(True) as folders:
        assert folders is not None
        (folders.agent / "agent").mkdir()
        (folders.agent / "agent" / "collect.exit").write_text("0")
        root = folders.agent.parent
        assert folders.grader.stat().st_mode & 0o777 == 0o777
    assert not root.exists()
    with mounts.run_folders(False) as none:
        assert none is None


class UnixClient:
    """A client on a Unix socket whose engine reports `name` as its host."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.api = type("Api", (), {"base_url": "http+docker://localhost"})()

    def info(self) -> dict[str, Any]:
        return {"Name": self.name, "SecurityOptions": []}


def test_only_an_engine_on_this_host_gets_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mounts.os, "geteuid", lambda: 0)
    here = UnixClient(socket.gethostname())
    assert mounts.mounts_usable(here)
    assert not mounts.mounts_usable(UnixClient("another-host"))  # the host's socket in a container
    tcp = UnixClient(socket.gethostname())
    tcp.api.base_url = "https://remote:2376"
    assert not mounts.mounts_usable(tcp)
    assert not mounts.mounts_usable(object())  # a fake client: no engine to ask
    monkeypatch.setenv(mounts.MOUNTS_ENV, "0")
    assert not mounts.mounts_usable(UnixClient(socket.gethostname()))


def test_a_run_that_did_not_see_its_folder_turns_folders_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mounts.os, "geteuid", lambda: 0)
    client = UnixClient(socket.gethostname())
    assert mounts.mounts_usable(client) and not mounts.mounts_proven(client)
    mounts.mark_shared(client, True)
    assert mounts.mounts_proven(client)
    mounts.mark_shared(client, False)
    assert not mounts.mounts_usable(client) and not mounts.mounts_proven(client)


def test_a_user_that_cannot_delete_root_files_gets_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mounts.os, "geteuid", lambda: 1000)
    assert not mounts.mounts_usable(UnixClient(socket.gethostname()))
    rootless = UnixClient(socket.gethostname())
    rootless.info = lambda: {  # type: ignore[method-assign]
        "Name": socket.gethostname(),
        "SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless"],
    }
    assert mounts.mounts_usable(rootless)


def test_folders_of_dead_processes_are_swept(tmp_path: Path) -> None:
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{mounts.FOLDER_PREFIX}{gone.pid}-abc"
    (dead / "agent" / "agent").mkdir(parents=True)
    mine = tmp_path / f"{mounts.FOLDER_PREFIX}{os.getpid()}-def"
    mine.mkdir()
    alive = tmp_path / f"{mounts.FOLDER_PREFIX}1-ghi"  # init: always alive
    alive.mkdir()
    other = tmp_path / "packager-run-notapid"
    other.mkdir()
    assert mounts.sweep_stale_folders(tmp_path) == 1
    assert not dead.exists()
    assert mine.exists() and alive.exists() and other.exists()


def test_bind_sources_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    binds = mounts.volume(Path("run"), Path("build/tasks/t/solution"))["volumes"]
    assert sorted(binds) == [str(tmp_path / "build/tasks/t/solution"), str(tmp_path / "run")]
    assert mounts.volume(None) == {}
