"""Base images on demand (packager.images.bases) with a fake Docker client: which images are pulled,
which are seeded from Debian's archive (seeding itself is replaced by a counter), which fail.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from packager import assumptions as A
from packager.errors import BuildError
from packager.images import bases
from packager.images.build import check_base_images


class FakeImages:
    def __init__(self, present: set[str], pullable: set[str] | None = None) -> None:
        self.present = set(present)
        self.pullable = set(pullable or ())
        self.pulls: list[str] = []
        self.registry_asks: list[str] = []

    def get(self, tag: str) -> object:
        if tag not in self.present:
            raise docker.errors.ImageNotFound(tag)
        return object()

    def pull(self, image: str) -> object:
        self.pulls.append(image)
        if image not in self.pullable:
            raise docker.errors.APIError(f"Get https://registry/v2/: no such host ({image})")
        self.present.add(image)
        return object()

    def get_registry_data(self, image: str) -> object:
        self.registry_asks.append(image)
        if image not in self.pullable:
            raise docker.errors.APIError("no such host")
        return object()


class FakeClient:
    def __init__(self, present: set[str], pullable: set[str] | None = None) -> None:
        self.images = FakeImages(present, pullable)
        self.api = None
        self.containers = None

    def ping(self) -> bool:
        return True


@pytest.fixture
def seeds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, str]]:
    """Seeding replaced by a slow fake that records (image, suite) and adds the image; the
    machine cache (where the seeding lock lives) is a temporary directory.
    """
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    calls: list[tuple[str, str]] = []

    def fake_seed(client: Any, image: str, suite: str, *, log_path: Path, task: str) -> None:
        calls.append((image, suite))
        time.sleep(0.3)  # long enough for a second caller to arrive while this one seeds
        client.images.present.add(image)

    monkeypatch.setattr(bases, "seed_debian_image", fake_seed)
    return calls


def test_seedable_suite() -> None:
    assert bases.seedable_suite("debian:bullseye-slim") == "bullseye"
    assert bases.seedable_suite("debian:bookworm-slim") == "bookworm"
    assert bases.seedable_suite("debian:trixie-slim") == "trixie"
    assert bases.seedable_suite(A.debian_base_image(A.DEBIAN_PYTHON_SUITES["3.13"])) == "trixie"
    for image in ("debian:buster-slim", "debian:trixie", "ubuntu:22.04", "python:3.9-slim"):
        assert bases.seedable_suite(image) is None


def test_official_python() -> None:
    assert bases.is_official_python("python:3.8-slim")
    assert bases.is_official_python("docker.io/library/python:3.12")
    assert not bases.is_official_python("debian:trixie-slim")
    assert not bases.is_official_python("localhost:5000/python-tools:1")


def test_present_image_is_left_alone(tmp_path: Path, seeds: list[tuple[str, str]]) -> None:
    client = FakeClient({"debian:trixie-slim"})
    bases.ensure_base_image(client, "debian:trixie-slim", log_dir=tmp_path, pull=True)
    assert seeds == [] and client.images.pulls == []


def test_seedable_missing_is_seeded_once_for_two_threads(
    tmp_path: Path, seeds: list[tuple[str, str]]
) -> None:
    client = FakeClient(set())
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def ask() -> None:
        start.wait()
        try:
            bases.ensure_base_image(client, "debian:bullseye-slim", log_dir=tmp_path, pull=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    workers = [threading.Thread(target=ask) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert errors == []
    assert seeds == [("debian:bullseye-slim", "bullseye")]
    assert client.images.pulls == []  # pulls are disabled: not even tried
    assert (tmp_path / "cache" / "locks").is_dir()  # the lock lives in the machine cache


def test_seedable_missing_seeded_after_failed_pull(
    tmp_path: Path, seeds: list[tuple[str, str]]
) -> None:
    client = FakeClient(set())
    bases.ensure_base_image(client, "debian:trixie-slim", log_dir=tmp_path, pull=True)
    assert client.images.pulls == ["debian:trixie-slim"]
    assert seeds == [("debian:trixie-slim", "trixie")]


def test_pullable_python_image_is_pulled(tmp_path: Path, seeds: list[tuple[str, str]]) -> None:
    client = FakeClient(set(), pullable={"python:3.8-slim"})
    bases.ensure_base_image(client, "python:3.8-slim", log_dir=tmp_path, pull=False)
    assert client.images.pulls == ["python:3.8-slim"] and seeds == []


def test_unobtainable_image_names_it(tmp_path: Path, seeds: list[tuple[str, str]]) -> None:
    client = FakeClient(set())
    with pytest.raises(bases.BaseImageMissing) as caught:
        bases.ensure_base_image(client, "ubuntu:22.04", log_dir=tmp_path, pull=False, task="t/1")
    assert caught.value.image == "ubuntu:22.04" and caught.value.task == "t/1"
    assert "ubuntu:22.04" in str(caught.value) and "pulls are disabled" in str(caught.value)
    assert client.images.pulls == [] and seeds == []
    with pytest.raises(BuildError, match="python:3.5-slim"):  # tried, the registry is gone
        bases.ensure_base_image(client, "python:3.5-slim", log_dir=tmp_path, pull=False)
    assert client.images.pulls == ["python:3.5-slim"]


def test_check_base_images_seeds_and_keeps_its_error(
    tmp_path: Path, seeds: list[tuple[str, str]]
) -> None:
    client = FakeClient({"debian:bookworm-slim"})
    log = tmp_path / "logs" / "build-agent.log"
    check_base_images(
        client,
        "FROM debian:trixie-slim AS b\nFROM b\nFROM debian:bookworm-slim\n",
        task="d/t",
        log_path=log,
        pull=False,
    )
    assert seeds == [("debian:trixie-slim", "trixie")]
    with pytest.raises(BuildError) as caught:
        check_base_images(
            client, "FROM ubuntu:22.04\nFROM alpine:3\n", task="d/t", log_path=log, pull=False
        )
    assert caught.value.log_path == log and caught.value.image == "ubuntu:22.04"
    assert caught.value.reason == (
        "base image ubuntu:22.04, alpine:3 not present locally and pulls are disabled "
        "(docker pull/load it first, or pass --pull)"
    )
    assert log.read_text().startswith("ERROR: base image ubuntu:22.04")


def test_seeding_failure_is_a_build_error_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bases.os, "geteuid", lambda: 1000)
    with pytest.raises(BuildError) as caught:
        bases.ensure_base_image(
            FakeClient(set()), "debian:trixie-slim", log_dir=tmp_path, pull=False
        )
    assert not isinstance(caught.value, bases.BaseImageMissing)
    assert "docker pull debian:trixie-slim" in caught.value.reason
    assert "root on a Debian host" in caught.value.reason


def test_can_pull_asks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bases, "_PULLABLE", {})
    client = FakeClient(set(), pullable={"python:3.12-slim"})
    assert not bases.can_pull(client, "python:3.5-slim")
    assert not bases.can_pull(client, "python:3.5-slim")
    assert bases.can_pull(client, "python:3.12-slim")
    assert client.images.registry_asks == ["python:3.5-slim", "python:3.12-slim"]
    assert client.images.pulls == []


def test_debian_mirror_reads_apt_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deb822, one_line = tmp_path / "debian.sources", tmp_path / "sources.list"
    monkeypatch.setattr(bases, "APT_SOURCES", (deb822, one_line))
    assert bases.debian_mirror() is None
    one_line.write_text(
        "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://m.example/debian x main\n"
    )
    assert bases.debian_mirror() == "http://m.example/debian"
    deb822.write_text("Types: deb\nURIs: http://n.example/debian\nSuites: bookworm\n")
    assert bases.debian_mirror() == "http://n.example/debian"


def test_seed_lock_holds_other_processes_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path))
    probe = (
        "import fcntl, sys\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    try:\n"
        "        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    except BlockingIOError:\n"
        "        sys.exit(3)\n"
    )
    lock_file = tmp_path / "locks" / "base-debian_trixie-slim.lock"
    with bases._seed_lock("debian:trixie-slim"):
        held = subprocess.run([sys.executable, "-c", probe, str(lock_file)], check=False)
    free = subprocess.run([sys.executable, "-c", probe, str(lock_file)], check=False)
    assert (held.returncode, free.returncode) == (3, 0)
