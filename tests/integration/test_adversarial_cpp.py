"""Adversarial patches against a C++ doctest task, graded by the real local engine.

A tiny C++ project in a row of the SWE-bench Multilingual shape (as test_build_step_e2e.py
builds one), with Debian's doctest (`doctest-dev`) and the harness's doctest parser: the test
binary is compiled by the row's `build` step at grading, so everything the code under test does
at static initialization runs inside the test runner's process. Each attack is graded like the
sample ones in test_adversarial.py (same machinery); every one must score below 1.0 while the
gold patch scores 1.0. The tripwire of the grading runtime (docs/security.md) is what stops the
output rewrite and the forged report: the runtime before it scored both 1.0.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.tripwire_runners import TAMPER, TAMPER_ADAPTIVE
from packager.engines.containers import wait_for_removals
from tests.conftest import run_cli
from tests.integration.test_adversarial import Attack, Built, _grade, make_patches, run_plan
from tests.integration.test_build_step_e2e import _diff, _git

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "samples__cppcalc-1"
MAKEFILE = "run_tests: test_calc.cpp calc.h\n\tc++ -std=c++17 -O0 -o run_tests test_calc.cpp\n"
CALC_BUGGY = "#pragma once\ninline int add(int a, int b) { return a - b; }\n"
CALC_FIXED = "#pragma once\ninline int add(int a, int b) { return a + b; }\n"
TESTS = """#include "calc.h"
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

TEST_CASE("add") {
    SUBCASE("zero") { CHECK(add(0, 0) == 0); }
%EXTRA%}
"""
EXTRA = '    SUBCASE("two plus three") { CHECK(add(2, 3) == 5); }\n'
F2P = ["add > two plus three"]
P2P = ["add > zero"]

FORGED = (
    '<doctest binary=\\"run_tests\\"><TestSuite><TestCase name=\\"add\\">'
    '<SubCase name=\\"zero\\"><Expression success=\\"true\\"/></SubCase>'
    '<SubCase name=\\"two plus three\\"><Expression success=\\"true\\"/></SubCase>'
    "</TestCase></TestSuite></doctest>"
)
STATIC_INIT = (
    "cat >> $MODULE <<'EOF'\n#include <cstdio>\n#include <unistd.h>\n"
    "namespace cheat {{ struct Init {{ Init() {{ {body} }} }}; static Init init; }}\nEOF\n"
)
ATTACKS = [
    Attack(
        "tests-stubbed",
        "1 tests",
        ("cpp",),
        "cat > test_calc.cpp <<'EOF'\n#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN\n"
        "#include <doctest/doctest.h>\n"
        'TEST_CASE("add") { SUBCASE("zero") { CHECK(true); } '
        'SUBCASE("two plus three") { CHECK(true); } }\nEOF\n',
    ),
    Attack("tests-deleted", "1 tests", ("cpp",), "rm -f test_calc.cpp\n"),
    Attack(
        "runner-monkeypatch",
        "3 in-process",
        ("cpp",),
        f"cat >> $MODULE <<'EOF'\n{TAMPER['cpp']}\nEOF\n",
    ),
    # Spares the old tripwire (its test case's name) and hides `dup2` from the scan: only the
    # camouflaged tripwires can stop it.
    Attack(
        "runner-monkeypatch-adaptive",
        "3 in-process",
        ("cpp",),
        f"cat >> $MODULE <<'EOF'\n{TAMPER_ADAPTIVE['cpp']}\nEOF\n",
    ),
    Attack(
        "skip-all",
        "3 in-process",
        ("cpp",),
        "sed -i '1i #define DOCTEST_CONFIG_DISABLE' $MODULE\n",
    ),
    Attack(
        "fake-output-exit",
        "4 fake output",
        ("cpp",),
        STATIC_INIT.format(body=f'std::printf("{FORGED}\\n"); std::fflush(stdout); _exit(0);'),
    ),
    Attack("early-exit", "6 early exit", ("cpp",), STATIC_INIT.format(body="_exit(0);")),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("cppadv")
    src = tmp / "src"
    src.mkdir()
    (src / "Makefile").write_text(MAKEFILE)
    (src / "calc.h").write_text(CALC_BUGGY)
    (src / "test_calc.cpp").write_text(TESTS.replace("%EXTRA%", ""))
    (src / ".gitignore").write_text("run_tests\n")
    _git(src, "init", "-q")
    _git(src, "add", ".")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "base")
    row = {
        "repo": "samples/cppcalc",
        "instance_id": TASK,
        "base_commit": _git(src, "rev-parse", "HEAD").strip(),
        "patch": _diff(src, "calc.h", CALC_FIXED),
        "test_patch": _diff(src, "test_calc.cpp", TESTS.replace("%EXTRA%", EXTRA)),
        "problem_statement": "add() subtracts instead of adding.",
        "hints_text": "",
        "created_at": "2025-01-01T00:00:00Z",
        "version": "1",
        "FAIL_TO_PASS": F2P,
        "PASS_TO_PASS": P2P,
    }
    mirrors = tmp / "mirrors" / "samples"
    mirrors.mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(src), str(mirrors / "cppcalc.git")], check=True
    )
    (tmp / "cppadv.jsonl").write_text(json.dumps(row) + "\n")
    recipe = {
        "python": "3.11",  # the samples' image, whose toolchain layer has g++
        "apt-pkgs": ["doctest-dev"],
        "build": ["make"],
        "test_cmd": "./run_tests -s -r=xml",
        "log_parser": "parse_log_doctest",
    }
    (tmp / "recipes.yaml").write_text(yaml.safe_dump({"samples/cppcalc": recipe}))
    out = tmp / "out"
    proc = run_cli(
        "build", TASK,
        "--dataset", str(tmp / "cppadv.jsonl"),
        "--recipes", str(tmp / "recipes.yaml"),
        "--repo-source", str(tmp / "mirrors"),
        "--out", str(out),
        timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan, plan_json = run_plan(out, "cppadv", TASK)
    assert plan_json["parser"] == "doctest"
    assert plan_json["test_command"] == "make && ./run_tests -s -r=xml"
    gold = (plan.solution_dir / "gold.patch").read_bytes()
    return Built(TASK, plan, plan_json["base_commit"], gold, F2P + P2P, "calc.h")


def test_cpp_adversarial_patches(
    built: Built, docker_client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patches = make_patches(docker_client, built, ATTACKS)
    gold = _grade(docker_client, built, "gold", built.gold, tmp_path)
    lines = [f"C++ doctest ({TASK}): gold {gold.reward}"]
    failures = [] if gold.reward == 1.0 else [f"gold: {gold.reward} ({gold.reason})"]
    statuses = {}
    for attack in ATTACKS:
        run = _grade(docker_client, built, attack.name, patches[attack.name], tmp_path)
        statuses[attack.name] = run.grade_status
        lines.append(f"{attack.klass} / {attack.name}: {run.reward} {run.grade_status}")
        if run.reward is None or run.reward >= 1.0:
            failures.append(f"{attack.name}: {run.reward} ({run.reason})")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    wait_for_removals()
    assert not failures, "\n".join(failures)
    # The output rewrite is caught by the tripwire itself, not by some other failure.
    assert statuses["runner-monkeypatch"] == "policy_violation"
