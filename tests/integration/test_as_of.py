"""Environments resolved as of a date, on the real engine: a local index holds an old and a new
version of a package (uploaded 2019 and 2024); a row built `--as-of 2020-06-01` gets the old one
through the machine's index as of that date, the same row with `--as-of none` the new one, and
the wheelhouse (which kept the old wheel) never serves it to the undated build.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from packager.images.wheelhouse import bridge_gateway
from packager.samples.generate import generate
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

UPLOADED = {"1.0": "2019-03-01T10:00:00.000000Z", "2.0": "2024-03-01T10:00:00.000000Z"}


def _wheel(version: str) -> tuple[str, bytes]:
    """A pure-Python wheel of `asofpkg` whose module says its version."""
    name = f"asofpkg-{version}-py3-none-any.whl"
    info = f"asofpkg-{version}.dist-info"
    files = {
        "asofpkg/__init__.py": f'VERSION = "{version}"\n'.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: asofpkg\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return name, buffer.getvalue()


class _Index(BaseHTTPRequestHandler):
    wheels: dict[str, bytes] = {}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/simple/asofpkg":
            files = [
                {
                    "filename": name,
                    "url": f"/files/{name}",
                    "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                    "upload-time": UPLOADED[name.split("-")[1]],
                }
                for name, data in sorted(self.wheels.items())
            ]
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": "asofpkg", "files": files})
            return self._send(body.encode(), "application/vnd.pypi.simple.v1+json")
        name = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/files/") and name in self.wheels:
            return self._send(self.wheels[name], "application/octet-stream")
        self._send(b"", "text/plain", 404)

    def _send(self, body: bytes, kind: str, code: int = 200) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def index(docker_client: Any) -> Iterator[str]:
    """The local index on the engine's bridge gateway (builds reach it as they reach the
    wheelhouse); yields its simple URL."""
    gateway = bridge_gateway(docker_client)
    assert gateway is not None, "the engine's bridge has no gateway"
    _Index.wheels = dict(_wheel(v) for v in UPLOADED)
    server = ThreadingHTTPServer((gateway, 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{gateway}:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()


def _installed(docker_client: Any, out: Path) -> str:
    result = json.loads(next(out.glob("rows/results/gen__calc-0.json")).read_text())
    assert result["status"] == "built", result
    command = ["python", "-c", "import asofpkg; print(asofpkg.VERSION)"]
    return bytes(
        docker_client.containers.run(result["images"]["agent"], command, remove=True)
    ).decode()


def test_a_row_dated_before_a_release_builds_the_older_version(
    tmp_path: Path, docker_client: Any, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKAGER_INDEX_URL", index)  # the upstream of the index as of a date
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))  # an empty wheelhouse
    data = generate(tmp_path / "ds", 1)
    recipes = tmp_path / "ds" / "recipes.yaml"
    host = index.split("/")[2].split(":")[0]
    recipes.write_text(
        recipes.read_text()
        + "  pip_packages: [asofpkg]\n"
        + f"  env_vars:\n    PIP_INDEX_URL: {index}\n    PIP_TRUSTED_HOST: {host}\n"
    )
    ca = ["--ca-bundle", "/etc/ssl/certs/ca-certificates.crt"]  # the venv's tools: the index
    dated, undated = tmp_path / "dated", tmp_path / "undated"
    base = ["build", "--all", "--dataset", str(data), *ca]
    built = run_cli(*base, "--out", str(dated), "--as-of", "2020-06-01", timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _installed(docker_client, dated).strip() == "1.0"
    task = dated / "rows" / "tasks" / "gen__calc-0"
    assert 'resolved_as_of = "2020-06-01T00:00:00Z"' in (task / "task.toml").read_text()
    result = json.loads((dated / "rows" / "results" / "gen__calc-0.json").read_text())
    assert result["environment"]["resolved_as_of"] == "2020-06-01T00:00:00Z"
    assert (
        "ENV PACKAGER_AS_OF=2020-06-01T00:00:00Z"
        in (task / "environment" / "Dockerfile").read_text()
    )
    # The old wheel is in the wheelhouse now; the undated build still gets the new release.
    wheels = sorted(p.name for p in (tmp_path / "cache" / "wheelhouse").rglob("asofpkg-*.whl"))
    assert wheels == ["asofpkg-1.0-py3-none-any.whl"]
    built = run_cli(*base, "--out", str(undated), "--as-of", "none", timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _installed(docker_client, undated).strip() == "2.0"
    assert (
        "PACKAGER_AS_OF"
        not in (
            undated / "rows" / "tasks" / "gen__calc-0" / "environment" / "Dockerfile"
        ).read_text()
    )


def _declares(requirement: str, value: str = "0") -> str:
    """A patch that makes `value_0` return `value` through `asofpkg` and declares it."""
    return (
        "diff --git a/calc/mod_0.py b/calc/mod_0.py\n"
        "--- a/calc/mod_0.py\n+++ b/calc/mod_0.py\n"
        "@@ -2,4 +2,7 @@\n \n \n def value_0() -> int:\n"
        f"-    return 1\n+    import asofpkg\n+\n+    assert asofpkg.VERSION\n+    return {value}\n"
        + (
            "diff --git a/requirements.txt b/requirements.txt\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/requirements.txt\n@@ -0,0 +1 @@\n"
            f"+{requirement}\n"
            if requirement
            else ""
        )
    )


def test_a_fix_that_adds_a_dependency_gets_it_offline_at_grading(
    tmp_path: Path, docker_client: Any, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gold patch imports a package the environment lacks and declares it (requirements.txt,
    read by the install step). The grader image carries its wheel, the agent image does not, and
    grading re-runs the install step offline: gold and a candidate declaring the same package
    its own way get 1.0; the same code without the declaration gets 0."""
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    data = generate(tmp_path / "ds", 1)
    row = json.loads(data.read_text().splitlines()[0])
    assert "return 1\n" in row["patch"]
    row["patch"] = _declares("asofpkg")
    data.write_text(json.dumps(row) + "\n")
    recipes = tmp_path / "ds" / "recipes.yaml"
    host = index.split("/")[2].split(":")[0]
    recipes.write_text(
        recipes.read_text()
        + "  install: 'if [ -f requirements.txt ]; then pip install -r requirements.txt; fi'\n"
        + f"  env_vars:\n    PIP_INDEX_URL: {index}\n    PIP_TRUSTED_HOST: {host}\n"
    )
    ca = ["--ca-bundle", "/etc/ssl/certs/ca-certificates.crt"]
    out = tmp_path / "out"
    done = run_cli("package", "--all", "--dataset", str(data), *ca, "--out", str(out), timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((out / "rows" / "results" / "gen__calc-0.json").read_text())
    assert result["status"] == "verified", result
    plan = json.loads((out / "rows" / "tasks" / "gen__calc-0" / "tests" / "plan.json").read_text())
    assert plan["refresh"]["command"].startswith("if [ -f requirements.txt ]")
    script = "python -c 'import asofpkg' 2>/dev/null || test -e /opt/packager-refresh || echo clean"
    agent = docker_client.containers.run(
        result["images"]["agent"], ["bash", "-c", script], remove=True, network_mode="none"
    )
    assert agent.decode().strip() == "clean"
    grader = docker_client.containers.run(
        result["images"]["grader"], ["ls", "/opt/packager-refresh"], remove=True
    )
    assert "asofpkg-2.0-py3-none-any.whl" in grader.decode()

    rewards = {}
    for name, patch in (
        ("declared", _declares("asofpkg>=1.0")),
        ("undeclared", _declares("")),
    ):
        path = tmp_path / f"{name}.patch"
        path.write_text(patch)
        said = run_cli(
            "verify",
            "gen__calc-0",
            "--dataset",
            str(data),
            "--out",
            str(out),
            "--patch",
            str(path),
            *ca,
        )
        assert said.returncode == 0, said.stdout + said.stderr
        rewards[name] = json.loads(said.stdout.strip().splitlines()[-1])["reward"]
    assert rewards == {"declared": 1.0, "undeclared": 0.0}
