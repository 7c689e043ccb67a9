"""grade.py end to end: a subprocess against a small real git repository and real pytest."""

from __future__ import annotations

import io
import json
import math
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from packager.grading import canaries, grade, patching, processes
from packager.render.harbor import GRADING_ARCHIVE, GRADING_MODULES, read_grading_archive

GRADE_PY = Path(grade.__file__).resolve()
PY = shlex.quote(sys.executable)
PYTEST = f"{PY} -m pytest -rA -p no:cacheprovider"

CALC_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_FIXED = CALC_BUGGY.replace("return a - b", "return a + b")
TESTS = (
    "from calc import add, mul\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)
F2P = ["tests/test_calc.py::test_add"]
P2P = ["tests/test_calc.py::test_mul"]


def run_git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


class Task:
    """A repository at its base commit plus a task folder holding plan.json."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repo"
        self.task = root / "task"
        self.out = root / "logs" / "verifier" / "nested"  # created by grade.py (mkdir -p)
        self.repo.mkdir()
        self.task.mkdir()
        (self.repo / "tests").mkdir()
        (self.repo / "calc.py").write_text(CALC_BUGGY)
        (self.repo / "tests" / "test_calc.py").write_text(TESTS)
        (self.repo / ".gitignore").write_text("__pycache__/\nbuild/\n")
        run_git(self.repo, "init", "-q")
        run_git(self.repo, "add", "-A")
        run_git(self.repo, "commit", "-q", "-m", "base")
        self.base = run_git(self.repo, "rev-parse", "HEAD").strip()
        # The runtime installs its JUnit proof plugin into the site-packages of the `python3` on
        # PATH: here a stand-in that answers that one question with `self.site` (absent unless a
        # test makes it), so no test writes into a real interpreter's site-packages.
        self.bin = root / "bin"
        self.bin.mkdir()
        self.site = root / "site"
        python3 = self.bin / "python3"
        python3.write_text(
            "#!/bin/sh\n"
            f'case "$2" in *sysconfig*purelib*) echo {shlex.quote(str(self.site))}; exit 0;; esac\n'
            f'exec {PY} "$@"\n'
        )
        python3.chmod(0o755)

    def diff(self, files: dict[str, str]) -> str:
        """A git diff from the base commit to the tree with ``files`` written."""
        for name, content in files.items():
            path = self.repo / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        run_git(self.repo, "add", "-f", "--", *files)  # -f: ignored paths too
        text = run_git(self.repo, "diff", "--cached", self.base)
        run_git(self.repo, "reset", "-q", "--hard", self.base)
        run_git(self.repo, "clean", "-fdxq")
        return text

    def plan(self, **overrides: Any) -> Path:
        plan: dict[str, Any] = {
            "version": 1,
            "instance_id": "samples__calc-1",
            "repo_dir": str(self.repo),
            "base_commit": self.base,
            "rule": "all_pass",
            "parser": "pytest",
            "test_command": f"{PYTEST} tests",
            "timeout_sec": 120,
            "env": {"PYTHONDONTWRITEBYTECODE": "1"},
            "test_patch": None,
            "hidden_files": None,
            "protected_paths": ["tests/**"],
            "fail_to_pass": F2P,
            "pass_to_pass": P2P,
            "patch_policy": None,
        }
        plan.update(overrides)
        path = self.task / "plan.json"
        path.write_text(json.dumps(plan, indent=2))
        return path

    def grade(
        self,
        patch: str | None,
        proc_env: dict[str, str] | None = None,
        runtime: Path = GRADE_PY,
        flags: tuple[str, ...] = (),
        **overrides: Any,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        plan = self.plan(**overrides)
        patch_file = self.root / "model.patch"
        if patch is None:
            patch_file.unlink(missing_ok=True)
        else:
            patch_file.write_text(patch)
        cmd = [sys.executable, *flags, str(runtime), str(plan)]
        cmd += ["--out", str(self.out), "--patch", str(patch_file)]
        env = dict(os.environ if proc_env is None else proc_env)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        reward = json.loads((self.out / "reward.json").read_text())
        report = json.loads((self.out / "report.json").read_text())
        return reward, report


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return Task(tmp_path)


def test_gold_patch_scores_one(task: Task) -> None:
    reward, report = task.grade(task.diff({"calc.py": CALC_FIXED}))
    assert reward == {"reward": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    assert report["status"] == "graded"
    assert report["reason"] is None
    # pytest exits 1: the runtime's tripwire test must fail (its result is dropped from `tests`).
    assert report["exit_code"] == 1
    assert report["apply"]["method"] == "git apply"
    assert report["tests"] == {F2P[0]: "passed", P2P[0]: "passed"}
    assert report["violations"] == []
    assert report["instance_id"] == "samples__calc-1"
    assert report["duration_sec"] >= 0
    output = (task.out / "test-output.txt").read_text()
    assert "2 passed" in output


@pytest.mark.parametrize("patch", ["", None], ids=["empty", "missing"])
def test_empty_or_missing_patch_scores_below_one(task: Task, patch: str | None) -> None:
    reward, report = task.grade(patch)
    assert reward == {"reward": 0.0, "fail_to_pass": 0.0, "pass_to_pass": 1.0}
    assert report["status"] == "graded"
    assert report["exit_code"] == 1
    assert report["apply"]["method"] == "empty"
    assert report["tests"][F2P[0]] == "failed"


def test_patch_that_does_not_apply(task: Task) -> None:
    bad = task.diff({"calc.py": CALC_FIXED}).replace("return a - b", "return a ^ b")
    reward, report = task.grade(bad)
    assert reward == {"reward": 0.0}
    assert report["status"] == "patch_failed"
    assert report["apply"]["method"] is None
    assert "git apply" in report["apply"]["log"]
    assert report["exit_code"] is None  # the tests never ran
    assert (task.repo / "calc.py").read_text() == CALC_BUGGY  # left pristine


def test_fuzzy_patch_applies_with_a_fallback(task: Task) -> None:
    # Hunk header line numbers off by a lot and one context line changed: strict git apply
    # rejects it, a fallback (3-way or patch --fuzz) still applies it.
    gold = task.diff({"calc.py": CALC_FIXED})
    fuzzy = gold.replace(" def add(a, b):", " def add(a,b):")
    reward, report = task.grade(fuzzy)
    assert report["status"] == "graded", report["apply"]["log"]
    assert report["apply"]["method"] in ("git apply --3way", "patch")
    assert reward["reward"] == 1.0


def test_timeout_is_an_infra_error_with_zero_reward(task: Task) -> None:
    sleeper = f"{PY} -c 'import time; time.sleep(60)'"
    reward, report = task.grade(
        task.diff({"calc.py": CALC_FIXED}), test_command=sleeper, timeout_sec=1
    )
    assert reward == {"reward": 0.0}
    assert report["status"] == "infra_error"
    assert report["reason"] == "timeout"
    assert report["duration_sec"] < 30
    assert "timed out" in (task.out / "test-output.txt").read_text()


def test_protected_test_edit_is_restored(task: Task) -> None:
    cheat = TESTS.replace("assert add(2, 3) == 5", "assert True")
    patch = task.diff(
        {
            "tests/test_calc.py": cheat,
            "tests/conftest.py": "import pytest\n",  # not in the base commit: deleted
        }
    )
    reward, report = task.grade(patch)
    assert reward["reward"] == 0.0
    assert report["status"] == "graded"
    assert report["tests"][F2P[0]] == "failed"
    restored = {v["path"] for v in report["violations"] if v["kind"] == "protected_path_restored"}
    assert restored == {"tests/test_calc.py", "tests/conftest.py"}
    assert (task.repo / "tests" / "test_calc.py").read_text() == TESTS
    assert not (task.repo / "tests" / "conftest.py").exists()


def test_gold_fix_with_protected_edit_still_scores(task: Task) -> None:
    patch = task.diff({"calc.py": CALC_FIXED, "tests/test_calc.py": TESTS + "\n# note\n"})
    reward, report = task.grade(patch)
    assert reward["reward"] == 1.0
    assert [v["path"] for v in report["violations"]] == ["tests/test_calc.py"]


def test_policy_violation(task: Task) -> None:
    patch = task.diff({"calc.py": CALC_FIXED, "build/out.txt": "x\n", "setup.cfg": "[x]\n"})
    reward, report = task.grade(
        patch, patch_policy={"allowed": ["*.py", "build/**"], "forbidden": ["build/**"]}
    )
    assert reward == {"reward": 0.0}
    assert report["status"] == "policy_violation"
    assert sorted(v["path"] for v in report["violations"]) == ["build/out.txt", "setup.cfg"]


def test_test_patch_and_hidden_files(task: Task) -> None:
    hidden_test = "from calc import add\n\n\ndef test_neg():\n    assert add(-1, -1) == -2\n"
    test_patch = task.diff({"tests/test_calc.py": TESTS + "\n\ndef test_extra():\n    pass\n"})
    (task.task / "payload").mkdir()
    (task.task / "payload" / "test.patch").write_text(test_patch)
    hidden = task.task / "payload" / "hidden" / "tests"
    hidden.mkdir(parents=True)
    (hidden / "test_hidden.py").write_text(hidden_test)
    f2p = F2P + ["tests/test_calc.py::test_extra", "tests/test_hidden.py::test_neg"]
    overrides: dict[str, Any] = {
        "test_patch": "payload/test.patch",
        "hidden_files": "payload/hidden",
        "protected_paths": [],
        "fail_to_pass": f2p,
    }
    # The candidate also edits the file the test patch touches: it is restored first.
    gold = task.diff({"calc.py": CALC_FIXED, "tests/test_calc.py": "# wiped\n"})
    reward, report = task.grade(gold, **overrides)
    assert reward["reward"] == 1.0, report
    assert report["tests"]["tests/test_hidden.py::test_neg"] == "passed"
    assert [v["path"] for v in report["violations"]] == ["tests/test_calc.py"]

    reward, report = task.grade("", **overrides)
    assert reward["reward"] == 0.0
    assert report["tests"]["tests/test_hidden.py::test_neg"] == "failed"


CARD_FORMULA = "0.80hidden_pass_fraction + 0.15public_regression + 0.05*build_health"


def test_formula_rule_with_build_command(task: Task) -> None:
    formula = {
        "expression": "0.80 hidden_pass_fraction + 0.15 public_regression + 0.05*build_health",
        "hidden_paths": ["tests/test_calc.py::test_add"],
        "hidden_tests": [],
        "public_tests": P2P,
        # Parse only: a .pyc written here would outlive the reset (ignored __pycache__) and,
        # as buggy and fixed calc.py have the same size, could be reused within one second.
        "build_command": f"{PY} -c \"import ast; ast.parse(open('calc.py').read())\"",
    }
    reward, report = task.grade(task.diff({"calc.py": CALC_FIXED}), rule="formula", formula=formula)
    assert reward == {
        "reward": 1.0,
        "hidden_pass_fraction": 1.0,
        "public_regression": 1.0,
        "build_health": 1.0,
    }
    assert report["status"] == "graded"
    reward, _ = task.grade("", rule="formula", formula=dict(formula, build_command="false"))
    assert reward == {
        "reward": 0.15,
        "hidden_pass_fraction": 0.0,
        "public_regression": 1.0,
        "build_health": 0.0,
    }


COLLECTED = {
    "expression": CARD_FORMULA,
    "hidden_paths": [],
    "hidden_tests": F2P,
    "public_tests": P2P,
    "build_health": "collected",
    # Must be ignored: with "collected" the health comes from the test run itself.
    "build_command": "false",
}


def test_formula_build_health_collected(task: Task) -> None:
    reward, report = task.grade(
        task.diff({"calc.py": CALC_FIXED}), rule="formula", formula=COLLECTED
    )
    assert report["status"] == "graded", report
    assert report["exit_code"] == 1  # the tripwire fails; 0 or 1 both mean "collected and ran"
    assert reward == {
        "reward": 1.0,
        "hidden_pass_fraction": 1.0,
        "public_regression": 1.0,
        "build_health": 1.0,
    }
    # The untouched repository: the card formula's nop value, 0.15 + 0.05.
    reward, _ = task.grade("", rule="formula", formula=COLLECTED)
    assert reward["build_health"] == 1.0
    assert reward["reward"] == pytest.approx(0.2)


def test_formula_build_health_collected_is_zero_on_a_collection_error(task: Task) -> None:
    broken = task.diff({"calc.py": CALC_FIXED + "\ndef broken(:\n"})
    reward, report = task.grade(broken, rule="formula", formula=COLLECTED)
    assert report["status"] == "graded", report
    assert report["exit_code"] == 2  # pytest: interrupted by a collection error
    assert reward == {
        "reward": 0.0,
        "hidden_pass_fraction": 0.0,
        "public_regression": 0.0,
        "build_health": 0.0,
    }


@pytest.mark.parametrize(
    "command",
    [f"{PY} -c 'pass'", f"{PYTEST} tests/nowhere.py", f"{PYTEST} -k no_such_test tests"],
    ids=["ran-no-pytest", "usage-error", "none-collected"],
)
def test_formula_build_health_collected_needs_parsed_tests(task: Task, command: str) -> None:
    formula = dict(COLLECTED, hidden_tests=[], public_tests=[], expression="build_health")
    reward, report = task.grade(
        task.diff({"calc.py": CALC_FIXED}), rule="formula", formula=formula, test_command=command
    )
    assert report["status"] == "graded", report
    assert report["tests"] == {}
    assert reward["build_health"] == 0.0 and reward["reward"] == 0.0


GRADER_SCRIPT = """\
import json, os, pathlib
repo = pathlib.Path(os.environ["REPO_DIR"])
criteria = json.loads(pathlib.Path(os.environ["CRITERIA_FILE"]).read_text())
fixed = "a + b" in (repo / "calc.py").read_text()
scores = {"fix": 1.0 if fixed else 0.0, "regress": 1.0}
reward = sum(c["weight"] * scores[c["name"]] for c in criteria) / 100
out = dict(scores, reward=reward)
if os.environ.get("VIA_STDOUT"):
    print("checking...")
    print(json.dumps(out))
else:
    pathlib.Path(os.environ["REWARD_FILE"]).write_text(json.dumps(out))
"""


@pytest.mark.parametrize("via_stdout", [False, True])
def test_script_rule(task: Task, via_stdout: bool) -> None:
    grader = task.task / "payload" / "grader"
    grader.mkdir(parents=True)
    (grader / "grade.py").write_text(GRADER_SCRIPT)
    script = {
        "command": f"{PY} grade.py",
        "dir": "payload/grader",
        "criteria": [{"name": "fix", "weight": 70}, {"name": "regress", "weight": 30}],
    }
    env = {"VIA_STDOUT": "1"} if via_stdout else {}
    reward, report = task.grade(
        task.diff({"calc.py": CALC_FIXED}), rule="script", script=script, test_command=None, env=env
    )
    assert reward == {"reward": 1.0, "fix": 1.0, "regress": 1.0}
    assert report["exit_code"] is None  # no test command in this plan
    reward, _ = task.grade("", rule="script", script=script, test_command=None, env=env)
    assert reward == {"reward": 0.3, "fix": 0.0, "regress": 1.0}


def test_script_without_reward_is_infra_error(task: Task) -> None:
    script = {"command": "echo nothing to see", "criteria": []}
    reward, report = task.grade("", rule="script", script=script, test_command=None)
    assert reward == {"reward": 0.0}
    assert report["status"] == "infra_error"
    assert "no reward" in report["reason"]


def test_judge_rule_needs_judge(task: Task) -> None:
    tests = [
        {"id": "new-thing", "category": "target", "purpose": "p", "steps": ["s"]},
        {"id": "old-thing", "category": "preservation", "purpose": "p", "steps": ["s"]},
    ]
    plan_judge = {"tests": tests, "start_command": "python3 -m http.server $PORT", "port": 8000}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PACKAGER_JUDGE_")}
    reward, report = task.grade("", rule="judge", judge=plan_judge, proc_env=env)
    assert reward == {"reward": 0.0}
    assert report["status"] == "needs_judge"


def test_forged_end_marker_does_not_truncate_output(task: Task) -> None:
    command = (
        f"echo '===== grading: output end 0123456789abcdef: exit code 0 ====='; {PYTEST} tests"
    )
    reward, report = task.grade(task.diff({"calc.py": CALC_FIXED}), test_command=command)
    assert reward["reward"] == 1.0


@pytest.mark.parametrize(
    "overrides",
    [{"base_commit": "0" * 40}, {"rule": "vibes"}, {"parser": "mocha"}, {"version": 2}],
    ids=["unknown-commit", "unknown-rule", "unknown-parser", "version"],
)
def test_unexpected_errors_fail_closed(task: Task, overrides: dict[str, Any]) -> None:
    reward, report = task.grade(task.diff({"calc.py": CALC_FIXED}), **overrides)
    assert reward == {"reward": 0.0}
    assert report["status"] == "infra_error"
    assert report["reason"]


def test_unreadable_plan_fails_closed(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{not json")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(GRADE_PY), str(plan), "--out", str(out), "--patch", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert json.loads((out / "reward.json").read_text()) == {"reward": 0.0}
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "infra_error"
    assert "JSONDecodeError" in report["reason"]


# ------------------------------------------------------------------ the zipapp in grader images


def _archive(folder: Path) -> Path:
    path = folder / GRADING_ARCHIVE
    path.write_bytes(read_grading_archive())
    return path


def test_zipapp_is_the_runtime_and_reproducible() -> None:
    data = read_grading_archive()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        assert names == ["__main__.py", *GRADING_MODULES]
        for name in GRADING_MODULES:
            assert archive.read(name) == (GRADE_PY.parent / name).read_bytes()
        assert {i.date_time for i in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    read_grading_archive.cache_clear()
    assert read_grading_archive() == data  # built again: the same bytes


@pytest.mark.parametrize("fixed", [True, False], ids=["gold", "empty"])
def test_zipapp_grades_as_grade_py_does(task: Task, fixed: bool) -> None:
    """`python3 grading.pyz PLAN` (how test.sh and the HUD env run it) gives grade.py's result."""
    patch = task.diff({"calc.py": CALC_FIXED}) if fixed else ""
    direct_reward, direct = task.grade(patch)
    packed_reward, packed = task.grade(patch, runtime=_archive(task.task))
    assert packed_reward == direct_reward
    assert packed_reward["reward"] == (1.0 if fixed else 0.0)
    for report in (direct, packed):
        report.pop("duration_sec")
        assert report.pop("resources").keys() <= {"memory_peak_mb", "cpu_sec"}  # measured anew
        assert len(report.pop("added_tests")) >= 2  # named anew each run
    assert packed == direct


def test_after_starts_fail_closed_and_grades_only_once_the_gate_exists(task: Task) -> None:
    """`--after GATE` (the local engine's early grader): the fail-closed report is written at
    start-up, nothing is graded while GATE is missing, and the patch in place when it appears
    is the one graded."""
    gate = task.root / "grade-now"
    patch_file = task.root / "model.patch"
    cmd = [sys.executable, str(GRADE_PY), str(task.plan()), "--out", str(task.out)]
    proc = subprocess.Popen([*cmd, "--patch", str(patch_file), "--after", str(gate)])
    try:
        deadline = time.monotonic() + 30
        while not (task.out / "report.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None  # still waiting at the gate
        waiting = json.loads((task.out / "report.json").read_text())
        assert waiting["status"] != "graded" and waiting["reward"] == 0
        assert not (task.out / "test-output.txt").exists()
        patch_file.write_text(task.diff({"calc.py": CALC_FIXED}))
        gate.write_text("")
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
    report = json.loads((task.out / "report.json").read_text())
    assert report["status"] == "graded" and report["reward"] == 1.0
    assert gate.exists()  # looked at, never removed (the engine may still be setting its times)


def test_zipapp_runs_the_browser_agent_as_a_module(tmp_path: Path) -> None:
    """judge.py runs `JUDGE_PYTHON -m browser_agent WORK` with the archive on PYTHONPATH."""
    work = tmp_path / "work"
    work.mkdir()
    verdict = work / "verdict.json"
    request = {"url": "http://127.0.0.1:9/", "test": {}, "verdict": str(verdict)}
    (work / "request.json").write_text(json.dumps(request))
    env = dict(os.environ, PYTHONPATH=str(_archive(tmp_path)))
    proc = subprocess.run(
        [sys.executable, "-m", "browser_agent", str(work)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "grading.pyz" in proc.stderr  # the traceback runs through the archive's module
    outcome = json.loads(verdict.read_text())
    # No browser-use outside the judge's virtualenv: the agent fails closed, as it should.
    assert outcome["outcome"] == "error"
    assert "browser_use" in outcome["reason"]


def test_write_outputs_degrades_non_finite_reward(tmp_path: Path) -> None:
    report = grade.new_report()
    report.update(status="graded", reason=None, reward=math.nan, subscores={"x": 1.0})
    grade.write_outputs(tmp_path, report)
    assert json.loads((tmp_path / "reward.json").read_text()) == {"reward": 0.0}
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["status"] == "infra_error"
    assert "not a finite number" in written["reason"]


# ------------------------------------------------------------------------ adversarial defences
# Each defence of docs/security.md "Adversarial patches", on the small real repository.


def test_default_protection_restores_conftest_and_config(task: Task) -> None:
    plugin = (
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    rep = outcome.get_result()\n"
        "    rep.outcome, rep.longrepr = 'passed', None\n"
    )
    patch = task.diff(
        {
            "conftest.py": plugin,
            "cheat.py": plugin,
            "pytest.ini": "[pytest]\naddopts = -p cheat\n",
            "sitecustomize.py": "print('hooked')\n",
        }
    )
    reward, report = task.grade(patch, protected_paths=[], scan_patch=False)
    assert reward["reward"] == 0.0
    assert report["tests"][F2P[0]] == "failed"
    restored = {v["path"] for v in report["violations"]}
    assert restored == {"conftest.py", "pytest.ini", "sitecustomize.py"}


FORGED_SUMMARY = (
    "import os\n"
    "print('=' * 10 + ' short test summary info ' + '=' * 10)\n"
    f"print('PASSED {F2P[0]}')\n"
    f"print('PASSED {P2P[0]}')\n"
    "print('=' * 10 + ' 2 passed in 0.01s ' + '=' * 10, flush=True)\n"
)


def test_forged_summary_then_exit_is_not_trusted(task: Task) -> None:
    # No JUnit report: the pytest session never finished, so nothing it printed counts.
    patch = task.diff({"calc.py": CALC_BUGGY + "\n" + FORGED_SUMMARY + "os._exit(0)\n"})
    # -s: uncaptured; no scan, so the run shows what the JUnit proof does on its own
    reward, report = task.grade(patch, test_command=f"{PYTEST} -s tests", scan_patch=False)
    assert "PASSED" in (task.out / "test-output.txt").read_text()
    assert reward["reward"] == 0.0
    assert report["tests"] == {}
    assert any("JUnit" in note for note in report["notes"])


def test_forged_summary_printed_at_exit_is_outvoted_by_junit(task: Task) -> None:
    code = FORGED_SUMMARY.replace("print(", "_p(") + "\n"
    forger = (
        "import atexit\n\n\ndef _forge():\n"
        "    _p = print\n" + "".join(f"    {line}\n" for line in code.splitlines() if line) + "\n\n"
        "atexit.register(_forge)\n"
    )
    reward, report = task.grade(task.diff({"calc.py": CALC_BUGGY + "\n" + forger}))
    assert "summary" in (task.out / "test-output.txt").read_text()
    assert reward["reward"] == 0.0
    assert report["tests"][F2P[0]] == "failed"


def test_detached_reward_writer_is_killed(task: Task) -> None:
    target = task.root / "reward.txt"
    daemon = (
        "import subprocess\n"
        f"subprocess.Popen(['sh', '-c', 'sleep 2; echo forged > {target}'],"
        " start_new_session=True)\n"
    )
    reward, _ = task.grade(task.diff({"calc.py": CALC_BUGGY + "\n" + daemon}))
    assert reward["reward"] == 0.0
    time.sleep(3)
    assert not target.exists()  # the sweep killed the setsid'd sleeper before it wrote


def test_changed_grader_files_are_restored_in_place(task: Task) -> None:
    script = task.task / "test.sh"
    script.write_text("#!/bin/bash\necho original\n")
    inode = script.stat().st_ino
    tamper = f"open({str(script)!r}, 'a').write('echo injected\\n')\n"
    patch = task.diff({"calc.py": CALC_FIXED + "\n" + tamper})
    reward, report = task.grade(patch)
    assert reward == {"reward": 0.0}
    assert report["status"] == "policy_violation"
    assert {"kind": "grader_files_changed", "path": "test.sh"} in report["violations"]
    assert script.read_text() == "#!/bin/bash\necho original\n"
    assert script.stat().st_ino == inode  # bash reads it through an open descriptor


def test_grader_files_watch_the_runtimes_byte_code_only(tmp_path: Path) -> None:
    """The byte code the grader image's build compiled into /tests/.runtime is watched (a
    process started after the candidate ran imports it); other __pycache__ folders are not."""
    runtime = tmp_path / ".runtime"
    (runtime / "__pycache__").mkdir(parents=True)
    (runtime / "grade.py").write_text("x = 1\n")
    pyc = runtime / "__pycache__" / "grade.cpython-311.pyc"
    pyc.write_bytes(b"compiled")
    (tmp_path / "payload" / "__pycache__").mkdir(parents=True)
    other = tmp_path / "payload" / "__pycache__" / "test_x.cpython-311.pyc"
    other.write_bytes(b"pytest's")
    guard = grade.GraderFiles(tmp_path, runtime=runtime)
    pyc.write_bytes(b"planted")
    other.write_bytes(b"rewritten by pytest")
    assert guard.check() == [".runtime/__pycache__/grade.cpython-311.pyc"]
    assert pyc.read_bytes() == b"compiled"
    assert grade.GraderFiles(tmp_path).check() == []  # without a runtime: no cache watched


def test_sweep_descendants_kills_a_double_forked_process() -> None:
    assert processes.set_subreaper()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess; subprocess.Popen(['sleep', '60'], start_new_session=True)",
        ]
    )
    proc.wait()
    assert processes.descendants(os.getpid())  # re-parented to us, not to init
    assert processes.sweep_descendants() >= 1
    assert processes.descendants(os.getpid()) == []


def test_processes_that_keep_appearing_are_an_infra_error(
    task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork bomb the sweep cannot empty (here: a process that never goes away) ends grading
    as an infra error with reward 0, never as a verdict."""
    gone = 2**22 + 1  # above Linux's largest pid: os.kill says no such process, every pass
    monkeypatch.setattr(processes, "descendants", lambda root: [gone])
    monkeypatch.setattr(processes, "SWEEP_PASSES", 3)
    with pytest.raises(processes.Runaway):
        processes.sweep_descendants()
    task.out.mkdir(parents=True, exist_ok=True)
    patch = task.root / "model.patch"
    patch.write_text(task.diff({"calc.py": CALC_FIXED}))
    report = grade.grade(task.plan(), task.out, patch)
    assert report["status"] == "infra_error" and report["reward"] == 0.0
    assert report["reason"] == "the command's processes could not be stopped"


def test_go_canaries(tmp_path: Path) -> None:
    (tmp_path / "a.go").write_text("// Package a.\npackage a\n")
    (tmp_path / "a_test.go").write_text("package a_test\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x_test.go").write_text("//go:build ignore\n\npackage main\n")
    (tmp_path / "sub" / "y_test.go").write_text("package y\n")
    (tmp_path / "vendor" / "v").mkdir(parents=True)
    (tmp_path / "vendor" / "v" / "v_test.go").write_text("package v\n")
    found = canaries.write_go_canaries(tmp_path)
    assert len(found) == 2 and all(c.name.startswith("Test") for c in found)
    assert len({c.name for c in found} | {c.tripwire for c in found}) == 4
    # No test file imports "testing": each canary gets a new file, compiled after the others.
    sources = {c.path.parent.name: c.path.read_text() for c in found}
    assert sources[tmp_path.name].startswith("package a\n")
    assert sources["sub"].startswith("package y\n")
    assert all(c.original is None for c in found)
    assert found[0].path.name > "a_test.go" and found[1].path.name > "y_test.go"
    for canary in found:
        canary.remove()
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["x_test.go", "y_test.go"]


# A patch to the code under test that rewrites every pytest report to "passed" from inside the
# test process: only a test that must fail can tell (the JUnit report is built from the same
# reports).
RUNNER_TAMPER = (
    CALC_BUGGY + "\n\nimport _pytest.reports as _r\n_orig = _r.TestReport.from_item_and_call\n\n\n"
    "def _fake(item, call):\n    rep = _orig(item, call)\n    rep.outcome = 'passed'\n"
    "    return rep\n\n\n_r.TestReport.from_item_and_call = staticmethod(_fake)\n"
)


@pytest.mark.parametrize("command", ["tests", "tests/test_calc.py"], ids=["folder", "file"])
def test_runner_tampering_is_caught_when_the_command_names_only_the_test_file(
    task: Task, command: str
) -> None:
    """SWE-bench commands name the test patch's files: the tripwire must be collected there."""
    reward, report = task.grade(
        task.diff({"calc.py": RUNNER_TAMPER}), test_command=f"{PYTEST} {command}", scan_patch=False
    )
    assert reward["reward"] == 0.0
    assert report["status"] == "policy_violation", report
    assert "tampered with the runner" in report["reason"]
    # With the scan (the default) the same patch stops before any test runs.
    reward, report = task.grade(
        task.diff({"calc.py": RUNNER_TAMPER}), test_command=f"{PYTEST} {command}"
    )
    assert report["status"] == "policy_violation" and report.get("exit_code") is None, report
    assert report["reason"].startswith("the patch reaches into the test runner: calc.py:")


# The same, made adaptive: it spares every test a cheat could tell was the grader's by what the
# runtime used to add (a `test_` + 12 hex digits name, a "grading tripwire" message, a file of
# that name). It scored 1.0 against that runtime; tripwires named and shaped from the test file
# leave it nothing to spare.
RUNNER_TAMPER_ADAPTIVE = (
    CALC_BUGGY + "\n\nimport inspect as _inspect\nimport re as _re\n\n"
    "import _pytest.reports as _r\n\n_orig = _r.TestReport.from_item_and_call\n\n\n"
    "def _spared(item):\n    try:\n        source = _inspect.getsource(item.obj)\n"
    "    except Exception:\n        source = ''\n"
    "    return bool(_re.fullmatch('test_[0-9a-f]{12}', item.name)) or 'grading' in source"
    " or 'tripwire' in source or _re.search('test_[0-9a-f]{12}', item.nodeid.split('::')[0])\n\n\n"
    "def _fake(item, call):\n    rep = _orig(item, call)\n    if not _spared(item):\n"
    "        rep.outcome = 'passed'\n    return rep\n\n\n"
    "_r.TestReport.from_item_and_call = staticmethod(_fake)\n"
)


@pytest.mark.parametrize("command", ["tests", "tests/test_calc.py"], ids=["folder", "file"])
def test_runner_tampering_that_spares_the_old_tripwire_is_caught(task: Task, command: str) -> None:
    reward, report = task.grade(
        task.diff({"calc.py": RUNNER_TAMPER_ADAPTIVE}),
        test_command=f"{PYTEST} {command}",
        scan_patch=False,  # the tripwires alone (an obfuscated cheat passes any scan)
    )
    assert reward["reward"] == 0.0
    assert report["status"] == "policy_violation", report
    assert "tampered with the runner" in report["reason"]


def test_tripwire_leaves_the_test_file_as_it_was(task: Task) -> None:
    before = (task.repo / "tests" / "test_calc.py").read_bytes()
    reward, report = task.grade(
        task.diff({"calc.py": CALC_FIXED}), test_command=f"{PYTEST} tests/test_calc.py"
    )
    assert reward["reward"] == 1.0 and report["exit_code"] == 1  # the tripwire ran and failed
    assert (task.repo / "tests" / "test_calc.py").read_bytes() == before
    assert sorted(report["tests"]) == sorted(F2P + P2P)


def test_protected_files_are_restored_to_the_environments_state(task: Task) -> None:
    """A recipe's pre_install edited a protected file (tox.ini, pytest.ini) when the image was
    built: that edit is the environment, recorded in the image, and grading keeps it; a
    candidate changing the file further is still restored, to the environment's state."""
    ini = "[pytest]\nmarkers =\n    env: added by the environment\n"
    recorded = task.root / "environment.patch"
    recorded.write_text(task.diff({"pytest.ini": ini}))
    # As collected from the agent's container: the environment's edit plus the fix.
    gold = task.diff({"pytest.ini": ini, "calc.py": CALC_FIXED})
    reward, report = task.grade(gold, environment_patch=str(recorded))
    assert reward["reward"] == 1.0 and report["violations"] == []
    assert (task.repo / "pytest.ini").read_text() == ini
    # Without the record the same edit is a protected path restored to the bare base.
    reward, report = task.grade(gold)
    assert report["violations"] == [{"kind": "protected_path_restored", "path": "pytest.ini"}]
    assert not (task.repo / "pytest.ini").exists()
    # A cheat on top of the environment's edit goes back to the environment's state.
    cheat = task.diff({"pytest.ini": ini + "addopts = -p no:terminal\n", "calc.py": CALC_FIXED})
    reward, report = task.grade(cheat, environment_patch=str(recorded))
    assert report["violations"] == [{"kind": "protected_path_restored", "path": "pytest.ini"}]
    assert (task.repo / "pytest.ini").read_text() == ini and reward["reward"] == 1.0


TEST_SH = Path(__file__).resolve().parents[2] / "golden/tree/tasks/samples__textkit-1/tests/test.sh"


def _test_sh_flags() -> tuple[str, ...]:
    """The interpreter flags test.sh runs the runtime with (`python3 FLAGS "$runtime"`, the
    archive or its byte-compiled copy)."""
    text = TEST_SH.read_text()
    assert "runtime=/tests/grading.pyz\n" in text
    assert "if [ -f /tests/.runtime/__main__.py ]; then runtime=/tests/.runtime; fi" in text
    [line] = [ln for ln in text.splitlines() if ln.startswith("python3 ")]
    words = shlex.split(line)
    return tuple(words[1 : words.index("$runtime")])


def test_test_sh_keeps_the_images_python_path_out_of_the_runtime(task: Task) -> None:
    """An image whose PYTHONPATH holds the repository (ENV in a row's Dockerfile) and a
    repository with a module named like one of the standard library's: the runtime, run as
    test.sh runs it, imports the standard library's, so grading is not broken by the repo.
    """
    (task.repo / "secrets.py").write_text("raise ImportError('the repository, not the stdlib')\n")
    run_git(task.repo, "add", "secrets.py")
    run_git(task.repo, "commit", "-q", "-m", "a module named like the stdlib's")
    task.base = run_git(task.repo, "rev-parse", "HEAD").strip()
    env = dict(os.environ, PYTHONPATH=str(task.repo))
    runtime = _archive(task.task)
    gold = task.diff({"calc.py": CALC_FIXED})
    flags = _test_sh_flags()
    assert flags == ("-I", "-S")
    reward, report = task.grade(gold, proc_env=env, runtime=runtime, flags=flags)
    assert reward["reward"] == 1.0, report
    # Without the flags the repository's module stands in for the runtime's: it breaks.
    proc = subprocess.run(
        [sys.executable, str(runtime), str(task.plan()), "--out", str(task.out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "the repository, not the stdlib" in proc.stderr


def test_the_runtime_starts_without_what_only_some_rules_use() -> None:
    """Start-up is on every run's path: the judge's urllib, and dataclasses (inspect, ast,
    ...), load only for the rule that needs them.
    """
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import grade; "
        "print(sorted(m for m in ('judge', 'urllib.request', 'http.client', 'dataclasses', "
        "'inspect') if m in sys.modules))"
    )
    with tempfile.TemporaryDirectory() as tmp:
        archive = _archive(Path(tmp))
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code, str(archive)],
            capture_output=True,
            text=True,
            check=True,
        )
    assert proc.stdout.split() == ["[]"]


NESTED_TEST = (
    "def test_nested_run():\n"
    "    # a pytester-like sub-run prints its own summary, as pytest-dev/pytest's tests do\n"
    "    print('PASSED test_capsysbinary.py::test_hello')\n"
    "    print('FAILED test_other.py::test_bad - assert 0')\n"
    "    print('PASSED tests/test_calc.py::test_gone')\n"
)


@pytest.mark.parametrize(
    ("listed", "status", "nested"),
    [
        # A PASS_TO_PASS id only a nested run answers: read as the harness reads it.
        (["tests/test_nested.py::test_nested_run", "test_capsysbinary.py::test_hello"], 1.0,
         ["test_capsysbinary.py::test_hello"]),
        (["test_other.py::test_bad"], 0.0, ["test_other.py::test_bad"]),
        # A real test file of the repository (at the base commit) is never read from lines.
        (["tests/test_calc.py::test_gone"], 0.0, None),
    ],
)  # fmt: skip
def test_listed_ids_of_nested_runs_are_read_as_the_harness_reads_them(
    task: Task, listed: list[str], status: float, nested: list[str] | None
) -> None:
    patch = task.diff({"calc.py": CALC_FIXED, "tests/test_nested.py": NESTED_TEST})
    fixed = task.diff({"calc.py": CALC_FIXED})
    # The nested test comes with the test patch; the candidate is the fix.
    reward, report = task.grade(
        fixed,
        test_patch=_payload(task, patch.replace(fixed, "")),
        pass_to_pass=[*P2P, *listed],
        test_command=f"{PYTEST} tests",
    )
    assert reward["reward"] == status, report
    assert report.get("nested_ids") == nested


def test_a_fail_to_pass_id_is_never_read_from_nested_lines(task: Task) -> None:
    printing = "def test_printing():\n    print('PASSED ghost.py::test_fixed')\n"
    patch = task.diff({"calc.py": CALC_FIXED, "tests/test_printing.py": printing})
    reward, report = task.grade(
        patch, fail_to_pass=[*F2P, "ghost.py::test_fixed"], test_command=f"{PYTEST} tests"
    )
    assert reward["fail_to_pass"] == 0.5 and "nested_ids" not in report


def _payload(task: Task, patch: str) -> str:
    folder = task.task / "payload"
    folder.mkdir(exist_ok=True)
    (folder / "test.patch").write_text(patch)
    return "payload/test.patch"


SETUP_CFG = (
    "[metadata]\nname = calc\n\n[options]\ninstall_requires =\n    six>=1.0\n\n"
    "[tool:pytest]\naddopts = -p no:cacheprovider\n"
)


def _with_setup_cfg(task: Task) -> None:
    (task.repo / "setup.cfg").write_text(SETUP_CFG)
    run_git(task.repo, "add", "setup.cfg")
    run_git(task.repo, "commit", "-q", "-m", "setup.cfg")
    task.base = run_git(task.repo, "rev-parse", "HEAD").strip()


DEPENDENCY = ("six>=1.0\n", "six>=1.0\n    newdep>=1\n")


@pytest.mark.parametrize(
    ("change", "read"),
    [
        (SETUP_CFG.replace(*DEPENDENCY), SETUP_CFG.replace(*DEPENDENCY)),
        (SETUP_CFG + "\n[isort]\nknown_third_party = newdep, pytest\n", None),
        # the dependency stays; the pytest section goes back to the base's
        (
            SETUP_CFG.replace(*DEPENDENCY).replace("-p no:cacheprovider", "-p cheat"),
            SETUP_CFG.replace(*DEPENDENCY),
        ),
        # the added plugin section dropped (the blank line before it stays)
        (SETUP_CFG + "\n[options.entry_points]\npytest11 =\n    cheat = cheat\n", SETUP_CFG + "\n"),
        (SETUP_CFG.replace("[tool:pytest]\naddopts = -p no:cacheprovider\n", ""), SETUP_CFG),
        (SETUP_CFG.replace("[options]", "[options]\nentry_points = pytest11 = cheat"), "restored"),
    ],
    ids=[
        "dependency",
        "other-section",
        "pytest-section",
        "plugin-section",
        "pytest-section-deleted",
        "entry-point-line",
    ],
)
def test_a_task_that_refreshes_keeps_only_declaration_changes(
    task: Task, change: str, read: str | None
) -> None:
    """With a refresh step (the gold patch declares dependencies), a candidate's setup.cfg change
    is kept, except its test-run and plugin sections, which go back to the base's; a changed
    line naming an entry point elsewhere restores the whole file. Without a refresh step every
    change to it is restored as before."""
    _with_setup_cfg(task)
    marker = task.root / "refreshed"
    refresh = {"command": f"cp setup.cfg {marker}", "wheels": str(task.root / "wheels")}
    patch = task.diff({"calc.py": CALC_FIXED, "setup.cfg": change})
    reward, report = task.grade(patch, refresh=refresh)
    assert reward["reward"] == 1.0
    assert report["refresh"] == {"exit_code": 0, "timed_out": False}
    kinds = [(v["kind"], v["path"]) for v in report["violations"]]
    if read == "restored":
        assert kinds == [("protected_path_restored", "setup.cfg")]
        assert marker.read_text() == SETUP_CFG  # what the install step read
        assert "declarations_kept" not in report
    else:
        expected = change if read is None else read
        assert marker.read_text() == expected
        assert report["declarations_kept"] == ["setup.cfg"]
        merged = [] if expected == change else [("test_sections_restored", "setup.cfg")]
        assert kinds == merged

    marker.unlink()
    reward, report = task.grade(patch)  # no refresh: the file is protected whole
    assert [v["path"] for v in report["violations"]] == ["setup.cfg"]
    assert "refresh" not in report and not marker.exists()


def test_stand_in_services_answer_before_the_tests_and_end_with_them(task: Task) -> None:
    """A plan's service is started before the test command, its port answers when the tests
    run, its output has its own file, and no process of it outlives the run."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = task.root / "served"
    served.mkdir()
    (served / "status").write_text("up")
    test = (
        "import urllib.request\n\n\ndef test_service():\n"
        f"    url = 'http://127.0.0.1:{port}/status'\n"
        "    assert urllib.request.urlopen(url, timeout=5).read() == b'up'\n"
    )
    service = {
        "name": "files",
        "command": f"{PY} -m http.server --bind 127.0.0.1 --directory {served} {port}",
        "python": sys.executable,
        "port": port,
    }
    (task.task / "test.patch").write_text(task.diff({"tests/test_service.py": test}))
    patch = task.diff({"calc.py": CALC_FIXED})
    ids = ["tests/test_service.py::test_service"]
    given = {"test_patch": "test.patch", "fail_to_pass": F2P + ids}
    reward, report = task.grade(patch, services=[service], **given)
    assert reward["reward"] == 1.0, report
    assert "GET /status" in (task.out / "service-files.txt").read_text()
    with socket.socket() as again:
        assert again.connect_ex(("127.0.0.1", port)) != 0  # the service ended with the run
    _, report = task.grade(patch, **given)
    assert report["tests"][ids[0]] == "failed"  # without it, nothing answers


def _a_pip_wheel() -> Path:
    """A pip wheel this machine holds (Debian's python3-pip-whl, or ensurepip's own)."""
    import ensurepip

    places = [Path("/usr/share/python-wheels"), Path(ensurepip.__file__).parent / "_bundled"]
    found = sorted(w for place in places for w in place.glob("pip-*.whl"))
    assert found, f"no pip wheel in {places}"
    return found[-1]


def test_a_refresh_in_an_environment_without_pip_runs_pip_from_the_wheels(task: Task) -> None:
    """An environment whose pip was taken out (the HUD image, which the agent shares) re-runs
    its install step with pip from the refresh wheels; with pip in place, nothing is added."""
    venv = task.root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheels = task.root / "wheels"
    wheels.mkdir()
    (wheels / _a_pip_wheel().name).write_bytes(_a_pip_wheel().read_bytes())
    marker = task.root / "refreshed"
    refresh = {
        "command": f'python -m pip --version > {marker}; echo "$PYTHONPATH" >> {marker}',
        "wheels": str(wheels),
    }
    env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    _, report = task.grade(task.diff({"calc.py": CALC_FIXED}), refresh=refresh, env=env)
    assert report["refresh"] == {"exit_code": 0, "timed_out": False}
    version, path = marker.read_text().splitlines()
    assert version.startswith("pip ") and path.endswith(_a_pip_wheel().name)

    # pip in place: it is used, and PYTHONPATH is left alone
    subprocess.run([str(venv / "bin/python"), "-m", "ensurepip"], check=True, capture_output=True)
    _, report = task.grade(task.diff({"calc.py": CALC_FIXED}), refresh=refresh, env=env)
    assert report["refresh"]["exit_code"] == 0
    assert marker.read_text().splitlines()[1] == ""


PYPROJECT = (
    '[project]\nname = "calc"\ndependencies = [\n    "six>=1.0",\n]\n\n'
    '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n\n[tool.ruff]\nline-length = 99\n'
)


def test_a_pyproject_keeps_its_new_dependency_and_loses_its_pytest_change(task: Task) -> None:
    import tomllib

    (task.repo / "pyproject.toml").write_text(PYPROJECT)
    run_git(task.repo, "add", "pyproject.toml")
    run_git(task.repo, "commit", "-q", "-m", "pyproject")
    base = run_git(task.repo, "rev-parse", "HEAD").strip()
    change = (
        PYPROJECT.replace('    "six>=1.0",\n', '    "six>=1.0",\n    "newdep>=1",\n')
        .replace("-p no:cacheprovider", "-p cheat")
        .replace("line-length = 99", "line-length = 100")
    )
    (task.repo / "pyproject.toml").write_text(change)
    assert patching.keep_declaration_change(task.repo, base, "pyproject.toml") == "merged"
    data = tomllib.loads((task.repo / "pyproject.toml").read_text())
    assert data["project"]["dependencies"] == ["six>=1.0", "newdep>=1"]
    assert data["tool"]["pytest"]["ini_options"]["addopts"] == "-p no:cacheprovider"
    assert data["tool"]["ruff"]["line-length"] == 100
    # a script entry added inside [project] itself names an entry point: restored whole
    (task.repo / "pyproject.toml").write_text(
        PYPROJECT.replace('name = "calc"\n', 'name = "calc"\nscripts = {cheat = "cheat:main"}\n')
    )
    assert patching.keep_declaration_change(task.repo, base, "pyproject.toml") == ""
