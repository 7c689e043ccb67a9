"""EC-SWE rows → TaskSpec (grading rule `script`: the row's own weighted grader).

Quirks owned here: `grader` arrives as a JSON string or dict; `grader_files` content is utf-8 or
base64; criterion weights must sum to 100; `base_reward` is what the untouched repo scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packager.adapters import Context
from packager.adapters.common import (
    check_patch,
    get,
    get_sha,
    get_str,
    parse_files,
    parse_mapping,
)
from packager.errors import RowError
from packager.model import (
    Criterion,
    Environment,
    Expectations,
    Grading,
    Provenance,
    Repo,
    TaskSpec,
)
from packager.naming import make_slug


def _criteria(grader: Mapping[str, Any], task: str) -> tuple[Criterion, ...]:
    raw = grader.get("criteria")
    if not isinstance(raw, list) or not raw:
        raise RowError(task, "grader.criteria", "missing or empty")
    criteria = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise RowError(task, "grader.criteria", "each criterion needs a name")
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
            raise RowError(
                task, "grader.criteria", f"weight of {item['name']!r} must be an int >= 0"
            )
        criteria.append(
            Criterion(
                name=item["name"], weight=weight, description=str(item.get("description", ""))
            )
        )
    total = sum(c.weight for c in criteria)
    if total != 100:
        raise RowError(task, "grader.criteria", f"weights sum to {total}, not 100")
    names = [c.name for c in criteria]
    if len(set(names)) != len(names) or "reward" in names:
        raise RowError(task, "grader.criteria", "criterion names must be unique and not 'reward'")
    return tuple(criteria)


def _base_image(dockerfile: str, task: str) -> str:
    for line in dockerfile.splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM" and len(words) >= 2:
            return words[1]
    raise RowError(task, "dockerfile", "no FROM line")


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one EC-SWE row."""
    task = get_str(row, "?", "instance_id")
    grader = parse_mapping(get(row, task, "grader"), task, "grader")
    command = grader.get("command")
    if not isinstance(command, str) or not command.strip():
        raise RowError(task, "grader.command", "missing: nothing would run the grader")
    timeout = grader.get("timeout_sec", 600)
    if not isinstance(timeout, int) or timeout <= 0:
        raise RowError(task, "grader.timeout_sec", "expected a positive integer")
    dockerfile = get_str(row, task, "dockerfile")
    base_reward = row.get("base_reward")
    if base_reward is not None and not (
        isinstance(base_reward, int | float) and 0.0 <= float(base_reward) < 1.0
    ):
        raise RowError(task, "base_reward", "expected a number in [0, 1)")
    setup = row.get("setup_patch")
    test_patch = row.get("test_patch")
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name="ec-swe",
            instance_id=task,
            slug=make_slug(task),
            language=str(row.get("language") or "unknown"),
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(
            name=get_str(row, task, "repo"),
            base_commit=get_sha(row, task, "base_commit"),
            setup_patch=check_patch(setup, task, "setup_patch") if setup else None,
        ),
        environment=Environment(base_image=_base_image(dockerfile, task), dockerfile=dockerfile),
        gold_patch=check_patch(row.get("patch"), task, "patch"),
        grading=Grading(
            rule="script",
            test_command=grader.get("test_command") or None,
            timeout_sec=timeout,
            test_patch=check_patch(test_patch, task, "test_patch") if test_patch else None,
            grader_command=command,
            grader_files=parse_files(get(row, task, "grader_files"), task, "grader_files"),
            criteria=_criteria(grader, task),
        ),
        expectations=Expectations(
            nop_reward=float(base_reward) if base_reward is not None else None
        ),
    )
