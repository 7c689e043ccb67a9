"""Reward rules: turn per-test statuses (or a grader script's report) into a reward.

``all_pass`` and ``formula`` are pure functions of the parsed test map. The formula evaluator
walks a Python ``ast`` over a whitelist (numbers, the names ``hidden_pass_fraction``/
``public_regression``/``build_health``, ``+ - * /``, parentheses) and never calls ``eval``.
The ``script`` helpers read what an EC-SWE grader script reported; running the script is the
runtime's job.

Standard library only, Python >= 3.9 (this module is copied into grader images).
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

PASSED = "passed"
FORMULA_NAMES = ("hidden_pass_fraction", "public_regression", "build_health")
"""The names PDL-SWE-Bench's card uses in ``reward_formula``."""
MAX_EXPRESSION_CHARS = 2000

Scores = Dict[str, float]


class RuleError(ValueError):
    """The rule's inputs cannot produce a reward (bad formula, no script reward, ...)."""


def resolve(tests: Mapping[str, str], test_id: str) -> Optional[str]:
    """The status of listed test ``test_id`` in ``tests``, or None when it is missing.

    As the SWE-bench harness matches (``_resolve_case`` in swebench 5.0.2): the exact id first.
    Datasets hold ids cut at their first space (``t.py::test_make_error[required-Missing``), so
    an id with more ``[`` than ``]`` also matches every parsed id it starts, provided they agree
    on passed-or-not (then the first one's status); candidates that disagree make it missing.
    """
    status = tests.get(test_id)
    if status is not None:
        return status
    if test_id.count("[") > test_id.count("]"):
        found = [s for key, s in tests.items() if key.startswith(test_id)]
        if found and len({s == PASSED for s in found}) == 1:
            return found[0]
    return None


def passed_fraction(tests: Mapping[str, str], ids: Iterable[str], empty: float = 1.0) -> float:
    """Fraction of ``ids`` whose status is ``passed``; missing or skipped ids count as failed.

    Ids are looked up with ``resolve`` (a truncated parametrized id matches its full form).
    """
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return empty
    return sum(1 for test_id in wanted if resolve(tests, test_id) == PASSED) / len(wanted)


MAX_FAILED_LISTED = 10
"""How many of a group's failed or missing ids a report names (the count covers all of them)."""


def failed_listed(tests: Mapping[str, str], groups: Mapping[str, Sequence[str]]) -> Dict[str, Any]:
    """Which listed ids did not pass, per group: report fields explaining a zero reward.

    ``{"failed_tests": {group: [first MAX_FAILED_LISTED ids]}, "failed_counts": {group: n}}``
    (failed, errored, skipped and missing alike; ``tests`` tells them apart, a missing id is
    absent there).
    """
    failed = {
        name: [t for t in dict.fromkeys(ids) if resolve(tests, t) != PASSED]
        for name, ids in groups.items()
    }
    return {
        "failed_tests": {name: ids[:MAX_FAILED_LISTED] for name, ids in failed.items()},
        "failed_counts": {name: len(ids) for name, ids in failed.items()},
    }


def all_pass(
    tests: Mapping[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    details: Optional[Dict[str, Any]] = None,
) -> Tuple[float, Scores]:
    """1.0 iff every listed id passed; subscores are the passed fraction of each list.

    When ``details`` is given (the report), ``failed_listed``'s fields are written into it.
    """
    f2p = passed_fraction(tests, fail_to_pass)
    p2p = passed_fraction(tests, pass_to_pass)
    reward = 1.0 if f2p == 1.0 and p2p == 1.0 else 0.0
    if details is not None:
        groups = {"fail_to_pass": fail_to_pass, "pass_to_pass": pass_to_pass}
        details.update(failed_listed(tests, groups))
    return reward, {"fail_to_pass": f2p, "pass_to_pass": p2p}


# -------------------------------------------------------------------------------------- formula

# A number directly followed by a variable name ("0.80 hidden", "0.8hidden") lost its `*` on the
# way through a spreadsheet or markdown renderer; putting it back is the only repair made.
_LOST_STAR = re.compile(
    r"(?<![\w.])((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?=(?:" + "|".join(FORMULA_NAMES) + r")\b)"
)


def normalize_expression(expression: str) -> str:
    """Restore a lost ``*`` between a number and a name (``0.80build_health`` ->
    ``0.80*build_health``).
    """
    return _LOST_STAR.sub(r"\1*", expression.strip())


_BINARY_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_UNARY_OPS = (ast.UAdd, ast.USub)


def _check_node(node: ast.AST, names: Sequence[str]) -> None:
    if isinstance(node, ast.Expression):
        _check_node(node.body, names)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY_OPS):
        _check_node(node.left, names)
        _check_node(node.right, names)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, _UNARY_OPS):
        _check_node(node.operand, names)
    elif isinstance(node, ast.Constant):
        # bool is an int subclass; True/False are names, not numbers, in a formula.
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise RuleError(f"formula: only numbers are allowed, not {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id not in names:
            raise RuleError(f"formula: unknown name {node.id!r} (allowed: {', '.join(names)})")
    else:
        raise RuleError(f"formula: {type(node).__name__} is not allowed")


def _eval_node(node: ast.AST, values: Mapping[str, float]) -> float:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body, values)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(values[node.id])
    if isinstance(node, ast.UnaryOp):
        operand = _eval_node(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left = _eval_node(node.left, values)
        right = _eval_node(node.right, values)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise RuleError("formula: division by zero")
        return left / right
    raise RuleError(f"formula: {type(node).__name__} is not allowed")  # guarded by _check_node


def parse_expression(expression: str, names: Sequence[str] = FORMULA_NAMES) -> ast.Expression:
    """Parse and validate a formula (after restoring a lost ``*``); raise RuleError if unsafe."""
    text = normalize_expression(expression)
    if not text:
        raise RuleError("formula: empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise RuleError("formula: expression too long")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise RuleError(f"formula: cannot parse {text!r}: {exc}") from None
    _check_node(tree, names)
    return tree


def evaluate_formula(expression: str, values: Mapping[str, float]) -> float:
    """Evaluate a validated formula; every allowed name must have a value."""
    tree = parse_expression(expression, tuple(values))
    try:
        result = _eval_node(tree, values)
    except (OverflowError, RecursionError) as exc:
        raise RuleError(f"formula: cannot evaluate: {exc}") from None
    if not math.isfinite(result):
        raise RuleError("formula: result is not a finite number")
    return result


def formula_groups(
    tests: Mapping[str, str], spec: Mapping[str, Any]
) -> Tuple[List[str], List[str]]:
    """The hidden and public test ids of a formula rule.

    When the plan lists them (``hidden_tests`` = FAIL_TO_PASS, ``public_tests`` = PASS_TO_PASS)
    those lists are the groups, exactly. A group not listed is made of the observed ids: hidden
    = every id under a ``hidden_paths`` prefix, public = every other id. Listed ids that did not
    run stay in their group and count as failed.
    """
    hidden_paths = [str(p) for p in spec.get("hidden_paths") or [] if str(p)]
    listed_hidden = [str(t) for t in spec.get("hidden_tests") or []]
    listed_public = [str(t) for t in spec.get("public_tests") or []]
    if listed_hidden:
        hidden = list(dict.fromkeys(listed_hidden))
    else:
        hidden = list(dict.fromkeys(t for t in tests if any(t.startswith(p) for p in hidden_paths)))
    hidden_set = set(hidden)
    if listed_public:
        public = [t for t in dict.fromkeys(listed_public) if t not in hidden_set]
    else:
        public = [
            t
            for t in tests
            if t not in hidden_set and not any(t.startswith(p) for p in hidden_paths)
        ]
    return hidden, public


def formula(
    tests: Mapping[str, str], spec: Mapping[str, Any], build_health: float
) -> Tuple[float, Scores]:
    """Evaluate the plan's formula; subscores are the three terms.

    ``hidden_pass_fraction`` is the passed share of the hidden group, ``public_regression`` that
    of the public group. An empty hidden group scores 0 (hidden tests that never ran prove
    nothing); an empty public group scores 1, as an empty list does for ``all_pass``.
    """
    hidden, public = formula_groups(tests, spec)
    values = {
        "hidden_pass_fraction": passed_fraction(tests, hidden, empty=0.0),
        "public_regression": passed_fraction(tests, public, empty=1.0),
        "build_health": float(build_health),
    }
    reward = evaluate_formula(str(spec.get("expression") or ""), values)
    return reward, values


# --------------------------------------------------------------------------------------- script


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


REWARD_KEYS = ("reward", "score")
"""A grader script reports its reward under one of these keys (the first present wins)."""


def _reward_object(text: str) -> Optional[Dict[str, Any]]:
    """A JSON object with a reward key (``score`` is read as ``reward``), or a bare number."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if _number(data) is not None:
        return {"reward": data}
    if isinstance(data, dict):
        for key in REWARD_KEYS:
            if key in data:
                found = dict(data)
                found["reward"] = found.pop(key) if key != "reward" else found["reward"]
                return found
    return None


def _tail(text: str, lines: int = 8, chars: int = 600) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    joined = " | ".join(kept)
    return joined[-chars:] if joined else "(no output)"


def read_script_report(reward_file: Optional[Path], stdout: str) -> Dict[str, Any]:
    """Find what a grader script reported, in the forms such scripts use.

    The reward file (``REWARD_FILE``) holding a number or a JSON object with ``reward`` or
    ``score``; or the last stdout line that is such an object. When both exist and the printed
    reward is lower, the printed one counts (the tested code inherits ``REWARD_FILE`` and could
    overwrite it). Anything else raises RuleError with the output's tail: the grader broke, which
    is an infrastructure fault, not a verdict.
    """
    printed: Optional[Dict[str, Any]] = None
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            printed = _reward_object(line)
            if printed is not None:
                break
    if reward_file is not None and reward_file.is_file():
        text = reward_file.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            data = _reward_object(text)
            if data is None:
                raise RuleError(
                    "script: the reward file holds neither a number nor a JSON object with "
                    f"'reward' or 'score': {_tail(text)}"
                )
            ours, theirs = (
                _number(data.get("reward")),
                _number(printed.get("reward")) if printed else None,
            )
            if printed is not None and theirs is not None and (ours is None or theirs < ours):
                return printed
            return data
    if printed is not None:
        return printed
    raise RuleError(
        "script: no reward (no reward file, no JSON object with 'reward' or 'score' on the "
        f"last stdout lines); output ends: {_tail(stdout)}"
    )


def script_scores(
    report: Mapping[str, Any], criteria: Sequence[Mapping[str, Any]]
) -> Tuple[float, Scores]:
    """Reward and subscores from a grader script's report.

    The reward must be a finite number in [0, 1]. Every other finite numeric key of the report
    (per-criterion scores, in whatever names the script uses) becomes a subscore; nested
    ``subscores``/``criteria`` objects are flattened one level. ``criteria`` (the row's declared
    criteria) are kept in the plan for the record; they do not filter the keys.
    """
    reward = _number(report.get("reward"))
    if reward is None or not 0.0 <= reward <= 1.0:
        raise RuleError(f"script: reward is not a number in [0, 1]: {report.get('reward')!r}")
    subscores: Scores = {}
    for key, value in report.items():
        if key in REWARD_KEYS:
            continue
        if isinstance(value, dict) and key in ("subscores", "criteria", "scores"):
            for inner, number in value.items():
                if _number(number) is not None and str(inner) not in REWARD_KEYS:
                    subscores[str(inner)] = float(number)
            continue
        number_value = _number(value)
        if number_value is not None:
            subscores[str(key)] = number_value
    return reward, subscores
