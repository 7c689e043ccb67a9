"""PDL-SWE-Bench rows → TaskSpec (grading rule `formula`, patch policy enforced).

Quirks owned here: the repository is inline (`files`); gold patches start at `--- a/` without a
`diff --git` line; `reward_formula` may have lost the `*` between a number and a name; policy
globs may arrive as JSON strings. The base commit is computed from `files`, the same way the
snapshot stage commits them, so it is known before any git command runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from packager.adapters import Context
from packager.adapters.common import (
    check_patch,
    get,
    get_str,
    parse_files,
    parse_list,
)
from packager.errors import RowError
from packager.gitobj import inline_commit_sha
from packager.grading import rules
from packager.model import Environment, Expectations, Grading, Provenance, Repo, TaskSpec
from packager.naming import make_slug


def normalise_formula(text: str, task: str) -> str:
    """Restore lost `*`s and validate with the grading runtime's own parser (numbers, the three
    names, + - * / and parentheses); spaced so plan.json reads well.
    """
    try:
        rules.parse_expression(text)
    except rules.RuleError as exc:
        raise RowError(task, "reward_formula", str(exc)) from exc
    fixed = re.sub(r"\s+", "", rules.normalize_expression(text))
    return fixed.replace("*", " * ").replace("+", " + ")


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one PDL row."""
    task = get_str(row, "?", "instance_id")
    files = parse_files(get(row, task, "files"), task, "files")
    hidden = parse_files(get(row, task, "hidden_tests"), task, "hidden_tests")
    formula = normalise_formula(get_str(row, task, "reward_formula"), task)
    build = row.get("build_command") or None
    floor = round(
        rules.evaluate_formula(formula, {"hidden": 0.0, "public": 1.0, "build_health": 1.0}), 6
    )
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name="pdl",
            instance_id=task,
            slug=make_slug(task),
            language=str(row.get("language") or "python"),
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(
            name=get_str(row, task, "repo"), base_commit=inline_commit_sha(files), files=files
        ),
        environment=Environment(packages=parse_list(row.get("packages"), task, "packages")),
        gold_patch=check_patch(row.get("patch"), task, "patch"),
        grading=Grading(
            rule="formula",
            parser="pytest",
            test_command=get_str(row, task, "test_command"),
            hidden_files=hidden,
            protected_paths=tuple(sorted(hidden)),
            formula=formula,
            build_command=str(build) if build else None,
            patch_allowed=parse_list(row.get("patch_policy_allowed"), task, "patch_policy_allowed"),
            patch_forbidden=parse_list(
                row.get("patch_policy_forbidden"), task, "patch_policy_forbidden"
            ),
        ),
        # The untouched repository passes its public tests and builds, fails every hidden test.
        expectations=Expectations(nop_reward=floor),
    )
