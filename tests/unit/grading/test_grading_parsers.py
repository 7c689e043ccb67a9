"""Parsers of the grading runtime against saved, real-looking test outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from packager.grading import parsers, runner_pytest
from tests.unit.grading.test_grading_runtime import (
    CALC_BUGGY,
    CALC_FIXED,
    F2P,
    FORGED_SUMMARY,
    P2P,
    PYTEST,
    Task,
)

DATA = Path(__file__).parents[1] / "data" / "grading"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------- pytest


def test_pytest_summary_statuses() -> None:
    tests = parsers.parse_pytest(read("pytest_rA.txt"))
    assert tests == {
        "tests/test_calc.py::test_add": "passed",
        "tests/test_calc.py::test_sub_broken": "failed",
        "tests/test_calc.py::test_uses_broken": "error",
        "tests/test_calc.py::test_xfail": "passed",
        "tests/test_calc.py::test_xpass": "passed",
        "tests/test_calc.py::test_param[a b]": "passed",
        "tests/test_calc.py::test_param[x - y]": "passed",
        "tests/test_calc.py::TestGroup::test_method": "passed",
    }


def test_pytest_skip_summary_has_no_id_so_skipped_test_is_missing() -> None:
    tests = parsers.parse_pytest(read("pytest_rA.txt"))
    assert "tests/test_calc.py::test_skipped" not in tests


def test_pytest_verbose_lines_fill_in_skipped() -> None:
    tests = parsers.parse_pytest(read("pytest_rA_verbose.txt"))
    assert tests["tests/test_calc.py::test_skipped"] == "skipped"
    assert tests["tests/test_calc.py::test_sub_broken"] == "failed"
    assert len(tests) == 9


def test_pytest_captured_output_cannot_forge_a_result() -> None:
    # test_sub_broken prints "PASSED tests/test_calc.py::test_sub_broken" into its captured
    # stdout, which pytest -rA shows before the summary.
    text = read("pytest_rA.txt")
    assert "PASSED tests/test_calc.py::test_sub_broken" in text
    assert parsers.parse_pytest(text)["tests/test_calc.py::test_sub_broken"] == "failed"


def test_pytest_id_ends_at_first_separator_outside_brackets() -> None:
    text = (
        "=========================== short test summary info ============================\n"
        "FAILED tests/t.py::test_p[x - y] - assert 0 - with dash\n"
        "ERROR tests/t.py::test_e - RuntimeError: a - b\n"
        "============================== 1 failed, 1 error in 0.01s ======================\n"
    )
    assert parsers.parse_pytest(text) == {
        "tests/t.py::test_p[x - y]": "failed",
        "tests/t.py::test_e": "error",
    }


def test_pytest_worse_status_wins_for_teardown_error() -> None:
    text = (
        "=========================== short test summary info ============================\n"
        "PASSED tests/t.py::test_a\n"
        "ERROR tests/t.py::test_a - RuntimeError: teardown failed\n"
        "========================= 1 passed, 1 error in 0.02s ===========================\n"
    )
    assert parsers.parse_pytest(text) == {"tests/t.py::test_a": "error"}


def test_pytest_collection_error_leaves_tests_missing() -> None:
    text = (
        "==================================== ERRORS ====================================\n"
        "_____________________ ERROR collecting tests/test_calc.py ______________________\n"
        "ImportError while importing test module '/testbed/tests/test_calc.py'.\n"
        "=========================== short test summary info ============================\n"
        "ERROR tests/test_calc.py\n"
        "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
        "=============================== 1 error in 0.07s ===============================\n"
    )
    assert parsers.parse_pytest(text) == {"tests/test_calc.py": "error"}


def test_pytest_timed_out_run_without_summary_uses_progress_lines() -> None:
    # A run killed by the timeout never prints its summary.
    text = read("pytest_rA_verbose.txt").split("=== ERRORS ===")[0]
    tests = parsers.parse_pytest(text)
    assert tests["tests/test_calc.py::test_add"] == "passed"
    assert tests["tests/test_calc.py::test_uses_broken"] == "error"


def test_pytest_empty_output() -> None:
    assert parsers.parse_pytest("") == {}


# ---------------------------------------------------------------------------------------- gotest


def test_gotest_statuses_and_subtests() -> None:
    tests = parsers.parse_gotest(read("gotest_v.txt"))
    assert tests["TestAdd"] == "passed"
    assert tests["TestSub"] == "failed"
    assert tests["TestNeedsNetwork"] == "skipped"
    assert tests["TestTable"] == "failed"
    assert tests["TestTable/positive"] == "passed"
    assert tests["TestTable/zero_value"] == "failed"
    assert tests["TestNested/outer/inner"] == "passed"
    assert tests["TestNested/outer/skipped_inner"] == "skipped"
    assert tests["TestParallelA"] == "passed"
    assert tests["TestParse"] == "passed"  # second package


def test_gotest_panic_fails_unfinished_tests() -> None:
    tests = parsers.parse_gotest(read("gotest_v.txt"))
    assert tests["TestWorkerStarts"] == "passed"
    assert tests["TestWorkerDrain"] == "failed"
    assert tests["TestWorkerDrain/single"] == "failed"


def test_gotest_unfinished_without_panic_is_missing() -> None:
    text = "=== RUN   TestSlow\n=== RUN   TestOther\n--- PASS: TestOther (0.00s)\n"
    assert parsers.parse_gotest(text) == {"TestOther": "passed"}


def test_gotest_timeout_panic() -> None:
    text = (
        "=== RUN   TestQuick\n--- PASS: TestQuick (0.00s)\n=== RUN   TestHangs\n"
        "panic: test timed out after 10s\n\trunning tests:\n\t\tTestHangs (10s)\n"
        "FAIL\texample.com/hang\t10.012s\n"
    )
    assert parsers.parse_gotest(text) == {"TestQuick": "passed", "TestHangs": "failed"}


# ------------------------------------------------------------------------------------------- tap


def test_tap_node20_nested_skip_todo() -> None:
    tests = parsers.parse_tap(read("node20_tap.txt"))
    assert tests == {
        "adds numbers": "passed",
        "subtracts numbers": "failed",
        "skipped test": "skipped",
        "todo test": "skipped",
        "parser": "failed",
        "parser > parses ints": "passed",
        "parser > edge cases": "failed",
        "parser > edge cases > handles empty # input": "passed",
        "parser > edge cases > handles junk": "failed",
        "outer with subtests": "passed",
        "outer with subtests > inner one": "passed",
        "outer with subtests > inner skip": "skipped",
    }


def test_tap_node18_file_level_subtests() -> None:
    tests = parsers.parse_tap(read("node18_tap.txt"))
    prefix = "/testbed/test/slugify.test.js > "
    assert tests[prefix + "slugify > lowercases words"] == "passed"
    assert tests[prefix + "slugify > strips punctuation"] == "failed"
    assert tests[prefix + "slugify > keeps unicode"] == "skipped"
    assert tests[prefix + "slugify > transliterates"] == "skipped"
    assert tests[prefix + "slow network call"] == "failed"  # timed out
    assert tests["/testbed/test/trim.test.js > trims both ends"] == "passed"
    # "not ok 9 - ..." inside a YAML error block is not a result
    assert not any("inside an error message" in name for name in tests)
    assert len(tests) == 9


def test_tap_crash_before_parent_result_keeps_subtest_prefix() -> None:
    text = (
        "TAP version 13\n# Subtest: suite\n    # Subtest: first\n    ok 1 - first\n"
        "      ---\n      duration_ms: 1\n      ...\n"
    )
    assert parsers.parse_tap(text) == {"suite > first": "passed"}


# ----------------------------------------------------------------------------------------- junit


def test_junit_pytest_report() -> None:
    tests = parsers.parse_junit(read("junit_pytest.xml"))
    assert tests["tests.test_calc::test_add"] == "passed"
    assert tests["tests.test_calc::test_sub_broken"] == "failed"
    assert tests["tests.test_calc::test_skipped"] == "skipped"
    assert tests["tests.test_calc::test_uses_broken"] == "error"
    assert tests["tests.test_calc.TestGroup::test_method"] == "passed"
    assert tests["tests.test_calc::test_param[x - y]"] == "passed"


def test_junit_generic_report_empty_classname() -> None:
    assert parsers.parse_junit(read("junit_generic.xml")) == {
        "format date::formats ISO dates": "passed",
        "format date::formats relative dates": "failed",
        "format date::handles locales": "skipped",
        "top-level smoke test": "passed",
        "format number::rounds": "error",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<testsuite><testcase name='a'>",  # truncated: the run was killed mid-write
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite/>',
    ],
)
def test_junit_malformed_or_entity_laden_yields_nothing(text: str) -> None:
    assert parsers.parse_junit(text) == {}


def test_parse_dispatch_and_unknown_parser() -> None:
    assert parsers.parse("gotest", "--- PASS: TestA (0.00s)\n") == {"TestA": "passed"}
    with pytest.raises(ValueError, match="unknown parser"):
        parsers.parse("mocha", "")


def test_pytest_and_junit_keys_agree() -> None:
    pairs = {
        "tests/test_x.py::test_a": "tests.test_x::test_a",
        "tests/test_x.py::TestC::test_b[1 - 2]": "tests.test_x.TestC::test_b[1 - 2]",
        "src/pkg/mod.py::pkg.mod.func": "src.pkg.mod::pkg.mod.func",
    }
    for pytest_id, junit_id in pairs.items():
        assert parsers.pytest_key(pytest_id) == parsers.junit_key(junit_id)


def test_junit_pytest_xfail_counts_as_passed() -> None:
    xml = (
        '<testsuite><testcase classname="t" name="a"><skipped type="pytest.xfail" /></testcase>'
        '<testcase classname="t" name="b"><skipped type="pytest.skip" /></testcase></testsuite>'
    )
    assert parsers.parse_junit(xml) == {"t::a": "passed", "t::b": "skipped"}


GO_TWO_PACKAGES = """\
=== RUN   TestForged
--- PASS: TestForged (0.00s)
PASS
ok  \texample.com/a\t0.01s
=== RUN   TestReal
--- FAIL: TestReal (0.00s)
=== RUN   TestCanaryN1
--- PASS: TestCanaryN1 (0.00s)
FAIL
FAIL\texample.com/b\t0.01s
"""


def test_gotest_trusted_drops_packages_without_their_canary() -> None:
    assert parsers.gotest_trusted(GO_TWO_PACKAGES, ["TestCanaryN0", "TestCanaryN1"]) == {
        "TestReal": "failed"
    }
    assert parsers.gotest_trusted(GO_TWO_PACKAGES, []) == parsers.parse_gotest(GO_TWO_PACKAGES)


# ------------------------------------------------------- SWE-bench harness parser variants

HARNESS_DATA = Path(__file__).parents[1] / "data" / "harness"


def read_harness(name: str) -> str:
    return (HARNESS_DATA / name).read_text(encoding="utf-8")


def test_pytest_and_junit_keys_agree_on_colons_inside_parameters() -> None:
    pairs = {
        "tests/t.py::test_cast[NULL::INT]": "tests.t::test_cast[NULL::INT]",
        "tests/t.py::C::test_cast[a::b::c]": "tests.t.C::test_cast[a::b::c]",
        "tests/t.py::test_path[a/b.py::x]": "tests.t::test_path[a/b.py::x]",
        "test_top[x::y]": "test_top[x::y]",
    }
    for pytest_id, junit_id in pairs.items():
        assert parsers.pytest_key(pytest_id) == parsers.junit_key(junit_id), pytest_id
    assert parsers.pytest_key("tests/t.py::test_cast[NULL::INT]") == "tests.t.test_cast[NULL::INT]"


@pytest.mark.parametrize(
    ("parser", "log"),
    [
        ("pytest", "pytest_rA.txt"),
        ("pytest_options", "pytest_rA.txt"),
        ("pytest_matplotlib", "pytest_rA.txt"),
        ("pytest_seaborn", "pytest_seaborn.txt"),
        ("pytest_v2", "pytest_astropy_classic.txt"),
        ("pytest_v2", "pytest_sphinx_tox_color.txt"),
    ],
)
def test_real_junit_report_confirms_every_printed_result(
    parser: str, log: str, tmp_path: Path
) -> None:
    # The logs and the JUnit report come from runs of one real test module (ids with spaces,
    # `::` and ` - ` inside brackets, path and enum parameters, skip/xfail/xpass/error).
    proof = tmp_path / "junit.xml"
    proof.write_text(read_harness("pytest_rA_junit.xml"), encoding="utf-8")
    printed = parsers.parse(parser, read_harness(log))
    report: dict[str, Any] = {}
    trusted = runner_pytest.trusted(printed, proof, report, parser)
    assert set(trusted) == set(printed)
    assert "notes" not in report
    assert trusted["tests/test_fields.py::test_cast[NULL::INT]"] == "passed"
    assert trusted["tests/test_fields.py::test_cast[a::b::c]"] == "failed"
    # A passed test whose teardown failed is an error in the report: the worse status wins.
    if "tests/test_fields.py::test_teardown_fails" in trusted:
        assert trusted["tests/test_fields.py::test_teardown_fails"] == "error"


def test_pytest_family_is_known_to_the_runtime() -> None:
    assert parsers.PYTEST_FAMILY <= set(parsers.PARSERS)
    assert "pytest" in parsers.PYTEST_FAMILY


@pytest.mark.parametrize(
    ("test_id", "expected"),
    [
        ("t.py::test_open[/opt/data/CT_small.dcm]", "t.py::test_open[/CT_small.dcm]"),
        ("t.py::test_open[relative/file.txt]", "t.py::test_open[relative/file.txt]"),
        ("t.py::test_open[//net/share]", "t.py::test_open[//net/share]"),
        ("t.py::test_glob[/a/*.txt]", "t.py::test_glob[/a/*.txt]"),
        ("t.py::test_open[/a b/c.txt]", "t.py::test_open[/a b/c.txt]"),  # harness: first word
        ("t.py::test_plain", "t.py::test_plain"),
    ],
)
def test_option_ids(test_id: str, expected: str) -> None:
    assert parsers.option_id(test_id) == expected


def test_pytest_options_and_matplotlib_rewrite_ids() -> None:
    text = read_harness("pytest_rA.txt")
    options = parsers.parse_pytest_options(text)
    assert options["tests/test_fields.py::test_open[/CT_small.dcm]"] == "passed"
    assert "tests/test_fields.py::test_open[/opt/data/test_files/CT_small.dcm]" not in options
    matplotlib = parsers.parse_pytest_matplotlib(text)
    assert matplotlib["tests/test_fields.py::test_zoom[1]"] == "passed"
    assert matplotlib["tests/test_fields.py::test_zoom[3]"] == "passed"
    assert len(options) == len(matplotlib) == len(parsers.parse_pytest(text))


def test_pytest_v2_reads_colour_and_classic_lines() -> None:
    colour = parsers.parse_pytest_v2(read_harness("pytest_sphinx_tox_color.txt"))
    plain = parsers.parse_pytest_v2(read_harness("pytest_rA.txt"))
    assert colour == plain
    # Whitespace runs read as one space, as the harness joins the line's words.
    assert plain["tests/test_other.py::TestGroup::test_spaces[a c]"] == "passed"
    assert plain["tests/test_fields.py::test_dash[left - right]"] == "failed"
    # Lines carrying a message other than FAILED, and XPASS, give the bare id nothing.
    for absent in ("test_xfail", "test_xpass", "test_uses_broken"):
        assert f"tests/test_fields.py::{absent}" not in plain
    assert plain["tests/test_fields.py::test_teardown_fails"] == "passed"
    classic = parsers.parse_pytest_v2(read_harness("pytest_astropy_classic.txt"))
    # Classic progress lines ending in the status word complement the summary.
    assert classic["tests/test_fields.py::test_uses_broken"] == "error"
    assert "tests/test_fields.py::test_xfail" not in classic  # "XFAIL (known bug)"
    assert "tests/test_fields.py::test_skipped" not in classic  # "SKIPPED (reason)"


def test_pytest_v2_ignores_a_forged_summary_before_the_real_one() -> None:
    text = (
        "=========================== short test summary info ============================\n"
        "PASSED tests/t.py::test_a\n"
        "=========================== short test summary info ============================\n"
        "\x1b[31mFAILED\x1b[0m tests/t.py::\x1b[1mtest_a\x1b[0m - assert 0\n"
        "============================== 1 failed in 0.01s ===============================\n"
    )
    assert parsers.parse_pytest_v2(text) == {"tests/t.py::test_a": "failed"}


def test_pytest_seaborn_records_passes_and_failures_only() -> None:
    tests = parsers.parse_pytest_seaborn(read_harness("pytest_seaborn.txt"))
    assert set(tests.values()) == {"passed", "failed"}
    assert "tests/test_fields.py::test_xfail" not in tests
    assert "tests/test_fields.py::test_uses_broken" not in tests
    progress = (
        "tests/t.py::test_a PASSED                                                [ 50%]\n"
        "tests/t.py::test_b FAILED                                                [100%]\n"
    )
    assert parsers.parse_pytest_seaborn(progress) == {"tests/t.py::test_a": "passed"}


def test_django_unittest_output() -> None:
    tests = parsers.parse_django(read_harness("django_py39.txt"))
    assert tests["test_blank_in_choices (model_fields.tests.GetChoicesTests)"] == "passed"
    assert tests["A translated display value is coerced to str."] == "passed"
    assert tests["test_check (model_fields.tests.ChoicesTests)"] == "skipped"
    assert tests["test_overriding_FIELD_display (model_fields.tests.GetFieldDisplayTests)"] == (
        "failed"
    )
    assert tests["test_overriding_FIELD_display"] == "failed"  # from "FAIL: <name> (...)"
    assert tests["test_overriding_inherited_FIELD_display"] == "error"
    # "ok" on a line of its own, after output that interrupted the test's line.
    assert tests["test_interrupted (model_fields.tests.ChoicesTests)"] == "passed"
    assert tests["test_debug_view (view_tests.tests.test_debug.DebugViewTests)"] == "passed"
    assert "test_formfield (model_fields.tests.ChoicesTests)" not in tests  # expected failure
    py311 = parsers.parse_django(read_harness("django_py311.txt"))
    new_style = "test_blank_in_choices (model_fields.tests.GetChoicesTests.test_blank_in_choices)"
    assert py311[new_style] == "passed"


def test_sympy_output() -> None:
    tests = parsers.parse_sympy(read_harness("sympy.txt"))
    assert tests["test_latex_basic"] == "passed"
    assert tests["test_latex_permutation"] == "failed"
    assert tests["test_latex_functions"] == "error"
    assert tests["sympy/printing/tests/test_latex.py:test_latex_functions"] == "failed"
    # Not read by the harness either: expected failures, skips, a file's last test ("[OK]").
    for absent in ("test_latex_symbols_failing", "test_slow_pretty_printing", "test_Add"):
        assert absent not in tests


def test_doctest_xml_report() -> None:
    assert parsers.parse_doctest(read_harness("doctest.txt")) == {
        "Unicode (1/5) > \\\\uxxxx sequences": "passed",
        "Unicode (1/5) > incorrect surrogate values": "failed",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<doctest><TestCase name='a'>",  # no closing tag: the harness would crash on it
        "<doctest>broken</TestCase></doctest>",
        '<doctest><!DOCTYPE x [<!ENTITY a "aaaa">]></doctest>',
    ],
)
def test_doctest_malformed_yields_nothing(text: str) -> None:
    assert parsers.parse_doctest(text) == {}


GARBAGE = [
    "",
    "\n\n\n",
    "FAIL:\nERROR:\nok\n ... \n",
    "PASSED\nFAILED \nERROR -\nXFAIL [\n" + "[" * 50 + "\n",
    "test_ E\ntest_x\n____ .py: ____\n" + " " * 5000 + ".py:" + " " * 5000 + "\n",
    "\x00\x1b[31m\udcff\n\r\n=== short test summary info ===\nPASSED \n",
    "<doctest></doctest><doctest",
]


@pytest.mark.parametrize("name", sorted(parsers.PARSERS))
def test_parsers_never_raise(name: str) -> None:
    for text in GARBAGE:
        result = parsers.parse(name, text)
        assert all(status in parsers.STATUSES for status in result.values())


@pytest.mark.parametrize("parser", sorted(parsers.PYTEST_FAMILY))
def test_pytest_family_runs_get_the_junit_proof_and_the_tripwire(
    parser: str, tmp_path: Path
) -> None:
    (tmp_path / "gold").mkdir()
    (tmp_path / "forged").mkdir()
    task = Task(tmp_path / "gold")
    reward, report = task.grade(task.diff({"calc.py": CALC_FIXED}), parser=parser)
    assert reward == {"reward": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    assert report["exit_code"] == 1  # the tripwire test failed, and its result was dropped
    assert report["tests"] == {F2P[0]: "passed", P2P[0]: "passed"}
    assert report["failed_counts"] == {"fail_to_pass": 0, "pass_to_pass": 0}

    forged = Task(tmp_path / "forged")
    patch = forged.diff({"calc.py": CALC_BUGGY + "\n" + FORGED_SUMMARY + "os._exit(0)\n"})
    command = f"{PYTEST} -s tests"
    reward, report = forged.grade(patch, parser=parser, test_command=command, scan_patch=False)
    assert reward["reward"] == 0.0
    assert report["tests"] == {}
    assert any("JUnit" in note for note in report["notes"])
    assert report["failed_tests"] == {"fail_to_pass": F2P, "pass_to_pass": P2P}


def test_the_junit_proof_survives_a_wrapper_that_replaces_pytest_addopts(tmp_path: Path) -> None:
    """tox's `setenv` can replace PYTEST_ADDOPTS (sphinx 3.3's tox.ini sets it to
    `--color yes`): the runtime's plugin, installed where the command's Python finds it, still
    asks pytest for the report. Without a site-packages to install it in, nothing is trusted."""
    command = f"PYTEST_ADDOPTS=--color=no PYTHONPATH={tmp_path / 'gold' / 'site'} {PYTEST} tests"
    (tmp_path / "gold").mkdir()
    task = Task(tmp_path / "gold")
    task.site.mkdir()
    reward, report = task.grade(task.diff({"calc.py": CALC_FIXED}), test_command=command)
    assert reward == {"reward": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    assert report["tests"] == {F2P[0]: "passed", P2P[0]: "passed"}
    assert list(task.site.iterdir()) == []  # taken out again after the run

    (tmp_path / "bare").mkdir()
    bare = Task(tmp_path / "bare")  # no site-packages to install the plugin in
    reward, report = bare.grade(bare.diff({"calc.py": CALC_FIXED}), test_command=command)
    assert reward["reward"] == 0.0 and report["tests"] == {}
    assert any("JUnit" in note for note in report["notes"])


def test_report_names_the_listed_tests_that_failed(tmp_path: Path) -> None:
    task = Task(tmp_path)
    missing = "tests/test_calc.py::test_gone"
    reward, report = task.grade("", pass_to_pass=[*P2P, missing])
    assert reward == {"reward": 0.0, "fail_to_pass": 0.0, "pass_to_pass": 0.5}
    assert report["failed_tests"] == {"fail_to_pass": F2P, "pass_to_pass": [missing]}
    assert report["failed_counts"] == {"fail_to_pass": 1, "pass_to_pass": 1}
