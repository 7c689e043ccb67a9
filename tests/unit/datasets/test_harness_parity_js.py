"""The runtime's JavaScript parsers read logs as the SWE-bench harness's (swebench 5.0.2) do.

The mechanism of test_harness_parity.py, for `packager/grading/parsers_js.py`: each harness
JavaScript parser and the runtime parser `harness_parsers` maps it to read the same logs
(tests/unit/data/harness/js_*.txt; README.md there says which are real runner output and which
are constructed) and must return the same status map, exactly: no difference is allowed. The
listed-id verdicts (`get_eval_tests_report`/`get_resolution_status` against `rules.all_pass`)
must agree too, for the parsers that report passing tests; fail-only parsers are checked
against the harness's EvalType.FAIL_ONLY grading in test_fail_only_grading_agrees.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from packager.assumptions import directive_style
from packager.datasets import harness_parsers
from packager.grading import parsers, parsers_js, rules
from tests.unit.datasets.test_harness_parity import (
    STATUS,
    Harness,
    SpecStandIn,
    _load_harness,
    mapped,
    read,
)

SPEC = SpecStandIn()
JEST_LOGS = ("js_jest_verbose.txt", "js_jest_calypso.txt")
FILE_LOGS = ("js_jest_files.txt", "js_jest_files_plain.txt", "js_jest_verbose.txt")

# harness parser -> (log, what the harness's TestSpec says) pairs it is checked on.
CASES: dict[str, tuple[tuple[str, SpecStandIn], ...]] = {
    "parse_log_jest": tuple((log, SPEC) for log in JEST_LOGS),
    "parse_log_jest_json": (("js_jest_json.txt", SPEC),),
    "parse_log_immutable_js": (
        ("js_jest_json.txt", SpecStandIn("immutable-js__immutable-js-2005")),
        ("js_jest_verbose.txt", SpecStandIn("immutable-js__immutable-js-2006")),
    ),
    "parse_log_vitest": (("js_vitest_verbose.txt", SPEC), ("js_vitest3_verbose.txt", SPEC)),
    "parse_log_karma": (("js_karma_mocha.txt", SPEC),),
    "parse_log_tap": tuple(
        (log, SPEC) for log in ("js_mocha_tap.txt", "js_qunit_tap.txt", "js_node_tap.txt")
    ),
    "parse_log_highlightjs": (("js_mocha_spec.txt", SPEC), ("js_karma_mocha.txt", SPEC)),
    "parse_log_prismjs": (("js_mocha_json_prism.txt", SPEC),),
    "parse_log_cypress": (("js_cypress.txt", SPEC),),
    "parse_log_carbon": tuple((log, SPEC) for log in FILE_LOGS),
    "parse_log_react_pdf": tuple((log, SPEC) for log in FILE_LOGS),
    "parse_log_prettier": (("js_jest_files.txt", SPEC),),
    "parse_log_scratch_gui": (("js_jest_files_plain.txt", SPEC),),
    "parse_log_grommet": tuple((log, SPEC) for log in FILE_LOGS),
    "parse_log_emotion": tuple((log, SPEC) for log in FILE_LOGS),
    "parse_log_calypso": (("js_jest_calypso.txt", SPEC),),
    "parse_log_next": (
        ("js_next_karma.txt", SpecStandIn(version="1.25")),
        ("js_next_cypress.txt", SpecStandIn(version="1.27")),
    ),
    "parse_log_lighthouse": (
        ("js_mocha_spec_lighthouse.txt", SpecStandIn(version="9.5")),
        ("js_jest_files.txt", SpecStandIn(version="11.0")),
        ("js_mocha_json_lighthouse.txt", SpecStandIn(version="2.0")),
    ),
    "parse_log_quarto_cli": (("js_quarto.txt", SPEC),),
    "parse_plotly_js": (("js_plotly.txt", SPEC),),
    "parse_log_eslint": (("js_mocha_spec.txt", SPEC),),
    "parse_log_bpmn_js": (("js_karma_progress_bpmn.txt", SPEC),),
    "parse_log_openlayers": (
        ("js_karma_progress.txt", SPEC),
        ("js_mocha_spec.txt", SPEC),
    ),
    "parse_log_chart_js": (("js_karma_progress_chart.txt", SPEC),),
    "parse_log_marked": (("js_jasmine.txt", SPEC),),
    "parse_log_p5js": (("js_mocha_spec.txt", SPEC),),
}
PAIRS = [
    pytest.param(name, log, spec, id=f"{name}-{log}")
    for name, cases in CASES.items()
    for log, spec in cases
]
FAIL_ONLY_NAMES = {
    name for name in CASES if harness_parsers.runtime_parser(name) in parsers_js.FAIL_ONLY
}

# Names of swebench's MAP_REPO_TO_PARSER_JS outside PARSER_REGISTRY, accepted all the same.
UNREGISTERED = (
    "parse_log_cypress",
    "parse_log_emotion",
    "parse_log_prettier",
    "parse_log_scratch_gui",
    "parse_plotly_js",
)


@pytest.fixture(scope="module")
def harness() -> Harness:
    return _load_harness()


def _javascript() -> ModuleType:
    _load_harness()
    return importlib.import_module("swebench.harness.log_parsers.javascript")


def harness_parser(name: str) -> Callable[..., dict[str, str]]:
    parser: Callable[..., dict[str, str]] = getattr(_javascript(), name)
    return parser


def both(name: str, log: str, spec: SpecStandIn) -> tuple[dict[str, str], dict[str, str], str]:
    text = read(log)
    raw = harness_parser(name)(text, spec)
    return raw, parsers.parse(harness_parsers.runtime_parser(name), text), text


# ------------------------------------------------------------------------------ the mapping


def test_every_javascript_registry_parser_is_accepted(harness: Harness) -> None:
    javascript = _javascript()
    names = [n for n, f in harness.registry.items() if f.__module__ == javascript.__name__]
    assert len(names) == 21
    for name in (*names, *UNREGISTERED):
        assert harness_parsers.runtime_parser(name) in parsers_js.PARSERS, name
        assert name in CASES, name


def test_every_mapped_javascript_parser_is_checked_here() -> None:
    javascript = _javascript()
    mapped_names = {n for n in harness_parsers.HARNESS_PARSERS if hasattr(javascript, n)}
    assert mapped_names == set(CASES)


def test_aliases_of_one_harness_function_map_alike() -> None:
    """carbon, prettier, scratch-gui (and lighthouse >= 3) are one function in the harness."""
    javascript = _javascript()
    for a in CASES:
        for b in CASES:
            if getattr(javascript, a) is getattr(javascript, b):
                assert harness_parsers.runtime_parser(a) == harness_parsers.runtime_parser(b)


def test_javascript_runners_take_no_test_file_directives() -> None:
    """The harness appends test files to Python test commands only; a JavaScript row's command
    (its spec's `test_cmd`) already names what it runs."""
    for name in CASES:
        assert directive_style(name, harness_parsers.runtime_parser(name)) is None, name


# --------------------------------------------------------------------------- status maps


@pytest.mark.parametrize(("name", "log", "spec"), PAIRS)
def test_status_maps_agree(harness: Harness, name: str, log: str, spec: SpecStandIn) -> None:
    raw, ours, _ = both(name, log, spec)
    assert raw, "the log must give the harness something to read"
    assert set(raw.values()) <= set(STATUS)
    assert ours == mapped(raw)


@pytest.mark.parametrize(("name", "log", "spec"), PAIRS)
def test_malformed_and_cut_logs_never_raise(name: str, log: str, spec: SpecStandIn) -> None:
    text = read(log)
    runtime = harness_parsers.runtime_parser(name)
    for cut in (text[: len(text) // 2], text[len(text) // 3 :], text.replace("\n", "\r\n"), ""):
        result = parsers.parse(runtime, cut)
        assert set(result.values()) <= {"passed", "failed", "skipped"}


def _resolved(harness: Harness, raw: dict[str, str], f2p: list[str], p2p: list[str]) -> bool:
    grading = harness.grading
    report = grading.get_eval_tests_report(raw, {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
    return bool(grading.get_resolution_status(report) == "RESOLVED_FULL")


@pytest.mark.parametrize(
    ("name", "log", "spec"), [p for p in PAIRS if p.values[0] not in FAIL_ONLY_NAMES]
)
def test_resolution_agrees(harness: Harness, name: str, log: str, spec: SpecStandIn) -> None:
    raw, ours, _ = both(name, log, spec)
    passing = [t for t in raw if harness.grading.test_passed(t, raw)]
    failing = [t for t in raw if harness.grading.test_failed(t, raw)]
    assert passing, "the log must have passing tests"
    half = len(passing) // 2
    f2p, p2p = passing[half:], passing[:half]
    assert _resolved(harness, raw, f2p, p2p)
    assert rules.all_pass(ours, f2p, p2p)[0] == 1.0
    for bad in failing:
        assert not _resolved(harness, raw, [*f2p, bad], p2p), bad
        assert rules.all_pass(ours, [*f2p, bad], p2p)[0] == 0.0, bad
    assert not _resolved(harness, raw, [*f2p, "a test no runner printed"], p2p)
    assert rules.all_pass(ours, [*f2p, "a test no runner printed"], p2p)[0] == 0.0


# ----------------------------------------------------------------------------- fail-only


def _fail_only_resolved(harness: Harness, raw: dict[str, str], text: str, f2p: list[str]) -> bool:
    """The harness's verdict for a fail-only repository: `get_logs_eval`'s validity check (a
    status map, or a log showing the suite ran), then EvalType.FAIL_ONLY grading."""
    grading = harness.grading
    if not raw and not grading.SUITE_RAN.search(text):
        return False
    eval_type = importlib.import_module("swebench.harness.constants").EvalType.FAIL_ONLY
    gold = {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": []}
    report = grading.get_eval_tests_report(raw, gold, eval_type=eval_type)
    return bool(grading.get_resolution_status(report) == "RESOLVED_FULL")


def _ours_resolved(ours: dict[str, str], text: str, f2p: list[str], code: int = 0) -> bool:
    filled, _ = parsers.fill_fail_only(ours, f2p, text, code)
    return rules.all_pass(filled, f2p, [])[0] == 1.0


@pytest.mark.parametrize(
    ("name", "log", "spec"), [p for p in PAIRS if p.values[0] in FAIL_ONLY_NAMES]
)
def test_fail_only_grading_agrees(harness: Harness, name: str, log: str, spec: SpecStandIn) -> None:
    raw, ours, text = both(name, log, spec)
    absent = "a test the log never names"
    for f2p in ([absent], *([t] for t in raw), [absent, *raw]):
        assert _ours_resolved(ours, text, f2p) == _fail_only_resolved(harness, raw, text, f2p)
    assert _ours_resolved(ours, text, [absent])
    # A run that failed some other test still lets the absent one pass, for both.
    assert _ours_resolved(ours, text, [absent], code=1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Chrome Headless 120.0.0.0 (Linux x86_64): Executed 0 of 0 ERROR (0.001 secs / 0 secs)\n",
        "  0 passing (2ms)\n",
        "karma: cannot start ChromeHeadless\n",
    ],
)
def test_fail_only_fills_nothing_unless_the_suite_ran(harness: Harness, text: str) -> None:
    for runtime in parsers_js.FAIL_ONLY:
        ours = parsers.parse(runtime, text)
        assert not _ours_resolved(ours, text, ["suite test"]), runtime
    assert not _fail_only_resolved(harness, {}, text, ["suite test"])


@pytest.mark.parametrize(
    "text",
    [
        "Chrome Headless 120.0.0.0 (Linux x86_64): Executed 3 of 3 SUCCESS (0.02 secs)\n",
        "TOTAL: 3 SUCCESS\n",
        "  3 passing (20ms)\n",
        "4 specs, 0 failures\nFinished in 0.02 seconds\n",
        "case rendering/circle': ok\n",
    ],
)
def test_fail_only_fills_a_clean_run(harness: Harness, text: str) -> None:
    for runtime in parsers_js.FAIL_ONLY:
        ours = parsers.parse(runtime, text)
        assert ours == {}
        assert _ours_resolved(ours, text, ["suite test"]), runtime
        # Stricter than the harness: a non-zero exit without a recorded failure fills nothing.
        assert not _ours_resolved(ours, text, ["suite test"], code=1), runtime
    assert _fail_only_resolved(harness, {}, text, ["suite test"])


def test_repository_wide_test_commands_are_the_specs() -> None:
    """A JavaScript repository whose every spec runs one command gets it as the default."""
    from packager.datasets import harness_specs

    tables = harness_specs.tables()
    checked = 0
    for repo, name in tables["parsers"].items():
        command = harness_parsers.HARNESS_TEST_COMMANDS.get(name)
        if name not in CASES or command is None:
            continue
        assert {spec["test_cmd"] for spec in tables["specs"][repo].values()} == {command}
        checked += 1
    assert checked == 3  # calypso, marked, p5.js
    assert harness_parsers.default_test_command("parse_log_prismjs") == parsers_js.PRISM_COMMAND
    assert harness_parsers.default_test_command("parse_log_jest") is None  # per instance


TOKENS = (
    "✓", "✕", "○", "×", "↓", "✔", "✖", "✗", "ok 1", "not ok 2", "PASS", "FAIL", "1)", "  ",
    "    ", "\t", "{", "}", "[", "]", "<a>", "</a>", "(12ms)", "(1.2 s)", "Starting browser",
    "SUMMARY:", "Running:", "running 2 test files", "3 passing", "Error:", "FAILED", "[smoke]",
    "...", "32mok", "\x1b[31m", "/tmp/x.qmd", "- suite :", "* t : ok", "Test Suites", "  ● ",
    " ./node_modules/.bin/jest ", " xvfb-run ", "../..", '  "passes": [', '"fullTitle": "t",',
    "Chrome 1.0 (Linux x86_64) ", "TOTAL", "\n", "\n", "\n", "word", ":", ")",
)  # fmt: skip


def test_no_javascript_parser_raises_on_noise() -> None:
    import random

    rng = random.Random(21)
    for _ in range(400):
        text = "".join(rng.choice(TOKENS) + rng.choice(("", " ")) for _ in range(60))
        for runtime, parse in parsers_js.PARSERS.items():
            result = parse(text)
            assert set(result.values()) <= {"passed", "failed", "skipped"}, runtime


def _reads_alike(name: str, text: str) -> bool:
    """Whether the runtime parser reads `text` by the harness's rule (see the module docstring
    of parsers_js: a log without the echo the harness splits on, or of the other format of a
    parser that chooses by row, is read differently by design)."""
    if name == "parse_log_calypso":
        return " ./node_modules/.bin/jest " in text
    if name == "parse_log_next":
        return " xvfb-run " in text and not parsers_js._NEXT_SUITES.search(text)
    if name == "parse_log_lighthouse":
        return bool(parsers_js._LIGHTHOUSE_FILES.search(text))
    if name == "parse_log_immutable_js":
        return not re.search(r"^\s*\[(PASSED|FAILED)\]\s", text, re.MULTILINE)
    return True


FUZZ_SPECS = {
    "parse_log_next": SpecStandIn(version="1.25"),
    "parse_log_lighthouse": SpecStandIn(version="9.5"),
    "parse_log_immutable_js": SpecStandIn("immutable-js__immutable-js-2006"),
}


def test_noise_is_read_as_the_harness_reads_it() -> None:
    """Random runner-shaped noise: the same map as the harness's wherever the harness does not
    raise, but for an id seen twice, which keeps its worse status (the harness: the last)."""
    import random

    rng = random.Random(7)
    compared = 0
    for _ in range(600):
        text = "".join(rng.choice(TOKENS) + rng.choice(("", " ")) for _ in range(40))
        for name in CASES:
            if not _reads_alike(name, text):
                continue
            try:
                raw = harness_parser(name)(text, FUZZ_SPECS.get(name, SPEC))
            except Exception:  # the harness's own failure: nothing to compare
                continue
            theirs, ours = mapped(raw), parsers.parse(harness_parsers.runtime_parser(name), text)
            assert set(theirs) == set(ours), (name, text)
            for key, status in ours.items():
                assert status == theirs[key] or status == "failed", (name, text, key)
            compared += 1
    assert compared > 600 * len(CASES) * 0.8


# ----------------------------------------------------------------------------- real rows

ROWS: dict[str, dict[str, Any]] = json.loads(read("js_rows.json"))
ROW_LOGS = [pytest.param(iid, mode, id=f"{iid}-{mode}") for iid in ROWS for mode in ("gold", "nop")]


@pytest.mark.parametrize(("iid", "mode"), ROW_LOGS)
def test_real_rows_grade_alike(harness: Harness, iid: str, mode: str) -> None:
    """SWE-bench Multilingual rows run here with the spec's own test command, once with the gold
    patch and once without it (test patch only): the same status map on both sides, resolved
    with the gold patch only, by the harness and by `rules.all_pass` alike."""
    row = ROWS[iid]
    text = read(f"js_row_{iid}.{mode}.txt")
    spec = SpecStandIn(iid, row["repo"], row["version"])
    raw = harness.registry[row["log_parser"]](text, spec)
    ours = parsers.parse(harness_parsers.runtime_parser(row["log_parser"]), text)
    assert ours == mapped(raw)
    f2p, p2p = row["FAIL_TO_PASS"], row["PASS_TO_PASS"]
    assert _resolved(harness, raw, f2p, p2p) is (mode == "gold")
    assert rules.all_pass(ours, f2p, p2p)[0] == (1.0 if mode == "gold" else 0.0)
