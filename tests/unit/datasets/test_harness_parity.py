"""The grading runtime reads test logs as the SWE-bench harness (swebench 5.0.2) does.

The same logs (tests/unit/data/harness/: real pytest and unittest output, realistic sympy, go
and doctest output) go through the harness's own parser and the runtime parser that
`packager.datasets.harness_parsers` maps it to. The status maps must agree, up to the differences
listed in `compare` (each one leaves the verdict unchanged, except XPASS), and the harness's
`get_eval_tests_report`/`get_resolution_status` must agree with `rules.all_pass` on every list
of ids the harness's map supports.

swebench is a test-only dependency, installed without its (heavy) dependencies:
`pip install --no-deps -r requirements-test.txt`. Its `swebench.harness` package imports
docker, datasets and modal on import; the parsers and the grading module need none of that, so
the package is stood in for by a bare module over the same directory.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from packager.datasets import harness_parsers
from packager.grading import parsers, parsers_native, rules

DATA = Path(__file__).parents[1] / "data" / "harness"
SWEBENCH_VERSION = "5.0.2"
INSTALL_HINT = "pip install --no-deps -r requirements-test.txt (`make install` does it)"

# The harness's statuses as the runtime names them (XFAIL grades as PASSED in both).
STATUS = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped", "ERROR": "error"}
STATUS["XFAIL"] = "passed"


@dataclass(frozen=True)
class Harness:
    registry: dict[str, Callable[..., dict[str, str]]]
    grading: Any


def _load_harness() -> Harness:
    if importlib.util.find_spec("swebench") is None:
        pytest.fail(f"swebench {SWEBENCH_VERSION} is not installed. Fix: {INSTALL_HINT}")
    import swebench

    if swebench.__version__ != SWEBENCH_VERSION:
        pytest.fail(f"swebench {swebench.__version__} installed, {SWEBENCH_VERSION} expected")
    if "swebench.harness" not in sys.modules:
        stand_in = types.ModuleType("swebench.harness")
        stand_in.__path__ = [str(Path(p) / "harness") for p in swebench.__path__]
        sys.modules["swebench.harness"] = stand_in
    log_parsers = importlib.import_module("swebench.harness.log_parsers")
    grading = importlib.import_module("swebench.harness.grading")
    return Harness(registry=dict(log_parsers.PARSER_REGISTRY), grading=grading)


@pytest.fixture(scope="module")
def harness() -> Harness:
    return _load_harness()


@dataclass(frozen=True)
class SpecStandIn:
    """What the harness parsers read from a TestSpec (only parse_log_immutable_js reads it)."""

    instance_id: str = "example__repo-1"
    repo: str = "example/repo"
    version: str = "1.0"


# harness parser -> logs it is checked on. Every mapped harness parser appears here.
PYTEST_LOGS = ("pytest_rA.txt", "pytest_seaborn.txt", "pytest_astropy_classic.txt")
CASES: dict[str, tuple[str, ...]] = {
    "parse_log_pytest": PYTEST_LOGS,
    "parse_log_astroid": ("pytest_rA.txt",),
    "parse_log_flask": ("pytest_rA.txt",),
    "parse_log_marshmallow": ("pytest_rA.txt",),
    "parse_log_pvlib": ("pytest_rA.txt",),
    "parse_log_pyvista": ("pytest_rA.txt",),
    "parse_log_sqlfluff": ("pytest_rA.txt",),
    "parse_log_xarray": ("pytest_rA.txt",),
    "parse_log_pytest_options": PYTEST_LOGS,
    "parse_log_pydicom": ("pytest_rA.txt",),
    "parse_log_requests": ("pytest_rA.txt",),
    "parse_log_pylint": ("pytest_rA.txt",),
    "parse_log_pytest_v2": (*PYTEST_LOGS, "pytest_sphinx_tox_color.txt"),
    "parse_log_astropy": ("pytest_astropy_classic.txt",),
    "parse_log_scikit": ("pytest_rA.txt",),
    "parse_log_sphinx": ("pytest_sphinx_tox_color.txt",),
    "parse_log_matplotlib": PYTEST_LOGS,
    "parse_log_seaborn": PYTEST_LOGS,
    "parse_log_django": ("django_py39.txt", "django_py311.txt"),
    "parse_log_sympy": ("sympy.txt",),
    "parse_log_gotest": ("gotest.txt", "gotest_panic.txt"),
    "parse_log_doctest": ("doctest.txt",),
}
# The C/C++, Java, PHP, Ruby and Rust runners (tests/unit/data/harness/native/, README.md there
# says which logs are real runner output and which are constructed).
NATIVE = "native/"
NATIVE_CASES: dict[str, tuple[str, ...]] = {
    "parse_log_redis": (f"{NATIVE}redis_err.txt", f"{NATIVE}redis_err_only.txt"),
    "parse_log_jq": (f"{NATIVE}automake_check.txt",),
    "parse_log_micropython_test": (f"{NATIVE}micropython_run_tests.txt",),
    "parse_log_googletest": (f"{NATIVE}googletest_ctest.txt",),
    "parse_log_maven": (f"{NATIVE}maven_set_x.txt",),
    "parse_log_ant": (f"{NATIVE}ant_lombok.txt",),
    "parse_log_gradle_custom": (f"{NATIVE}gradle_real.txt", f"{NATIVE}gradle_testlogging.txt"),
    "parse_log_phpunit": (f"{NATIVE}phpunit_testdox.txt", f"{NATIVE}phpunit11_testdox.txt"),
    "parse_log_minitest": (f"{NATIVE}minitest_v.txt",),
    "parse_log_cucumber": (f"{NATIVE}jekyll_cucumber.txt",),
    "parse_log_jekyll": (f"{NATIVE}minitest_v.txt", f"{NATIVE}jekyll_cucumber.txt"),
    "parse_log_ruby_unit": (f"{NATIVE}test_unit_v.txt",),
    "parse_log_rspec_transformed_json": (
        f"{NATIVE}rspec_fpm.txt",
        f"{NATIVE}rspec_fastlane.txt",
        f"{NATIVE}rspec_rubocop.txt",
    ),
    "parse_log_cargo": (f"{NATIVE}cargo_test.txt", f"{NATIVE}cargo_test_nocapture.txt"),
}
CASES.update(NATIVE_CASES)
# parse_log_jekyll picks its runner by instance id: the row each log stands for.
INSTANCES = {
    f"{NATIVE}minitest_v.txt": "jekyll__jekyll-9141",
    f"{NATIVE}jekyll_cucumber.txt": "jekyll__jekyll-8761",
}
# These read line for line as the harness does: their maps must be equal, not just agree.
NATIVE_RUNTIME = tuple(parsers_native.NATIVE_PARSERS)
PAIRS = [(name, log) for name, logs in CASES.items() for log in logs]

PYTHON_PARSERS = (
    "astroid astropy django doctest flask marshmallow matplotlib pvlib pydicom pylint pyvista "
    "requests scikit seaborn sphinx sqlfluff sympy xarray pytest pytest_v2 pytest_options"
).split()


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def harness_map(harness: Harness, name: str, text: str, log: str = "") -> dict[str, str]:
    """The harness parser's raw status map (statuses as the harness spells them); ``log``
    names the row the log stands for where the parser reads the instance id."""
    spec = SpecStandIn(instance_id=INSTANCES[log]) if log in INSTANCES else SpecStandIn()
    return harness.registry[name](text, spec)


def mapped(raw: dict[str, str]) -> dict[str, str]:
    """Statuses renamed; entries whose status is no TestStatus (the harness keys a tox line
    ``ERROR: InvocationError ...`` as status ``ERROR:``) are no test results and are left out."""
    return {k: STATUS[v] for k, v in raw.items() if v in STATUS}


def _failures_kept(text: str) -> set[str]:
    """Tests lombok's ant formatter reported failed (``[junit] [FAIL] id`` or ``[ERR]``), and
    jekyll's cucumber scenarios whose step characters hold a pending or undefined step."""
    ant = re.findall(r"^\s*\[junit\]\s+\[(?:FAIL|ERR)\]\s+(.*?)\s*$", text, re.MULTILINE)
    steps = re.findall(r"^(\S+  Scenario: .*) ([.FUP-]+)(?: \(|$)", text, re.MULTILINE)
    return set(ant) | {name for name, run in steps if set(run) & set("UP")}


def _truncated(test_id: str) -> bool:
    return test_id.count("[") > test_id.count("]")


def _message_keyed(key: str) -> bool:
    """A summary line the harness keyed with its message (``id - reason``), not a test id."""
    test_id, has_message = parsers._pytest_split(key)
    return has_message and "::" in test_id


@dataclass
class Comparison:
    unexplained: list[str]
    explained: dict[str, list[str]]


def compare(theirs: dict[str, str], ours: dict[str, str], text: str) -> Comparison:
    """Differences between the harness's (mapped) map and the runtime's, sorted by reason.

    Explained, verdict-neutral differences:
    - ``truncated``: the harness cut an id at whitespace (or a FAILED line at its first `` - ``);
      the runtime keeps the whole id, and ``rules.resolve`` finds it from the cut one with the
      same status (and the harness resolves the cut id the same way).
    - ``message_keyed``: pytest_v2 keys ``XFAIL id - reason``/``ERROR id - exc`` by the whole
      line; such a key names no test, the bare id is missing in both maps alike.
    - ``not_passed_extra``: the runtime reports a non-passing status for a test the harness
      lacks (a skip that pytest's summary names only by file, a test a Go panic cut short):
      missing and failed/skipped/error grade alike.
    The one difference that is not verdict-neutral: ``xpass``, an XPASS the runtime's
    ``pytest``-based parsers count as passed and the harness does not record. And one that
    fails closed on purpose: ``failure_kept``, a test lombok's ant formatter reported
    ``[FAIL]``/``[ERR]`` and then ``[PASS]`` (as it does for every failure), or a cucumber
    scenario with a pending or undefined step: failed for the runtime, passed for the harness.
    """
    explained: dict[str, list[str]] = {}
    unexplained: list[str] = []

    def note(reason: str, key: str) -> None:
        explained.setdefault(reason, []).append(key)

    for key, status in theirs.items():
        if ours.get(key) == status:
            continue
        if key not in ours and _truncated(key) and rules.resolve(ours, key) == status:
            note("truncated", key)
        elif key not in ours and _message_keyed(key):
            note("message_keyed", key)
        elif status == "passed" and ours.get(key) == "failed" and key in _failures_kept(text):
            note("failure_kept", key)
        else:
            unexplained.append(f"harness {key!r}: {status}, runtime: {ours.get(key)}")
    xpassed = set(re.findall(r"^XPASS (\S+)", text, re.MULTILINE))
    for key, status in ours.items():
        if theirs.get(key) == status or key in explained.get("failure_kept", ()):
            continue
        if key in theirs:
            unexplained.append(f"runtime {key!r}: {status}, harness: {theirs[key]}")
        elif any(key.startswith(t) and _truncated(t) for t in theirs):
            note("truncated", key)
        elif status != "passed":
            note("not_passed_extra", key)
        elif key in xpassed:
            note("xpass", key)
        else:
            unexplained.append(f"runtime {key!r}: {status}, harness: missing")
    return Comparison(unexplained, explained)


# ------------------------------------------------------------------------------ the mapping


def test_every_registry_parser_is_mapped_or_refused_with_the_supported_names(
    harness: Harness,
) -> None:
    supported = sorted(harness_parsers.HARNESS_PARSERS)
    for name in harness.registry:
        if name in harness_parsers.HARNESS_PARSERS:
            assert harness_parsers.runtime_parser(name) in parsers.PARSERS
            continue
        with pytest.raises(ValueError) as info:
            harness_parsers.runtime_parser(name)
        assert name in str(info.value)
        assert all(s in str(info.value) for s in supported)


def test_every_python_parser_is_supported(harness: Harness) -> None:
    for short in PYTHON_PARSERS:
        name = f"parse_log_{short}"
        assert name in harness.registry, name
        assert harness_parsers.runtime_parser(name) in parsers.PARSERS, name


def test_no_registry_parser_is_refused(harness: Harness) -> None:
    """Every language's names (C/C++, Go, Java, JavaScript, PHP, Python, Ruby, Rust): each key of
    the registry has a runtime parser; the list of names still refused is empty."""
    refused = [n for n in harness.registry if n not in harness_parsers.HARNESS_PARSERS]
    assert refused == []
    modules = {harness.registry[n].__module__.rsplit(".", 1)[-1] for n in harness.registry}
    assert {"python", "javascript", "go", "rust", "java", "php", "ruby", "c"} <= modules, modules
    for name in NATIVE_CASES:
        assert harness_parsers.runtime_parser(name) in parsers_native.NATIVE_PARSERS


def test_plain_cucumber_progress_names_no_test_for_either(harness: Harness) -> None:
    """Real cucumber output without jekyll's formatter is dots only: nothing to read, in both."""
    text = read(f"{NATIVE}cucumber_progress.txt")
    assert "..U..U.U" in text
    assert harness_map(harness, "parse_log_cucumber", text) == {}
    assert parsers.parse("cucumber", text) == {}


@pytest.mark.parametrize(
    ("name", "log"),
    [("parse_log_ant", "ant_lombok.txt"), ("parse_log_cucumber", "jekyll_cucumber.txt")],
)
def test_failures_the_harness_reads_as_passed_are_kept(
    harness: Harness, name: str, log: str
) -> None:
    """Deliberate: lombok's formatter prints ``[PASS]`` at the end of every test, after the
    ``[FAIL]``/``[ERR]`` of a failing one, and the harness keeps the last line; it reads a
    cucumber scenario ``..P`` (a pending step) as passed. The runtime keeps the failure."""
    text = read(f"{NATIVE}{log}")
    failures = _failures_kept(text)
    assert failures
    raw = harness_map(harness, name, text)
    ours = parsers.parse(harness_parsers.runtime_parser(name), text)
    assert failures & set(raw)
    for test_id in failures:
        if test_id not in raw:  # `.U-`: neither reads a result from it
            assert test_id not in ours
            continue
        assert raw[test_id] == "PASSED"
        assert ours[test_id] == "failed"
        assert rules.all_pass(ours, [test_id], [])[0] == 0.0
    assert all(ours[k] == v.lower() for k, v in raw.items() if k not in failures)
    assert "passed" in ours.values() and "failed" in set(ours.values())


def test_every_mapped_harness_parser_is_checked_here(harness: Harness) -> None:
    from tests.unit.datasets.test_harness_parity_js import CASES as JS_CASES

    mapped_names = {n for n in harness_parsers.HARNESS_PARSERS if n in harness.registry}
    assert mapped_names == set(CASES) | (set(JS_CASES) & set(harness.registry))


def test_registry_aliases_map_alike(harness: Harness) -> None:
    """parse_log_flask *is* parse_log_pytest in the harness: both map to one runtime parser."""
    names = [n for n in harness.registry if n in harness_parsers.HARNESS_PARSERS]
    for a in names:
        for b in names:
            if harness.registry[a] is harness.registry[b]:
                assert harness_parsers.runtime_parser(a) == harness_parsers.runtime_parser(b)


def test_project_names_and_runtime_names_are_accepted() -> None:
    for name in ("pytest", "gotest", "tap", "junit"):
        assert harness_parsers.runtime_parser(name) == name
    assert harness_parsers.runtime_parser("go") == "gotest"
    assert harness_parsers.runtime_parser("node") == "tap"
    for name in parsers.PARSERS:
        assert harness_parsers.runtime_parser(name) == name


def test_default_test_commands() -> None:
    assert set(harness_parsers.DEFAULT_TEST_COMMANDS) <= set(parsers.PARSERS)
    assert (
        harness_parsers.DEFAULT_TEST_COMMANDS["pytest"]
        == "pytest --no-header -rA --tb=no -p no:cacheprovider"
    )
    assert (
        harness_parsers.default_test_command("parse_log_flask")
        == (harness_parsers.DEFAULT_TEST_COMMANDS["pytest"])
    )
    assert "console_output_style=classic" in str(
        harness_parsers.default_test_command("parse_log_astropy")
    )
    assert "runtests.py" in str(harness_parsers.default_test_command("parse_log_django"))
    assert harness_parsers.default_test_command("parse_log_doctest") is None
    assert harness_parsers.default_test_command("tap") is None


# --------------------------------------------------------------------------- status maps


@pytest.mark.parametrize(("name", "log"), PAIRS)
def test_status_maps_agree(harness: Harness, name: str, log: str) -> None:
    text = read(log)
    theirs = mapped(harness_map(harness, name, text, log))
    ours = parsers.parse(harness_parsers.runtime_parser(name), text)
    assert theirs, "the fixture must give the harness something to read"
    result = compare(theirs, ours, text)
    assert result.unexplained == []
    runtime = harness_parsers.runtime_parser(name)
    if runtime not in ("pytest", "pytest_options", "pytest_matplotlib"):
        assert "xpass" not in result.explained
    exact = ("django", "sympy", "doctest", *NATIVE_RUNTIME)
    if runtime in ("ant", "cucumber", "jekyll"):
        assert set(result.explained) <= {"failure_kept"}
    elif runtime in exact or log == "gotest.txt":
        assert ours == theirs  # no id rewriting or extras at all for these


def test_pytest_families_see_the_same_tests_as_the_harness(harness: Harness) -> None:
    """Spot checks of the differences `compare` explains, on the real pytest -rA log."""
    text = read("pytest_rA.txt")
    ours = parsers.parse_pytest_options(text)
    theirs = mapped(harness_map(harness, "parse_log_pytest_options", text))
    # An absolute path parameter keeps its last part, in both.
    assert ours["tests/test_fields.py::test_open[/CT_small.dcm]"] == "passed"
    assert theirs["tests/test_fields.py::test_open[/CT_small.dcm]"] == "passed"
    assert ours["tests/test_fields.py::test_open[//net/share]"] == "passed"
    # `::` inside brackets is part of the id for both.
    assert theirs["tests/test_fields.py::test_cast[a::b::c]"] == "failed"
    assert ours["tests/test_fields.py::test_cast[a::b::c]"] == "failed"
    # The harness cut this id at its first space; the runtime keeps it whole.
    cut = "tests/test_fields.py::TestErrorMessages::test_make_error[required-Missing"
    assert theirs[cut] == "passed"
    assert rules.resolve(ours, cut) == "passed"
    matplotlib = parsers.parse_pytest_matplotlib(text)
    assert matplotlib["tests/test_fields.py::test_zoom[1]"] == "passed"
    assert (
        mapped(harness_map(harness, "parse_log_matplotlib", text))[
            "tests/test_fields.py::test_zoom[3]"
        ]
        == matplotlib["tests/test_fields.py::test_zoom[3]"]
    )


def test_xpass_is_the_one_difference_that_changes_a_verdict(harness: Harness) -> None:
    """Documented: the runtime's pytest parser counts a (non-strict) XPASS as passed, the
    harness records nothing for it (missing: failed)."""
    text = read("pytest_rA.txt")
    xpass = "tests/test_fields.py::test_xpass"
    assert parsers.parse_pytest(text)[xpass] == "passed"
    assert xpass not in harness_map(harness, "parse_log_pytest", text)
    # pytest_seaborn and pytest_v2 leave it out, as their harness parsers do.
    assert xpass not in parsers.parse_pytest_seaborn(text)
    assert xpass not in parsers.parse_pytest_v2(text)


def test_captured_output_forges_a_harness_result_but_not_a_runtime_one(harness: Harness) -> None:
    """Deliberate: the harness reads status lines anywhere; the runtime only the last summary."""
    text = (
        "tests/t.py F                                                             [100%]\n"
        "=================================== FAILURES ===================================\n"
        "----------------------------- Captured stdout call -----------------------------\n"
        "PASSED tests/t.py::test_ghost\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/t.py::test_real - assert 0\n"
        "============================== 1 failed in 0.01s ===============================\n"
    )
    assert harness_map(harness, "parse_log_pytest", text)["tests/t.py::test_ghost"] == "PASSED"
    assert parsers.parse_pytest(text) == {"tests/t.py::test_real": "failed"}


# -------------------------------------------------------------------------------- verdicts


def _listed_ids(theirs_raw: dict[str, str], ours: dict[str, str], text: str) -> list[str]:
    """Ids a dataset could list: the harness's keys (test results only) plus every whole id
    cut at its first space, as the datasets hold them. The failures the runtime keeps and the
    harness reads as passed are left to test_failures_the_harness_reads_as_passed_are_kept."""
    kept = _failures_kept(text)
    ids = [
        k for k, v in theirs_raw.items() if v in STATUS and not _message_keyed(k) and k not in kept
    ]
    ids += [k.split()[0] for k in ours if " " in k and "::" in k]
    return list(dict.fromkeys(ids))


def _resolved(harness: Harness, raw: dict[str, str], f2p: list[str], p2p: list[str]) -> bool:
    grading = harness.grading
    report = grading.get_eval_tests_report(raw, {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
    return bool(grading.get_resolution_status(report) == "RESOLVED_FULL")


@pytest.mark.parametrize(("name", "log"), PAIRS)
def test_each_listed_id_grades_alike(harness: Harness, name: str, log: str) -> None:
    text = read(log)
    raw = harness_map(harness, name, text, log)
    ours = parsers.parse(harness_parsers.runtime_parser(name), text)
    xpassed = set(re.findall(r"^XPASS (\S+)", text, re.MULTILINE))
    for test_id in _listed_ids(raw, ours, text):
        ours_pass = rules.all_pass(ours, [test_id], [])[0] == 1.0
        assert ours_pass == harness.grading.test_passed(test_id, raw), test_id
        assert ours_pass == _resolved(harness, raw, [test_id], []), test_id
        assert rules.all_pass(ours, [], [test_id])[0] == float(ours_pass)
        maintained = _resolved(harness, raw, [], [test_id])
        if maintained != ours_pass:
            # The one deliberate difference (docs/grading.md): the harness lets a skipped
            # PASS_TO_PASS test through, the runtime counts it as failed.
            key = harness.grading._resolve_case(test_id, raw)
            assert raw[key] == "SKIPPED" and not ours_pass, test_id
    for test_id in xpassed:
        assert test_id not in raw


@pytest.mark.parametrize(("name", "log"), PAIRS)
def test_resolution_agrees(harness: Harness, name: str, log: str) -> None:
    text = read(log)
    raw = harness_map(harness, name, text, log)
    ours = parsers.parse(harness_parsers.runtime_parser(name), text)
    listed = _listed_ids(raw, ours, text)
    passing = [t for t in listed if harness.grading.test_passed(t, raw)]
    failing = [t for t in listed if harness.grading.test_failed(t, raw)]
    assert passing, "the fixture must have passing tests"
    half = len(passing) // 2
    f2p, p2p = passing[half:], passing[:half]
    assert _resolved(harness, raw, f2p, p2p)
    assert rules.all_pass(ours, f2p, p2p)[0] == 1.0
    for bad in failing:
        assert not _resolved(harness, raw, [*f2p, bad], p2p), bad
        assert rules.all_pass(ours, [*f2p, bad], p2p)[0] == 0.0, bad
        if raw.get(harness.grading._resolve_case(bad, raw) or "") != "SKIPPED":
            assert not _resolved(harness, raw, f2p, [*p2p, bad]), bad
        assert rules.all_pass(ours, f2p, [*p2p, bad])[0] == 0.0, bad
    # A test no parser saw is missing for both.
    assert not _resolved(harness, raw, [*f2p, "tests/test_absent.py::test_gone"], p2p)
    assert rules.all_pass(ours, [*f2p, "tests/test_absent.py::test_gone"], p2p)[0] == 0.0


COLLIDING = """\
============================= test session starts ==============================
collected 3 items

tests/t.py ..F                                                           [100%]

=========================== short test summary info ============================
PASSED tests/t.py::test_x[a b]
PASSED tests/t.py::test_y[a b]
PASSED tests/t.py::test_y[a c]
FAILED tests/t.py::test_x[a c] - assert 0
========================= 1 failed, 3 passed in 0.01s ==========================
"""


@pytest.mark.parametrize("name", ["parse_log_pytest", "parse_log_pytest_v2"])
def test_cut_ids_shared_by_several_tests(harness: Harness, name: str) -> None:
    """`test_x[a` names a passing and a failing test: failed for both; `test_y[a` names two
    passing tests: passed for both (pytest prints failures after passes, so the harness's
    last-seen status is a failure whenever one of them failed)."""
    raw = harness_map(harness, name, COLLIDING)
    ours = parsers.parse(harness_parsers.runtime_parser(name), COLLIDING)
    for cut, passes in (("tests/t.py::test_x[a", False), ("tests/t.py::test_y[a", True)):
        assert _resolved(harness, raw, [cut], []) is passes
        assert rules.all_pass(ours, [cut], [])[0] == float(passes)
