"""Reward rules and patch-policy helpers of the grading runtime (pure functions)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from packager.grading import patching, rules

# -------------------------------------------------------------------------------------- all_pass


def test_all_pass_every_listed_test_passed() -> None:
    tests = {"t::a": "passed", "t::b": "passed", "t::c": "failed"}
    assert rules.all_pass(tests, ["t::a"], ["t::b"]) == (
        1.0,
        {"fail_to_pass": 1.0, "pass_to_pass": 1.0},
    )


def test_all_pass_skipped_fail_to_pass_scores_zero() -> None:
    tests = {"t::a": "skipped", "t::b": "passed"}
    reward, subscores = rules.all_pass(tests, ["t::a"], ["t::b"])
    assert reward == 0.0
    assert subscores == {"fail_to_pass": 0.0, "pass_to_pass": 1.0}


def test_all_pass_missing_test_scores_zero() -> None:
    tests = {"t::a": "passed"}
    reward, subscores = rules.all_pass(tests, ["t::a", "t::gone"], [])
    assert reward == 0.0
    assert subscores == {"fail_to_pass": 0.5, "pass_to_pass": 1.0}


@pytest.mark.parametrize("status", ["failed", "error", "skipped"])
def test_all_pass_broken_pass_to_pass(status: str) -> None:
    tests = {"t::a": "passed", "t::b": status}
    assert rules.all_pass(tests, ["t::a"], ["t::b"])[0] == 0.0


def test_all_pass_empty_lists_are_vacuously_true() -> None:
    assert rules.all_pass({}, [], []) == (1.0, {"fail_to_pass": 1.0, "pass_to_pass": 1.0})


def test_passed_fraction_counts_duplicates_once() -> None:
    assert rules.passed_fraction({"a": "passed"}, ["a", "a", "b"]) == 0.5


# --------------------------------------------------------------------------------------- formula

VALUES = {"hidden": 0.5, "public": 1.0, "build_health": 1.0}


@pytest.mark.parametrize(
    ("raw", "fixed"),
    [
        (
            "0.80 hidden + 0.15 public + 0.05 build_health",
            "0.80*hidden + 0.15*public + 0.05*build_health",
        ),
        ("0.8hidden+0.2public", "0.8*hidden+0.2*public"),
        ("0.80*hidden + 0.2 * public", "0.80*hidden + 0.2 * public"),
        (".5 hidden + .5 public", ".5*hidden + .5*public"),
        ("(hidden + public) / 2", "(hidden + public) / 2"),
    ],
)
def test_normalize_restores_lost_star(raw: str, fixed: str) -> None:
    assert rules.normalize_expression(raw) == fixed


def test_formula_lost_star_evaluates() -> None:
    expr = "0.80 hidden + 0.15 public + 0.05 build_health"
    assert rules.evaluate_formula(expr, VALUES) == pytest.approx(0.4 + 0.15 + 0.05)


def test_formula_arithmetic() -> None:
    assert rules.evaluate_formula("(hidden + public) / 2 - -0.25", VALUES) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "hidden ** 2",
        "hidden % 2",
        "hidden // 1",
        "max(hidden, public)",
        "hidden if public else 0",
        "hidden and public",
        "hidden < public",
        "True * hidden",
        "'1' + hidden",
        "[hidden][0]",
        "hidden.real",
        "lambda: 1",
        "secret + hidden",
        "1j * hidden",
        "",
        "hidden +",
        "hidden; public",
    ],
)
def test_formula_rejects_everything_else(expr: str) -> None:
    with pytest.raises(rules.RuleError):
        rules.evaluate_formula(expr, VALUES)


def test_formula_division_by_zero_and_overflow() -> None:
    with pytest.raises(rules.RuleError, match="division by zero"):
        rules.evaluate_formula("hidden / (public - 1)", VALUES)
    with pytest.raises(rules.RuleError, match="finite"):
        rules.evaluate_formula("1e308 * 1e308 * hidden", VALUES)


def test_formula_rule_groups_and_terms() -> None:
    tests = {
        "tests/test_hidden.py::test_a": "passed",
        "tests/test_hidden.py::test_b": "failed",
        "tests/test_public.py::test_c": "passed",
        "tests/test_public.py::test_d": "passed",
    }
    spec = {
        "expression": "0.80 hidden + 0.15*public + 0.05*build_health",
        "hidden_paths": ["tests/test_hidden.py"],
        "hidden_tests": ["tests/test_hidden.py::test_a", "tests/test_hidden.py::test_gone"],
        "public_tests": ["tests/test_public.py::test_c"],
    }
    reward, subscores = rules.formula(tests, spec, build_health=0.0)
    # hidden: a passed, b failed, gone missing -> 1/3; public: c and d passed -> 1
    assert subscores == {"hidden": pytest.approx(1 / 3), "public": 1.0, "build_health": 0.0}
    assert reward == pytest.approx(0.8 / 3 + 0.15)


def test_formula_rule_no_hidden_tests_ran_scores_zero_hidden() -> None:
    spec = {"expression": "hidden", "hidden_paths": ["tests/test_hidden.py"]}
    assert rules.formula({"tests/test_public.py::t": "passed"}, spec, 1.0)[0] == 0.0


# ---------------------------------------------------------------------------------------- script


def test_script_reward_file_wins_over_a_higher_printed_reward(tmp_path: Path) -> None:
    reward_file = tmp_path / "reward.json"
    reward_file.write_text(json.dumps({"reward": 0.7, "fix": 1.0, "edge": 0.0}))
    report = rules.read_script_report(reward_file, '{"reward": 0.9}\n')
    assert report == {"reward": 0.7, "fix": 1.0, "edge": 0.0}


def test_script_lower_printed_reward_beats_an_overwritten_reward_file(tmp_path: Path) -> None:
    # The tested code inherits REWARD_FILE and can overwrite it after the grader wrote it.
    reward_file = tmp_path / "reward.json"
    reward_file.write_text(json.dumps({"reward": 1.0}))
    report = rules.read_script_report(reward_file, '{"reward": 0.2, "fix": 0.0}\n')
    assert report == {"reward": 0.2, "fix": 0.0}


def test_script_last_json_line_on_stdout(tmp_path: Path) -> None:
    stdout = (
        "running checks\n"
        '{"reward": 0.2}\n'
        '{"reward": 0.8, "fix": 1.0, "edge": 0.5, "regress": 1.0, "note": "x"}\n'
        '{"not_reward": 1}\n'
        "done\n"
    )
    report = rules.read_script_report(tmp_path / "absent.json", stdout)
    criteria: list[dict[str, object]] = [
        {"name": "fix", "weight": 50},
        {"name": "edge", "weight": 30},
        {"name": "regress"},
    ]
    assert rules.script_scores(report, criteria) == (
        0.8,
        {"fix": 1.0, "edge": 0.5, "regress": 1.0},
    )


def test_script_without_criteria_passes_numbers_through() -> None:
    assert rules.script_scores({"reward": 1, "a": 0.5, "b": "text", "c": True}, []) == (
        1.0,
        {"a": 0.5},
    )


def test_script_no_reward_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(rules.RuleError, match="no reward"):
        rules.read_script_report(None, "all good\n")
    bad = tmp_path / "reward.json"
    bad.write_text("[1, 2]")
    with pytest.raises(rules.RuleError, match="REWARD_FILE"):
        rules.read_script_report(bad, '{"reward": 1}')


@pytest.mark.parametrize("value", [None, "1", math.nan, math.inf, True])
def test_script_reward_must_be_a_finite_number(value: object) -> None:
    with pytest.raises(rules.RuleError):
        rules.script_scores({"reward": value}, [])


# ---------------------------------------------------------------------------------- touched paths

DIFF = """\
diff --git a/src/calc.py b/src/calc.py
index 3b18e51..a9c1d2e 100644
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,3 +1,3 @@
 def add(a, b):
--- this removed line starts with two dashes
+++ and this added one with two pluses
diff --git a/docs/old name.md b/docs/new name.md
similarity index 100%
rename from docs/old name.md
rename to docs/new name.md
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+def test_new(): pass
diff --git a/legacy.py b/legacy.py
deleted file mode 100644
index e69de29..0000000
diff --git "a/data/caf\\303\\251.txt" "b/data/caf\\303\\251.txt"
index 1..2 100644
Binary files "a/data/caf\\303\\251.txt" and "b/data/caf\\303\\251.txt" differ
diff --git a/bin/run b/bin/run
old mode 100644
new mode 100755
"""


def test_touched_paths_git_diff() -> None:
    assert patching.touched_paths(DIFF) == [
        "src/calc.py",
        "docs/old name.md",
        "docs/new name.md",
        "tests/test_new.py",
        "legacy.py",
        "data/café.txt",
        "bin/run",
    ]


def test_touched_paths_plain_unified_diff_with_timestamps() -> None:
    diff = (
        "--- a/src/util.py\t2024-01-01 00:00:00.000000000 +0000\n"
        "+++ b/src/util.py\t2024-01-02 00:00:00.000000000 +0000\n"
        "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
        "--- a/src/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-y = 1\n"
    )
    assert patching.touched_paths(diff) == ["src/util.py", "src/gone.py"]


# ----------------------------------------------------------------------------------------- policy


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src/**", "src/a.py", True),
        ("src/**", "src/pkg/deep/a.py", True),
        ("src/**", "srcx/a.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("**/*.lock", "yarn.lock", True),
        ("**/*.lock", "web/app/yarn.lock", True),
        ("tests/**/test_*.py", "tests/test_a.py", True),
        ("tests/**/test_*.py", "tests/unit/deep/test_a.py", True),
        ("*.md", "docs/a.md", False),
        ("docs/", "docs/a/b.md", True),
        ("src/?.py", "src/a.py", True),
        ("src/[ab].py", "src/c.py", False),
        ("./setup.py", "setup.py", True),
    ],
)
def test_glob_matching(pattern: str, path: str, expected: bool) -> None:
    assert bool(patching.glob_to_regex(pattern).match(path)) is expected


def test_policy_violations() -> None:
    paths = ["src/a.py", "src/vendor/x.py", "tests/test_a.py", "README.md", "../escape", ".git/x"]
    assert patching.policy_violations(paths, ["src/**"], ["src/vendor/**"]) == [
        "src/vendor/x.py",
        "tests/test_a.py",
        "README.md",
        "../escape",
        ".git/x",
    ]


def test_policy_empty_allowed_means_anything_not_forbidden() -> None:
    assert patching.policy_violations(["a.py", "tests/t.py"], [], ["tests/**"]) == ["tests/t.py"]
