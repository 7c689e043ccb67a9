"""The scan of a candidate patch for code that reaches into the test runner (scan.py), on real
git repositories: a violation names file and line; what the base commit's own code does, or a
test file does, is only suspicious; gold patches of real rows raise nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from packager.grading import scan

ROOT = Path(__file__).resolve().parents[3]


def _repo(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return repo, head.stdout.strip()


def _diff(path: str, added: list[str], start: int = 10) -> str:
    body = "".join(f"+{line}\n" for line in added)
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{start},1 +{start},{len(added) + 1} @@\n context\n{body}"
    )


@pytest.mark.parametrize(
    ("path", "line", "what"),
    [
        ("pkg/core.py", "import _pytest.reports as r", "pytest's internals"),
        ("pkg/core.py", "def pytest_runtest_makereport(item, call):", "pytest run hook"),
        ("pkg/core.py", "    os._exit(0)", "os._exit"),
        ("src/props.js", "Mocha.Runner.prototype.fail = function () {};", "prototype"),
        ("src/props.js", "process.stdout.write = (c) => true;", "stdout"),
        ("lib/a.js", "const a = require('node:assert');", "assert"),
        ("set.go", "\t_ = syscall.Dup2(int(w.Fd()), 1)", "file descriptor"),
        ("include/fmt/core.h", "  dup2(p[1], 1);", "file descriptor"),
        ("scripts/x.sh", "echo 1 > /logs/verifier/reward.txt", "log folders"),
    ],
)
def test_code_reaching_into_the_runner_is_a_violation(
    tmp_path: Path, path: str, line: str, what: str
) -> None:
    repo, base = _repo(tmp_path, {"README": "x\n"})
    report: dict = {}
    reason = scan.check(_diff(path, ["x = 1", line]), repo, base, report)
    assert reason is not None and f"{path}:12 " in reason and what in reason, reason
    assert report["violations"][0]["path"] == path and report["violations"][0]["line"] == 12


def test_what_the_repository_itself_does_is_only_suspicious(tmp_path: Path) -> None:
    repo, base = _repo(
        tmp_path,
        {
            "src/_pytest/reports.py": "from _pytest._code import code\n",
            "tests/test_x.py": "import os\nos._exit(0)\n",  # a test file: not the code's own
        },
    )
    diff = _diff("src/_pytest/main.py", ["from _pytest.reports import TestReport"])
    report: dict = {}
    assert scan.check(diff, repo, base, report) is None or "TestReport" in str(report)
    violations, suspicious = scan.scan(diff, repo, base)
    assert [h.rule.key for h in suspicious] == ["_pytest"]
    assert [h.rule.key for h in violations] == ["TestReport"]  # the base never names it
    # os._exit only in the base's tests: in library code it is still a violation
    violations, _ = scan.scan(_diff("pkg/run.py", ["os._exit(1)"]), repo, base)
    assert [h.rule.key for h in violations] == ["os._exit"]
    # a new test file importing pytest's helpers: suspicious, listed for review
    diff = _diff("tests/test_new.py", ["from _pytest.monkeypatch import MonkeyPatch"])
    report = {}
    assert scan.check(diff, repo, base, report) is None
    assert report["suspicious"] == [
        {"path": "tests/test_new.py", "line": 11, "what": "imports pytest's internals"}
    ]


def test_added_lines_carry_their_new_line_numbers() -> None:
    diff = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n"
        "+three\n four\n@@ -20,0 +21,1 @@\n+last\n"
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n"
        "@@ -0,0 +1,1 @@\n+created\n"
    )
    assert scan.added_lines(diff) == [
        ("a.py", 2, "TWO"),
        ("a.py", 3, "three"),
        ("a.py", 21, "last"),
        ("new.py", 1, "created"),
    ]


def test_no_gold_patch_of_the_real_rows_here_hits_outside_its_repositorys_habits() -> None:
    """Every gold patch of the real rows this repository carries (SWE-bench Verified and
    Multilingual, as published): no rule matches, except in pytest's own repository (whose
    base code names those internals, so they are suspicious there, never violations)."""
    rows = [
        json.loads(line)
        for name in ("swebench-verified-real.jsonl", "swe-bench-multilingual-real.jsonl")
        for line in (ROOT / "benchmarks" / "data" / name).read_text().splitlines()
    ]
    assert len(rows) > 50
    hit = {r["instance_id"] for r in rows if scan.hits(r["patch"])}
    assert hit <= {"pytest-dev__pytest-5787"}, hit
