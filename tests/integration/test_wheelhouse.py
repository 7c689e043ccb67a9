"""The machine wheelhouse on the real engine: a cold environment built twice (its image removed
in between) downloads and builds its wheels once; the second build installs them from the
wheelhouse alone, and neither image holds a wheel or names the wheelhouse.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from packager.context import RunContext
from packager.images import build
from packager.images.hud_build import host_ca_bundle
from packager.models.spec import TaskSpec
from packager.stages.environment import ensure_environment

pytestmark = [pytest.mark.docker]

PACKAGES = ("six==1.16.0", "docopt==0.6.2")
"""A wheel, and an sdist the first build turns into a wheel (pure Python: quick to build)."""


def wheelhouse_host(log: str) -> str:
    """The wheelhouse's address the build's pip was given (`--find-links http://HOST:PORT/`)."""
    found = re.search(r"--find-links http://([^/]+)/", log)
    assert found is not None, log
    return found.group(1)


def _python_base(client: Any, tmp_path: Path) -> str:
    """Debian bookworm's python3 with venv and git, trusting the host's CA (pip in it reaches
    the index). Kept, under a tag naming what it is made of: it is the one slow step (apt), and
    the same for every run; the environments built on it are removed.
    """
    ca = host_ca_bundle()
    assert ca is not None, "no CA bundle on this host"
    base = build.ca_base_image(client, "debian:bookworm-slim", ca, tmp_path)
    context = tmp_path / "base"
    context.mkdir()
    dockerfile = (
        f"FROM {base}\nRUN apt-get update && apt-get install -y --no-install-recommends "
        "git python3 python3-venv && rm -rf /var/lib/apt/lists/*\n"
    )
    (context / "Dockerfile").write_text(dockerfile)
    digest = hashlib.sha256(dockerfile.encode()).hexdigest()[:12]
    tag = f"packager-test/wheelhouse-python:{digest}"
    build.build_image(
        client,
        task="wheelhouse-test",
        role="test",
        context=context,
        tag=tag,
        log_path=tmp_path / "base.log",
        timeout_sec=600,
    )
    return tag


def _context(tmp_path: Path, base: str) -> Path:
    from packager.datasets.sources import open_dataset
    from packager.render.harbor import make_harbor_task
    from packager.run.select import Selection, iter_specs

    spec: TaskSpec = next(
        iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=("samples__textkit-1",)))
    )
    env = spec.environment.model_copy(  # a variable of its own: cold in every run
        update={
            "base_image": base,
            "packages": (),
            "pip_packages": PACKAGES,
            "env": {"WHEELHOUSE_TEST": uuid.uuid4().hex},
        }
    )
    files = make_harbor_task(spec.model_copy(update={"environment": env})).files
    context = tmp_path / "environment"
    for rel, out in files.items():
        if rel.startswith("environment/"):
            (context / rel).parent.mkdir(parents=True, exist_ok=True)
            (context / rel).write_bytes(out.data)
    return context / "environment"


def test_a_second_cold_environment_build_takes_its_wheels_from_the_wheelhouse(
    tmp_path: Path, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.render.harbor import SNAPSHOT_FILES

    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))  # an empty wheelhouse
    run = RunContext()  # its wheelhouse server serves both builds, and stops when it closes
    tags: list[str] = []
    try:
        base = _python_base(docker_client, tmp_path)
        context = _context(tmp_path, base)
        bases = build.base_ids(docker_client, f"FROM {base}\n")
        logs = []
        for attempt in (1, 2):
            outcome = ensure_environment(
                docker_client,
                context,
                SNAPSHOT_FILES,
                {},
                bases,
                task="wheelhouse-test",
                log_path=tmp_path / f"build-{attempt}.log",
                timeout_sec=600,
                run=run,
            )
            assert outcome is not None and outcome.built and outcome.log_path is not None
            tags.append(outcome.tag)
            logs.append(outcome.log_path.read_text())
            if attempt == 1:
                kept = sorted(p.name for p in (tmp_path / "cache" / "wheelhouse").rglob("*.whl"))
                assert any(name.startswith("docopt-0.6.2-") for name in kept), kept
                assert any(name.startswith("six-1.16.0-") for name in kept), kept
                history = docker_client.api.history(outcome.tag)
                assert not any("wheelhouse.invalid" in str(h) for h in history)
                docker_client.images.remove(outcome.tag)  # cold again: its layers go too
        first, second = logs
        assert tags[0] == tags[1]  # the wheelhouse is in no key
        # The first build fetched from the index, built docopt's wheel and uploaded both.
        assert re.search(r"Downloading six-1\.16\.0", first), first
        assert "Building wheel for docopt" in first, first
        assert re.search(r"uploaded [1-9]\d* wheel", first), first
        # The second ran every pip step from the wheelhouse alone: nothing downloaded or built.
        assert "Running in" in second  # cold, not the engine's cache
        # The venv's tools by a pip run from the wheelhouse's pip wheel, then the packages.
        assert "packager-pip: pip from ensurepip" in first, first
        assert second.count("packager-pip: pip from the machine wheelhouse") == 1, second
        assert second.count("packager-pip: the machine wheelhouse first") == 1, second
        assert second.count("installed from the machine wheelhouse alone") == 2, second
        fetched = re.findall(r"Downloading (\S+)", second)  # pip says from where
        host = wheelhouse_host(second)
        assert fetched and all(url.startswith(f"http://{host}/") for url in fetched), fetched
        assert "Building wheel" not in second and "uploaded" not in second, second
        listing = docker_client.containers.run(
            tags[1], ["sh", "-c", "find / -xdev -name 'docopt-*.whl' -o -name 'packager-wheels-*'"],
            remove=True,
        )  # fmt: skip
        assert listing.strip() == b"", listing
        # Compiled after pip (on every core) as pip would have: each module has its .pyc.
        compiled = docker_client.containers.run(
            tags[1], ["sh", "-c", "cd /opt/venv/lib/python3*/site-packages && "
                      "ls __pycache__/six.* __pycache__/docopt.* pip/__pycache__/__init__.*"],
            remove=True,
        ).decode()  # fmt: skip
        assert compiled.count(".pyc") == 3, compiled
        assert b"/opt/venv/" in docker_client.containers.run(
            tags[1], ["pip", "--version"], remove=True
        )
        assert (
            docker_client.containers.run(
                tags[1], ["python", "-c", "import docopt, six; print(six.__version__)"], remove=True
            ).strip()
            == b"1.16.0"
        )
    finally:
        run.close()
        for tag in reversed(tags):
            try:
                docker_client.images.remove(tag)
            except Exception:  # noqa: BLE001 - removed above, or never built
                pass
