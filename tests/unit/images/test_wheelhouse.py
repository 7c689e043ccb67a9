"""The machine wheelhouse: its server (tokened paths, atomic uploads, a links page pip reads),
the pip helper the agent Dockerfile runs (offline first, then build and upload, then plain pip),
and the render that ships the helper only with a Python recipe that installs with pip.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from packager.context import RunContext
from packager.images import wheelhouse
from packager.render import TEMPLATES_DIR

HELPER_PATH = TEMPLATES_DIR / "harbor" / "environment" / wheelhouse.HELPER
KEY = "0123456789abcdef"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    srv = wheelhouse._Server(("127.0.0.1", 0), tmp_path / "wh")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: Any, path: str) -> str:
    host, port = srv.server_address[:2]
    return f"http://{host}:{port}{path}"


def _status(url: str, data: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=data, method="PUT" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_server_keeps_uploaded_wheels_per_key_behind_its_token(server: Any) -> None:
    base = f"/{server.token}/{KEY}/"
    assert _status(_url(server, base + "six-1.0-py3-none-any.whl"), b"wheel bytes") == 201
    stored = server.root / KEY / "six-1.0-py3-none-any.whl"
    assert stored.read_bytes() == b"wheel bytes"
    assert not [p for p in stored.parent.iterdir() if p.name.startswith(".")]  # renamed in
    with urllib.request.urlopen(_url(server, base), timeout=10) as reply:
        page = reply.read().decode()
    assert '<a href="six-1.0-py3-none-any.whl">' in page
    with urllib.request.urlopen(_url(server, base + "six-1.0-py3-none-any.whl")) as reply:
        assert reply.read() == b"wheel bytes"
    # Another key sees none of it; a wrong token, a bad key or name, a path out: refused.
    with urllib.request.urlopen(_url(server, f"/{server.token}/{'f' * 16}/")) as reply:
        assert b"six" not in reply.read()
    assert _status(_url(server, f"/{'0' * 32}/{KEY}/")) == 404
    assert _status(_url(server, f"/{'0' * 32}/{KEY}/x-1-py3-none-any.whl"), b"x") == 403
    assert _status(_url(server, f"/{server.token}/../x-1-py3-none-any.whl"), b"x") == 403
    assert _status(_url(server, f"/{server.token}/{KEY}/setup.py"), b"x") == 403
    assert _status(_url(server, f"/{server.token}/{KEY}/..%2fx.whl"), b"x") == 403
    assert sorted(p.name for p in (server.root / KEY).iterdir()) == ["six-1.0-py3-none-any.whl"]
    # Byte code bundles: named by a hash, kept, served, never on the links page.
    bundle = f"{'ab' * 16}.pycs"
    assert _status(_url(server, f"/{server.token}/{KEY}/{bundle}"), b"code") == 201
    assert _status(_url(server, f"/{server.token}/{KEY}/x.pycs"), b"code") == 403
    assert _status(_url(server, f"/{server.token}/{KEY}/{'AB' * 16}.pycs"), b"code") == 403
    with urllib.request.urlopen(_url(server, f"/{server.token}/{KEY}/{bundle}")) as reply:
        assert reply.read() == b"code"
    with urllib.request.urlopen(_url(server, f"/{server.token}/{KEY}/")) as reply:
        assert b"pycs" not in reply.read()


def test_a_stored_name_is_never_replaced_even_by_racing_uploads(server: Any) -> None:
    # Build steps run repositories' setup code: one must not swap a wheel or byte code that
    # other builds install. The first upload of a name is kept.
    base = f"/{server.token}/{KEY}/"
    for name in ("six-1.0-py3-none-any.whl", f"{'cd' * 16}.pycs"):
        assert _status(_url(server, base + name), b"first") == 201
        assert _status(_url(server, base + name), b"second") == 409
        with urllib.request.urlopen(_url(server, base + name), timeout=10) as reply:
            assert reply.read() == b"first"
    codes: list[int] = []
    bodies = [bytes([65 + i]) * 200_000 for i in range(8)]
    racers = [
        threading.Thread(
            target=lambda b=b: codes.append(
                _status(_url(server, base + "raced-1-py3-none-any.whl"), b)
            )
        )
        for b in bodies
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert sorted(codes) == [201] + [409] * 7
    assert (server.root / KEY / "raced-1-py3-none-any.whl").read_bytes() in bodies
    assert not [p for p in (server.root / KEY).iterdir() if p.name.startswith(".")]


def _helper(monkeypatch: pytest.MonkeyPatch, hosts: str, tmp_path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("packager_pip", HELPER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "hosts").write_text(hosts)
    monkeypatch.setattr(module, "HOSTS", str(tmp_path / "hosts"))
    return module


ENTRY = "172.17.0.1\tp4242-tok.packager-wheelhouse.invalid\n"


def test_the_helper_without_a_wheelhouse_entry_is_the_plain_pip_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module = _helper(monkeypatch, "127.0.0.1\tlocalhost\n", tmp_path)
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(module, "pip", lambda *args, **_: calls.append(args) or 0)
    monkeypatch.setattr(module, "compile_site", lambda *_: calls.append(("compile",)))
    assert module.wheelhouse() is None
    assert module.main(["--quiet", "six"]) == 0
    assert calls == [("install", "--no-compile", "--no-cache-dir", "--quiet", "six"), ("compile",)]


@pytest.mark.parametrize(
    ("codes", "expected", "uploads"),
    [
        ([0], ["install --no-index"], 0),
        ([1, 0, 0], ["install --no-index", "wheel", "install --no-index"], 1),
        ([1, 1, 0], ["install --no-index", "wheel", "install"], 0),
        ([1, 0, 1, 1], ["install --no-index", "wheel", "install --no-index", "install"], 0),
    ],
)
def test_the_helper_goes_offline_first_then_builds_and_uploads_then_plain(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    codes: list[int],
    expected: list[str],
    uploads: int,
) -> None:
    module = _helper(monkeypatch, "127.0.0.1\tlocalhost\n" + ENTRY, tmp_path)
    assert module.wheelhouse() == ("172.17.0.1", 4242, "tok")
    calls: list[tuple[str, ...]] = []
    sent: list[str] = []
    returned = iter(codes)
    monkeypatch.setattr(module, "pip", lambda *args, **_: calls.append(args) or next(returned))
    monkeypatch.setattr(module, "upload", lambda base, folder: sent.append(base))
    monkeypatch.setattr(module, "compile_site", lambda *_: None)
    assert module.main(["six"]) == codes[-1]
    assert [c[0] + (" --no-index" if "--no-index" in c else "") for c in calls] == expected
    key = module.platform_key()
    assert len(key) == 16 and wheelhouse._KEY.fullmatch(key)
    base = f"http://172.17.0.1:4242/tok/{key}/"
    if len(calls) > 1:
        assert calls[1][calls[1].index("--find-links") + 1] == base  # the wheelhouse first
    assert sent == [base] * uploads
    assert all(c[-1] == "six" for c in calls)


def test_only_a_python_recipe_installing_with_pip_ships_the_helper() -> None:
    from packager.datasets.sources import open_dataset
    from packager.render.harbor import make_harbor_task
    from packager.run.select import Selection, iter_specs

    spec = next(
        iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=("samples__textkit-1",)))
    )
    plain = make_harbor_task(spec).files
    assert not any(path.endswith(wheelhouse.HELPER) for path in plain)
    env = spec.environment.model_copy(update={"pip_packages": ("six==1.16.0",)})
    files = make_harbor_task(spec.model_copy(update={"environment": env})).files
    helper = next(path for path in files if path.endswith(wheelhouse.HELPER))
    assert files[helper].data == HELPER_PATH.read_bytes()
    dockerfile = files[helper.replace(wheelhouse.HELPER, "Dockerfile")].data.decode()
    assert "RUN python /tmp/packager-pip.py six==1.16.0\n" in dockerfile
    assert (
        "venv --system-site-packages --without-pip /opt/venv && "
        "/opt/venv/bin/python /tmp/packager-pip.py --bootstrap --quiet 'pip>=21.3,<25'"
        in dockerfile
    )
    assert "RUN pip install" not in dockerfile and "-m pip install" not in dockerfile


def test_no_wheelhouse_without_a_bridge_gateway() -> None:
    class NoNetworks:
        networks = None

    assert wheelhouse.build_hosts(NoNetworks(), RunContext()) == {}  # type: ignore[arg-type]


def test_the_wheelhouse_server_is_the_runs_and_stops_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One server per run, shared by its builds, stopped when the run closes its context; a
    pickled context (a Ray job) arrives with none. No module global holds it."""
    import pickle
    import urllib.request

    class Bridge:
        class networks:  # noqa: N801 - docker-py's attribute name
            @staticmethod
            def get(name: str) -> Any:
                class Network:
                    attrs = {"IPAM": {"Config": [{"Gateway": "127.0.0.1"}]}}

                return Network()

    monkeypatch.setenv("PACKAGER_WHEELHOUSE", "1")
    run, other = RunContext(), RunContext()
    first = wheelhouse.serve(Bridge(), run, tmp_path)  # type: ignore[arg-type]
    assert first is not None
    assert wheelhouse.serve(Bridge(), run, tmp_path) is first  # type: ignore[arg-type]
    second = wheelhouse.serve(Bridge(), other, tmp_path)  # type: ignore[arg-type]
    assert second is not None and second is not first
    (host, port) = first.server_address[:2]
    hosts = wheelhouse.build_hosts(Bridge(), run)  # type: ignore[arg-type]
    assert hosts == {f"p{port}-{first.token}{wheelhouse.HOST_SUFFIX}": host}
    assert pickle.loads(pickle.dumps(run))._services == {}
    url = f"http://{host}:{port}/{first.token}/{KEY}/"

    def answers() -> bool:
        try:
            urllib.request.urlopen(url, timeout=2).close()  # noqa: S310 - loopback
        except urllib.error.HTTPError:
            return True  # it answered (a status of its own)
        except OSError:
            return False
        return True

    assert answers()
    run.close()
    other.close()
    assert not answers()  # the run's server stopped with the run


@pytest.mark.parametrize(
    ("configs", "gateway"),
    [
        ([{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}], "172.17.0.1"),
        ([{"Subnet": "172.18.0.0/16"}], "172.18.0.1"),  # docker.io 20.10 on a fresh host
        ([{"Subnet": "fd00::/64"}, {"Subnet": "10.9.0.0/24"}], "10.9.0.1"),
        ([], None),
        ([{"Subnet": "not a subnet"}], None),
    ],
)
def test_the_bridge_gateway_is_listed_or_the_subnets_first_address(
    configs: list[dict[str, str]], gateway: str | None
) -> None:
    class Network:
        attrs = {"IPAM": {"Config": configs}}

    class Networks:
        def get(self, name: str) -> Network:
            assert name == "bridge"
            return Network()

    class Client:
        networks = Networks()

    assert wheelhouse.bridge_gateway(Client()) == gateway  # type: ignore[arg-type]


def test_the_helper_uploads_its_wheels_to_the_server(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    server: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = _helper(monkeypatch, "", tmp_path)
    built = tmp_path / "built"
    built.mkdir()
    (built / "docopt-0.6.2-py2.py3-none-any.whl").write_bytes(b"w" * 100_000)
    (built / "notes.txt").write_text("not a wheel")
    module.upload(_url(server, f"/{server.token}/{KEY}/"), str(built))
    stored = server.root / KEY
    assert sorted(p.name for p in stored.iterdir()) == ["docopt-0.6.2-py2.py3-none-any.whl"]
    assert (stored / "docopt-0.6.2-py2.py3-none-any.whl").read_bytes() == b"w" * 100_000
    module.upload(_url(server, f"/{'0' * 32}/{KEY}/"), str(built))  # refused: no raise
    # A later build's wheel of that name is not taken: the first stays, and the build goes on.
    (built / "docopt-0.6.2-py2.py3-none-any.whl").write_bytes(b"evil" * 4_000_000)
    (built / "six-1.0-py3-none-any.whl").write_bytes(b"six")
    module.upload(_url(server, f"/{server.token}/{KEY}/"), str(built))
    assert "uploaded 1 wheel(s) to the machine wheelhouse (1 there already)" in (
        capsys.readouterr().out
    )
    assert (stored / "docopt-0.6.2-py2.py3-none-any.whl").read_bytes() == b"w" * 100_000
    assert (stored / "six-1.0-py3-none-any.whl").read_bytes() == b"six"


def _site(monkeypatch: pytest.MonkeyPatch, module: ModuleType, tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    site.mkdir(exist_ok=True)
    paths = {"purelib": str(site), "platlib": str(site)}
    monkeypatch.setattr(module.sysconfig, "get_paths", lambda: paths)
    return site


@pytest.mark.parametrize(
    ("wheels", "expected"),
    [
        # A pip wheel in the wheelhouse: it installs the tools, nothing else runs.
        (["pip-23.0.1-py3-none-any.whl", "pip-24.3.1-py3-none-any.whl"], ["wheel:pip-24.3.1"]),
        # None there: ensurepip, as `python -m venv` would, then the offline-first install.
        ([], ["ensurepip", "module:install --no-index"]),
    ],
)
def test_the_helper_bootstraps_pip_from_the_wheelhouse_or_ensurepip(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    server: Any,
    wheels: list[str],
    expected: list[str],
) -> None:
    host, port = server.server_address[:2]
    module = _helper(monkeypatch, f"{host}\tp{port}-{server.token}.packager-wheelhouse.invalid\n",
                     tmp_path)  # fmt: skip
    site = _site(monkeypatch, module, tmp_path)
    key = module.platform_key()
    (server.root / key).mkdir(parents=True)
    for name in wheels:
        (server.root / key / name).write_bytes(name.encode())
    calls: list[str] = []

    def pip(*args: str, runner: list[str] | None = None) -> int:
        where = f"wheel:{Path(runner[1]).parent.name[:10]}" if runner else "module"
        if runner:  # the wheel was downloaded whole, and is still there while pip runs
            assert Path(runner[1]).parent.read_bytes() == Path(runner[1]).parent.name.encode()
            (site / "pip").mkdir()  # it installs pip: the helper checks that it did
            (site / "pip" / "__init__.py").write_text("")
        calls.append(f"{where}:{args[0]}" + (" --no-index" if "--no-index" in args else ""))
        return 0

    def ensurepip(command: list[str], **_: Any) -> int:
        assert command[1:4] == ["-Im", "ensurepip", "--upgrade"]
        calls.append("ensurepip")
        (site / "pip").mkdir()
        (site / "pip" / "__init__.py").write_text("")
        return 0

    monkeypatch.setattr(module, "pip", pip)
    monkeypatch.setattr(module.subprocess, "call", ensurepip)
    monkeypatch.setattr(module, "compile_site", lambda *_: None)
    assert module.main(["--bootstrap", "--quiet", "pip>=21.3,<25", "wheel"]) == 0
    assert [c.replace(":install --no-index", "") for c in calls] == [
        e.replace(":install --no-index", "") for e in expected
    ]
    assert not list(Path(module.tempfile.gettempdir()).glob("packager-pip-*/pip-24*"))


def test_the_helper_compiles_what_pip_installed_and_only_into_site_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module = _helper(monkeypatch, "", tmp_path)
    site = _site(monkeypatch, module, tmp_path)
    (site / "pkg" / "deep").mkdir(parents=True)
    (site / "pkg" / "deep" / "mod.py").write_text("X = 1\n")
    (site / "broken.py").write_text("def (:\n")  # pip only warns of such a file
    module.compile_site()
    assert importlib.util.cache_from_source(str(site / "pkg" / "deep" / "mod.py"))
    assert Path(importlib.util.cache_from_source(str(site / "pkg" / "deep" / "mod.py"))).is_file()
    assert not Path(importlib.util.cache_from_source(str(site / "broken.py"))).exists()
    # An install elsewhere (--target, --prefix, --user...) is compiled by pip itself.
    assert module.compiles_after(["--no-cache-dir", "six"])
    for elsewhere in (["--target", "x"], ["--target=x"], ["-t", "x"], ["--user"], ["--prefix=/p"]):
        assert not module.compiles_after(["six", *elsewhere])


def _dist(site: Path, modules: dict[str, str]) -> Path:
    import base64
    import hashlib

    lines = []
    for rel, text in modules.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{rel},sha256={digest.decode()},{len(text)}")
    info = site / "demo-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "RECORD").write_text("\n".join([*lines, "demo-1.0.dist-info/RECORD,,"]) + "\n")
    return info / "RECORD"


def _value(pyc: Path) -> Any:
    import marshal

    scope: dict[str, Any] = {}
    exec(marshal.loads(pyc.read_bytes()[16:]), scope)  # noqa: S102 - the test's own module
    return scope["X"]


def test_byte_code_compiled_once_is_reused_only_for_the_same_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: Any
) -> None:
    import os
    import py_compile
    import time

    module = _helper(monkeypatch, "", tmp_path)
    site = _site(monkeypatch, module, tmp_path)
    base = _url(server, f"/{server.token}/{KEY}/")
    modules = {"demo/__init__.py": "X = 1\n", "demo/sub/deep.py": "X = 2\n", "bad.py": "def (:\n"}
    record = _dist(site, modules)
    pycs = {rel: Path(importlib.util.cache_from_source(str(site / rel))) for rel in modules}
    (site / "other.py").write_text("X = 0\n")  # in no distribution pip changed
    module.compile_site(base, {})  # a miss: compiled here, then uploaded
    assert not Path(importlib.util.cache_from_source(str(site / "other.py"))).exists()
    bundles = list((server.root / KEY).glob("*.pycs"))
    assert len(bundles) == 1 and bundles[0].name == module.bundle_name(
        str(site), module.record_modules(str(record))
    )
    assert not pycs["bad.py"].exists() and _value(pycs["demo/sub/deep.py"]) == 2
    # A fresh install of the same distribution: new mtimes, no .pyc; nothing is compiled.
    for pyc in pycs.values():
        pyc.unlink(missing_ok=True)
    later = time.time() + 100
    for rel in modules:
        os.utime(site / rel, (later, later))
    (site / "demo" / "sub" / "deep.py").write_text("X = 3\n")  # but one source is another
    compiled: list[str] = []
    real = py_compile.compile
    monkeypatch.setattr(
        py_compile, "compile", lambda f, *a, **k: compiled.append(f) or real(f, *a, **k)
    )
    module.compile_site(base, {})
    assert _value(pycs["demo/__init__.py"]) == 1 and _value(pycs["demo/sub/deep.py"]) == 3
    header = module.timestamp_header(str(site / "demo" / "__init__.py"))
    assert pycs["demo/__init__.py"].read_bytes()[:16] == header  # valid for this source
    assert sorted(Path(f).name for f in compiled) == ["bad.py", "deep.py"]
    # With its bundle gone, or without the wheelhouse, everything still compiles.
    for bundle in bundles:
        bundle.unlink()
    for where in (base, None):
        pycs["demo/__init__.py"].unlink()
        module.compile_site(where, {})
        assert _value(pycs["demo/__init__.py"]) == 1
    # Only a distribution pip changed is looked up: nothing is fetched for one as it was.
    looked: list[str] = []
    monkeypatch.setattr(module, "reuse_compiled", lambda *a: looked.append(a[-1]) or True)
    module.compile_site(base, module.records())
    assert looked == []
    module.compile_site(base, {})
    assert looked == [str(record)]


def test_pip_bootstraps_from_its_wheel_unpacked_with_the_byte_code_compiled_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: Any
) -> None:
    import zipfile

    module = _helper(monkeypatch, "", tmp_path)
    site = _site(monkeypatch, module, tmp_path)
    base = _url(server, f"/{server.token}/{KEY}/")
    modules = {"pip/__init__.py": "X = 5\n", "pip/__main__.py": "X = 6\n"}
    record = _dist(site, modules)  # pip as an earlier bootstrap installed it, then compiled
    module.compile_site(base, {})
    wheel = tmp_path / "dl" / "pip-24.3.1-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        for rel in modules:
            archive.write(site / rel, rel)
        archive.write(record, "demo-1.0.dist-info/RECORD")
        archive.writestr("../outside.py", "X = 0\n")
    folder = Path(module.unpacked(base, str(wheel)))
    assert folder.parent == wheel.parent and (folder / "pip" / "__main__.py").is_file()
    # Its metadata is not kept: pip on sys.path beside it would take itself for installed.
    assert not list(folder.glob("*.dist-info"))
    assert not (tmp_path / "outside.py").exists()
    for rel in modules:  # the bundle's code, under a header valid for the unpacked source
        pyc = Path(importlib.util.cache_from_source(str(folder / rel)))
        assert pyc.read_bytes()[:16] == module.timestamp_header(str(folder / rel))
        assert _value(pyc) == int(modules[rel][4])
    # No bundle for it: pip runs from the unpacked sources; not a zip: from the wheel itself.
    for bundle in (server.root / KEY).glob("*.pycs"):
        bundle.unlink()
    other = tmp_path / "dl2" / wheel.name
    other.parent.mkdir()
    other.write_bytes(wheel.read_bytes())
    folder = Path(module.unpacked(base, str(other)))
    assert (folder / "pip" / "__init__.py").is_file() and not (
        folder / "pip" / "__pycache__"
    ).exists()
    (tmp_path / "dl3").mkdir()
    (tmp_path / "dl3" / wheel.name).write_bytes(b"not a zip")
    assert module.unpacked(base, str(tmp_path / "dl3" / wheel.name)) == str(
        tmp_path / "dl3" / wheel.name
    )


def test_what_a_failed_pip_installed_is_compiled_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # pip can fail after installing part of a step; the helper's next attempt finds those
    # distributions satisfied and leaves them be, so they are compiled now or never.
    module = _helper(monkeypatch, "", tmp_path)
    site = _site(monkeypatch, module, tmp_path)

    def half_install(*args: str, **_: Any) -> int:
        assert "--no-compile" in args
        _dist(site, {"half/__init__.py": "X = 4\n"})
        return 1

    monkeypatch.setattr(module, "pip", half_install)
    assert module.install(["--no-cache-dir", "half"]) == 1
    assert _value(Path(importlib.util.cache_from_source(str(site / "half" / "__init__.py")))) == 4


def test_the_helper_drops_conda_packages_pip_cannot_install_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _helper(monkeypatch, "127.0.0.1\tlocalhost\n", tmp_path)
    reqs = tmp_path / "environment.yml.txt"
    reqs.write_text("numpy==1.23.*\ncdms2\nHDF5>=1.10\ncartopy\n")
    outputs = iter(
        [
            ["ERROR: Could not find a version that satisfies the requirement cdms2 (from -r x)",
             "ERROR: No matching distribution found for cdms2"],
            ["ERROR: No matching distribution found for hdf5>=1.10"],
            ["ERROR: Failed to build installable wheels for some pyproject.toml based projects "
             "(cartopy)"],
            [],
        ]
    )  # fmt: skip
    seen: list[list[str]] = []

    def main(args: list[str]) -> int:
        seen.append(Path(args[args.index("-r") + 1]).read_text().split())
        module.LAST_OUTPUT[:] = next(outputs)
        return 1 if module.LAST_OUTPUT else 0

    monkeypatch.setattr(module, "main", main)
    assert module.drop_unavailable(["--quiet", "-r", str(reqs)]) == 0
    assert seen == [
        ["numpy==1.23.*", "cdms2", "HDF5>=1.10", "cartopy"],
        ["numpy==1.23.*", "HDF5>=1.10", "cartopy"],
        ["numpy==1.23.*", "cartopy"],
        ["numpy==1.23.*"],
    ]
    said = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith(module.DROPPED)
    ]
    assert said == [
        f"{module.DROPPED}{name} from environment.yml.txt: no distribution pip can install here"
        for name in ("cdms2", "HDF5>=1.10", "cartopy")
    ]
    assert reqs.read_text().split() == ["numpy==1.23.*", "cdms2", "HDF5>=1.10", "cartopy"]
    # A failure that names no requirement of the file (a conflict) is returned as it is.
    outputs = iter([["ERROR: ResolutionImpossible: numpy==1.23.* and pandas>=2"]])
    assert module.drop_unavailable(["-r", str(reqs)]) == 1


def test_the_helpers_pip_shows_and_keeps_what_pip_printed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    module = _helper(monkeypatch, "127.0.0.1\tlocalhost\n", tmp_path)
    code = module.pip("-c", "import sys; print('one'); sys.stderr.write('two\\n'); sys.exit(3)",
                      runner=[sys.executable])  # fmt: skip
    assert code == 3
    assert module.LAST_OUTPUT == ["one", "two"]
    assert "one\ntwo\n" in capfd.readouterr().out
