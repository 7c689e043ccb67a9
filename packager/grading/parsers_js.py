"""JavaScript/TypeScript test-log parsers: jest, vitest, karma, mocha, TAP and per-repository ones.

Each one reads a log the way one (or several) of the SWE-bench harness's JavaScript parsers
(swebench 5.0.2, ``log_parsers/javascript.py``) does, so that the ids a dataset lists are found
under the same names (``packager.datasets.harness_parsers`` maps the harness names here;
tests/unit/datasets/test_harness_parity_js.py feeds both sides the same logs). The ids keep the
harness's quirks (a TAP id keeps its ``- `` and ``# SKIP``, a jest id is the bare test title)
because the datasets' ids were written by the harness. Deliberate differences:

- an id reported twice keeps its worse status (the harness keeps the last one seen);
- where the harness cuts the log at an echoed command (``+ ./node_modules/.bin/jest ...`` of
  its ``set -x`` eval script) and the log holds no such echo, as the runtime's own log of a
  single command does not, the whole log is read as that command's output;
- malformed input never raises (the harness raises on a prism JSON report it cannot decode,
  and on a calypso result line without indentation): what is recognised is returned.

Standard library only, Python >= 3.9 (this module is copied into grader images; ``parsers``
registers its ``PARSERS``). It must not import its siblings.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Dict, List, Optional, Pattern, Sequence, Tuple

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
_SEVERITY = {PASSED: 0, SKIPPED: 1, FAILED: 2}

Results = Dict[str, str]
Suite = List[Tuple[str, int]]

# The harness's ANSI pattern (swebench.utils.ansi_escape): CSI sequences and two-byte escapes.
_ANSI = re.compile(r"\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")


def _record(results: Results, test_id: str, status: str) -> None:
    old = results.get(test_id)
    if old is None or _SEVERITY[status] > _SEVERITY[old]:
        results[test_id] = status


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _runs(text: str, echo: str) -> List[str]:
    """The log after each echo of ``echo`` (the harness's split); the whole log when none."""
    parts = text.split(echo)
    return parts[1:] if len(parts) > 1 else [text]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _nest(suite: Suite, name: str, indent: int) -> None:
    """An indented non-result line names a suite: it replaces every suite not less indented."""
    while suite and suite[-1][1] >= indent:
        suite.pop()
    suite.append((name, indent))


def _joined(suite: Suite, name: str, sep: str = " - ") -> str:
    return sep.join([s for s, _ in suite] + [name])


# ----------------------------------------------------------------------- marker-per-line runners

# A verbose result line, stripped: marker, title, an optional duration the title does not keep.
_JEST_LINE = re.compile(r"(✓|✕|○)\s(.+?)(?:\s\(\d+\s*m?s\))?$")
_JEST_STATUS = {"✓": PASSED, "✕": FAILED, "○": SKIPPED}
_VITEST_LINE = re.compile(r"(✓|×|↓)\s(.+?)(?:\s(?:\d+\s*m?s?|\[skipped\]))?$")
_VITEST_STATUS = {"✓": PASSED, "×": FAILED, "↓": SKIPPED}
_JQ_LINE = re.compile(r"\[(PASSED|FAILED)\]\s(.+)$")
_TAP_LINE = re.compile(r"(ok|not ok) \d+ (.+)$")


def _marked_lines(
    text: str, pattern: Pattern[str], statuses: Dict[str, str], strip_title: bool
) -> Results:
    results: Results = {}
    for line in text.split("\n"):
        m = pattern.match(line.strip())
        if m:
            title = m.group(2).strip() if strip_title else m.group(2)
            _record(results, title, statuses[m.group(1)])
    return results


def parse_jest(text: str) -> Results:
    """``jest --verbose``: ``✓``/``✕``/``○`` lines, the bare test title as id (no describe path;
    ``○ skipped t`` keeps its ``skipped``), a trailing ``(12 ms)`` dropped.
    """
    return _marked_lines(text, _JEST_LINE, _JEST_STATUS, True)


def parse_jest_json(text: str) -> Results:
    """``jest --json`` turned by jq into ``[PASSED] describe > title`` lines (other statuses,
    pending or todo, are left out, as the harness does).
    """
    return _marked_lines(text, _JQ_LINE, {"PASSED": PASSED, "FAILED": FAILED}, False)


def parse_jest_either(text: str) -> Results:
    """immutable-js: one instance logs ``jest --json`` through jq, the other ``jest --verbose``;
    the two line forms cannot be mistaken for each other, so both are read.
    """
    results = parse_jest_json(text)
    for test_id, status in parse_jest(text).items():
        _record(results, test_id, status)
    return results


def parse_vitest(text: str) -> Results:
    """``vitest --reporter=verbose``: ``✓``/``×``/``↓`` lines, ``file > describe > title``; a
    trailing duration (``3ms``, or any bare number, as the harness reads it) or ``[skipped]`` is
    dropped.
    """
    return _marked_lines(text, _VITEST_LINE, _VITEST_STATUS, False)


def parse_tap_lines(text: str) -> Results:
    """Every ``ok N rest``/``not ok N rest`` line, indented or not (mocha's and qunit's TAP
    reporters, ``node --test``): the id is ``rest`` whole (``- `` and ``# SKIP`` included),
    subtests flattened; ``ok`` passes, ``not ok`` fails, whatever the directive.
    """
    results: Results = {}
    for line in text.split("\n"):
        m = _TAP_LINE.match(line.strip())
        if m:
            _record(results, m.group(2), PASSED if m.group(1) == "ok" else FAILED)
    return results


# ------------------------------------------------------------------------------------------ karma

_KARMA_LINE = re.compile(r"(\s*)([✔✖]?)\s(.*)$")


def parse_karma(text: str) -> Results:
    """Karma with the mocha reporter (preact): after ``Starting browser`` and up to
    ``SUMMARY:``, ``✔``/``✖`` results named ``suite > title``.

    Suites are tracked as the harness does, by one indentation level at a time: a deeper suite
    line opens a suite, a shallower one closes one, a sibling at the same depth changes nothing
    (so its tests keep the previous sibling's name).
    """
    results: Results = {}
    depth = -1
    suite: List[str] = []
    started = False
    for line in text.split("\n"):
        if line.startswith("SUMMARY:"):
            break
        if "Starting browser" in line:
            started = True
            continue
        m = _KARMA_LINE.match(line) if started else None
        if not m:
            continue
        indent, mark, name = m.groups()
        if mark:
            _record(results, " > ".join(suite + [name]), PASSED if mark == "✔" else FAILED)
        elif indent and len(indent) > depth:
            depth = len(indent)
            suite.append(name)
        elif indent and len(indent) < depth:
            depth = len(indent)
            if suite:
                suite.pop()
    return results


# ------------------------------------------------------------------------------------------ mocha

_MS = re.compile(r"\(\d+ms\)")


def parse_mocha_spec(text: str) -> Results:
    """Mocha's spec reporter (highlight.js): ``✓``/``✔`` and ``1)`` lines before ``N passing``,
    named ``<last indented non-result line>.<title>``, a ``(12ms)`` removed.
    """
    head = re.split(r"\n[ \t]*\d+ passing", text)[0]
    results: Results = {}
    suite: List[str] = []
    for line in head.split("\n"):
        stripped = line.strip()
        if stripped[:1] in ("✓", "✔"):
            title, status = stripped[1:], PASSED
        elif re.match(r"\d+\)", stripped):
            title, status = stripped.split(")", 1)[1], FAILED
        else:
            if line.startswith("  "):
                suite = [stripped]
            continue
        _record(results, ".".join(suite + [_MS.sub("", title).strip()]), status)
    return results


def _json_object(text: str) -> Optional[Dict[str, object]]:
    """The text from its first ``{`` to its last ``}`` as a JSON object, None if it is not."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _titles(data: Dict[str, object], key: str) -> List[str]:
    entries = data.get(key)
    if not isinstance(entries, list):
        return []
    titles = [e.get("fullTitle") for e in entries if isinstance(e, dict)]
    return [t for t in titles if isinstance(t, str)]


PRISM_COMMAND = "./node_modules/.bin/mocha tests/run.js --reporter json"


def parse_mocha_json(text: str) -> Results:
    """Mocha's JSON reporter (prism): ``passes``/``failures`` by ``fullTitle``, one report per
    echo of prism's test command.
    """
    results: Results = {}
    for run in _runs(text, PRISM_COMMAND):
        data = _json_object(run)
        if data is None:
            continue
        for title in _titles(data, "failures"):
            _record(results, title, FAILED)
        for title in _titles(data, "passes"):
            _record(results, title, PASSED)
    return results


_FULL_TITLE = re.compile(r"\"fullTitle\":\s\"(.*)\",\n")


def _json_titles(run: str, arrays: Sequence[Tuple[str, str, str]], results: Results) -> None:
    """``fullTitle`` lines of a pretty-printed mocha JSON report read as text, as the harness
    does: for each (opening, closing, status), the text after the last ``opening`` up to the
    last ``closing`` after it.
    """
    for opening, closing, status in arrays:
        section = run.split(opening)[-1].rsplit(closing, 1)[0]
        for title in _FULL_TITLE.findall(section):
            _record(results, title, status)


_CYPRESS_ARRAYS = (('  "passes": [', "  }", PASSED), ('  "failures": [', "  ],", FAILED))


def parse_cypress(text: str) -> Results:
    """Cypress's mocha JSON reports, one per spec, each followed by a ``../..`` path."""
    results: Results = {}
    for run in text.split("../..")[:-1]:
        _json_titles(run, _CYPRESS_ARRAYS, results)
    return results


# -------------------------------------------------------------------------------- jest file lines

_TIMINGS = tuple(re.compile(rf"(.*)\s\([\d.]+{unit}\)") for unit in ("ms", r"\ss", "s"))
_FILE_LINE = re.compile(r"(PASS|FAIL)\s(.*)")


def parse_jest_files(text: str) -> Results:
    """Jest's per-file lines (carbon, react-pdf, prettier, scratch-gui, lighthouse >= 3):
    ``PASS path (1.2 s)``/``FAIL path``, the id the path up to its last timing.
    """
    results: Results = {}
    for line in text.split("\n"):
        m = _FILE_LINE.match(line)
        if not m:
            continue
        name = m.group(2)
        for timing in _TIMINGS:
            t = timing.match(name)
            if t:
                name = t.group(1)
                break
        _record(results, name, PASSED if m.group(1) == "PASS" else FAILED)
    return results


def _file_lines(text: str, trailing: Optional[Pattern[str]]) -> Results:
    results: Results = {}
    for m in re.finditer(r"^(PASS|FAIL)\s(.*)", text, re.MULTILINE):
        name = m.group(2).strip()
        if trailing is not None:
            name = trailing.sub("", name)
        _record(results, name, PASSED if m.group(1) == "PASS" else FAILED)
    return results


def parse_jest_files_trimmed(text: str) -> Results:
    """Grommet's jest file lines: the id stripped, then a final `` (12 ms)``/`` (1.2 s)`` cut."""
    return _file_lines(text, re.compile(r"\s\([\d.]+\s?(?:ms|s)\)$"))


def parse_jest_files_raw(text: str) -> Results:
    """Emotion's jest file lines: the whole rest of the line, timing included, stripped."""
    return _file_lines(text, None)


# ---------------------------------------------------------------- failures only (fail-only repos)

# These runners' parsers record failing tests only: the harness grades their repositories
# fail-only (EvalType.FAIL_ONLY), an absent test counting as passed once the suite ran.


def _failures(text: str, patterns: Sequence[Pattern[str]], squeeze: bool) -> Results:
    results: Results = {}
    for pattern in patterns:
        for found in pattern.findall(text):
            name = found[-1] if isinstance(found, tuple) else found
            if squeeze:
                name = re.sub(r"\s+", " ", name).strip()
            _record(results, name, FAILED)
    return results


_ESLINT = (re.compile(r"\s{2}\d+\)([\s\S]*?)\s+.*Error"),)
_BPMN = tuple(
    re.compile(p)
    for p in (
        r"2KPhantomJS\s[\d.]+\s\(Linux\s[\d.]+\)\s(.*)FAILED\n",
        r"2KPhantomJS\s[\d.]+\s\(Linux\sx86_64\)\s(.*)FAILED\n",
        r"Chrome\sHeadless\s(.*)\s\(Linux\sx86_64\)\s(.*)FAILED\n",
        r"HeadlessChrome\s[\d.]+\s\(Linux\s[\d.]+\)\s(.*)FAILED\n",
    )
)
_OPENLAYERS = tuple(
    re.compile(p, re.MULTILINE)
    for p in (
        r"Chrome\sHeadless\s[\d.]+\s\(Linux\s[\d._\S]+\)\s(.*)\sFAILED\n",
        r"Chrome\s[\d.]+\s\(Linux\s[\d._\S]+\)\s(.*)FAILED\n",
        r"^\s{2}\d+\)([\s\S]*?)Error:",
        r"^case\s(.*):\smismatch",
    )
)
_CHART = (re.compile(r"Chrome\s[\d.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$", re.MULTILINE),)
_MARKED = (re.compile(r"^\d+\)\s(.*)", re.MULTILINE),)


def parse_eslint(text: str) -> Results:
    """Eslint's mocha failures (``  1) suite title ... Error``), whitespace runs made one space."""
    return _failures(text, _ESLINT, True)


def parse_karma_failed(text: str) -> Results:
    """bpmn-js: karma's ``<browser> (Linux ...) suite title FAILED`` lines (PhantomJS, Chrome)."""
    return _failures(text, _BPMN, False)


def parse_openlayers(text: str) -> Results:
    """openlayers: karma's Chrome ``FAILED`` lines, mocha's ``  1) ... Error:`` and the
    rendering tests' ``case <name>: mismatch``.
    """
    return _failures(text, _OPENLAYERS, True)


def parse_chart_js(text: str) -> Results:
    """Chart.js: karma's ``Chrome N (os) suite title FAILED`` lines, colours removed."""
    return _failures(_strip_ansi(text), _CHART, False)


def parse_marked(text: str) -> Results:
    """marked: jasmine's numbered failures, ``1) suite title``."""
    results: Results = {}
    for line in text.split("\n"):
        m = _MARKED[0].match(line)
        if m:
            _record(results, m.group(1).strip(), FAILED)
    return results


def _without_json(text: str) -> str:
    """p5.js: lines of (pretty-printed) JSON objects and arrays dropped."""
    kept: List[str] = []
    in_object = in_list = False
    for line in text.split("\n"):
        s = line.rstrip()
        if s.endswith("{"):
            in_object = True
        elif s.endswith("["):
            in_list = True
        elif s == "}" and in_object:
            in_object = False
        elif s == "]" and in_list:
            in_list = False
        elif not (in_object or in_list or s[:1] + s[-1:] in ("{}", "[]")):
            kept.append(line)
    return "\n".join(kept)


_XML_ELEMENT = re.compile(r"<(\w+)>[\s\S]*?</\1>")


def _without_xml(text: str) -> str:
    """p5.js: ``<tag>...</tag>`` spans dropped, innermost-first as the harness does (the opening
    tags a span swallowed are put back so that their own closing tag still pairs).
    """
    m = _XML_ELEMENT.search(text)
    while m:
        opened = max(m.group(0).count(f"<{m.group(1)}>") - 1, 0)
        text = text[: m.start()] + f"<{m.group(1)}>" * opened + text[m.end() :]
        m = _XML_ELEMENT.search(text)
    return text


_P5_FAILURE = re.compile(r"^\s*(\d+)\)(.{0,1000}?):", re.MULTILINE | re.DOTALL)


def parse_p5js(text: str) -> Results:
    """p5.js (grunt + mocha): failures ``1) suite``, ``sub``, ``title:`` (one line each, each
    indented deeper than the last), named by their stripped lines joined with ``:``.
    """
    text = _without_xml(_without_json(_strip_ansi(text)))
    results: Results = {}
    for m in _P5_FAILURE.finditer(text):
        lines = m.group(2).split("\n")
        indents = [0] + [_indent(line) for line in lines]
        if all(indents[i] < indents[i + 1] for i in range(len(lines))):
            _record(results, ":".join(line.strip() for line in lines), FAILED)
    return results


# --------------------------------------------------------------- indentation-nested suites

_CALYPSO_RESULT = {"✓": PASSED, "✕": FAILED}


def _calypso_title(line: str) -> Optional[str]:
    """A ``  ✓ title (12ms)`` line's title (the duration only when the line ends with it)."""
    m = re.match(
        r"\s+[✓✕]\s(.*)\(\d+ms\)$" if re.search(r"\(\d+ms\)", line) else r"\s+[✓✕]\s(.*)", line
    )
    return m.group(1) if m else None


def parse_calypso(text: str) -> Results:
    """wp-calypso's jest (verbose): ``✓``/``✕`` lines under indented describe lines, named
    ``describe - ... - title`` (``- title`` without a describe), up to jest's failure details
    (``  ● ``) or summary (``Test Suites``) of each run.
    """
    results: Results = {}
    suite: Suite = []
    for run in _runs(text, " ./node_modules/.bin/jest "):
        for line in run.split("\n"):
            if line.startswith(("Test Suites", "  ● ")):
                break
            mark = line.strip()[:1]
            if mark in _CALYPSO_RESULT:
                title = _calypso_title(line)
                if title is not None:
                    name = " - ".join([" - ".join(s for s, _ in suite), title]).strip()
                    _record(results, name, _CALYPSO_RESULT[mark])
            elif _indent(line) > 0:
                _nest(suite, line.strip(), _indent(line))
    return results


_NEXT_SKIP = ("ERROR", "LOG", "WARN", "Check", "in")
_NEXT_SUITES = re.compile(r"Running\:(.*)\)\n{3}\s{2}(.*)\n")


def _next_karma(text: str) -> Results:
    """alibaba-fusion/next before 1.27: karma (mocha reporter) after ``Starting browser Chrome``
    of each ``xvfb-run`` run, ``✓``/``✗`` results named ``suite - ... - title``.
    """
    text = _strip_ansi(text)
    text = re.sub(r"AssertionError:\s+#([\s\S]*?)\n\n", "", text)
    results: Results = {}
    suite: Suite = []
    for run in _runs(text, " xvfb-run "):
        for line in run.split("Starting browser Chrome")[-1].split("\n"):
            if line.startswith("TOTAL"):
                break
            if line.strip().startswith(_NEXT_SKIP):
                continue
            failed = re.match(r".*?✗\s*(.*)", line)
            passed = None if failed else re.match(r".*?✓\s*(.*)", line)
            if failed or passed:
                title = (failed or passed).group(1)  # type: ignore[union-attr]
                _record(results, _joined(suite, title), FAILED if failed else PASSED)
            elif _indent(line) > 0:
                _nest(suite, line.strip(), _indent(line))
    return results


def _next_cypress(text: str) -> Results:
    """alibaba-fusion/next 1.27: cypress's spec reporter, ``<suite>: <title>`` per ``Running:``."""
    parts = _NEXT_SUITES.split(text)
    results: Results = {}
    for i, (_, suite) in enumerate(_NEXT_SUITES.findall(text)):
        run = parts[(i + 1) * 3]
        for title in re.findall(r"^\s{4}\d+\)\s(.*)", run, re.MULTILINE):
            _record(results, f"{suite}: {title.strip()}", FAILED)
        for title in re.findall(r"^\s{4}✓\s(.*)\(", run, re.MULTILINE):
            _record(results, f"{suite}: {title.strip()}", PASSED)
    return results


def parse_next(text: str) -> Results:
    """alibaba-fusion/next: the harness picks by version (1.27 cypress, else karma); here the
    log tells, by cypress's ``Running:`` spec headers.
    """
    return _next_cypress(text) if _NEXT_SUITES.search(text) else _next_karma(text)


_LIGHTHOUSE_MOCHA = (
    (re.compile(r"✔\s(.*)\s\(\d+m+s\)"), PASSED),
    (re.compile(r"✔\s(.*)"), PASSED),
    (re.compile(r"\d+\)\s(.*)\s\(\d+m+s\)"), FAILED),
    (re.compile(r"\d+\)\s(.*)"), FAILED),
)
_LIGHTHOUSE_FILES = re.compile(r"running\s\d+\stest\sfiles")
LIGHTHOUSE_JSON_COMMAND = "./node_modules/.bin/mocha --reporter json"
_LIGHTHOUSE_ARRAYS = (('"passes": [', "]", PASSED), ('"failures": [', "],", FAILED))


def _lighthouse_mocha(text: str) -> Results:
    results: Results = {}
    for run in _LIGHTHOUSE_FILES.split(text)[1:]:
        suite: Suite = []
        for line in re.split(r"\d+\spassing", run)[0].strip().split("\n"):
            for pattern, status in _LIGHTHOUSE_MOCHA:
                m = pattern.match(line.strip())
                if m:
                    _record(results, _joined(suite, m.group(1)), status)
                    break
            else:
                if _indent(line) > 0:
                    _nest(suite, line.strip(), _indent(line))
    return results


def parse_lighthouse(text: str) -> Results:
    """lighthouse: the harness picks by version (9.5/10.0/10.2 mocha's spec reporter after
    ``running N test files``, other versions >= 3 jest file lines, older ones mocha's JSON
    reporter); here the log tells, by the same markers.
    """
    if _LIGHTHOUSE_FILES.search(text):
        return _lighthouse_mocha(text)
    if LIGHTHOUSE_JSON_COMMAND in text:
        results: Results = {}
        for run in text.split(LIGHTHOUSE_JSON_COMMAND)[1:]:
            _json_titles(run, _LIGHTHOUSE_ARRAYS, results)
        return results
    return parse_jest_files(text)


_QUARTO_TMP = (re.compile(r"/tmp/(\w+)\.qmd"), re.compile(r"/tmp/(\w+)/"))


def _quarto_rejected(line: str) -> bool:
    steps = all(word in line for word in ("passed", "failed", "steps"))
    return bool(re.match("test result:", line)) or steps or "34mINFO" in line


def parse_quarto(text: str) -> Results:
    """quarto-cli's deno tests: ``[smoke]``/``[unit]`` lines ``name ... ok`` (the colour codes
    ``32mok``/``31mFAILED`` are what is read; a result line with neither failed), up to the
    ``ERRORS``/``failures:`` report; temporary paths numbered in order of appearance.
    """
    results: Results = {}
    tmp: Dict[str, int] = {}
    for line in text.split("\n"):
        if "ERRORS" in line or "failures:" in line:
            break
        if not re.search(r"\[(smoke|unit)\]", line):
            continue
        for pattern in _QUARTO_TMP:
            m = pattern.search(line)
            if m:
                number = tmp.setdefault(m.group(0), len(tmp))
                line = pattern.sub(f"/tmp/{number}", line)
        name = line.split("...")[0].strip()
        if _quarto_rejected(line):
            continue
        if "32mok" in line:
            _record(results, name, PASSED)
        elif "31mFAILED" in line or name not in results:
            _record(results, name, FAILED)
    return results


_PLOTLY_SUITE = re.compile(r"(\s+)-\s+(.*?)\s+:")
_PLOTLY_TEST = re.compile(r"(\s+)\*\s+(.*?)\s+:\s*(.*)")


def parse_plotly(text: str) -> Results:
    """plotly.js's jasmine ``- suite :`` / ``* title : ok`` lines nested by indentation,
    named ``suite.title``; a status without ``ok`` (or with ``failed``) fails.
    """
    results: Results = {}
    suites: List[str] = []
    depth = 0
    for line in text.split("\n"):
        suite = _PLOTLY_SUITE.match(line)
        test = None if suite else _PLOTLY_TEST.match(line)
        m = suite or test
        if m is None:
            continue
        while suites and len(m.group(1)) <= depth:
            suites.pop()
        if suite:
            suites, depth = suites + [suite.group(2)], len(suite.group(1))
        elif test:
            status = test.group(3).lower()
            ok = "ok" in status and "failed" not in status
            _record(results, ".".join(suites + [test.group(2)]), PASSED if ok else FAILED)
    return results


PARSERS: Dict[str, Callable[[str], Results]] = {
    "jest": parse_jest,
    "jest_json": parse_jest_json,
    "jest_either": parse_jest_either,
    "vitest": parse_vitest,
    "tap_lines": parse_tap_lines,
    "karma": parse_karma,
    "karma_failed": parse_karma_failed,
    "mocha_spec": parse_mocha_spec,
    "mocha_json": parse_mocha_json,
    "cypress": parse_cypress,
    "jest_files": parse_jest_files,
    "jest_files_trimmed": parse_jest_files_trimmed,
    "jest_files_raw": parse_jest_files_raw,
    "eslint": parse_eslint,
    "openlayers": parse_openlayers,
    "chart_js": parse_chart_js,
    "marked": parse_marked,
    "p5js": parse_p5js,
    "calypso": parse_calypso,
    "next": parse_next,
    "lighthouse": parse_lighthouse,
    "quarto": parse_quarto,
    "plotly": parse_plotly,
}
"""Runtime name -> parser (registered into ``parsers.PARSERS``)."""

FAIL_ONLY = ("eslint", "karma_failed", "openlayers", "chart_js", "marked", "p5js")
"""Parsers that record failing tests only (their repositories are graded fail-only)."""

# A count of tests run, non-zero: karma's `Executed 3 of 5` and `TOTAL: 3 SUCCESS`, mocha's
# `3 passing`, jest's `Tests: 3 ...`, jasmine's `3 specs, 0 failures`, TAP's `# tests 3`, and
# openlayers' rendering cases (`<case>': ok`). `Executed 0 of 0`, a browser lost at start, is
# no evidence.
_SUITE_RAN = re.compile(
    r"Executed [1-9]\d* of \d+|TOTAL: [1-9]\d* (?:SUCCESS|FAILED)|[1-9]\d* passing"
    r"|Tests:\s+[1-9]\d*|^# tests [1-9]\d*|[1-9]\d* specs?, \d+ failures?|': ok$",
    re.MULTILINE,
)


def fill_fail_only(
    results: Results, listed: Sequence[str], text: str, exit_code: Optional[int]
) -> Tuple[Results, int]:
    """Listed ids a fail-only parser did not see, counted as passed, as the harness's
    EvalType.FAIL_ONLY grading counts them; returns the results and how many were filled.

    Nothing is filled unless the run shows it happened: a failure was recorded, or the log
    holds a non-zero count of tests run. Stricter than the harness, a run that exited non-zero
    without any recorded failure fills nothing either (the harness lets an empty map through).
    """
    ran = bool(results) or bool(_SUITE_RAN.search(text))
    unexplained_exit = exit_code not in (None, 0) and FAILED not in results.values()
    if not ran or unexplained_exit:
        return results, 0
    filled = dict(results)
    for test_id in listed:
        filled.setdefault(test_id, PASSED)
    return filled, len(filled) - len(results)
