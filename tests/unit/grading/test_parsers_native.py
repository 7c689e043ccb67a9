"""The C/C++, Java, PHP, Ruby and Rust parsers of the grading runtime (parsers_native.py).

Their agreement with the SWE-bench harness on real logs is tested in
tests/unit/datasets/test_harness_parity.py; here: the readings that are easy to get wrong, and
that no input makes them raise.
"""

from __future__ import annotations

import random

import pytest

from packager.grading import parsers, parsers_native

NATIVE = sorted(parsers_native.NATIVE_PARSERS)


def test_every_native_parser_is_registered() -> None:
    for name in NATIVE:
        assert parsers.PARSERS[name] is parsers_native.NATIVE_PARSERS[name]
    assert set(NATIVE).isdisjoint(
        {"pytest", "django", "sympy", "doctest", "gotest", "tap", "junit"}
    )


def test_redis_cuts_the_duration_and_the_file_of_a_failure() -> None:
    text = (
        "[ok]: INCR against non existing key (1 ms)\n"
        "[ok]: name (with parens) (12 ms)\n"
        "[err]: INCR over 32bit value in tests/unit/type/incr.tcl\r\n"
        "[skip]: DECRBY negation overflow\n"
        "[ignore]: Not supported in cluster mode\n"
        "*** [err]: copied summary line in tests/unit/x.tcl\n"
        "[ready]: 1985\n"
    )
    assert parsers.parse("redis", text) == {
        "INCR against non existing key": "passed",
        "name (with parens)": "passed",
        "INCR over 32bit value": "failed",
        "DECRBY negation overflow": "skipped",
        "Not supported in cluster mode": "skipped",
    }


def test_googletest_keeps_a_parameter_and_reads_behind_ctest_prefixes() -> None:
    text = (
        "1: [       OK ] CalcTest.Adds (0 ms)\n"
        "1: [  FAILED  ] Pairs/PairTest.Ordered/1, where GetParam() = (3, 1) (0 ms)\n"
        "1: [  SKIPPED ] CalcTest.Skipped (0 ms)\n"
        "1: [  FAILED  ] 3 tests, listed below:\n"
        "1: [  FAILED  ] CalcTest.FailsOnPurpose\n"
    )
    assert parsers.parse("googletest", text) == {
        "CalcTest.Adds": "passed",
        "Pairs/PairTest.Ordered/1, where GetParam() = (3, 1)": "failed",
    }


def test_maven_pairs_traced_commands_with_build_results_in_order() -> None:
    text = (
        "[INFO] BUILD FAILURE\n"  # a result before any command waits for the next one
        "+ mvnd test -B -pl gson -Dtest=com.google.gson.A#one\n"
        "+ mvnd test -B -pl gson -Dtest=com.google.gson.A#two\n"
        "[INFO] BUILD SUCCESS\n"
        "+ mvnd test -B -Dtest=com.google.gson.A#three\n"
    )
    assert parsers.parse("maven", text) == {
        "com.google.gson.A#one": "passed",
        "com.google.gson.A#two": "failed",
    }


def test_gradle_completes_a_result_split_by_output() -> None:
    text = (
        "pkg.T > a PASSED\n"
        "pkg.T > b\n"
        "    WARNING: something\n"
        "FAILED\n"
        "pkg.T > c SKIPPED\n"
        "> Task :test FAILED\n"
        "PASSED\n"
    )
    assert parsers.parse("gradle", text) == {"pkg.T > a": "passed", "pkg.T > b": "failed"}


def test_phpunit_testdox_names_tests_by_suite() -> None:
    text = (
        " \u2714 Before any suite\n"
        "Calculator (Tests\\Calculator)\n"
        " \u2714 Adds numbers\n"
        " \u2718 Divides\n"
        "   \u2502 Failed asserting that 2 is identical to 3.\n"
        " \u21a9 Is skipped\n"
        " \u2205 Is incomplete\n"
    )
    assert parsers.parse("phpunit_testdox", text) == {
        "None > Before any suite": "passed",
        "Calculator > Adds numbers": "passed",
        "Calculator > Divides": "failed",
        "Calculator > Is skipped": "skipped",
    }


def test_ruby_parsers() -> None:
    minitest = (
        "TestUtils#test_: slugify should keep case.  = 0.00 s = .\n"
        "TestUtils#test_: slugify should break.  = 0.01 s = F\n"
        "TestUtils#test_plain = 0.00 s = .\n"
    )
    assert parsers.parse("minitest", minitest) == {
        "TestUtils#test_: slugify should keep case": "passed",
        "TestUtils#test_: slugify should break": "failed",
    }
    test_unit = "  test_adds:\t\t\t.: (0.000195)\n  test: retry forever:\t\tO\n  test_x:\t\tP\n"
    assert parsers.parse("test_unit", test_unit) == {
        "test_adds": "passed",
        "retry forever": "skipped",
    }
    rspec = "a - b - passed\nc - ./x_spec.rb[1:2] - failed\nd - pending\n"
    assert parsers.parse("rspec_lines", rspec) == {
        "a - b": "passed",
        "c - ./x_spec.rb[1:2]": "failed",
    }
    cucumber = (
        "features/a.feature:6  Scenario: x ...... (0.5s)\n"
        "features/a.feature:9  Scenario: y ..F- (0.1s)\n"
        "features/a.feature:12  Scenario: z ..P (0.1s)\n"  # the harness: passed
        "features/a.feature:15  Scenario: w ..U- (0.1s)\n"  # the harness: passed
    )
    assert parsers.parse("cucumber", cucumber) == {
        "features/a.feature:6  Scenario: x": "passed",
        "features/a.feature:9  Scenario: y": "failed",
        "features/a.feature:12  Scenario: z": "failed",
        "features/a.feature:15  Scenario: w": "failed",
    }
    assert parsers.parse("jekyll", minitest + cucumber) == {
        **parsers.parse("minitest", minitest),
        **parsers.parse("cucumber", cucumber),
    }


def test_cargo_automake_and_micropython() -> None:
    cargo = (
        "test tests::adds ... ok\n"
        "test tests::ignored_one ... ignored\n"
        "test tests::panics - should panic ... ok\n"
        "test slow_output ... partial line ok\n"
        "test it::fails ... FAILED\n"
    )
    assert parsers.parse("cargo", cargo) == {"tests::adds": "passed", "it::fails": "failed"}
    automake = "PASS: tests/jqtest\nFAIL: tests/shtest\nSKIP: a\nXFAIL: b\nERROR: c\n"
    assert parsers.parse("automake", automake) == {
        "tests/jqtest": "passed",
        "tests/shtest": "failed",
    }
    micropython = "pass  basics/fun1.py\nFAIL  basics/fun2.py\nskip  basics/fun3.py\n"
    assert parsers.parse("micropython", micropython) == {
        "basics/fun1.py": "passed",
        "basics/fun2.py": "failed",
        "basics/fun3.py": "skipped",
    }
    ant = "    [junit] [PASS] a(C)\n    [junit] [FAIL] b(C)\n    [junit] [ERR] c(C)\n"
    assert parsers.parse("ant", ant) == {"a(C)": "passed", "b(C)": "failed", "c(C)": "failed"}
    # lombok's formatter ends every test with [PASS], a failing one too: the failure stays.
    ant += "    [junit] [PASS] b(C)\n    [junit] [PASS] c(C)\n"
    assert parsers.parse("ant", ant) == {"a(C)": "passed", "b(C)": "failed", "c(C)": "failed"}


def test_a_later_line_replaces_an_earlier_one_as_in_the_harness() -> None:
    assert parsers.parse("cargo", "test a ... FAILED\ntest a ... ok\n") == {"a": "passed"}
    assert parsers.parse("redis", "[ok]: a (1 ms)\n[err]: a in x.tcl\n") == {"a": "failed"}


@pytest.mark.parametrize("name", NATIVE)
def test_no_input_makes_a_parser_raise(name: str) -> None:
    rng = random.Random(name)
    alphabet = "[]():.-> =#\t\r\n okOKFAILEDPASS\u2714\u2718\u21a9 BUILDSUCCESS-Dtest=test..."
    samples = ["", "\n", "\x00\xff", "[junit]", "BUILD SUCCESS", "-Dtest=", " \u2714", "PASSED"]
    for _ in range(300):
        samples.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(200))))
    for text in samples:
        results = parsers.parse(name, text)
        assert set(results.values()) <= set(parsers.STATUSES)


def test_native_runners_take_no_test_file_arguments() -> None:
    from packager import assumptions

    assert assumptions.NATIVE_RUNNER_PARSERS == tuple(parsers_native.NATIVE_PARSERS)
    for name in NATIVE:
        assert assumptions.directive_style(f"parse_log_{name}", name) is None
    assert assumptions.directive_style("parse_log_pytest", "pytest") == "path"


def test_maven_commands_run_each_test_traced() -> None:
    from packager.datasets import harness_parsers

    cmds = ["mvnd test -B -Dtest=A#one", "mvnd test -B -Dtest=A#two"]
    joined = harness_parsers.join_test_commands("maven", cmds)
    assert joined == "set -x; mvnd test -B -Dtest=A#one; mvnd test -B -Dtest=A#two"
    assert harness_parsers.join_test_commands("cargo", ["cd x", "cargo test"]) == (
        "cd x && cargo test"
    )
