"""Reward rules: turn per-test statuses (or a grader script's report) into a reward.

``all_pass`` and ``formula`` are pure functions of the parsed test map. The formula evaluator
walks a Python ``ast`` over a whitelist (numbers, the names ``hidden``/``public``/
``build_health``, ``+ - * /``, parentheses) and never calls ``eval``. The ``script`` helpers
read what an EC-SWE grader script reported; running the script is the runtime's job.

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
FORMULA_NAMES = ("hidden", "public", "build_health")
MAX_EXPRESSION_CHARS = 2000

Scores = Dict[str, float]


class RuleError(ValueError):
    """The rule's inputs cannot produce a reward (bad formula, no script reward, ...)."""


def passed_fraction(tests: Mapping[str, str], ids: Iterable[str], empty: float = 1.0) -> float:
    """Fraction of ``ids`` whose status is ``passed``; missing or skipped ids count as failed."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return empty
    return sum(1 for test_id in wanted if tests.get(test_id) == PASSED) / len(wanted)


def all_pass(
    tests: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> Tuple[float, Scores]:
    """1.0 iff every listed id passed; subscores are the passed fraction of each list."""
    f2p = passed_fraction(tests, fail_to_pass)
    p2p = passed_fraction(tests, pass_to_pass)
    reward = 1.0 if f2p == 1.0 and p2p == 1.0 else 0.0
    return reward, {"fail_to_pass": f2p, "pass_to_pass": p2p}


# -------------------------------------------------------------------------------------- formula

# A number directly followed by a variable name ("0.80 hidden", "0.8hidden") lost its `*` on the
# way through a spreadsheet or markdown renderer; putting it back is the only repair made.
_LOST_STAR = re.compile(
    r"(?<![\w.])((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?=(?:" + "|".join(FORMULA_NAMES) + r")\b)"
)


def normalize_expression(expression: str) -> str:
    """Restore a lost ``*`` between a number and a name (``0.80 hidden`` -> ``0.80*hidden``)."""
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
    """Split test ids into the hidden and public groups of a formula rule.

    Hidden: the listed ``hidden_tests`` plus every observed id under a ``hidden_paths`` prefix.
    Public: the listed ``public_tests`` plus every other observed id. Listed ids that did not run
    stay in their group and count as failed.
    """
    hidden_paths = [str(p) for p in spec.get("hidden_paths") or [] if str(p)]
    hidden = [str(t) for t in spec.get("hidden_tests") or []]
    hidden += [t for t in tests if any(t.startswith(p) for p in hidden_paths)]
    hidden = list(dict.fromkeys(hidden))
    hidden_set = set(hidden)
    public = [str(t) for t in spec.get("public_tests") or [] if str(t) not in hidden_set]
    public += [t for t in tests if t not in hidden_set]
    return hidden, list(dict.fromkeys(public))


def formula(
    tests: Mapping[str, str], spec: Mapping[str, Any], build_health: float
) -> Tuple[float, Scores]:
    """Evaluate the plan's formula; subscores are the three terms.

    An empty hidden group scores 0 (hidden tests that never ran prove nothing); an empty public
    group scores 1, as an empty list does for ``all_pass``.
    """
    hidden, public = formula_groups(tests, spec)
    values = {
        "hidden": passed_fraction(tests, hidden, empty=0.0),
        "public": passed_fraction(tests, public, empty=1.0),
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


def _reward_object(text: str) -> Optional[Dict[str, Any]]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict) and "reward" in data:
        return data
    return None


def read_script_report(reward_file: Optional[Path], stdout: str) -> Dict[str, Any]:
    """Find what a grader script reported.

    ``REWARD_FILE`` when the script wrote it, unless the last stdout line that is a JSON object
    with a ``reward`` key reports a lower reward; otherwise that stdout line. Raise RuleError
    when neither exists (an infra error: the grader itself broke).
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
                raise RuleError("script: REWARD_FILE is not a JSON object with 'reward'")
            # The tested code inherits REWARD_FILE from the grader script and could overwrite
            # it after the script wrote it: when the script also printed a reward, the lower
            # of the two counts.
            ours, theirs = (
                _number(data.get("reward")),
                _number(printed.get("reward")) if printed else None,
            )
            if printed is not None and theirs is not None and (ours is None or theirs < ours):
                return printed
            return data
    if printed is not None:
        return printed
    raise RuleError("script: no reward (REWARD_FILE not written, no JSON reward line on stdout)")


def script_scores(
    report: Mapping[str, Any], criteria: Sequence[Mapping[str, Any]]
) -> Tuple[float, Scores]:
    """Reward and criterion subscores from a grader script's report.

    With criteria declared, only their names are passed through (other keys are the script's
    own bookkeeping); without, every finite number is.
    """
    reward = _number(report.get("reward"))
    if reward is None:
        raise RuleError(f"script: reward is not a finite number: {report.get('reward')!r}")
    names = [str(c.get("name")) for c in criteria if c.get("name")]
    keys = names if names else [k for k in report if k != "reward"]
    subscores: Scores = {}
    for key in keys:
        value = _number(report.get(key))
        if value is not None:
            subscores[str(key)] = value
    return reward, subscores
