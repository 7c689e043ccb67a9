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


# Ids as SWE-bench datasets hold them: cut at the first space (`_resolve_case` in the harness).
MAKE_ERROR = "tests/test_fields.py::TestErrorMessages::test_make_error"


@pytest.mark.parametrize(
    ("listed", "tests", "expected"),
    [
        # Exact ids always win, even when they look truncated.
        ("t.py::test_x[a", {"t.py::test_x[a": "failed", "t.py::test_x[a b]": "passed"}, "failed"),
        (
            f"{MAKE_ERROR}[required-Missing",
            {f"{MAKE_ERROR}[required-Missing data for required field.]": "passed"},
            "passed",
        ),
        (
            "astropy/units/tests/test_format.py::test_ogip_grammar_fail[log(photon",
            {"astropy/units/tests/test_format.py::test_ogip_grammar_fail[log(photon /m2": "passed"},
            "passed",
        ),
        (
            "lib/matplotlib/tests/test_axes.py::test_margins_errors[TypeError-args6-kwargs6-Must",
            {
                "lib/matplotlib/tests/test_axes.py::test_margins_errors"
                "[TypeError-args6-kwargs6-Must pass a single positional argument]": "failed"
            },
            "failed",
        ),
        # Every candidate passed: passed; all failed one way or another: that first status.
        (
            "t.py::test_s[a",
            {"t.py::test_s[a b]": "passed", "t.py::test_s[a c]": "passed"},
            "passed",
        ),
        ("t.py::test_s[a", {"t.py::test_s[a b]": "error", "t.py::test_s[a c]": "failed"}, "error"),
        # Candidates that disagree on pass-vs-fail: missing.
        ("t.py::test_s[a", {"t.py::test_s[a b]": "passed", "t.py::test_s[a c]": "failed"}, None),
        ("t.py::test_s[a", {"t.py::test_s[a b]": "passed", "t.py::test_s[a c]": "skipped"}, None),
        # Balanced brackets never prefix-match: a shorter name is another test.
        ("t.py::test_x", {"t.py::test_x_more": "passed"}, None),
        ("t.py::test_x[1]", {"t.py::test_x[1]-extra": "passed"}, None),
        ("test_a (m.C)", {"test_a (m.C.test_a)": "passed"}, None),
        # No candidate at all.
        ("t.py::test_x[a", {"t.py::test_y[a b]": "passed"}, None),
    ],
)
def test_resolve_matches_as_the_harness(
    listed: str, tests: dict[str, str], expected: str | None
) -> None:
    assert rules.resolve(tests, listed) == expected


def test_all_pass_with_ids_cut_at_their_first_space() -> None:
    tests = {
        f"{MAKE_ERROR}[required-Missing data for required field.]": "passed",
        f"{MAKE_ERROR}[null-Field may not be null.]": "passed",
        "tests/test_fields.py::test_other": "passed",
    }
    f2p = [f"{MAKE_ERROR}[required-Missing"]
    p2p = [f"{MAKE_ERROR}[null-Field", "tests/test_fields.py::test_other"]
    assert rules.all_pass(tests, f2p, p2p) == (1.0, {"fail_to_pass": 1.0, "pass_to_pass": 1.0})
    tests[f"{MAKE_ERROR}[null-Field may not be null.]"] = "failed"
    assert rules.all_pass(tests, f2p, p2p) == (0.0, {"fail_to_pass": 1.0, "pass_to_pass": 0.5})
    assert rules.passed_fraction(tests, [f"{MAKE_ERROR}[required-Missing"]) == 1.0


def test_all_pass_records_failed_and_missing_listed_tests() -> None:
    tests = {"t::a": "passed", "t::b": "failed", "t::c": "skipped", "t::d[x y]": "error"}
    tests.update({f"t::p{i}": "failed" for i in range(12)})
    details: dict[str, object] = {"status": "graded"}
    f2p = ["t::a", "t::b", "t::gone", "t::d[x"]
    p2p = ["t::a", "t::c", *(f"t::p{i}" for i in range(12))]
    reward, _ = rules.all_pass(tests, f2p, p2p, details=details)
    assert reward == 0.0
    assert details["status"] == "graded"
    assert details["failed_tests"] == {
        "fail_to_pass": ["t::b", "t::gone", "t::d[x"],
        "pass_to_pass": ["t::c", *(f"t::p{i}" for i in range(9))],
    }
    assert details["failed_counts"] == {"fail_to_pass": 3, "pass_to_pass": 13}


def test_all_pass_records_nothing_failed_when_all_passed() -> None:
    details: dict[str, object] = {}
    rules.all_pass({"t::a": "passed"}, ["t::a"], [], details=details)
    assert details == {
        "failed_tests": {"fail_to_pass": [], "pass_to_pass": []},
        "failed_counts": {"fail_to_pass": 0, "pass_to_pass": 0},
    }


# --------------------------------------------------------------------------------------- formula

H, P, B = rules.FORMULA_NAMES  # hidden_pass_fraction, public_regression, build_health
VALUES = {H: 0.5, P: 1.0, B: 1.0}
CARD_FORMULA = f"0.80{H} + 0.15{P} + 0.05*{B}"  # as the PDL card writes it: two `*`s lost


def test_formula_names_are_the_cards() -> None:
    assert rules.FORMULA_NAMES == ("hidden_pass_fraction", "public_regression", "build_health")


@pytest.mark.parametrize(
    ("raw", "fixed"),
    [
        (f"0.80 {H} + 0.15 {P} + 0.05 {B}", f"0.80*{H} + 0.15*{P} + 0.05*{B}"),
        (CARD_FORMULA, f"0.80*{H} + 0.15*{P} + 0.05*{B}"),
        (f"0.8{H}+0.2{P}", f"0.8*{H}+0.2*{P}"),
        (f"0.80*{H} + 0.2 * {P}", f"0.80*{H} + 0.2 * {P}"),
        (f".5 {H} + .5 {P}", f".5*{H} + .5*{P}"),
        (f"1e-1{B}", f"1e-1*{B}"),
        (f"({H} + {P}) / 2", f"({H} + {P}) / 2"),
        # Only the card's names get a `*` back; the old short names are left alone (and then
        # refused by the parser), as is a number glued to another identifier.
        ("0.8hidden + 0.2public", "0.8hidden + 0.2public"),
        (f"x1{H}", f"x1{H}"),
    ],
)
def test_normalize_restores_lost_star(raw: str, fixed: str) -> None:
    assert rules.normalize_expression(raw) == fixed


def test_formula_lost_star_evaluates() -> None:
    assert rules.evaluate_formula(CARD_FORMULA, VALUES) == pytest.approx(0.4 + 0.15 + 0.05)
    nop = {H: 0.0, P: 1.0, B: 1.0}
    assert rules.evaluate_formula(CARD_FORMULA, nop) == pytest.approx(0.2)


def test_formula_arithmetic() -> None:
    assert rules.evaluate_formula(f"({H} + {P}) / 2 - -0.25", VALUES) == pytest.approx(1.0)


@pytest.mark.parametrize("expr", ["0.8*hidden + 0.2*public", "hidden", "public * 1"])
def test_formula_old_names_are_refused(expr: str) -> None:
    with pytest.raises(rules.RuleError, match="unknown name"):
        rules.parse_expression(expr)


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        f"{H} ** 2",
        f"{H} % 2",
        f"{H} // 1",
        f"max({H}, {P})",
        f"{H} if {P} else 0",
        f"{H} and {P}",
        f"{H} < {P}",
        f"True * {H}",
        f"'1' + {H}",
        f"[{H}][0]",
        f"{H}.real",
        "lambda: 1",
        f"secret + {H}",
        f"1j * {H}",
        "",
        f"{H} +",
        f"{H}; {P}",
    ],
)
def test_formula_rejects_everything_else(expr: str) -> None:
    with pytest.raises(rules.RuleError):
        rules.evaluate_formula(expr, VALUES)


def test_formula_division_by_zero_and_overflow() -> None:
    with pytest.raises(rules.RuleError, match="division by zero"):
        rules.evaluate_formula(f"{H} / ({P} - 1)", VALUES)
    with pytest.raises(rules.RuleError, match="finite"):
        rules.evaluate_formula(f"1e308 * 1e308 * {H}", VALUES)


FORMULA_TESTS = {
    "tests/hidden/test_h.py::test_a": "passed",
    "tests/hidden/test_h.py::test_b": "failed",
    "tests/public/test_p.py::test_c": "passed",
    "tests/public/test_p.py::test_d": "failed",
}


def test_formula_groups_are_the_listed_tests_exactly() -> None:
    spec = {
        "hidden_paths": ["tests/hidden/"],
        "hidden_tests": ["tests/hidden/test_h.py::test_a", "tests/hidden/test_h.py::test_gone"],
        "public_tests": ["tests/public/test_p.py::test_c"],
    }
    # Observed ids that are not listed (test_b, test_d) belong to no group; a listed id that
    # did not run (test_gone) stays in its group.
    assert rules.formula_groups(FORMULA_TESTS, spec) == (
        ["tests/hidden/test_h.py::test_a", "tests/hidden/test_h.py::test_gone"],
        ["tests/public/test_p.py::test_c"],
    )


def test_formula_groups_from_observed_ids_when_not_listed() -> None:
    spec = {"hidden_paths": ["tests/hidden/"], "hidden_tests": [], "public_tests": []}
    assert rules.formula_groups(FORMULA_TESTS, spec) == (
        ["tests/hidden/test_h.py::test_a", "tests/hidden/test_h.py::test_b"],
        ["tests/public/test_p.py::test_c", "tests/public/test_p.py::test_d"],
    )


def test_formula_groups_a_listed_public_id_that_is_hidden_counts_once() -> None:
    spec = {
        "hidden_tests": ["tests/hidden/test_h.py::test_a"],
        "public_tests": ["tests/hidden/test_h.py::test_a", "tests/public/test_p.py::test_c"],
    }
    assert rules.formula_groups(FORMULA_TESTS, spec) == (
        ["tests/hidden/test_h.py::test_a"],
        ["tests/public/test_p.py::test_c"],
    )


def test_formula_rule_groups_and_terms() -> None:
    spec = {
        "expression": f"0.80 {H} + 0.15*{P} + 0.05*{B}",
        "hidden_paths": ["tests/hidden/"],
        "hidden_tests": ["tests/hidden/test_h.py::test_a", "tests/hidden/test_h.py::test_gone"],
        "public_tests": ["tests/public/test_p.py::test_c"],
    }
    reward, subscores = rules.formula(FORMULA_TESTS, spec, build_health=0.0)
    # hidden: a passed, gone missing -> 1/2 (b is not listed); public: c passed -> 1 (d is not)
    assert subscores == {H: 0.5, P: 1.0, B: 0.0}
    assert reward == pytest.approx(0.8 * 0.5 + 0.15)


def test_formula_rule_no_hidden_tests_ran_scores_zero_hidden() -> None:
    spec = {"expression": H, "hidden_paths": ["tests/hidden/"]}
    assert rules.formula({"tests/public/test_p.py::t": "passed"}, spec, 1.0) == (
        0.0,
        {H: 0.0, P: 1.0, B: 1.0},
    )


def test_formula_rule_empty_public_group_scores_one() -> None:
    spec = {"expression": P, "hidden_tests": ["tests/hidden/test_h.py::test_a"]}
    assert rules.formula({"tests/hidden/test_h.py::test_a": "failed"}, spec, 1.0)[0] == 1.0


def test_formula_rule_card_formula_needs_the_card_names() -> None:
    spec = {"expression": "0.8*hidden + 0.2*public", "hidden_tests": ["t::a"]}
    with pytest.raises(rules.RuleError, match="unknown name 'hidden'"):
        rules.formula({"t::a": "passed"}, spec, 1.0)


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


@pytest.mark.parametrize("text", ["0.4", "0.4\n", " 4e-1 "])
def test_script_bare_number_in_reward_file(tmp_path: Path, text: str) -> None:
    reward_file = tmp_path / "reward.txt"
    reward_file.write_text(text)
    report = rules.read_script_report(reward_file, "")
    assert rules.script_scores(report, []) == (0.4, {})


def test_script_score_is_read_as_reward(tmp_path: Path) -> None:
    reward_file = tmp_path / "reward.json"
    reward_file.write_text(json.dumps({"score": 0.6, "parse": 1.0}))
    report = rules.read_script_report(reward_file, "")
    assert rules.script_scores(report, []) == (0.6, {"parse": 1.0})
    # On stdout too, and `score` never becomes a subscore of its own.
    report = rules.read_script_report(None, 'log line\n{"score": 0.25, "a": 0.5}\n')
    assert rules.script_scores(report, []) == (0.25, {"a": 0.5})


def test_script_reward_key_wins_over_score() -> None:
    report = rules.read_script_report(None, '{"score": 0.9, "reward": 0.1}\n')
    reward, subscores = rules.script_scores(report, [])
    assert reward == 0.1
    assert "score" not in subscores and "reward" not in subscores


def test_script_without_criteria_passes_numbers_through() -> None:
    assert rules.script_scores({"reward": 1, "a": 0.5, "b": "text", "c": True}, []) == (
        1.0,
        {"a": 0.5},
    )


def test_script_every_numeric_key_is_a_subscore_whatever_the_criteria() -> None:
    report = {
        "reward": 0.5,
        "hidden_tests": 0.25,
        "lint": 2,
        "subscores": {"fix": 1.0, "edge": 0.0, "why": "text"},
        "criteria": {"c1": 0.5},
        "other": {"nested": 1.0},
        "passed": [1, 2],
        "bad": math.nan,
    }
    criteria: list[dict[str, object]] = [{"name": "fix", "weight": 100}]
    assert rules.script_scores(report, criteria) == (
        0.5,
        {"hidden_tests": 0.25, "lint": 2.0, "fix": 1.0, "edge": 0.0, "c1": 0.5},
    )


def test_script_no_reward_is_an_error_naming_the_output_tail(tmp_path: Path) -> None:
    stdout = "".join(f"line {i}\n" for i in range(20)) + "Traceback: boom\n"
    with pytest.raises(rules.RuleError, match="no reward") as caught:
        rules.read_script_report(None, stdout)
    message = str(caught.value)
    assert "Traceback: boom" in message and "line 19" in message
    assert "line 0\n" not in message and "line 0 |" not in message  # only the tail
    with pytest.raises(rules.RuleError, match=r"no output"):
        rules.read_script_report(tmp_path / "absent.json", "")


@pytest.mark.parametrize("content", ["[1, 2]", '{"points": 3}', "passed", '"0.5"'])
def test_script_unreadable_reward_file_is_an_error(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "reward.json"
    bad.write_text(content)
    with pytest.raises(rules.RuleError, match="reward file") as caught:
        rules.read_script_report(bad, '{"reward": 1}')
    assert content in str(caught.value)


def test_script_empty_reward_file_falls_back_to_stdout(tmp_path: Path) -> None:
    empty = tmp_path / "reward.json"
    empty.write_text("  \n")
    assert rules.read_script_report(empty, '{"reward": 0.5}\n') == {"reward": 0.5}


@pytest.mark.parametrize("value", [None, "1", math.nan, math.inf, True, -0.1, 1.5])
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
