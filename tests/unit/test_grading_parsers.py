"""Parsers of the grading runtime against saved, real-looking test outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from packager.grading import parsers

DATA = Path(__file__).parent / "data" / "grading"


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
