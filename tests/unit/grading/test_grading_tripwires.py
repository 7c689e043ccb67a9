"""Canaries for Node's test runner and Go test binaries (packager/grading/tripwires.py), end to
end through grade.py against small real repositories and the host's real `node`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from packager.grading import grade, tripwires
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
    assert not [t for t in report["tests"] if tripwires.NODE_CANARY_PREFIX in t]  # dropped
    assert report["exit_code"] == 0  # a todo test's failure does not fail the run
    assert {p: p.read_bytes() for p in (node_task.repo / "test").iterdir()} == before
    reward, report = _tap(node_task, "")
    assert reward["reward"] == 0.0 and report["status"] == "graded"


@needs_node
@pytest.mark.parametrize("cheat", [ASSERT_NOOP, OUTPUT_REWRITE], ids=["assert-noop", "rewrite"])
def test_node_tampering_is_caught(node_task: Task, cheat: str) -> None:
    reward, report = _tap(node_task, node_task.diff({"kv.js": cheat}))
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
    reward, report = node_task.grade(node_task.diff({"kv.js": ASSERT_NOOP}), **kw)
    if quiet:  # a true black box: the tampering wins, and the report says it was not checked
        assert reward["reward"] == 1.0 and report["node_canary"] == "unseen"
        assert any("could not be checked" in n for n in report["notes"])
    else:
        assert reward["reward"] == 0.0
        assert report["status"] == "policy_violation", report


def test_node_canary_outcomes_read_tap_and_spec() -> None:
    name = "grading_canary_abc"
    tap = f"ok 1 - real\n  not ok 2 - {name} # TODO grading canary\n"
    assert tripwires.node_canary_outcomes(tap, name) == ["failed"]
    assert tripwires.node_canary_verdict([tap, f"ok 3 - {name} # TODO x\n"], name) == "tampered"
    spec = f"\u2714 real (1ms)\n\u2716 {name} (2ms) # grading canary\n"
    assert tripwires.node_canary_verdict([spec], name) == "held"
    assert tripwires.node_canary_verdict([f"\u2714 {name} (2ms)\n"], name) == "tampered"
    assert tripwires.node_canary_verdict(["ok 1 - real\n"], name) == "unseen"
    # Another test whose name merely starts with the canary's is not the canary.
    assert tripwires.node_canary_verdict([f"ok 1 - {name}x\n"], name) == "unseen"
    tests = {"a": "passed", name: "skipped", f"file.js > {name}": "skipped"}
    assert tripwires.drop_named(tests, name) == {"a": "passed"}


def test_node_canaries_touch_only_node_test_files(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"type": "module"}))
    (tmp_path / "a.test.js").write_text("import test from 'node:test';\n")
    (tmp_path / "b.test.cjs").write_text("const test = require('node:test');\n")
    (tmp_path / "fixture.js").write_text("export default 1;\n")
    (tmp_path / "node_modules" / "m").mkdir(parents=True)
    (tmp_path / "node_modules" / "m" / "t.js").write_text("require('node:test')\n")
    canary = tripwires.write_node_canaries(tmp_path)
    assert canary is not None
    assert sorted(p.name for p, _ in canary.files) == ["a.test.js", "b.test.cjs"]
    assert "import __gradingTest" in (tmp_path / "a.test.js").read_text()
    assert "require('node:test')" in (tmp_path / "b.test.cjs").read_text().split(";", 1)[1]
    canary.remove()
    assert (tmp_path / "a.test.js").read_text() == "import test from 'node:test';\n"
    (tmp_path / "a.test.js").unlink()
    (tmp_path / "b.test.cjs").unlink()
    assert tripwires.write_node_canaries(tmp_path) is None  # nothing to add to


GO_OUT = """=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestGradingCanaryabcN0
--- PASS: TestGradingCanaryabcN0 (0.00s)
=== RUN   TestGradingTripwireabcN0
--- {verdict}: TestGradingTripwireabcN0 (0.00s)
{tail}
"""


def test_go_tripwire_written_beside_the_canary(tmp_path: Path) -> None:
    (tmp_path / "a.go").write_text("package a\n")
    (tmp_path / "a_test.go").write_text("package a\n")
    [(name, path)] = grade.write_go_canaries(tmp_path, "abc")
    source = path.read_text()
    assert source.index(name) < source.index("func TestGradingTripwireabcN0(t *testing.T)")
    assert 't.Fatal("grading tripwire")' in source


@pytest.mark.parametrize("verdict", ["PASS", "SKIP"])
def test_go_tripwire_reported_passed_is_tampering(verdict: str) -> None:
    out = GO_OUT.format(verdict=verdict, tail="PASS\nok  \texample.com/a\t0.01s")
    status = {"PASS": "passed", "SKIP": "skipped"}[verdict]
    with pytest.raises(tripwires.Tampered, match=f"must fail as {status}"):
        tripwires.check_go_tripwires(grade.parsers.parse_gotest(out), ["TestGradingCanaryabcN0"])
    honest = GO_OUT.format(verdict="FAIL", tail="FAIL\nFAIL\texample.com/a\t0.01s")
    tripwires.check_go_tripwires(grade.parsers.parse_gotest(honest), ["TestGradingCanaryabcN0"])
    assert "TestGradingTripwireabcN0" in grade.parsers.gotest_trusted(
        honest, ["TestGradingCanaryabcN0"]
    )


# bin/test --verbose output of sympy__sympy-12489 with the tripwire added (the real run's lines).
SYMPY_HONEST = """sympy/combinatorics/tests/test_permutations.py[11]
test_Permutation ok
test_printing_non_cyclic ok
test_grading_tripwire_cb76f2af8b7f F                                      [FAIL]

________________________________________________________________________________
 sympy/combinatorics/tests/test_permutations.py:test_grading_tripwire_cb76f2af8b7f
"""
SYMPY_TAMPERED = "test_Permutation ok\ntest_grading_tripwire_522a93d51612 ok      [OK]\n"


def test_sympy_tripwire_goes_into_the_files_the_command_names(tmp_path: Path) -> None:
    tests = tmp_path / "pkg" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "outside.py").symlink_to(tests / "test_a.py")
    command = "PYTHONWARNINGS='ignore' bin/test -C --verbose pkg/tests/test_a.py outside.py x.py"
    assert tripwires.command_test_files(tmp_path, command) == [(tests / "test_a.py").resolve()]
    added = tripwires.write_sympy_tripwire(tmp_path, command)
    assert added is not None and added.name.startswith(tripwires.SYMPY_TRIPWIRE_PREFIX)
    assert f"def {added.name}():\n    raise AssertionError" in (tests / "test_a.py").read_text()
    added.remove()
    assert (tests / "test_a.py").read_text() == "def test_a():\n    pass\n"
    assert tripwires.write_sympy_tripwire(tmp_path, "bin/test -C --verbose 'unclosed") is None


def test_sympy_tripwire_reported_ok_is_tampering() -> None:
    name = "test_grading_tripwire_cb76f2af8b7f"
    parsed = grade.parsers.parse_sympy(SYMPY_HONEST)
    kept = tripwires.check_sympy_tripwire(parsed, SYMPY_HONEST, name)
    assert kept == {"test_Permutation": "passed", "test_printing_non_cyclic": "passed"}
    with pytest.raises(tripwires.Tampered, match="'ok'"):
        tripwires.check_sympy_tripwire({}, SYMPY_TAMPERED, "test_grading_tripwire_522a93d51612")
    # A file's last line ("... ok [OK]") is not read by the parser; the tripwire check reads it.
    assert "test_grading_tripwire_522a93d51612" not in grade.parsers.parse_sympy(SYMPY_TAMPERED)
