"""SWE-bench harness log parsers -> parsers of the grading runtime.

A row (or its recipe) names the harness parser its FAIL_TO_PASS/PASS_TO_PASS ids were written
by: a key of ``swebench.harness.log_parsers.PARSER_REGISTRY`` (swebench 5.0.2), or one of the
short names this project already used. ``runtime_parser`` turns it into the name of a parser of
``packager.grading.parsers.PARSERS``, one whose status map on the same log agrees with the
harness parser's (tests/unit/datasets/test_harness_parity.py and test_harness_parity_js.py feed
both the same logs). Pure: no I/O.
"""

from __future__ import annotations

from packager.grading.parsers import PYTEST_FAMILY
from packager.grading.parsers_js import PARSERS as JS_PARSERS
from packager.grading.parsers_js import PRISM_COMMAND

HARNESS_PARSERS: dict[str, str] = {
    # pytest, read like the harness's parse_log_pytest (ids cut at whitespace there; the
    # runtime keeps whole ids and matches a cut listed id by prefix, see rules.resolve).
    "parse_log_pytest": "pytest",
    "parse_log_astroid": "pytest",
    "parse_log_flask": "pytest",
    "parse_log_marshmallow": "pytest",
    "parse_log_pvlib": "pytest",
    "parse_log_pyvista": "pytest",
    "parse_log_sqlfluff": "pytest",
    "parse_log_xarray": "pytest",
    # pytest, an absolute-path parameter keeping its last part.
    "parse_log_pytest_options": "pytest_options",
    "parse_log_pydicom": "pytest_options",
    "parse_log_requests": "pytest_options",
    "parse_log_pylint": "pytest_options",
    # pytest, coloured output and classic progress lines.
    "parse_log_pytest_v2": "pytest_v2",
    "parse_log_astropy": "pytest_v2",
    "parse_log_scikit": "pytest_v2",
    "parse_log_sphinx": "pytest_v2",
    "parse_log_matplotlib": "pytest_matplotlib",
    "parse_log_seaborn": "pytest_seaborn",
    "parse_log_django": "django",
    "parse_log_sympy": "sympy",
    # C++ doctest's XML reporter (nlohmann/json), not Python's doctest.
    "parse_log_doctest": "doctest",
    "parse_log_gotest": "gotest",
    # C/C++, Java, PHP, Ruby and Rust runners (packager/grading/parsers_native.py).
    "parse_log_redis": "redis",
    "parse_log_jq": "automake",
    "parse_log_micropython_test": "micropython",
    "parse_log_googletest": "googletest",
    "parse_log_maven": "maven",
    "parse_log_ant": "ant",
    "parse_log_gradle_custom": "gradle",
    "parse_log_phpunit": "phpunit_testdox",
    "parse_log_minitest": "minitest",
    "parse_log_cucumber": "cucumber",
    "parse_log_jekyll": "jekyll",
    "parse_log_ruby_unit": "test_unit",
    "parse_log_rspec_transformed_json": "rspec_lines",
    "parse_log_cargo": "cargo",
    "redis": "redis",
    "automake": "automake",
    "micropython": "micropython",
    "googletest": "googletest",
    "maven": "maven",
    "ant": "ant",
    "gradle": "gradle",
    "phpunit_testdox": "phpunit_testdox",
    "minitest": "minitest",
    "cucumber": "cucumber",
    "jekyll": "jekyll",
    "test_unit": "test_unit",
    "rspec_lines": "rspec_lines",
    "cargo": "cargo",
    # JavaScript/TypeScript (packager/grading/parsers_js.py), ids as the harness writes them.
    "parse_log_jest": "jest",
    "parse_log_jest_json": "jest_json",
    "parse_log_immutable_js": "jest_either",  # by instance: jest --json via jq, or --verbose
    "parse_log_vitest": "vitest",
    "parse_log_karma": "karma",
    "parse_log_tap": "tap_lines",  # mocha -R tap (axios), qunit (three.js): flat, ids whole
    "parse_log_highlightjs": "mocha_spec",
    "parse_log_prismjs": "mocha_json",
    "parse_log_cypress": "cypress",
    "parse_log_carbon": "jest_files",
    "parse_log_react_pdf": "jest_files",
    "parse_log_prettier": "jest_files",
    "parse_log_scratch_gui": "jest_files",
    "parse_log_grommet": "jest_files_trimmed",
    "parse_log_emotion": "jest_files_raw",
    "parse_log_calypso": "calypso",
    "parse_log_next": "next",
    "parse_log_lighthouse": "lighthouse",
    "parse_log_quarto_cli": "quarto",
    "parse_plotly_js": "plotly",
    # Failures only: the harness grades these repositories fail-only.
    "parse_log_eslint": "eslint",
    "parse_log_bpmn_js": "karma_failed",
    "parse_log_openlayers": "openlayers",
    "parse_log_chart_js": "chart_js",
    "parse_log_marked": "marked",
    "parse_log_p5js": "p5js",
    # The project's own names.
    "pytest": "pytest",
    "gotest": "gotest",
    "go": "gotest",
    "tap": "tap",
    "node": "tap",
    "junit": "junit",
    "pytest_options": "pytest_options",
    "pytest_v2": "pytest_v2",
    "pytest_matplotlib": "pytest_matplotlib",
    "pytest_seaborn": "pytest_seaborn",
    "django": "django",
    "sympy": "sympy",
    "doctest": "doctest",
}
"""Supported parser names -> the runtime parser reading the same log the same way.

``parse_log_jekyll`` picks minitest or cucumber by the row's instance id; its runtime parser
``jekyll`` reads both runners' lines (neither prints the other's). ``parse_log_tap`` maps onto
``tap_lines``, not the runtime's ``tap``: it keeps the ``- `` and ``# SKIP`` of a TAP line in its
ids and flattens subtests.
Every JavaScript name of swebench 5.0.2's registry is accepted, plus the names its
``MAP_REPO_TO_PARSER_JS`` uses outside the registry (emotion, cypress, plotly, prettier,
scratch-gui). Three harness parsers choose a log format by the row (``parse_log_next`` and
``parse_log_lighthouse`` by version, ``parse_log_immutable_js`` by instance); their runtime
parsers tell the format from the log itself.
"""
HARNESS_PARSERS.update({name: name for name in JS_PARSERS})  # the runtime's own JS names

TEST_PYTEST = "pytest --no-header -rA --tb=no -p no:cacheprovider"
TEST_ASTROPY_PYTEST = "pytest -rA -vv -o console_output_style=classic --tb=no"
TEST_DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
TEST_SEABORN = "pytest --no-header -rA"
TEST_SPHINX = "tox --current-env -epy39 -v --"
TEST_SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
TEST_GO = "go test -v ./..."
TEST_REDIS = "TERM=dumb ./runtest --durable"
TEST_CARGO = "cargo test --no-fail-fast"
TEST_PHPUNIT = "vendor/bin/phpunit --testdox --colors=never"
TEST_CTEST = "ctest --test-dir build -V"
TEST_AUTOMAKE = "make check"
TEST_RSPEC = (
    "bundle exec rspec --no-color --format json | sed -n '/^{/,$p'"
    " | jq -r '.examples[] | \"\\(.description) - \\(.status)\"'"
)

DEFAULT_TEST_COMMANDS: dict[str, str] = {
    "pytest": TEST_PYTEST,
    "pytest_options": TEST_PYTEST,
    "pytest_matplotlib": TEST_PYTEST,
    "pytest_v2": TEST_PYTEST,
    "pytest_seaborn": TEST_SEABORN,
    "django": TEST_DJANGO,
    "sympy": TEST_SYMPY,
    "gotest": TEST_GO,
    "redis": TEST_REDIS,
    "cargo": TEST_CARGO,
    "phpunit_testdox": TEST_PHPUNIT,
    "googletest": TEST_CTEST,
    "automake": TEST_AUTOMAKE,
    "rspec_lines": TEST_RSPEC,
}
"""Runtime parser -> the harness's test command for that family, for a recipe without
``test_cmd``. The harness's Go commands are per instance (``go test -v <package>``); ``./...``
is their general form, and so are the others' (the harness names a test file or filter per
instance). Maven, Gradle, ant, minitest, test-unit, cucumber and micropython have none: their
harness commands need a per-instance test list or a build-file edit (``pre_install``)."""

HARNESS_TEST_COMMANDS: dict[str, str] = {
    "parse_log_astropy": TEST_ASTROPY_PYTEST,
    "parse_log_sphinx": TEST_SPHINX,
    # JavaScript repositories whose every spec runs one command (swebench 4.1.0's specs; prism
    # has no spec there, its command is the one swebench 5.0.2's parser splits its log on).
    "parse_log_calypso": "npm run test-client",
    "parse_log_marked": "./node_modules/.bin/jasmine --no-color --config=jasmine.json",
    "parse_log_p5js": (
        "sed -i 's/concurrency:[[:space:]]*[0-9][0-9]*/concurrency: 1/g' Gruntfile.js\n"
        "stdbuf -o 1M ./node_modules/.bin/grunt test --quiet --force"
    ),
    "parse_log_prismjs": PRISM_COMMAND,
}
"""Harness parsers whose repository's command differs from its family's default. The other
JavaScript repositories' commands are per instance (a spec's ``test_cmd`` names its files)."""


TRACED_PARSERS = frozenset({"maven"})
"""Runtime parsers that read the shell's trace of each test command (``set -x``: ``+ mvn test
-Dtest=<id>``) to know which test a result belongs to."""


def join_test_commands(parser: str, commands: tuple[str, ...] | list[str]) -> str:
    """A spec's list of test commands as one shell command for runtime parser ``parser``.

    ``&&``-joined, except for a ``TRACED_PARSERS`` one: there, as in the harness's eval script,
    every command runs (one test each: a failing test must not keep the next from running)
    under ``set -x``, whose trace names the test of each result.
    """
    if parser in TRACED_PARSERS:
        return "; ".join(("set -x", *commands))
    return " && ".join(commands)


def runtime_parser(name: str) -> str:
    """The runtime parser for a harness (or project) parser name; ValueError when unsupported."""
    try:
        return HARNESS_PARSERS[name]
    except KeyError:
        supported = ", ".join(sorted(HARNESS_PARSERS))
        raise ValueError(f"unsupported log parser {name!r} (supported: {supported})") from None


def default_test_command(name: str) -> str | None:
    """The harness's test command for a parser name (harness or runtime), None if it has none."""
    if name in HARNESS_TEST_COMMANDS:
        return HARNESS_TEST_COMMANDS[name]
    return DEFAULT_TEST_COMMANDS.get(HARNESS_PARSERS.get(name, name))


def not_test_ids(parser: str, test_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Listed ids that are pytest's own progress marks, not tests: runner output the harness's
    line-matching parser once read as a result (SWE-bench Verified lists `[100%]` as a
    PASS_TO_PASS of pytest-dev__pytest-5262 and -7521). Nothing else is ever set aside.
    """
    import re

    if parser not in PYTEST_FAMILY:
        return ()
    progress = re.compile(r"^\[\s*\d{1,3}%\]$")
    return tuple(test_id for test_id in test_ids if progress.match(test_id))
