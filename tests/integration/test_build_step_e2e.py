"""A compiled project's `build` step end to end on the real engine (SWE-bench Multilingual's C
rows work this way): a tiny C project in a row of the Multilingual shape (11 columns, lists,
no environment_setup_commit), a recipe with the harness spec's `build` and `test_cmd`.

The test binary is built in the agent image; the gold patch changes only C source. If grading
did not rebuild after applying the patches (as the harness's eval script does), the oracle would
run the stale binary and fail: oracle 1.0 shows the rebuild, nop < 1.0 that the bug is real.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "samples__cadd-1"
MAKEFILE = "run_tests: add.c run_tests.c\n\tcc -O0 -o run_tests add.c run_tests.c\n"
ADD_BUGGY = "int add(int a, int b) { return a - b; }\n"
ADD_FIXED = "int add(int a, int b) { return a + b; }\n"
RUN_TESTS = """#include <stdio.h>
int add(int a, int b);
static int n = 0;
static void check(int ok, const char *name) {
    printf("%s %d - %s\\n", ok ? "ok" : "not ok", ++n, name);
}
int main(void) {
    check(add(0, 0) == 0, "zero");
    %EXTRA%printf("1..%d\\n", n);
    return 0;
}
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def _diff(repo: Path, path: str, new: str) -> str:
    old = (repo / path).read_text()
    (repo / path).write_text(new)
    diff = _git(repo, "diff", "--", path)
    (repo / path).write_text(old)
    return diff


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cbuild")
    src = tmp / "src"
    src.mkdir()
    (src / "Makefile").write_text(MAKEFILE)
    (src / "add.c").write_text(ADD_BUGGY)
    (src / "run_tests.c").write_text(RUN_TESTS.replace("%EXTRA%", ""))
    (src / ".gitignore").write_text("run_tests\n")
    _git(src, "init", "-q")
    _git(src, "add", ".")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "base")
    base = _git(src, "rev-parse", "HEAD").strip()
    extra = 'check(add(2, 3) == 5, "two plus three");\n    '
    row = {
        "repo": "samples/cadd",
        "instance_id": TASK,
        "base_commit": base,
        "patch": _diff(src, "add.c", ADD_FIXED),
        "test_patch": _diff(src, "run_tests.c", RUN_TESTS.replace("%EXTRA%", extra)),
        "problem_statement": "add() subtracts instead of adding.",
        "hints_text": "",
        "created_at": "2025-01-01T00:00:00Z",
        "version": "1",
        "FAIL_TO_PASS": ["two plus three"],
        "PASS_TO_PASS": ["zero"],
    }
    (tmp / "mirrors" / "samples").mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(src), str(tmp / "mirrors" / "samples" / "cadd.git")],
        check=True,
    )
    (tmp / "data").mkdir()
    (tmp / "data" / "cbuild.jsonl").write_text(json.dumps(row) + "\n")
    # Python 3.11's image: its toolchain layer (build-essential) is the one the samples share.
    recipe = {
        "python": "3.11",
        "build": ["make"],
        "test_cmd": "./run_tests",
        "log_parser": "tap",
    }
    (tmp / "recipes.yaml").write_text(yaml.safe_dump({"samples/cadd": recipe}))
    return tmp


def test_build_reruns_after_the_patches(work: Path) -> None:
    proc = run_cli(
        "package", TASK,
        "--dataset", str(work / "data" / "cbuild.jsonl"),
        "--recipes", str(work / "recipes.yaml"),
        "--repo-source", str(work / "mirrors"),
        "--out", str(work / "out"),
        "--oracle-runs", "1",
        timeout=900,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(
        (work / "out" / "cbuild" / "results" / f"{TASK}.json").read_text()
    )
    assert result["status"] == "verified", proc.stdout + proc.stderr
    assert [o["reward"] for o in result["oracle"]] == [1.0]
    assert result["nop"]["reward"] < 1.0
    task_dir = work / "out" / "cbuild" / "tasks" / TASK
    toml = (task_dir / "task.toml").read_text()
    assert 'schema = "swebench-multilingual"' in toml or "swebench-multilingual" in toml
    plan = json.loads((task_dir / "tests" / "plan.json").read_text())
    assert plan["test_command"] == "make && ./run_tests"
