"""In-process canaries and tripwires for the test runners (pytest's is at the end).

Code under test runs in the test runner's own process, so it can tamper with what the runner
reports: make ``assert`` a no-op, rewrite the runner's output, or report every test passed. A
test the runtime adds for one run, with a random name, whose honest outcome is known, shows it:
only a tampered run reports it otherwise.

- Node (``node:test``, run by ``node --test`` directly or by a row's own grader script): a
  *todo* test appended to every file that uses ``node:test``. Its body calls each ``node:assert``
  function (and ``assert.strict``'s) with arguments that must fail; if every call threw, the body
  throws, so an honest run reports ``not ok ... # TODO``. A todo test's failure does not fail the
  run (exit code 0, not counted in ``# fail``), so a grader that scores by exit code or by the
  failures it counts is unaffected. ``ok`` for it means an assertion was a no-op or the runner
  (its output) was rewritten.
- Go: ``write_go_canaries`` adds, beside the passing canary, a test that always fails;
  reported PASS or SKIP it shows a test binary whose output was rewritten.
- SymPy (``bin/test``): a test function that always fails, appended to every test file the
  command names; reported ``ok`` it shows a runner patched from inside the process.
- JavaScript runners with a global ``it`` (mocha, jest, jasmine, karma with either): a test
  that always fails, appended to every JavaScript/TypeScript file the command names; reported
  passed or skipped it shows a runner (or its reporter) patched from inside the process.
- C++ GoogleTest and doctest: a test that always fails, appended to every C++ source of the
  repository that defines tests of that framework (the build step the grader's command runs
  first compiles it into the test binaries the command builds); reported passed, the same.

The ``check_*`` functions read a run's output and raise ``Tampered`` (grade.py scores it 0,
``policy_violation``); they never decide a reward otherwise. Standard library only, Python >=
3.9; must not import the other runtime modules (grade.py imports this one).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple


class Tampered(Exception):
    """A canary or tripwire shows that the code under test tampered with the test runner: the
    run scores 0 with status ``policy_violation`` (grade.py turns it into its report).
    """


Report = Dict[str, Any]

NODE_CANARY_PREFIX = "grading_canary_"
NODE_EXTENSIONS = (".js", ".cjs", ".mjs")
NODE_SKIP_DIRS = {".git", "node_modules"}
NODE_FILE_LIMIT = 2 * 1024 * 1024
NODE_FILES_MAX = 2000

# Every call must throw on an honest node:assert; `a` is the module, `s` its strict variant,
# `x`/`y` two different random strings (so a patched assert cannot spare known arguments).
_NODE_CHECKS = (
    "() => a(false)",
    "() => a.ok(false)",
    "() => a.equal(x, y)",
    "() => a.notEqual(x, x)",
    "() => a.deepEqual({ k: x }, { k: y })",
    "() => a.notDeepEqual({ k: x }, { k: x })",
    "() => a.strictEqual(x, y)",
    "() => a.notStrictEqual(x, x)",
    "() => a.deepStrictEqual({ k: x }, { k: y })",
    "() => a.notDeepStrictEqual({ k: x }, { k: x })",
    "() => a.throws(() => {})",
    "() => a.doesNotThrow(() => { throw new Error(x); })",
    "() => a.match(x, /^$/)",
    "() => a.doesNotMatch(x, /./)",
    "() => a.fail(x)",
    "() => a.ifError(new Error(x))",
    "() => s(false)",
    "() => s.ok(false)",
    "() => s.equal(x, y)",
    "() => s.deepEqual({ k: x }, { k: y })",
    "() => s.strictEqual(x, y)",
    "() => s.deepStrictEqual({ k: x }, { k: y })",
    "() => s.throws(() => {})",
)


class AddedTest:
    """A test added to some of a run's test files (by appending), and how to take it out again."""

    def __init__(self, name: str, files: List[Tuple[Path, bytes]]) -> None:
        self.name = name
        self.files = files  # (path, original bytes)

    def remove(self) -> None:
        """Put every file back as it was."""
        for path, original in self.files:
            try:
                path.write_bytes(original)
            except OSError:
                pass


def node_canary_source(name: str, esm: bool, x: str, y: str) -> str:
    """The JavaScript appended to one test file (ES module or CommonJS syntax)."""
    tag = name[len(NODE_CANARY_PREFIX) :]
    checks = ",\n      ".join(_NODE_CHECKS)
    if esm:
        head = (
            f"import __gradingTest{tag} from 'node:test';\n"
            f"import __gradingAssert{tag} from 'node:assert';\n"
            f"((t, a) => {{\n"
        )
        tail = f"}})(__gradingTest{tag}, __gradingAssert{tag});\n"
    else:
        head = "((t, a) => {\n"
        tail = "})(require('node:test'), require('node:assert'));\n"
    return (
        "\n;"
        + head
        + f"  const s = a.strict, x = {json.dumps(x)}, y = {json.dumps(y)};\n"
        + f"  t({json.dumps(name)}, {{ todo: 'grading canary' }}, () => {{\n"
        + f"    const checks = [\n      {checks},\n    ];\n"
        + "    let held = 0;\n"
        + "    for (const check of checks) { try { check(); } catch (e) { held += 1; } }\n"
        + "    if (held === checks.length) throw new Error('grading canary: assertions held');\n"
        + "  });\n"
        + tail
    )


def _package_type(folder: Path, root: Path, cache: Dict[Path, str]) -> str:
    """``module`` or ``commonjs``: the ``type`` of the nearest package.json (Node's rule)."""
    here = folder
    seen: List[Path] = []
    found = "commonjs"
    while True:
        if here in cache:
            found = cache[here]
            break
        seen.append(here)
        manifest = here / "package.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
                found = "module" if isinstance(data, dict) and data.get("type") == "module" else ""
            except (OSError, ValueError):
                found = ""
            found = found or "commonjs"
            break
        if here == root or root not in here.parents:
            break
        here = here.parent
    for folder_seen in seen:
        cache[folder_seen] = found
    return found


def _node_test_files(repo: Path) -> Iterable[Path]:
    count = 0
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = sorted(
            d for d in dirnames if d not in NODE_SKIP_DIRS and not d.startswith(".")
        )
        for name in sorted(filenames):
            if not name.endswith(NODE_EXTENSIONS):
                continue
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            try:
                if path.stat().st_size > NODE_FILE_LIMIT or b"node:test" not in path.read_bytes():
                    continue
            except OSError:
                continue
            yield path
            count += 1
            if count >= NODE_FILES_MAX:
                return


def write_node_canaries(repo: Path) -> Optional[AddedTest]:
    """Append a canary test to every file of ``repo`` that uses ``node:test``; None if none.

    Only files that import ``node:test`` are touched: fixtures and helpers that do not register
    tests are left byte for byte (a test may read them as data). The canary runs after the
    file's own tests, i.e. after the code under test has been loaded and could have patched
    ``node:assert``.
    """
    root = repo.resolve()
    name = f"{NODE_CANARY_PREFIX}{secrets.token_hex(6)}"
    x, y = secrets.token_hex(4), secrets.token_hex(5)
    cache: Dict[Path, str] = {}
    files: List[Tuple[Path, bytes]] = []
    try:
        for path in _node_test_files(repo):
            if path.name.endswith(".mjs"):
                esm = True
            elif path.name.endswith(".cjs"):
                esm = False
            else:
                esm = _package_type(path.parent.resolve(), root, cache) == "module"
            original = path.read_bytes()
            files.append((path, original))
            path.write_bytes(original + node_canary_source(name, esm, x, y).encode())
    except OSError:
        AddedTest(name, files).remove()
        raise
    return AddedTest(name, files) if files else None


_TAP_LINE = re.compile(r"^\s*(not ok|ok)\b(?:\s+\d+)?(?:\s+-)?\s+(\S+)")
_SPEC_LINE = re.compile(r"^\s*([\u2714\u2716])\s+(\S+)")  # ✔ passed, ✖ failed


def node_canary_outcomes(text: str, name: str) -> List[str]:
    """What Node's TAP or spec reporter said about the canary: ``passed``/``failed`` each time."""
    seen: List[str] = []
    if name not in text:
        return seen
    for line in text.splitlines():
        if name not in line:
            continue
        m = _TAP_LINE.match(line)
        if m and m.group(2) == name:
            seen.append("failed" if m.group(1) == "not ok" else "passed")
            continue
        m = _SPEC_LINE.match(line)
        if m and m.group(2) == name:
            seen.append("failed" if m.group(1) == "\u2716" else "passed")
    return seen


def node_canary_verdict(texts: Iterable[str], name: str) -> str:
    """``tampered`` (reported passed anywhere), ``held`` (only ever failed) or ``unseen``."""
    outcomes = [o for text in texts for o in node_canary_outcomes(text, name)]
    if "passed" in outcomes:
        return "tampered"
    return "held" if outcomes else "unseen"


def drop_named(tests: Dict[str, str], name: str, separator: str = " > ") -> Dict[str, str]:
    """``tests`` without the results of the test ``name`` (at any nesting level)."""
    return {k: v for k, v in tests.items() if k != name and not k.endswith(f"{separator}{name}")}


NODE_TAMPERED = (
    "node's test runner reported its grading canary passed: the code under test made an "
    "assertion a no-op or rewrote the runner's results"
)


def check_node_canary(
    tests: Dict[str, str], texts: Sequence[str], name: str, report: Report
) -> Dict[str, str]:
    """Judge a run by its node canary (``write_node_canaries``); drop the canary's results.

    Reported passed: ``Tampered``. Never reported while other results were parsed: the output
    did not come from the files the canary was added to, so none of it is trusted.
    """
    verdict = node_canary_verdict(texts, name)
    if verdict == "tampered":
        raise Tampered(NODE_TAMPERED)
    kept = drop_named(tests, name)
    if verdict == "unseen" and kept:
        report.setdefault("notes", []).append(
            "node test output without the grading canary: results not trusted"
        )
        return {}
    return kept


def check_grader_canary(name: str, stdout: str, stderr_path: Path, report: Report) -> None:
    """The row's own grader ran node's test runner on files holding the node canary: if its
    output (stdout or stderr) shows the canary passed, the run was tampered with. A grader that
    prints nothing of that run is a black box here: noted, not judged.
    """
    try:
        stderr = stderr_path.read_bytes().decode("utf-8", "replace")
    except OSError:
        stderr = ""
    verdict = node_canary_verdict([stdout, stderr], name)
    report["node_canary"] = verdict
    if verdict == "tampered":
        raise Tampered(NODE_TAMPERED)
    if verdict == "unseen":
        report.setdefault("notes", []).append(
            "the grader's output does not show node's grading canary: tampering with node's "
            "assert or test runner could not be checked"
        )


GO_TRIPWIRE_PREFIX = "TestGradingTripwire"


def go_tripwire_name(canary: str) -> str:
    """The must-fail test written beside the Go canary ``canary``."""
    return canary.replace("TestGradingCanary", GO_TRIPWIRE_PREFIX, 1)


def is_go_tripwire(test_id: str) -> bool:
    """Whether a parsed Go test id is a tripwire's (its results never count)."""
    return test_id.split("/", 1)[0].startswith(GO_TRIPWIRE_PREFIX)


def check_go_tripwires(parsed: Dict[str, str], canaries: Sequence[str]) -> None:
    """A Go tripwire reported passed or skipped (in ``parse_gotest``'s results of the run)
    means the test binary's output was rewritten: ``Tampered``.
    """
    names = {go_tripwire_name(c) for c in canaries}
    bad = sorted(k for k, v in parsed.items() if k in names and v in ("passed", "skipped"))
    if bad:
        raise Tampered(
            f"go test reported a test that must fail as {parsed[bad[0]]}: "
            "the code under test tampered with the test binary"
        )


def go_tripwire_source(name: str) -> str:
    """A Go test that always fails (appended to the canary file, so it runs last)."""
    return f'\nfunc {name}(t *testing.T) {{\n\tt.Fatal("grading tripwire")\n}}\n'


SYMPY_TRIPWIRE_PREFIX = "test_grading_tripwire_"


def command_test_files(
    repo: Path, command: str, extensions: Sequence[str] = (".py",)
) -> List[Path]:
    """The files inside ``repo`` with one of ``extensions`` that ``command`` names (shell words,
    or the value of an ``--option=value`` word), in order.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    root = repo.resolve()
    found: List[Path] = []
    for word in words:
        if word.startswith("--") and "=" in word:
            word = word.split("=", 1)[1]
        if not word.endswith(tuple(extensions)) or word.startswith("-"):
            continue
        path = repo / word
        target = path.resolve()
        inside = root in target.parents
        if inside and path.is_file() and not path.is_symlink() and target not in found:
            found.append(target)
    return found


def write_sympy_tripwire(repo: Path, command: str) -> Optional[AddedTest]:
    """Append a must-fail test function to every test file the command names; None if none."""
    name = f"{SYMPY_TRIPWIRE_PREFIX}{secrets.token_hex(6)}"
    body = f"\n\ndef {name}():\n    raise AssertionError('grading tripwire')\n".encode()
    files: List[Tuple[Path, bytes]] = []
    for path in command_test_files(repo, command):
        original = path.read_bytes()
        files.append((path, original))
        path.write_bytes(original + body)
    return AddedTest(name, files) if files else None


def sympy_tripwire_outcomes(text: str, name: str) -> List[str]:
    """What ``bin/test --verbose`` printed for the tripwire: the word after its name.

    Read here rather than through the parser, which skips a file's last line (``test_x ok
    [OK]``) and every status but ``ok``/``F``/``E``.
    """
    seen: List[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == name:
            seen.append(words[1])
    return seen


def check_sympy_tripwire(tests: Dict[str, str], output: str, name: str) -> Dict[str, str]:
    """SymPy's tripwire reported anything but a failure (``F``/``E``): ``Tampered``; otherwise
    ``tests`` without the tripwire's results.
    """
    seen = sympy_tripwire_outcomes(output, name)
    if [word for word in seen if word not in ("F", "E")]:
        raise Tampered(
            f"sympy's test runner reported a test that must fail as {seen[0]!r}: "
            "the code under test tampered with the runner"
        )
    return {k: v for k, v in tests.items() if not k.endswith(name)}


TRIPWIRE_PREFIX = "grading_tripwire_"
# Runners that give every test file a global ``it`` (karma's mocha and jasmine adapters too).
JS_GLOBAL_IT_RUNNERS = frozenset({"mocha", "_mocha", "jest", "jasmine", "karma"})
JS_TEST_EXTENSIONS = (".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx")
TRIPWIRE_TAMPERED = (
    "the test runner reported a test that must fail as {status}: the code under test tampered "
    "with the runner or its reporter"
)


# Options that select tests by name (matched against a test's full title). A plain literal
# value (no regular-expression syntax) is put in the tripwire's title, so that the filter still
# selects it; any other value, or a filter that inverts, gets no tripwire. Karma's ``--grep`` is
# a file pattern in karma configs, not this.
JS_NAME_FILTERS = {
    "mocha": ("-g", "--grep", "-f", "--fgrep"),
    "jest": ("-t", "--testNamePattern"),
}
JS_NAME_FILTERS["_mocha"] = JS_NAME_FILTERS["mocha"]
JS_INVERTING = ("-i", "--invert", "--filter")  # mocha's inverted grep; jasmine's filter
_PLAIN_TITLE = re.compile(r"[\w ,:;'=@#%&<>!/-]+")


def js_runner(command: str) -> Optional[str]:
    """The global-``it`` runner a command runs (a word naming it, path or not), or None; None
    too when the command selects that runner's tests by name in a way a title cannot follow.
    """
    found = _js_run(command)
    return found[0] if found else None


def _js_run(command: str) -> Optional[Tuple[str, str]]:
    """(runner, title prefix) for the tripwire of a command, or None (see ``js_runner``)."""
    try:
        words = shlex.split(command.replace(";", " ; "))
    except ValueError:
        return None
    runner = next(
        (w.rsplit("/", 1)[-1] for w in words if w.rsplit("/", 1)[-1] in JS_GLOBAL_IT_RUNNERS),
        None,
    )
    if runner is None:
        return None
    filters = JS_NAME_FILTERS.get(runner, ())
    values: List[str] = []
    for index, word in enumerate(words):
        option, eq, value = word.partition("=")
        if option in JS_INVERTING:
            return None
        if option not in filters:
            continue
        if not eq:
            value = words[index + 1] if index + 1 < len(words) else ""
        values.append(value)
    if not values:
        return runner, ""
    if len(values) > 1 or not _PLAIN_TITLE.fullmatch(values[0]):
        return None
    return runner, f"{values[0]} "


def js_tripwire_source(name: str) -> str:
    """A test that always fails, registered only where the runner defines a global ``it``
    (anywhere else, e.g. a build script the command also names, it does nothing).
    """
    return (
        f'\n;if (typeof it === "function") {{ it({json.dumps(name)}, function () '
        '{ throw new Error("grading tripwire"); }); }\n'
    )


def write_js_tripwire(repo: Path, command: str) -> Optional[AddedTest]:
    """Append a must-fail test to every JavaScript/TypeScript file the command names, when the
    command runs a runner with a global ``it``; None otherwise (or when it names no file). Its
    title holds the command's plain name filter (mocha ``-g timeout``: ``timeout
    grading_tripwire_...``), so that the filter selects it; ``name`` is the random part.
    """
    found = _js_run(command)
    if found is None:
        return None
    name = f"{TRIPWIRE_PREFIX}{secrets.token_hex(6)}"
    body = js_tripwire_source(found[1] + name).encode()
    files: List[Tuple[Path, bytes]] = []
    try:
        for path in command_test_files(repo, command, JS_TEST_EXTENSIONS):
            original = path.read_bytes()
            files.append((path, original))
            path.write_bytes(original + body)
    except OSError:
        AddedTest(name, files).remove()
        raise
    return AddedTest(name, files) if files else None


def check_named_tripwire(tests: Dict[str, str], name: str, report: Report) -> Dict[str, str]:
    """Judge a run by a tripwire whose results' ids hold ``name`` (``write_js_tripwire``,
    ``write_cpp_tripwire``); drop its results.

    Reported passed or skipped (under any suite name): ``Tampered``. Never reported while other
    results were parsed: the output did not come from the files the tripwire was added to (or a
    reporter left it out), so none of it is trusted.
    """
    seen = {k: v for k, v in tests.items() if name in k}
    for status in seen.values():
        if status in ("passed", "skipped"):
            raise Tampered(TRIPWIRE_TAMPERED.format(status=status))
    kept = {k: v for k, v in tests.items() if name not in k}
    if not seen and kept:
        report.setdefault("notes", []).append(
            "test output without the grading tripwire: results not trusted"
        )
        return {}
    return kept


# ------------------------------------------------------------------------------------------ C++

CPP_EXTENSIONS = (".cc", ".cpp", ".cxx")
CPP_SKIP_DIRS = {".git", "node_modules", "build", "_build", "CMakeFiles"}
CPP_FILES_MAX = 2000


class CppFramework:
    """How one C++ test framework's tripwire is written and filtered: always with the prefixed
    macros (``GTEST_TEST``, ``DOCTEST_SUBCASE``), which a project may not rename or undefine as
    it may the short ones (nlohmann/json's doctest_compatibility.h has no ``SUBCASE``).
    """

    def __init__(self, marker: bytes, defines: str, source: str, filters: Tuple[str, ...]):
        self.marker = marker  # bytes every test file of the framework holds (its include)
        self.defines = re.compile(defines.encode(), re.M)  # a test definition at a line start
        self.source = source  # format(name=...): the must-fail test
        self.filters = filters  # command options that select tests by name


CPP_FRAMEWORKS = {
    "googletest": CppFramework(
        b"gtest",
        r"^[ \t]*(?:GTEST_)?TEST(?:_F|_P)?[ \t]*\(",
        '\nGTEST_TEST(GradingTripwire, {name}) {{ GTEST_FAIL() << "grading tripwire"; }}\n',
        ("--gtest_filter",),
    ),
    "doctest": CppFramework(
        b"doctest",
        r"^[ \t]*(?:DOCTEST_)?TEST_CASE\w*[ \t]*\(",
        '\nDOCTEST_TEST_CASE("{name}") {{\n'
        '  DOCTEST_SUBCASE("tripwire") {{ DOCTEST_CHECK(false); }}\n}}\n',
        ("-tc", "--test-case", "-ts", "--test-suite", "-sc", "--subcase", "-id", "-is"),
    ),
}


def _cpp_test_files(repo: Path, framework: CppFramework) -> Iterable[Path]:
    count = 0
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = sorted(d for d in dirnames if d not in CPP_SKIP_DIRS)
        for filename in sorted(filenames):
            if not filename.endswith(CPP_EXTENSIONS):
                continue
            path = Path(dirpath) / filename
            if path.is_symlink() or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if framework.marker in data and framework.defines.search(data):
                yield path
                count += 1
                if count >= CPP_FILES_MAX:
                    return


def write_cpp_tripwire(repo: Path, command: str, parser: str) -> Optional[AddedTest]:
    """Append a must-fail test to every C++ file of ``repo`` that defines tests of the parser's
    framework (a distinct name per file: GoogleTest's test classes share one namespace); None if
    there is none, or when the command selects tests by name.
    """
    framework = CPP_FRAMEWORKS[parser]
    try:
        words = shlex.split(command.replace(";", " ; "))
    except ValueError:
        return None
    if any(w.split("=", 1)[0] in framework.filters for w in words):
        return None
    name = f"{TRIPWIRE_PREFIX}{secrets.token_hex(6)}"
    files: List[Tuple[Path, bytes]] = []
    try:
        for index, path in enumerate(_cpp_test_files(repo, framework)):
            original = path.read_bytes()
            files.append((path, original))
            body = framework.source.format(name=f"{name}_{index}")
            path.write_bytes(original + body.encode())
    except OSError:
        AddedTest(name, files).remove()
        raise
    return AddedTest(name, files) if files else None


# ------------------------------------------------------------------- pytest tripwire, Go canaries


class Tripwire:
    """A must-fail pytest test added for one run, and how to take it out again."""

    def __init__(self, name: str, path: Path, original: Optional[bytes]) -> None:
        self.name = name
        self.path = path
        self.original = original

    def remove(self) -> None:
        """Put the test file back as it was (or delete the file the tripwire had to make)."""
        if self.original is None:
            self.path.unlink(missing_ok=True)
        else:
            self.path.write_bytes(self.original)


def write_pytest_tripwire(repo: Path, plan: Mapping[str, Any]) -> Tripwire:
    """Add a test that must fail where the test command will collect it.

    Code under test can patch pytest from inside its own process (say, rewrite every report to
    `passed` at import time); the JUnit proof cannot see that, since it is built from the same
    reports. A test that raises unconditionally, with a random name, is reported `passed` only
    by a tampered runner. Test commands usually name the test files to run (SWE-bench appends
    those of the test patch), so the tripwire goes into the first listed test file that exists;
    failing that, into a new file beside it, or in `tests/`.
    """
    formula = plan.get("formula") or {}
    listed = [str(t) for key in ("fail_to_pass", "pass_to_pass") for t in (plan.get(key) or [])] + [
        str(t) for key in ("hidden_tests", "public_tests") for t in (formula.get(key) or [])
    ]
    named = [t.split("::", 1)[0] for t in listed if "::" in t]
    named += [str(p) for p in (formula.get("hidden_paths") or []) if str(p).endswith(".py")]
    name = f"test_{secrets.token_hex(6)}"
    body = f"\n\ndef {name}():\n    raise AssertionError('grading tripwire')\n"
    root = repo.resolve()
    for rel in named:
        target = (repo / rel).resolve()
        inside = target == root or root in target.parents
        if inside and rel.endswith(".py") and target.is_file() and not target.is_symlink():
            original = target.read_bytes()
            target.write_bytes(original + body.encode())
            return Tripwire(name, target, original)
    folder = repo / "tests" if (repo / "tests").is_dir() else repo
    for rel in named:
        candidate = (repo / rel).parent.resolve()
        if candidate.is_dir() and (candidate == root or root in candidate.parents):
            folder = candidate
            break
    path = folder / f"{name}.py"
    path.write_text(body.lstrip("\n"))
    return Tripwire(name, path, None)


def check_tripwire(tests: Dict[str, str], name: str) -> Dict[str, str]:
    """Drop the tripwire's result; a tripwire reported passed (or skipped) means tampering."""
    kept: Dict[str, str] = {}
    for test_id, status in tests.items():
        if test_id.rsplit("::", 1)[-1] == name:
            if status in ("passed", "skipped"):
                raise Tampered(
                    f"the test runner reported a test that must fail as {status}: "
                    "the code under test tampered with the runner"
                )
            continue
        kept[test_id] = status
    return kept


GO_CANARY_PREFIX = "zz_grading_canary_"
_GO_PACKAGE = re.compile(r"^package\s+(\w+)", re.MULTILINE)
_GO_BUILD_TAG = re.compile(r"^//(?:go:build|\s*\+build)\s", re.MULTILINE)
_GO_SKIP_DIRS = {".git", "vendor", "testdata", "node_modules"}


def _go_package(dirpath: Path, filenames: Sequence[str]) -> Optional[str]:
    """The package a canary test in ``dirpath`` must declare (from unconstrained files)."""
    names: Dict[str, int] = {}
    for name in sorted(filenames):
        if not name.endswith(".go") or name.startswith(GO_CANARY_PREFIX):
            continue
        try:
            text = (dirpath / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        head = text[: text.find("\npackage ") + 1] if "\npackage " in text else ""
        m = _GO_PACKAGE.search(text)
        if not m or _GO_BUILD_TAG.search(head):
            continue
        if not name.endswith("_test.go"):
            return m.group(1)  # the package itself: tests in it are always valid
        names[m.group(1)] = names.get(m.group(1), 0) + 1
    return max(names, key=lambda k: names[k]) if names else None


def write_go_canaries(repo: Path, nonce: str) -> List[Tuple[str, Path]]:
    """Add a passing canary test to every Go package that has tests; return (name, file) pairs.

    A test binary that prints fake results from an ``init`` and exits early never runs its
    canary, whose name (random per run) it cannot know; ``parsers.gotest_trusted`` drops every
    result of a package whose canary did not pass. Each canary file also holds a test that
    always fails (``go_tripwire_name``): reported passed or skipped, it shows a binary
    whose output was rewritten (``check_go_tripwires``).
    """
    canaries: List[Tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in _GO_SKIP_DIRS and not d.startswith(".")]
        if not any(f.endswith("_test.go") for f in filenames):
            continue
        here = Path(dirpath)
        package = _go_package(here, filenames)
        if package is None:
            continue
        name = f"TestGradingCanary{nonce}N{len(canaries)}"
        source = f'package {package}\n\nimport "testing"\n\nfunc {name}(t *testing.T) {{}}\n'
        source += go_tripwire_source(go_tripwire_name(name))
        path = here / f"{GO_CANARY_PREFIX}{nonce}_test.go"
        path.write_text(source, encoding="utf-8")
        canaries.append((name, path))
    return canaries
