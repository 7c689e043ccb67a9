"""Installers that vendor the package under test (packager/datasets/vendored.yaml): which rows
are affected, what their agent and grader Dockerfiles do, what the helper removes, and what the
audit's reason says when a copy is still there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from packager.adapters import Context, to_spec
from packager.checks.audit.report import AuditReport, Finding
from packager.datasets.vendored import package_name, vendoring_installers
from packager.render.harbor import make_harbor_task, pip_helper_source
from tests.unit.datasets.test_services import ROW


def test_the_installers_that_copy_a_repositorys_package() -> None:
    assert vendoring_installers("psf/requests") == (("pip",), "requests")
    assert vendoring_installers("pypa/packaging") == (("pip", "setuptools"), "packaging")
    assert vendoring_installers("urllib3/urllib3") == (("pip",), "urllib3")
    assert vendoring_installers("sympy/sympy") == ((), None)
    assert vendoring_installers("pytest-dev/pytest") == ((), None)
    assert package_name("msgpack/msgpack-python") == "msgpack"
    assert package_name("someone/python-tomli") == "tomli"


def _runs(dockerfile: str) -> list[str]:
    return [line for line in dockerfile.splitlines() if line.startswith("RUN ")]


def test_a_requests_row_builds_every_install_step_with_pip_for_that_step_alone() -> None:
    spec = to_spec(ROW, Context("verified", "test"))
    assert spec.environment.installers_out == ("pip",)
    assert spec.environment.vendored_package == "requests"
    assert spec.provenance.metadata["installers_out"] == ["pip"]
    task = make_harbor_task(spec)
    agent = task.files["environment/Dockerfile"].data.decode()
    runs = _runs(agent)
    venv = next(r for r in runs if "-m venv" in r)
    assert venv.endswith("--remove-installers pip --wheels requests")
    installing = [r for r in runs if "pip install" in r or "packager-pip.py -" in r]
    assert installing and all(
        r.endswith("--remove-installers pip") or r is venv for r in installing
    ), installing
    for run in installing:
        if run is not venv:
            # The venv step put pip in undated: a step of a row dated before pip 21.3 gets it too.
            assert run.startswith(
                "RUN env -u PACKAGER_AS_OF python /tmp/packager-pip.py --bootstrap --quiet 'pip>="
            )
    grader = task.files["tests/Dockerfile"].data.decode()
    assert (
        "RUN env -u PACKAGER_AS_OF python /tmp/packager-pip.py --bootstrap --quiet 'pip>=" in grader
    )
    assert "-m venv --without-pip /opt/packager-services/httpbin" in grader  # no ensurepip


def test_a_row_of_another_repository_keeps_its_installers() -> None:
    row = {**ROW, "repo": "pallets/flask", "instance_id": "pallets__flask-1", "version": "2.0"}
    spec = to_spec(row, Context("verified", "test"))
    assert spec.environment.installers_out == ()
    task = make_harbor_task(spec)
    assert b"--remove-installers" not in task.files["environment/Dockerfile"].data
    assert b"--bootstrap" not in task.files["tests/Dockerfile"].data


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder


def test_the_helper_takes_pip_and_its_scripts_out_of_a_real_venv(
    venv: Path, tmp_path: Path
) -> None:
    python = venv / "bin" / "python"
    assert subprocess.run([python, "-c", "import pip"]).returncode == 0
    helper = tmp_path / "packager-pip.py"
    helper.write_bytes(pip_helper_source())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, helper, "--remove-installers", "pip", "--wheels", "requests"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "removed" in done.stdout and "/pip" in done.stdout
    # No wheelhouse serves this run: the wheels ensurepip installs from stay, and it says so.
    assert "installer wheels ensurepip uses stay" in done.stdout
    assert subprocess.run([python, "-c", "import pip"], capture_output=True).returncode != 0
    assert not list((venv / "bin").glob("pip*"))


def test_the_audit_names_the_remedy_for_a_vendored_copy() -> None:
    vendored = Finding(
        "gold_patch", "sha256:x", "/opt/venv/lib/python3.9/site-packages/pip/_vendor/requests/m.py"
    )
    elsewhere = Finding("gold_patch", "sha256:x", "/testbed/requests/models.py")
    assert "vendored.yaml" in AuditReport("i", "id", False, [vendored]).summary()
    assert "vendored.yaml" not in AuditReport("i", "id", False, [elsewhere]).summary()
