"""The sample rows are written field for field from the five published dataset cards.

Each card's column list and types are copied here from the card; every sample row must have
exactly those columns with those types (null allowed only where the card says so), and every
schema must adapt such a row without a column the card does not list.
"""

from __future__ import annotations

from typing import Any

import pytest

from packager.adapters import Context, detect_schema, row_id, to_spec
from packager.datasets.sources import open_dataset
from tests.conftest import sample_rows

STR, INT, FLOAT, LIST_STR, LIST_FLOAT = "str", "int", "float", "list[str]", "list[float]"

SWEBENCH_ORACLE = {
    "instance_id": STR,
    "text": STR,
    "repo": STR,
    "base_commit": STR,
    "problem_statement": STR,
    "hints_text": STR,
    "created_at": STR,
    "patch": STR,
    "test_patch": STR,
    "version": STR,
    "FAIL_TO_PASS": STR,
    "PASS_TO_PASS": STR,
    "environment_setup_commit": STR,
}
SWE_REBENCH = {
    "instance_id": STR,
    "patch": STR,
    "repo": STR,
    "base_commit": STR,
    "hints_text": STR,
    "created_at": STR,
    "test_patch": STR,
    "problem_statement": STR,
    "version": STR,
    "environment_setup_commit": STR,
    "FAIL_TO_PASS": STR,
    "PASS_TO_PASS": STR,
    "meta": STR,
    "license_name": STR,
    "install_config": STR,
    "docker_image": STR,
}
EC_SWE = {
    "instance_id": STR,
    "repo": STR,
    "base_commit": STR,
    "setup_patch": STR,
    "problem_statement": STR,
    "patch": STR,
    "test_patch": STR,
    "patch_files": LIST_STR,
    "grader": "list[{criterion: str, weight: float}]",
    "grader_files": "list[{path: str, encoding: str, content: str}]",
    "dockerfile": STR,
    "language": STR,
    "repo_license": STR,
    "hud_task": STR,
    "difficulty": STR,
    "agent_runs": INT,
    "agent_rewards": LIST_FLOAT,
    "agent_mean_reward": FLOAT,
    "agent_solve_rate": FLOAT,
    "agent_models": LIST_STR,
    "gold_reward": FLOAT,
    "base_reward": FLOAT,
}
PDL = {
    "instance_id": STR,
    "task_id": STR,
    "task_version": INT,
    "tier": STR,
    "domain": STR,
    "problem_statement": STR,
    "patch": STR,
    "test_patch": STR,
    "FAIL_TO_PASS": LIST_STR,
    "PASS_TO_PASS": LIST_STR,
    "files": "list[{path: str, content: str}]",
    "patch_policy_allowed": LIST_STR,
    "patch_policy_forbidden": LIST_STR,
    "token_budget": INT,
    "hidden_test_count": INT,
    "public_test_count": INT,
    "graded_ladder_rungs": LIST_STR,
    "reward_formula": STR,
}
SWEEPER = {
    "case_id": STR,
    "slug": STR,
    "repo": STR,
    "base_commit": STR,
    "reference_commit": STR,
    "task_scoped": STR,
    "task_specified": STR,
    "pr": "int|null",
    "issue": "int|null",
    "workflows": STR,
}
CARDS = {
    "swebench": SWEBENCH_ORACLE,
    "swe-rebench": SWE_REBENCH,
    "ec-swe": EC_SWE,
    "pdl": PDL,
    "sweeper": SWEEPER,
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind == STR:
        return isinstance(value, str)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == FLOAT:
        return isinstance(value, float)
    if kind == "int|null":
        return value is None or (isinstance(value, int) and not isinstance(value, bool))
    if kind == LIST_STR:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == LIST_FLOAT:
        return isinstance(value, list) and all(isinstance(v, float) for v in value)
    if kind.startswith("list[{"):
        fields = dict(
            part.strip().split(": ") for part in kind[len("list[{") : -len("}]")].split(",")
        )
        return (
            isinstance(value, list)
            and bool(value)
            and all(
                isinstance(item, dict)
                and set(item) == set(fields)
                and all(_type_ok(item[k], t) for k, t in fields.items())
                for item in value
            )
        )
    raise AssertionError(kind)


def test_one_sample_per_card() -> None:
    assert sorted(detect_schema(r) for r in sample_rows()) == sorted(CARDS)


@pytest.mark.parametrize("row", sample_rows(), ids=lambda r: str(row_id(r)))
def test_sample_row_has_exactly_its_cards_columns_and_types(row: dict[str, Any]) -> None:
    card = CARDS[detect_schema(row)]
    assert set(row) == set(card), (
        f"extra: {sorted(set(row) - set(card))}, missing: {sorted(set(card) - set(row))}"
    )
    wrong = {k: type(row[k]).__name__ for k, kind in card.items() if not _type_ok(row[k], kind)}
    assert not wrong, f"columns of the wrong type: {wrong}"


@pytest.mark.parametrize("row", sample_rows(), ids=lambda r: str(row_id(r)))
def test_sample_row_adapts_with_only_card_columns(row: dict[str, Any]) -> None:
    ds = open_dataset(None)
    spec = to_spec(row, Context(dataset="samples", split="test", recipes=ds.recipes))
    assert spec.task_id == row_id(row)
    assert spec.instruction.strip()
