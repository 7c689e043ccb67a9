"""Environments without hand-written configuration: conda lists and environment.yml as pip
requirements, the failed step of a build named in the terms of its recipe, and an environment
that cannot run its tests reported as a build failure, not a gold failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from packager import assumptions as A
from packager.datasets.conda import (
    CondaError,
    from_environment_yml,
    from_package_list,
    pip_requirement,
)
from packager.engines.excerpts import run_evidence
from packager.engines.verdict import decide_status
from packager.images.failures import explain
from packager.models.spec import Environment, RunResult, TaskResult
from packager.release.report import HEADERS, make_markdown, python_cell, table_rows


@pytest.mark.parametrize(
    ("conda", "pip"),
    [
        ("numpy", "numpy"),
        ("numpy=1.19", "numpy==1.19.*"),
        ("numpy=1.19.*", "numpy==1.19.*"),
        ("numpy==1.19.2", "numpy==1.19.2"),
        ("numpy>=1.19,<2", "numpy>=1.19,<2"),
        ("fsspec!=2021.7.0", "fsspec!=2021.7.0"),
        ("numpy 1.19", "numpy==1.19.*"),
        ("conda-forge::numpy=1.19=py39h1234", "numpy==1.19.*"),
        ("pytables=3.6", "tables==3.6.*"),
        ("matplotlib-base", "matplotlib"),
        ("python=3.9", None),
        ("pip", None),
    ],
)
def test_a_conda_spec_as_a_pip_requirement(conda: str, pip: str | None) -> None:
    assert pip_requirement(conda) == pip


def test_no_pin_is_dropped_silently() -> None:
    converted = from_package_list("'numpy==1.19.2' scipy=1.5 python=3.9 pip dask-core")
    assert converted.requirements == ("numpy==1.19.2", "scipy==1.5.*", "dask")
    said = "\n".join(converted.notes)
    assert "python=3.9: not installed with pip (the interpreter" in said
    assert "pip: not installed with pip (the installer" in said
    assert "dask-core: installed as dask" in said


def test_environment_yml_keeps_its_pip_section() -> None:
    text = (
        "name: testbed\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.10\n"
        "  - numpy>=1.21\n  - hdf5\n  - pip\n  - pip:\n      - numbagg==0.2\n      - -e .\n"
    )
    converted = from_environment_yml(text)
    # hdf5 stays: pip cannot install it, and the build failure will name it (not dropped).
    assert converted.requirements == ("numpy>=1.21", "hdf5", "numbagg==0.2", "-e .")
    with pytest.raises(CondaError):
        from_environment_yml("name: x\n")


def test_a_conda_package_whose_c_library_pip_lacks_brings_debian_s() -> None:
    """conda-forge's cfgrib comes with ecCodes; pip's does not: Debian's library is added to the
    environment's packages (read from an environment.yml or a package list alike)."""
    text = "name: t\ndependencies:\n  - cfgrib\n  - numpy\n  - eccodes\n"
    converted = from_environment_yml(text)
    assert converted.requirements == ("cfgrib", "numpy", "eccodes")
    assert converted.system == ("libeccodes-dev",)
    assert any("cfgrib: its C library from Debian (libeccodes-dev)" in n for n in converted.notes)
    assert from_package_list("numpy cfgrib=0.9").system == ("libeccodes-dev",)
    assert from_package_list("numpy").system == ()


def _log(step: str, *output: str) -> str:
    head = "Step 1/9 : FROM debian:bullseye-slim\n ---> 0123\n"
    tail = "\n".join(output)
    return f"{head}Step 7/9 : {step}\n ---> Running in abc\n{tail}\nERROR: The command ... 1\n"


ENV = Environment(
    base_image="debian:bullseye-slim",
    python="3.9",
    packages=A.PYTHON_TOOLCHAIN_PACKAGES,
    requirements={A.CONDA_PACKAGES_FILE: b"cdms2\n", "tests__requirements__py3.txt": b"x\n"},
    pip_packages=("tox==4.16.0",),
    pre_install=("sed -i 's/pytest/pytest -rA/' tox.ini",),
    install=("python -m pip install -e .",),
)


@pytest.mark.parametrize(
    ("step", "output", "named", "package"),
    [
        (
            "RUN pip install --no-cache-dir -r /tmp/packager-requirements/conda-packages.txt",
            ("Collecting cartopy",
             "   ━━━━━━━━━━━━━━━━ 386.4/386.4 kB 502.3 MB/s eta 0:00:00",
             "ERROR: Could not find a version that satisfies the requirement cdms2",
             "ERROR: No matching distribution found for cdms2"),
            "packages (the conda package list",
            "cdms2",
        ),
        (
            "RUN pip install --no-cache-dir -r "
            "/tmp/packager-requirements/tests__requirements__py3.txt",
            ("ERROR: Failed building wheel for pylibmc",),
            "packages (requirements.txt: tests/requirements/py3.txt)",
            "pylibmc",
        ),
        ("RUN pip install --no-cache-dir tox==4.16.0", ("boom",), "pip_packages", None),
        ("RUN python /tmp/packager-pip.py tox==4.16.0",
         ("packager-pip: the wheelhouse route failed; installing as without it",
          "ERROR: No matching distribution found for tox==4.16.0"),
         "pip_packages", "tox==4.16.0"),
        ("RUN python /tmp/packager-pip.py -r /tmp/packager-requirements/conda-packages.txt",
         ("ERROR: Failed building wheel for cdms2",), "packages (the conda package list", "cdms2"),
        ("RUN sed -i 's/pytest/pytest -rA/' tox.ini", ("sed: can't read tox.ini",),
         "pre_install[0]", None),
        ("RUN python -m pip install -e .", ("error: subprocess-exited",), "install[0]", None),
        ("RUN python /tmp/packager-pip.py --drop-unavailable -r "
         "/tmp/packager-requirements/ci__requirements__environment.yml.txt",
         ("ERROR: Failed building wheel for cartopy", "Failed to build cartopy",
          "ERROR: ERROR: Failed to build installable wheels for some pyproject.toml based "
          "projects (cartopy)"),
         "packages (environment.yml: ci/requirements/environment.yml", "cartopy"),
    ],
)  # fmt: skip
def test_the_failed_build_step_is_named_in_recipe_terms(
    step: str, output: tuple[str, ...], named: str, package: str | None
) -> None:
    failure = explain(_log(step, *output), ENV)
    assert failure is not None
    assert failure.step.startswith(named), failure.step
    assert failure.package == package
    assert failure.tail[-1] == output[-1]
    sentence = failure.sentence()
    assert named in sentence and output[-1] in sentence
    assert "━" not in sentence and "Collecting" not in sentence  # pip's progress is no reason
    assert "ERROR: The command" not in sentence and "--->" not in sentence


def test_an_untrusted_index_certificate_asks_for_the_ca_bundle() -> None:
    output = (
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'SSLError(SSLCertVerifi"
        "cationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed'))'",
        "ERROR: No matching distribution found for python-dateutil",
    )
    failure = explain(_log("RUN python -m pip install -e .", *output), ENV)
    assert failure is not None and failure.untrusted and failure.package == "python-dateutil"
    assert "pass --ca-bundle" in failure.sentence()
    plain = explain(_log("RUN python -m pip install -e .", output[1]), ENV)
    assert plain is not None and not plain.untrusted and "--ca-bundle" not in plain.sentence()


def _run(kind: str, reward: float, tests_run: int | None, code: int | None = 1) -> RunResult:
    return RunResult(
        kind=kind,  # type: ignore[arg-type]
        reward=reward,
        grade_status="graded",
        duration_sec=1.0,
        log_dir="x",
        tests_run=tests_run,
        exit_code=code,
        test_tail="tox: command not found" if tests_run == 0 else None,
    )


def test_a_test_command_that_ran_no_test_is_a_build_failure() -> None:
    status, reason = decide_status(
        [_run("oracle", 0.0, 0, 127), _run("oracle", 0.0, 0, 127)], _run("nop", 0.0, 0, 127), None
    )
    assert status == "build_failed"
    assert reason is not None and "exit 127" in reason and "tox: command not found" in reason
    # Tests that ran and failed are a verdict on the gold patch.
    status, _ = decide_status([_run("oracle", 0.0, 5)], _run("nop", 0.0, 5), None)
    assert status == "gold_failed"


def test_evidence_of_a_run(tmp_path: Path) -> None:
    output = tmp_path / "test-output.txt"
    output.write_text("collecting...\nImportError: no module named x\n\n")
    found = run_evidence({"tests": {}, "exit_code": 2}, output)
    assert found == {"tests_run": 0, "exit_code": 2, "test_tail": (
        "first error: ImportError: no module named x")}  # fmt: skip
    output.write_text("collecting...\nnothing to see\n")
    found = run_evidence({"tests": {}, "exit_code": 5}, output)
    assert found["test_tail"] == "last lines: collecting... | nothing to see"
    assert run_evidence({"tests": {"a": "passed"}, "exit_code": 0}, output)["tests_run"] == 1
    assert run_evidence({"status": "patch_failed"}, output) == {}
    nested = run_evidence({"tests": {"a": "passed"}, "nested_ids": ["t.py::x"]}, output)
    assert nested["nested_ids"] == ["t.py::x"]


def _result(**environment: str) -> TaskResult:
    return TaskResult(
        task="t", instance_id="t", dataset="d", status="verified", engine="local",
        environment=environment,
    )  # fmt: skip


def test_a_python_substitution_shows_in_the_table_and_report() -> None:
    moved = _result(python_requested="3.6", python_used="3.9", source="harness spec")
    same = _result(python_requested="3.9", python_used="3.9")
    assert [python_cell(r) for r in (moved, same, _result())] == ["3.6 -> 3.9", "3.9", "-"]
    rows = table_rows([moved])
    assert rows[0][HEADERS.index("python")] == "3.6 -> 3.9"
    assert "| 3.6 -> 3.9 |" in make_markdown("d", [moved])


# ---------------------------------------------------------------- rows with no configuration

VERIFIED = Path(__file__).parents[1] / "data" / "swebench-verified-4.jsonl"
"""Four SWE-bench Verified rows exactly as published (rese1f/terminal-bench-datasets,
datasets/swebench-verified/<id>/tests/config.json), Verified's `difficulty` column included."""


def _verified() -> dict[str, dict[str, object]]:
    import json

    rows = [json.loads(line) for line in VERIFIED.read_text().splitlines() if line.strip()]
    return {str(r["instance_id"]): r for r in rows}


def _adapt(row: dict[str, object], **ctx: object) -> object:
    from packager.adapters import Context, to_spec

    return to_spec(row, Context(dataset="verified", split="test", **ctx))  # type: ignore[arg-type]


def test_a_verified_row_takes_the_harness_spec_with_its_python() -> None:
    from packager.models.spec import TaskSpec

    spec = _adapt(_verified()["django__django-11099"])
    assert isinstance(spec, TaskSpec)
    meta = spec.provenance.metadata
    assert meta["environment_source"] == "harness spec django/django@3.0 (swebench==4.1.0)"
    # Django 3.0's spec asks for Python 3.6: no image serves it here, the nearest Debian does.
    assert (meta["python_requested"], meta["python_used"]) == ("3.6", "3.9")
    env = spec.environment
    assert env.base_image == "debian:bullseye-slim" and env.python == "3.9"
    assert env.requirements_paths == ("tests/requirements/py3.txt",)
    assert env.install == ("python -m pip install -e .",)
    assert env.shell_setup is not None and "locale-gen" in env.shell_setup
    assert spec.grading.parser == "django"
    assert spec.grading.test_command == (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
        "auth_tests.test_validators"
    )


def test_sympy_and_sphinx_rows_take_their_runners_and_pre_install() -> None:
    rows = _verified()
    sympy = _adapt(rows["sympy__sympy-12481"])
    assert sympy.grading.parser == "sympy"  # type: ignore[attr-defined]
    assert sympy.grading.test_command.endswith(  # type: ignore[attr-defined]
        "bin/test -C --verbose sympy/combinatorics/tests/test_permutations.py"
    )
    sphinx = _adapt(rows["sphinx-doc__sphinx-10323"])
    assert sphinx.environment.pre_install == ("sed -i 's/pytest/pytest -rA/' tox.ini",)  # type: ignore[attr-defined]
    assert sphinx.grading.test_command.startswith("tox --current-env -epy39 -v -- ")  # type: ignore[attr-defined]


def test_recipes_take_precedence_over_the_harness_spec() -> None:
    from packager.datasets.recipes import Recipes

    row = _verified()["sympy__sympy-12481"]
    recipe = {"python": "3.11", "test_cmd": "pytest -rA"}
    for key in ("sympy/sympy", "sympy/sympy@1.0", "sympy__sympy-12481"):
        spec = _adapt(row, recipes=Recipes({key: recipe}))
        assert spec.provenance.metadata["environment_source"] == f"recipe {key}"  # type: ignore[attr-defined]
        assert spec.environment.python == "3.11"  # type: ignore[attr-defined]
    # The most specific key wins: instance over owner/name@version over owner/name.
    both = Recipes({"sympy/sympy": {"python": "3.9"}, "sympy/sympy@1.0": recipe})
    assert _adapt(row, recipes=both).provenance.metadata["recipe"] == "sympy/sympy@1.0"  # type: ignore[attr-defined]


def test_a_version_the_harness_lacks_is_refused_naming_both_ways_out() -> None:
    from packager.errors import RowError

    row = dict(_verified()["sympy__sympy-12481"], version="0.1")
    with pytest.raises(RowError) as caught:
        _adapt(row)
    assert caught.value.field == "install_config"
    assert "no spec for sympy/sympy@0.1" in caught.value.problem
    assert "--recipes" in caught.value.problem


def test_python_fallback_never_refuses_a_verified_row(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    proc = run_cli(
        "render", "django__django-11099", "--dataset", str(VERIFIED), "--out", str(tmp_path),
        "--python-fallback", "never",
    )  # fmt: skip
    assert proc.returncode == 2
    message = proc.stderr.strip()
    assert message.startswith("error: django__django-11099: field 'harness spec")
    assert "Python 3.6" in message and "3.9, 3.11, 3.13" in message
    assert not (tmp_path / "swebench-verified-4").exists()


def test_a_substitution_is_in_task_metadata_and_list(tmp_path: Path) -> None:
    import tomllib

    from tests.conftest import run_cli

    # A recipe asking for 3.6 (no repository read needed to render it).
    recipes = tmp_path / "recipes.yaml"
    recipes.write_text('sympy/sympy@1.0:\n  python: "3.6"\n  test_cmd: bin/test -C\n'
                       "  log_parser: parse_log_sympy\n")  # fmt: skip
    proc = run_cli("render", "sympy__sympy-12481", "--dataset", str(VERIFIED), "--out",
                   str(tmp_path / "out"), "--recipes", str(recipes))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    task = tmp_path / "out" / "swebench-verified-4" / "tasks" / "sympy__sympy-12481"
    meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
    assert (meta["python_requested"], meta["python_used"]) == ("3.6", "3.9")
    assert meta["python_base"] == "debian:bullseye-slim (Debian bullseye)"
    assert meta["environment_source"] == "recipe sympy/sympy@1.0"
    listed = run_cli("list", "--dataset", str(VERIFIED))
    assert listed.returncode == 0, listed.stderr
    lines = dict(line.split("\t", 1) for line in listed.stdout.splitlines())
    assert lines["django__django-11099"] == (
        "swebench\tpython\tharness spec django/django@3.0 (swebench==4.1.0); python 3.6 -> 3.9"
    )
    assert lines["sympy__sympy-12481"].endswith("sympy/sympy@1.0 (swebench==4.1.0); python 3.9")
    with_recipes = run_cli("list", "--dataset", str(VERIFIED), "--recipes", str(recipes))
    assert "\trecipe sympy/sympy@1.0; python 3.6 -> 3.9" in with_recipes.stdout


def test_a_substitution_is_in_the_result_environment_and_html() -> None:
    from packager.models.spec import TaskSpec
    from packager.release.report import make_html
    from packager.stages.build import environment_facts

    spec = _adapt(_verified()["django__django-11099"])
    assert isinstance(spec, TaskSpec)
    facts = environment_facts(spec, flattened_from="img@sha256:1")
    assert facts == {
        "source": "harness spec django/django@3.0 (swebench==4.1.0)",
        "python_requested": "3.6",
        "python_used": "3.9",
        "python_base": "debian:bullseye-slim (Debian bullseye)",
        "flattened_from": "img@sha256:1",
        "resolved_as_of": "2024-08-13T00:00:00Z",
    }
    result = _result(**facts)
    assert "<td>3.6 -&gt; 3.9</td>" in make_html("d", [result], None, [])


def test_an_id_no_test_can_have_is_set_aside_and_named() -> None:
    from packager.datasets.harness_parsers import not_test_ids

    row = _verified()["pytest-dev__pytest-5262"]
    assert "[100%]" in str(row["PASS_TO_PASS"])  # as published
    spec = _adapt(row)
    assert "[100%]" not in spec.grading.pass_to_pass  # type: ignore[attr-defined]
    assert spec.provenance.metadata["ids_not_tests"] == ["[100%]"]  # type: ignore[attr-defined]
    assert len(spec.grading.pass_to_pass) == len(json.loads(str(row["PASS_TO_PASS"]))) - 1  # type: ignore[attr-defined]
    # Only pytest's ids have a mark to check; Django's and SymPy's are all kept.
    assert not_test_ids("django", ("test_x (a.B)",)) == ()
    assert not_test_ids("pytest", ("a.py::t", "[100%]", "[ 50%]", "t[1]")) == ("[100%]", "[ 50%]")


def test_nano_cpus_becomes_the_containers_cpu_quota() -> None:
    """The harness runs pylint's containers with nano_cpus=2e9: tests that need two cores read
    the cgroup quota and skip themselves (a skipped PASS_TO_PASS fails) without it."""
    import tomllib

    from packager.adapters.recipe import PythonPolicy, make_recipe
    from packager.engines.local import make_run_plan
    from packager.render.harbor import make_harbor_task
    from packager.storage import OutputPaths

    policy = PythonPolicy({}, lambda _image: False)
    result = make_recipe(
        {"python": "3.9", "nano_cpus": 2000000000, "test_cmd": "pytest -rA"},
        task="t", field="install_config", test_patch=None, pythons=policy, env_commit=None,
    )  # fmt: skip
    assert result.environment.cpus == 2.0
    spec = _adapt(_verified()["sympy__sympy-12481"])
    spec = spec.model_copy(  # type: ignore[attr-defined]
        update={"environment": spec.environment.model_copy(update={"cpus": 2.0})}  # type: ignore[attr-defined]
    )
    toml = tomllib.loads(make_harbor_task(spec).files["task.toml"].data.decode())
    assert toml["environment"]["cpus"] == 2.0 and toml["verifier"]["environment"]["cpus"] == 2.0
    plan = make_run_plan(spec, OutputPaths(Path("/tmp/o"), "d"), {"agent": "a", "grader": "g"})
    assert plan.cpus == 2.0
    from packager.errors import RowError

    with pytest.raises(RowError, match="nano_cpus"):
        make_recipe({"nano_cpus": "two"}, task="t", field="f", test_patch=None, pythons=policy,
                    env_commit=None)  # fmt: skip


class _CpuClient:
    def __init__(self) -> None:
        self.created: dict[str, object] = {}
        outer = self

        class Containers:
            def create(self, image: str, **kwargs: object) -> object:
                outer.created = kwargs

                class Box:
                    def remove(self, force: bool = False) -> None:
                        return None

                return Box()

        self.containers = Containers()

    def info(self) -> dict[str, int]:
        return {"NCPU": 1}


def test_the_cpu_quota_is_at_most_the_engines() -> None:
    from packager.context import RunContext
    from packager.engines.containers import _container

    client = _CpuClient()
    run = RunContext()
    with _container(client, "img", "t", "grader-nop", ["true"], "/w", False, cpus=2.0, run=run):  # type: ignore[arg-type]
        pass
    assert client.created["nano_cpus"] == 1_000_000_000
    with _container(client, "img", "t", "grader-nop", ["true"], "/w", False, run=run):  # type: ignore[arg-type]
        pass
    assert "nano_cpus" not in client.created


def test_a_recipe_without_python_keeps_its_own_base_image() -> None:
    from packager.adapters.recipe import PythonPolicy, make_recipe

    result = make_recipe(
        {"base_image": "golang:1.22", "test_cmd": "go test ./...", "log_parser": "gotest"},
        task="t", field="f", test_patch=None, pythons=PythonPolicy({}, lambda _i: False),
        env_commit=None,
    )  # fmt: skip
    assert result.environment.base_image == "golang:1.22" and result.python is None
    assert result.environment.packages == ()  # no Python toolchain without Python


SPHINX_NO_TEST = """\
============================= test session starts ==============================
collected 1 item / 2 errors

==================================== ERRORS ====================================
___________________ ERROR collecting tests/test_build_latex.py ___________________
tests/test_build_latex.py:20: in <module>
    from sphinx.writers.latex import LaTeXTranslator
sphinx/writers/latex.py:30: in <module>
    from docutils.utils.roman import toRoman
E   ModuleNotFoundError: No module named 'roman'
=================================== FAILURES ===================================
_________________________ test_nested_order_value _________________________

    def test_nested_order_value():
        value = 'order'
>       assert value == 'nested'
E       AssertionError: assert 'order' == 'nested'
=========================== short test summary info ============================
FAILED tests/test_build_latex.py::test_nested_order_value
ERROR tests/test_build_latex.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
"""


def test_a_run_without_tests_is_explained_by_its_first_error_not_the_tripwire() -> None:
    from packager.engines.excerpts import output_excerpt

    added = ["test_nested_order_value"]  # the report's added_tests
    text = output_excerpt(SPHINX_NO_TEST, added)
    assert text.startswith("module roman is missing; first error: ERROR collecting tests/test_bu")
    assert "No module named 'roman'" in text
    assert "nested" not in text and "order" not in text
    # Without any error line: the last lines, still without the tripwire's.
    tail = output_excerpt("ok\nFAILED tests/t.py::test_nested_order_value - x\nbye\n", added)
    assert tail == "last lines: ok | bye"
    assert output_excerpt("") == "last lines: -"


NETWORK_OUTPUTS = {
    # requests over urllib3 1.x, name resolution refused
    "E   requests.exceptions.ConnectionError: HTTPConnectionPool(host='httpbin.org', port=80): "
    "Max retries exceeded with url: /get (Caused by NewConnectionError('<urllib3.connection."
    "HTTPConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary "
    "failure in name resolution'))": ["httpbin.org"],
    # urllib3 2.x
    "urllib3.exceptions.NameResolutionError: <urllib3.connection.HTTPSConnection object at 0x7f>"
    ": Failed to resolve 'pypi.org' ([Errno -3] Temporary failure in name resolution)": [
        "pypi.org"
    ],
    # a connect timeout expected from a non-routable address, refused at once offline
    "ConnectionError: HTTPConnectionPool(host='10.255.255.1', port=80): Max retries exceeded "
    "with url: / (Caused by NewConnectionError('...: [Errno 101] Network is unreachable'))": [
        "10.255.255.1"
    ],
    "Error: getaddrinfo ENOTFOUND registry.npmjs.org": ["registry.npmjs.org"],
    "dial tcp: lookup proxy.golang.org on 127.0.0.11:53: dial udp 127.0.0.11:53: connect: "
    "network is unreachable": ["proxy.golang.org"],
    "curl: (6) Could not resolve host: example.org": ["example.org"],
    # urllib names no host: the URL fetched just before
    '>       urllib.request.urlopen("http://service.invalid/get", timeout=5)\n'
    "E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>": [
        "service.invalid"
    ],
    "socket.gaierror: [Errno -2] Name or service not known": [],
    # pytest's long traceback: the URL far above, the frame's arguments nearer
    "________________________________ test_fetch ________________________________\n"
    '>       urllib.request.urlopen("http://service.invalid/status", timeout=5)\n'
    + "\n" * 60
    + "host = 'service.invalid', port = 80, family = 0\n"
    + "E       socket.gaierror: [Errno -3] Temporary failure in name resolution\n"
    + "\n" * 60
    + "E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>"
    + "": ["service.invalid"],
    "___ test_a ___\nsee http://other.example/\n___ test_b ___\naddress = ('db.example', 5432)"
    "\nE   socket.gaierror: [Errno -2] Name or service not known": ["db.example"],
}


@pytest.mark.parametrize("text", list(NETWORK_OUTPUTS))
def test_a_failed_network_access_names_its_hosts(text: str) -> None:
    from packager.engines.excerpts import network_hosts

    assert network_hosts("collected 3 items\n" + text + "\n1 failed\n") == NETWORK_OUTPUTS[text]


def test_output_without_network_access_names_none() -> None:
    from packager.engines.excerpts import network_hosts

    assert network_hosts("E   AssertionError: assert 1 == 2\nsee http://example.org/x\n") is None
    assert network_hosts("") is None


STAND_IN_OUTPUT = (
    "$ { /opt/packager-services/httpbin/bin/python -m httpbin.core --host 127.0.0.1 "
    "--port 8765 ; } >/logs/verifier/service-httpbin.txt 2>&1 &\n"
    "collected 90 items\n"
    "E           ssl.SSLError: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1123)\n"
)


def test_a_stand_in_asked_for_https_is_the_real_service_out_of_reach() -> None:
    """psf/requests 2.0's test_mixed_case_scheme_acceptable asks httpbin for https://; the
    stand-in answers in plain HTTP. The gold run needed the real service: needs_network."""
    from packager.engines.excerpts import network_hosts

    hosts = network_hosts(STAND_IN_OUTPUT)
    assert hosts == ["httpbin over https: its stand-in serves plain http"]
    # The same TLS error without a stand-in in the run is no network access.
    assert network_hosts(STAND_IN_OUTPUT.split("\n", 1)[1]) is None
    # Together with a real host: both named.
    both = STAND_IN_OUTPUT + "socket.gaierror: [Errno -3] Temporary failure in name resolution"
    both += " host='httpbin.org'\n"
    assert network_hosts(both) == ["httpbin.org", hosts[0]]


def test_a_gold_run_that_needed_the_network_is_needs_network_not_gold_failed() -> None:
    def offline(kind: str, reward: float, hosts: list[str] | None) -> RunResult:
        return _run(kind, reward, 5).model_copy(update={"network_hosts": hosts})

    oracle = [offline("oracle", 0.0, ["httpbin.org"]), offline("oracle", 0.0, ["httpbin.org"])]
    status, reason = decide_status(oracle, offline("nop", 0.0, ["httpbin.org"]), None)
    assert status == "needs_network"
    assert reason is not None and "(httpbin.org)" in reason
    status, reason = decide_status([offline("oracle", 0.0, [])], _run("nop", 0.0, 5), None)
    assert status == "needs_network" and reason is not None and "no host named" in reason
    # A gold run that passes with network errors in its output (a test expecting them) verifies.
    status, _ = decide_status([offline("oracle", 1.0, ["a.b"])], offline("nop", 0.0, ["a.b"]), None)
    assert status == "verified"
    # Without network errors a failing gold run stays gold_failed.
    status, _ = decide_status([offline("oracle", 0.0, None)], _run("nop", 0.0, 5), None)
    assert status == "gold_failed"
