"""Test-log parsers for the SWE-bench harness's C/C++, Java, PHP, Ruby and Rust runners.

Each parser reads a test command's printed output as the harness's parser of the same runner
does (swebench 5.0.2, ``swebench.harness.log_parsers``): the same lines give the same ids and
statuses, and a later line about a test replaces an earlier one, as in the harness. These
runners write no report the runtime could check the printed lines against, so their output is
taken as printed, as the harness takes it (see docs/grading.md). Parsers never raise on
malformed input: they return what they could recognise.

Standard library only, Python >= 3.9 (this module is copied into grader images, beside
``parsers``, which registers these parsers in its ``PARSERS``).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"

Results = Dict[str, str]


def _stripped_lines(text: str) -> List[str]:
    """The log's lines (split at newlines only) without surrounding whitespace."""
    return [line.strip() for line in text.split("\n")]


def _read(text: str, pattern: "re.Pattern[str]", statuses: Dict[str, str]) -> Results:
    """Every stripped line ``pattern`` matches at its start: its group ``word`` the status word
    (looked up in ``statuses``; a word not there is no result), its group ``id`` the test id.
    """
    results: Results = {}
    for line in _stripped_lines(text):
        m = pattern.match(line)
        if m and m.group("word") in statuses:
            results[m.group("id")] = statuses[m.group("word")]
    return results


# ------------------------------------------------------------------------------------ C / C++

_REDIS_LINE = re.compile(r"\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\(\d+\s*m?s\))?$")
_REDIS_WHERE = re.compile(r"\s+in\s+\S+$")
_REDIS_STATUS = {"ok": PASSED, "err": FAILED, "skip": SKIPPED, "ignore": SKIPPED}


def parse_redis(text: str) -> Results:
    """The Tcl ``runtest`` of redis and valkey (``TERM=dumb``): ``[ok]: <name> (12 ms)``.

    ``[err]: <name> in tests/unit/x.tcl`` failed (the `` in <file>`` is cut off), ``[skip]`` and
    ``[ignore]`` skipped; a trailing `` (<n> ms)`` is not part of the name.
    """
    results: Results = {}
    for line in _stripped_lines(text):
        m = _REDIS_LINE.match(line)
        if not m:
            continue
        word, name = m.group(1), m.group(2)
        if word == "err":
            name = _REDIS_WHERE.sub("", name)
        results[name] = _REDIS_STATUS[word]
    return results


_AUTOMAKE_LINE = re.compile(r"(?P<word>PASS|FAIL):\s(?P<id>.+)$")


def parse_automake(text: str) -> Results:
    """``make check`` of an automake test suite (jq): ``PASS: tests/jqtest``, ``FAIL: <name>``.

    ``SKIP``, ``XFAIL``, ``XPASS`` and ``ERROR`` lines give nothing (the test is missing).
    """
    return _read(text, _AUTOMAKE_LINE, {"PASS": PASSED, "FAIL": FAILED})


_MICROPYTHON_LINE = re.compile(r"(?P<word>pass|FAIL|skip)\s+(?P<id>.+)$")


def parse_micropython(text: str) -> Results:
    """MicroPython's ``tests/run-tests.py``: ``pass basics/fun1.py``, ``FAIL <file>``,
    ``skip <file>``.
    """
    return _read(text, _MICROPYTHON_LINE, {"pass": PASSED, "FAIL": FAILED, "skip": SKIPPED})


# The status bracket read is the last one on the line that is followed by a name and a
# parenthesised tail; the name runs to the last `` (`` before the closing ``)``.
_GTEST_LINE = re.compile(r".*\[\s*(?P<word>OK|FAILED)\s*\]\s(?P<id>.*)\s\(.*\)$")


def parse_googletest(text: str) -> Results:
    """GoogleTest output, also behind ``ctest -V``'s ``<n>: `` prefixes (fmt).

    ``[       OK ] Suite.Test (0 ms)`` passed, ``[  FAILED  ] Suite.Test (1 ms)`` failed. A
    parametrised failure keeps its ``, where GetParam() = ...`` in the name; skipped tests
    (``[  SKIPPED ]``) give nothing.
    """
    return _read(text, _GTEST_LINE, {"OK": PASSED, "FAILED": FAILED})


# ---------------------------------------------------------------------------------------- Java

_MAVEN_TEST = re.compile(r".*-Dtest=(\S+)")
_MAVEN_RESULT = re.compile(r".*BUILD (SUCCESS|FAILURE)$")
_MAVEN_STATUS = {"SUCCESS": PASSED, "FAILURE": FAILED}


def parse_maven(text: str) -> Results:
    """One Maven run per test (``mvn test -Dtest=Class#method`` under ``set -x``).

    The id is the ``-Dtest=`` value of a traced command line (the last one on the line); the
    next ``BUILD SUCCESS``/``BUILD FAILURE`` line gives its status. Commands and results pair
    in order: a result seen before any pending command waits for the next one, as the harness
    pairs interleaved output. A command with no result gives nothing.
    """
    results: Results = {}
    pending: List[str] = []
    early: List[str] = []
    for line in _stripped_lines(text):
        m = _MAVEN_TEST.match(line)
        if m:
            pending.append(m.group(1))
        m = _MAVEN_RESULT.match(line)
        if m:
            if pending:
                results[pending.pop(0)] = _MAVEN_STATUS[m.group(1)]
            else:
                early.append(m.group(1))
    for test_id, word in zip(pending, early):  # noqa: B905 (Python 3.9: no strict=)
        results[test_id] = _MAVEN_STATUS[word]
    return results


_ANT_LINE = re.compile(r"\[junit\]\s+\[(?P<word>PASS|FAIL|ERR)\]\s+(?P<id>.*)$")


def parse_ant(text: str) -> Results:
    """Ant's ``<junit>`` task with lombok's ``SimpleTestFormatter``:
    ``[junit] [PASS] testName(pkg.Class)``; ``[FAIL]`` and ``[ERR]`` are failed.
    """
    return _read(text, _ANT_LINE, {"PASS": PASSED, "FAIL": FAILED, "ERR": FAILED})


# The name keeps every character before the last whitespace character preceding the status.
_GRADLE_RESULT = re.compile(r"([^>].+)\s+(PASSED|FAILED)$")
_GRADLE_NAME = re.compile(r"([^>]\S*\s+>\s+\S+)$")
_GRADLE_STATUS = {"PASSED": PASSED, "FAILED": FAILED}


def parse_gradle(text: str) -> Results:
    """Gradle with ``testLogging`` events (lucene, rxjava): ``pkg.Class > method PASSED``.

    When other output splits a result, ``pkg.Class > method`` alone on a line is completed by
    the next line that is exactly ``PASSED`` or ``FAILED``. ``SKIPPED`` gives nothing, and a
    line starting with ``>`` is never a result.
    """
    results: Results = {}
    waiting: Optional[str] = None
    for line in _stripped_lines(text):
        m = _GRADLE_RESULT.match(line)
        if m:
            results[m.group(1)] = _GRADLE_STATUS[m.group(2)]
            waiting = None
            continue
        m = _GRADLE_NAME.match(line)
        if m:
            waiting = m.group(1)
            continue
        if waiting is not None and line in _GRADLE_STATUS:
            results[waiting] = _GRADLE_STATUS[line]
            waiting = None
    return results


# ----------------------------------------------------------------------------------------- PHP

_TESTDOX_SUITE = re.compile(r"(\w.+) \(.+\)$")
_TESTDOX_TEST = re.compile(r"\s*([\u2714\u2718\u21a9])\s*(.*)$")
_TESTDOX_STATUS = {"\u2714": PASSED, "\u2718": FAILED, "\u21a9": SKIPPED}


def parse_phpunit_testdox(text: str) -> Results:
    r"""PHPUnit ``--testdox --colors=never``: id ``<suite> > <test>``.

    A line ``Calculator (Tests\Calculator)`` opens a suite; `` ✔ Adds numbers`` passed, ``✘``
    failed, ``↩`` skipped (an incomplete ``∅`` or risky ``☢`` test gives nothing). Lines are
    read as printed (not stripped); a test before any suite line has the suite ``None``.
    """
    results: Results = {}
    suite = "None"
    for line in text.split("\n"):
        m = _TESTDOX_SUITE.match(line)
        if m:
            suite = m.group(1)
            continue
        m = _TESTDOX_TEST.match(line)
        if m:
            results[f"{suite} > {m.group(2)}"] = _TESTDOX_STATUS[m.group(1)]
    return results


# ---------------------------------------------------------------------------------------- Ruby

# ``Class#test_: context should x. = 0.00 s = .``: the id ends at the last ``. `` that is
# followed by an ``=`` and, after that, a status character (the last one on the line counts).
_MINITEST_LINE = re.compile(r"(.+)\. .*=.*(\.|F|E).*$")
_MINITEST_STATUS = {".": PASSED, "F": FAILED, "E": FAILED}


def parse_minitest(text: str) -> Results:
    """Minitest ``-v`` lines of shoulda-style tests, whose names end in ``. ``:
    ``TestUtils#test_: slugify should keep case. = 0.00 s = .``; ``F`` and ``E`` failed.

    A plain ``TestX#test_y = 0.00 s = .`` holds no ``. `` and gives nothing, as in the harness.
    """
    results: Results = {}
    for line in _stripped_lines(text):
        m = _MINITEST_LINE.match(line)
        if m:
            results[m.group(1)] = _MINITEST_STATUS[m.group(2)]
    return results


_CUCUMBER_LINE = re.compile(r"(?P<id>.*) \.+(?P<word>\.|F)")


def parse_cucumber(text: str) -> Results:
    """Cucumber ``--format progress`` lines ``<name> ....``: the character after the run of
    dots is the status (``.`` passed, ``F`` failed).
    """
    return _read(text, _CUCUMBER_LINE, {".": PASSED, "F": FAILED})


def parse_jekyll(text: str) -> Results:
    """The jekyll rows run minitest or cucumber; the harness picks by instance id, the runtime
    reads both (``parse_minitest`` first, cucumber's lines then replace): neither runner
    prints the other's result lines.
    """
    results = parse_minitest(text)
    results.update(parse_cucumber(text))
    return results


_TEST_UNIT_LINE = re.compile(r"\s*(?:test: )?(?P<id>.+):\s+(?P<word>\.|E\b|F\b|O\b)")
_TEST_UNIT_STATUS = {".": PASSED, "E": FAILED, "F": FAILED, "O": SKIPPED}


def parse_test_unit(text: str) -> Results:
    """test-unit's ``-v`` output (fluentd, faker): ``test_name: .: (0.001)``.

    The id is everything before the last ``:`` that is followed by whitespace and a status
    (``.`` passed, ``F``/``E`` failed, ``O`` omitted: skipped), a leading ``test: `` dropped.
    """
    return _read(text, _TEST_UNIT_LINE, _TEST_UNIT_STATUS)


_RSPEC_LINE = re.compile(r"(?P<id>.+) - (?P<word>passed|failed)")


def parse_rspec_lines(text: str) -> Results:
    """RSpec's JSON report turned into lines by the harness's ``jq`` filter:
    ``<description> - <status>`` (fastlane adds `` - <example id>`` before the status).

    The id runs to the last `` - passed``/`` - failed`` on the line; ``pending`` gives nothing.
    """
    return _read(text, _RSPEC_LINE, {"passed": PASSED, "failed": FAILED})


# ---------------------------------------------------------------------------------------- Rust

_CARGO_LINE = re.compile(r"test\s+(\S+)\s+\.\.\.\s+(\w+)$")


def parse_cargo(text: str) -> Results:
    """``cargo test``: ``test path::name ... ok`` passed, ``... FAILED`` failed; ``ignored``
    and a result that shares its line with the test's output give nothing.
    """
    results: Results = {}
    for line in _stripped_lines(text):
        m = _CARGO_LINE.match(line)
        if m and m.group(2) in ("ok", "FAILED"):
            results[m.group(1)] = PASSED if m.group(2) == "ok" else FAILED
    return results


NATIVE_PARSERS: Dict[str, Callable[[str], Results]] = {
    "redis": parse_redis,
    "automake": parse_automake,
    "micropython": parse_micropython,
    "googletest": parse_googletest,
    "maven": parse_maven,
    "ant": parse_ant,
    "gradle": parse_gradle,
    "phpunit_testdox": parse_phpunit_testdox,
    "minitest": parse_minitest,
    "cucumber": parse_cucumber,
    "jekyll": parse_jekyll,
    "test_unit": parse_test_unit,
    "rspec_lines": parse_rspec_lines,
    "cargo": parse_cargo,
}
"""Runtime parser name -> parser (registered in ``parsers.PARSERS``)."""
