"""Canaries and tripwires (packager/grading/canaries.py, tripwires.py, camouflage.py), end to
end through grade.py against small real repositories and the host's real `node`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from packager.grading import camouflage, canaries, grade, tripwires
from tests.unit.grading.test_grading_runtime import PY, Task, run_git

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not on this host")

KV_BUGGY = "'use strict';\nexports.get = (s) => s.split('=')[1];\n"
KV_FIXED = "'use strict';\nexports.get = (s) => s.split('=').slice(1).join('=');\n"
KV_TEST = (
    "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { get } = require('../kv.js');\n\n"
    "test('plain value', () => { assert.strictEqual(get('a=1'), '1'); });\n"
    "test('value with equals', () => { assert.deepStrictEqual(get('a=b=c'), 'b=c'); });\n"
)
ASSERT_NOOP = (
    KV_BUGGY + "const _a = require('node:assert');\n"
    "for (const k of ['ok', 'equal', 'strictEqual', 'deepEqual', 'deepStrictEqual', 'throws'])"
    " { _a[k] = () => {}; }\n"
)
# Rewrites the test process's reports to its parent (`node --test` runs each file in a child that
# sends v8-serialized events on stdout): every `test:fail` event becomes a same-length `test:pass`.
OUTPUT_REWRITE = KV_BUGGY + (
    "const _w = process.stdout.write.bind(process.stdout);\n"
    "process.stdout.write = (chunk, ...rest) => {\n"
    "  if (typeof chunk !== 'string') {\n"
    "    const b = Buffer.from(chunk);\n"
    "    for (let i = b.indexOf('test:fail'); i >= 0; i = b.indexOf('test:fail', i))"
    " b.write('test:pass', i);\n"
    "    chunk = b;\n"
    "  }\n"
    "  return _w(chunk, ...rest);\n"
    "};\n"
)
TAP_COMMAND = "node --test --test-reporter=tap test/"
F2P = ["value with equals"]
P2P = ["plain value"]


@pytest.fixture
def node_task(tmp_path: Path) -> Task:
    t = Task(tmp_path)
    t.diff({})  # keep the python files; the node ones are added to a second commit
    (t.repo / "kv.js").write_text(KV_BUGGY)
    (t.repo / "test").mkdir()
    (t.repo / "test" / "kv.test.js").write_text(KV_TEST)
    (t.repo / "test" / "fixture.js").write_text("module.exports = 'not a test';\n")
    run_git(t.repo, "add", "-A")
    run_git(t.repo, "commit", "-q", "-m", "node")
    t.base = run_git(t.repo, "rev-parse", "HEAD").strip()
    return t


def _tap(task: Task, patch: str, **overrides: object) -> tuple[dict, dict]:
    plan = {
        "parser": "tap",
        "test_command": TAP_COMMAND,
        "fail_to_pass": F2P,
        "pass_to_pass": P2P,
        "protected_paths": [],
        **overrides,
    }
    return task.grade(patch, **plan)


@needs_node
def test_node_canary_lets_the_fix_score_and_leaves_the_files(node_task: Task) -> None:
    before = {p: p.read_bytes() for p in (node_task.repo / "test").iterdir()}
    reward, report = _tap(node_task, node_task.diff({"kv.js": KV_FIXED}))
    assert reward["reward"] == 1.0, report
    assert set(F2P + P2P) <= set(report["tests"])
    [canary] = report["added_tests"]
    assert not [t for t in report["tests"] if canary in t]  # the canary's result is dropped
    assert report["exit_code"] == 0  # a todo test's failure does not fail the run
    assert {p: p.read_bytes() for p in (node_task.repo / "test").iterdir()} == before
    reward, report = _tap(node_task, "")
    assert reward["reward"] == 0.0 and report["status"] == "graded"


@needs_node
@pytest.mark.parametrize("cheat", [ASSERT_NOOP, OUTPUT_REWRITE], ids=["assert-noop", "rewrite"])
def test_node_tampering_is_caught(node_task: Task, cheat: str) -> None:
    reward, report = _tap(node_task, node_task.diff({"kv.js": cheat}), scan_patch=False)
    assert reward["reward"] == 0.0
    assert report["status"] == "policy_violation", report
    assert "canary" in report["reason"]


@needs_node
def test_node_canary_in_es_modules(node_task: Task) -> None:
    esm_test = (
        "import test from 'node:test';\nimport assert from 'node:assert';\n"
        "import kv from '../kv.js';\n"
        "test('value with equals', () => { assert.strictEqual(kv.get('a=b=c'), 'b=c'); });\n"
    )
    (node_task.repo / "test" / "kv.test.js").unlink()
    (node_task.repo / "test" / "kv.test.mjs").write_text(esm_test)
    run_git(node_task.repo, "add", "-A")
    run_git(node_task.repo, "commit", "-q", "-m", "esm")
    node_task.base = run_git(node_task.repo, "rev-parse", "HEAD").strip()
    reward, report = _tap(node_task, node_task.diff({"kv.js": KV_FIXED}), pass_to_pass=[])
    assert reward["reward"] == 1.0, report
    cheat = KV_FIXED.replace(".slice(1).join('=')", "[1]") + ASSERT_NOOP[len(KV_BUGGY) :]
    reward, report = _tap(node_task, node_task.diff({"kv.js": cheat}), pass_to_pass=[])
    assert report["status"] == "policy_violation", report


@needs_node
def test_node_results_without_the_canary_are_not_trusted(node_task: Task) -> None:
    forged = "echo 'ok 1 - value with equals'; echo 'ok 2 - plain value'"
    reward, report = _tap(node_task, node_task.diff({"kv.js": KV_FIXED}), test_command=forged)
    assert reward["reward"] == 0.0 and report["tests"] == {}
    assert any("canary" in n for n in report["notes"])


GRADER = """import json, os, re, subprocess
out = subprocess.run(["node", "--test", "--test-reporter=tap", "test/"], cwd=os.environ["REPO_DIR"],
                     capture_output=True, text=True).stdout
os.sys.stderr.write(out)
ok = {m.group(1) for m in re.finditer(r"^ok \\d+ - (.*)$", out, re.M)}
score = 1.0 if {"plain value", "value with equals"} <= ok else 0.0
print(json.dumps({"reward": score, "tests": score}))
"""


@needs_node
@pytest.mark.parametrize("quiet", [False, True], ids=["prints", "black-box"])
def test_script_grader_running_node_is_checked_by_its_canary(node_task: Task, quiet: bool) -> None:
    grader = node_task.task / "payload" / "grader"
    grader.mkdir(parents=True)
    source = GRADER.replace("os.sys.stderr.write(out)", "") if quiet else GRADER
    (grader / "grade.py").write_text(source)
    script = {
        "command": f"{PY} grade.py",
        "dir": "payload/grader",
        "criteria": [{"name": "tests", "weight": 100}],
    }
    kw = {"rule": "script", "script": script, "test_command": None}
    reward, report = node_task.grade(node_task.diff({"kv.js": KV_FIXED}), **kw)
    assert reward["reward"] == 1.0, report
    assert report["node_canary"] == ("unseen" if quiet else "held")
    reward, report = node_task.grade(node_task.diff({"kv.js": ASSERT_NOOP}), scan_patch=False, **kw)
    if quiet:  # a true black box: the tampering wins, and the report says it was not checked
        assert reward["reward"] == 1.0 and report["node_canary"] == "unseen"
        assert any("could not be checked" in n for n in report["notes"])
    else:
        assert reward["reward"] == 0.0
        assert report["status"] == "policy_violation", report
    # The scan reads the patch, so even the black box is stopped when the cheat is plain.
    reward, report = node_task.grade(node_task.diff({"kv.js": ASSERT_NOOP}), **kw)
    assert report["status"] == "policy_violation" and "kv.js:3" in report["reason"], report


def test_node_canary_outcomes_read_tap_and_spec() -> None:
    name = "nested value order"
    tap = f"ok 1 - real\n  not ok 2 - {name} # TODO keep order\n"
    assert canaries.node_canary_outcomes(tap, name) == ["failed"]
    assert canaries.node_canary_verdict([tap, f"ok 3 - {name} # TODO x\n"], name) == "tampered"
    spec = f"\u2714 real (1ms)\n\u2716 {name} (2ms) # keep order\n"
    assert canaries.node_canary_verdict([spec], name) == "held"
    assert canaries.node_canary_verdict([f"\u2714 {name} (2ms)\n"], name) == "tampered"
    assert canaries.node_canary_verdict([f"ok 4 - {name}\n"], name) == "tampered"
    assert canaries.node_canary_verdict(["ok 1 - real\n"], name) == "unseen"
    # Another test whose title merely starts with the canary's is not the canary.
    assert canaries.node_canary_verdict([f"ok 1 - {name}x\n"], name) == "unseen"
    assert canaries.node_canary_verdict([f"ok 1 - {name} twice\n"], name) == "unseen"
    tests = {"a": "passed", name: "skipped", f"file.js > {name}": "skipped"}
    assert canaries.drop_named(tests, name) == {"a": "passed"}


def test_node_canaries_touch_only_node_test_files(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"type": "module"}))
    (tmp_path / "a.test.js").write_text("import test from 'node:test';\n")
    (tmp_path / "b.test.cjs").write_text("const test = require('node:test');\n")
    (tmp_path / "fixture.js").write_text("export default 1;\n")
    (tmp_path / "node_modules" / "m").mkdir(parents=True)
    (tmp_path / "node_modules" / "m" / "t.js").write_text("require('node:test')\n")
    canary = canaries.write_node_canaries(tmp_path)
    assert canary is not None
    assert sorted(p.name for p, _ in canary.files) == ["a.test.js", "b.test.cjs"]
    esm = (tmp_path / "a.test.js").read_text()
    assert esm.count("import ") == 3 and f"t({json.dumps(canary.name)}," in esm
    assert "require('node:test')" in (tmp_path / "b.test.cjs").read_text().split(";", 1)[1]
    canary.remove()
    assert (tmp_path / "a.test.js").read_text() == "import test from 'node:test';\n"
    (tmp_path / "a.test.js").unlink()
    (tmp_path / "b.test.cjs").unlink()
    assert canaries.write_node_canaries(tmp_path) is None  # nothing to add to


GO_OUT = """=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestSortedRange
--- PASS: TestSortedRange (0.00s)
=== RUN   TestMergeOrder
--- {verdict}: TestMergeOrder (0.00s)
{tail}
"""
GO_CANARY = canaries.GoCanary("TestSortedRange", "TestMergeOrder", Path("x_test.go"), None)


def test_go_tripwire_written_beside_the_canary(tmp_path: Path) -> None:
    (tmp_path / "a.go").write_text("package a\n")
    test = 'package a\n\nimport "testing"\n\nfunc TestA(t *testing.T) {}\n'
    (tmp_path / "a_test.go").write_text(test)
    [canary] = canaries.write_go_canaries(tmp_path)
    assert canary.path == tmp_path / "a_test.go"  # appended to the test file compiled last
    source = canary.path.read_text()
    assert source.startswith(test) and "grading" not in source.lower()
    assert source.index(f"func {canary.name}(t *testing.T)") < source.index(
        f"func {canary.tripwire}(t *testing.T)"
    )
    canary.remove()
    assert (tmp_path / "a_test.go").read_text() == test


@pytest.mark.parametrize("verdict", ["PASS", "SKIP"])
def test_go_tripwire_reported_passed_is_tampering(verdict: str) -> None:
    out = GO_OUT.format(verdict=verdict, tail="PASS\nok  \texample.com/a\t0.01s")
    status = {"PASS": "passed", "SKIP": "skipped"}[verdict]
    with pytest.raises(tripwires.Tampered, match=f"must fail as {status}"):
        canaries.check_go_tripwires(grade.parsers.parse_gotest(out), [GO_CANARY])
    honest = GO_OUT.format(verdict="FAIL", tail="FAIL\nFAIL\texample.com/a\t0.01s")
    canaries.check_go_tripwires(grade.parsers.parse_gotest(honest), [GO_CANARY])
    assert "TestMergeOrder" in grade.parsers.gotest_trusted(honest, ["TestSortedRange"])


# bin/test --verbose output of sympy__sympy-12489 with a tripwire added (the real run's lines,
# the tripwire renamed as the runtime names them now).
SYMPY_HONEST = """sympy/combinatorics/tests/test_permutations.py[11]
test_Permutation ok
test_printing_non_cyclic ok
test_cyclic_order F                                      [FAIL]

________________________________________________________________________________
 sympy/combinatorics/tests/test_permutations.py:test_cyclic_order
"""
SYMPY_TAMPERED = "test_Permutation ok\ntest_cyclic_order ok      [OK]\n"


def test_sympy_tripwire_goes_into_the_files_the_command_names(tmp_path: Path) -> None:
    tests = tmp_path / "pkg" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "outside.py").symlink_to(tests / "test_a.py")
    command = "PYTHONWARNINGS='ignore' bin/test -C --verbose pkg/tests/test_a.py outside.py x.py"
    assert tripwires.command_test_files(tmp_path, command) == [(tests / "test_a.py").resolve()]
    added = tripwires.write_sympy_tripwire(tmp_path, command)
    assert added is not None and len(added.names) == 2  # two, even in one file
    text = (tests / "test_a.py").read_text()
    assert all(f"\ndef {name}():\n" in text for name in added.names)
    assert "grading" not in text and "tripwire" not in text
    added.remove()
    assert (tests / "test_a.py").read_text() == "def test_a():\n    pass\n"
    assert tripwires.write_sympy_tripwire(tmp_path, "bin/test -C --verbose 'unclosed") is None


def test_sympy_tripwire_reported_ok_is_tampering() -> None:
    parsed = grade.parsers.parse_sympy(SYMPY_HONEST)
    kept = tripwires.check_sympy_tripwire(parsed, SYMPY_HONEST, ["test_cyclic_order"])
    assert kept == {"test_Permutation": "passed", "test_printing_non_cyclic": "passed"}
    with pytest.raises(tripwires.Tampered, match="'ok'"):
        tripwires.check_sympy_tripwire({}, SYMPY_TAMPERED, ["test_other", "test_cyclic_order"])
    # A file's last line ("... ok [OK]") is not read by the parser; the tripwire check reads it.
    assert "test_cyclic_order" not in grade.parsers.parse_sympy(SYMPY_TAMPERED)


# ---------------------------------------------------------------- runners with a global `it`

# A runner shaped like mocha's TAP reporter (global `it`, the named files loaded, one line per
# test), small enough to run here with the host's node; its reporter is reachable from the code
# under test, as mocha's Runner is through require('mocha').
MINI_MOCHA = """'use strict';
const path = require('path');
const tests = [];
global.it = (name, fn) => tests.push([name, fn]);
global.__reporter = { line: (ok, i, name) => console.log(`${ok ? 'ok' : 'not ok'} ${i} ${name}`) };
const argv = process.argv.slice(2);
for (const f of argv.filter((a) => a.endsWith('.js'))) require(path.resolve(f));
const g = argv.indexOf('--grep');
const grep = g >= 0 ? new RegExp(argv[g + 1]) : null;  // mocha's: the value as a RegExp
let i = 0;
for (const [name, fn] of tests.filter(([n]) => !grep || grep.test(n))) {
  i += 1;
  let ok = true;
  try { fn(); } catch (e) { ok = false; }
  global.__reporter.line(ok, i, name);
}
"""
KV_SPEC = (
    "'use strict';\nconst assert = require('node:assert');\nconst { get } = require('../kv.js');\n"
    "it('plain value', () => { assert.strictEqual(get('a=1'), '1'); });\n"
    "it('value with equals', () => { assert.strictEqual(get('a=b=c'), 'b=c'); })"  # no newline
)
REPORT_ALL_OK = KV_BUGGY + (
    "const _line = global.__reporter.line;\n"
    "global.__reporter.line = (ok, i, name) => _line(true, i, name);\n"
)
MOCHA_COMMAND = "node tools/mocha -R tap test/kv.spec.js"


@pytest.fixture
def mocha_task(tmp_path: Path) -> Task:
    t = Task(tmp_path)
    t.diff({})
    (t.repo / "kv.js").write_text(KV_BUGGY)
    (t.repo / "tools").mkdir()
    (t.repo / "tools" / "mocha").write_text(MINI_MOCHA)
    (t.repo / "test").mkdir()
    (t.repo / "test" / "kv.spec.js").write_text(KV_SPEC)
    run_git(t.repo, "add", "-A")
    run_git(t.repo, "commit", "-q", "-m", "mocha")
    t.base = run_git(t.repo, "rev-parse", "HEAD").strip()
    return t


def _mocha(task: Task, patch: str, command: str = MOCHA_COMMAND) -> tuple[dict, dict]:
    plan = {
        "parser": "tap_lines",
        "test_command": command,
        "fail_to_pass": F2P,
        "pass_to_pass": P2P,
        "protected_paths": [],
    }
    return task.grade(patch, **plan)


@needs_node
def test_js_tripwire_lets_the_fix_score_and_leaves_the_files(mocha_task: Task) -> None:
    spec = mocha_task.repo / "test" / "kv.spec.js"
    reward, report = _mocha(mocha_task, mocha_task.diff({"kv.js": KV_FIXED}))
    assert reward["reward"] == 1.0, report
    assert set(report["tests"]) == set(F2P + P2P)  # the tripwire's failure is dropped
    assert report["exit_code"] == 0
    assert spec.read_text() == KV_SPEC
    reward, report = _mocha(mocha_task, "")
    assert reward["reward"] == 0.0 and report["status"] == "graded"


@needs_node
def test_js_runner_reporting_every_test_passed_is_caught(mocha_task: Task) -> None:
    reward, report = _mocha(mocha_task, mocha_task.diff({"kv.js": REPORT_ALL_OK}))
    assert reward["reward"] == 0.0
    assert report["status"] == "policy_violation", report
    assert "must fail as passed" in report["reason"]


@needs_node
def test_js_tripwire_follows_a_plain_name_filter(mocha_task: Task) -> None:
    """mocha's --grep selects tests by title: a plain value goes into the tripwire's title, so
    the filtered run still holds it; a regular expression gets no tripwire (what
    docs/security.md lists as open)."""
    command = f"{MOCHA_COMMAND} --grep value"
    reward, report = _mocha(mocha_task, mocha_task.diff({"kv.js": KV_FIXED}), command)
    assert reward["reward"] == 1.0, report
    reward, report = _mocha(mocha_task, mocha_task.diff({"kv.js": REPORT_ALL_OK}), command)
    assert reward["reward"] == 0.0 and report["status"] == "policy_violation", report
    command = f"{MOCHA_COMMAND} --grep 'val(ue)'"
    reward, report = _mocha(mocha_task, mocha_task.diff({"kv.js": KV_FIXED}), command)
    assert reward["reward"] == 1.0, report
    reward, report = _mocha(mocha_task, mocha_task.diff({"kv.js": REPORT_ALL_OK}), command)
    assert reward["reward"] == 1.0  # unchecked


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("timeout 10s npx mocha -R tap test/a.js -g 'timeout'", ("mocha", "timeout ")),
        ("npx mocha test/a.js -R tap --grep=compression", ("mocha", "compression ")),
        ("npx mocha test/a.js --fgrep 'should not fail'", ("mocha", "should not fail ")),
        ("npx jest test/a.test.js -t 'renders list'", ("jest", "renders list ")),
        ("npx jest test/a.test.js --testNamePattern=x", ("jest", "x ")),
        ("npx mocha test/a.js", ("mocha", "")),
        ("npx mocha test/a.js -g 'a|b'", None),  # a regular expression
        ("npx mocha test/a.js -g x --grep y", None),
        ("npx mocha test/a.js -g x -i", None),  # inverted
        ("npx jasmine --filter=x spec/a.js", None),
        ("npx mocha test/a.js -g", None),  # no value
        ("npx vitest run -t x test/a.js", None),
    ],
)
def test_js_runs_and_their_name_filters(command: str, found: tuple[str, str] | None) -> None:
    assert tripwires._js_run(command) == found
    assert tripwires.js_runner(command) == (found[0] if found else None)


def test_js_tripwire_goes_into_the_files_the_command_names(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    spec = "describe('parser', () => {\n  it('reads a header', () => {});\n});\n"
    files = {"a.test.ts": spec, "b.test.js": "test('b', () => {});\n", "c.py": "x\n"}
    files["build.js"] = "console.log('built');\n"  # named, but calls no test function
    for name, text in files.items():
        (tmp_path / "test" / name).write_text(text)
    command = (
        "npm run build && COVERAGE=false npx karma start karma.conf.js --single-run "
        '--grep="test/a.test.ts" test/b.test.js test/c.py test/build.js missing.js'
    )
    assert tripwires.js_runner(command) == "karma"
    added = tripwires.write_js_tripwire(tmp_path, command)
    assert added is not None and len(added.names) == 2
    assert [p.name for p, _ in added.files] == ["a.test.ts", "b.test.js"]
    a, b = ((tmp_path / "test" / n).read_text() for n in ("a.test.ts", "b.test.js"))
    assert f"it({json.dumps(added.names[0])}," in a and 'describe("parser",' in a
    assert b.endswith(");\n") and f"test({json.dumps(added.names[1])}," in b  # what b calls
    assert "typeof it" not in a + b and "grading" not in a + b
    added.remove()
    assert {n: (tmp_path / "test" / n).read_text() for n in files} == files
    for command in (
        "node scripts/test.js test/b.test.js",  # no global-`it` runner named
        "npx vitest run test/b.test.js",  # vitest's globals are optional
        "npx jest -t 'some.*name' test/b.test.js",
        "node_modules/.bin/mocha --grep=value -i test/b.test.js",
        "npx mocha 'unclosed",
        "npx mocha test/build.js",  # no test file
    ):
        assert tripwires.write_js_tripwire(tmp_path, command) is None, command
    assert tripwires.js_runner("./node_modules/.bin/_mocha -R tap x.js") == "_mocha"


@needs_node
@pytest.mark.parametrize("suite", ["", "parser"])
def test_js_tripwire_source_registers_a_failing_test(tmp_path: Path, suite: str) -> None:
    """What is appended registers one test under the runner's `it` (inside `describe` when the
    file has one) that throws, whatever shape the body took."""
    import subprocess

    runner = tmp_path / "run.cjs"
    runner.write_text(
        "global.describe = (n, f) => f();\n"
        "global.it = (n, f) => { try { f(); console.log('ok', n); }"
        " catch (e) { console.log('not ok', n); } };\n"
    )
    for i in range(12):
        script = tmp_path / f"t{i}.js"
        words = ["value", "order", "nested"]
        script.write_text("it('real', () => {})" + camouflage.js_test("a b", words, "it", suite))
        out = subprocess.run(
            [NODE or "node", "--require", str(runner), str(script)], capture_output=True, text=True
        )
        assert out.stdout.splitlines() == ["ok real", "not ok a b"], out.stderr


def test_js_tripwire_verdicts() -> None:
    names = ["reads nested header", "keeps order"]
    honest = {"suite > a": "passed", names[0]: "failed", f"x > {names[1]}": "error", "b": "failed"}
    report: dict = {}
    assert tripwires.check_named_tripwire(honest, names, report) == {
        "suite > a": "passed",
        "b": "failed",
    }
    assert report == {}
    for status in ("passed", "skipped"):
        with pytest.raises(tripwires.Tampered, match=f"must fail as {status}"):
            tripwires.check_named_tripwire({f"refs > {names[1]}": status}, names, {})
    assert tripwires.check_named_tripwire({"a": "passed"}, names, report) == {}
    assert report["notes"] == ["test output without the grading tripwire: results not trusted"]
    assert tripwires.check_named_tripwire({}, names, {}) == {}


# ------------------------------------------------------------------------- C++ test frameworks


def test_cpp_tripwire_goes_into_every_file_defining_tests(tmp_path: Path) -> None:
    test = tmp_path / "test"
    (test / "gtest").mkdir(parents=True)
    (tmp_path / "build").mkdir()
    files = {
        "test/ranges-test.cc": '#include "gtest/gtest.h"\nTEST(ranges_test, a) {}\n',
        "test/format-test.cc": '#include "gtest-extra.h"\n  TEST_F(fixture, b) {}\n',
        "test/util.cc": '#include "gtest/gtest.h"\n// TEST(commented, out)\n',
        "test/gtest/gmock-gtest-all.cc": "// gtest itself\nint x;\n",
        "test/unit-doc.cpp": '#include "doctest_compatibility.h"\nTEST_CASE("c") {}\n',
        "build/ranges-test.cc": '#include "gtest/gtest.h"\nTEST(ranges_test, a) {}\n',
        "test/ranges-test.h": '#include "gtest/gtest.h"\nTEST(in_header, a) {}\n',
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    added = tripwires.write_cpp_tripwire(tmp_path, "ctest --test-dir build -V", "googletest")
    assert added is not None
    assert sorted(p.name for p, _ in added.files) == ["format-test.cc", "ranges-test.cc"]
    sources = [(test / n).read_text() for n in ("format-test.cc", "ranges-test.cc")]
    assert len(added.names) == 4 and len({n.split(".")[0] for n in added.names}) == 4
    for name in added.names:  # two per file, each its own suite; prefixed macros (no EXPECT_EQ)
        suite, test_name = name.split(".")
        assert sum(f"GTEST_TEST({suite}, {test_name})" in s for s in sources) == 1
    assert "GTEST_ASSERT_EQ(" in sources[0] and "grading" not in "".join(sources).lower()
    added.remove()
    assert {rel: (tmp_path / rel).read_text() for rel in files} == files
    doc = tripwires.write_cpp_tripwire(tmp_path, "./build/tests/test-udt -s -r=xml", "doctest")
    assert doc is not None and [p.name for p, _ in doc.files] == ["unit-doc.cpp"]
    text = (test / "unit-doc.cpp").read_text()
    assert all(f'DOCTEST_TEST_CASE("{name}")' in text for name in doc.names)
    assert text.count("DOCTEST_CHECK(") == 2  # two in the one file
    doc.remove()
    for command, parser in (
        ("./build/tests/test-udt -s -r=xml -tc='some case'", "doctest"),
        ("./build/tests/test-udt --test-case=x", "doctest"),
        ("./build/format-test --gtest_filter=ranges_test.*", "googletest"),
    ):
        assert tripwires.write_cpp_tripwire(tmp_path, command, parser) is None, command
    assert {rel: (tmp_path / rel).read_text() for rel in files} == files


def test_js_titles_are_new_to_every_test_file_not_only_the_named_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """karma loads spec files its config names, not the command: a tripwire title that a real
    test's title in such a file contains would be judged as the tripwire (passed: tampering)."""
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "a.test.js").write_text("it('reads a header', () => {});\n")
    (tmp_path / "test" / "other.test.js").write_text(
        "it('should render nested props', () => {});\n"
    )
    titles = iter(["render nested props", "keeps order value", "header value read"])
    monkeypatch.setattr(camouflage, "sentence", lambda words: next(titles))
    added = tripwires.write_js_tripwire(tmp_path, "npx karma start --single-run test/a.test.js")
    assert added is not None
    assert added.names == ["keeps order value", "header value read"]  # the first is taken
