"""PDL-SWE-Bench rows → TaskSpec (grading rule `formula`, patch policy enforced).

Quirks owned here: the repository is inline (`files`, a list of {path, content}); the hidden
tests arrive as `test_patch`, an additive diff placing them under `tests/hidden/`, applied only
in the grader image; gold patches may start at `--- a/` (or `new file mode`) without a
`diff --git` line; `reward_formula` has lost the `*` between a number and a name
(`0.80hidden_pass_fraction`); `requirements.lock` inside `files` names wheels the image must
pre-bake (often it only holds a comment). The base commit is computed from `files`, the same way
the snapshot stage commits them, so it is known before any git command runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from packager import assumptions as A
from packager.adapters import Context, row_id
from packager.adapters.common import check_patch, get, get_str, parse_files, parse_list
from packager.diffs import parse_diff
from packager.errors import RowError
from packager.grading import rules
from packager.models.spec import (
    Environment,
    Expectations,
    Grading,
    JsonValue,
    Provenance,
    Repo,
    TaskSpec,
)
from packager.render.naming import make_slug
from packager.repos.objects import inline_commit_sha

HIDDEN_DIR = "tests/hidden/"


def normalise_formula(text: str, task: str) -> str:
    """Restore lost `*`s and validate with the grading runtime's own parser (numbers, the
    card's three names, + - * / and parentheses); spaced so plan.json reads well.
    """
    try:
        rules.parse_expression(text)
    except rules.RuleError as exc:
        raise RowError(task, "reward_formula", str(exc)) from exc
    fixed = re.sub(r"\s+", "", rules.normalize_expression(text))
    return fixed.replace("*", " * ").replace("+", " + ")


def check_hidden_patch(text: str, task: str) -> tuple[str, ...]:
    """The test patch only adds files, all under tests/hidden/; returns their paths."""
    patch = parse_diff(text)
    if not patch.paths:
        raise RowError(task, "test_patch", "adds no files")
    for path in patch.paths:
        if not path.startswith(HIDDEN_DIR):
            raise RowError(task, "test_patch", f"{path}: hidden tests belong under {HIDDEN_DIR}")
    if any(f.status != "added" for f in patch.files):
        raise RowError(task, "test_patch", "must only add files (it changes an existing one)")
    return patch.paths


def _has_requirements(data: bytes) -> bool:
    """Whether a requirements file names any package (not only comments and blank lines)."""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return True
    return False


def test_files(ids: tuple[str, ...]) -> tuple[str, ...]:
    """The test files named by pytest ids (`path::test`), in first-seen order."""
    return tuple(dict.fromkeys(i.split("::", 1)[0] for i in ids if i.split("::", 1)[0]))


_METADATA_COLUMNS = (
    "task_id",
    "task_version",
    "tier",
    "domain",
    "token_budget",
    "hidden_test_count",
    "public_test_count",
    "graded_ladder_rungs",
)


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one PDL row."""
    task = row_id(row) or get_str(row, "?", "instance_id")
    files = parse_files(get(row, task, "files"), task, "files")
    test_patch = check_patch(get(row, task, "test_patch"), task, "test_patch")
    hidden_paths = check_hidden_patch(test_patch, task)
    clash = sorted(set(hidden_paths) & set(files))
    if clash:
        raise RowError(task, "test_patch", f"adds {', '.join(clash)}, which `files` already has")
    f2p = parse_list(row.get("FAIL_TO_PASS"), task, "FAIL_TO_PASS", allow_empty=False)
    p2p = parse_list(row.get("PASS_TO_PASS"), task, "PASS_TO_PASS")
    formula = normalise_formula(get_str(row, task, "reward_formula"), task)
    floor = round(rules.evaluate_formula(formula, A.PDL_NOP_VALUES), 6)
    lock = files.get(A.PDL_REQUIREMENTS_FILE)
    python_env: dict[str, Any] = {}
    if lock is not None and _has_requirements(lock):
        python_env = {
            "python": A.PDL_PYTHON,
            "requirements": {A.PDL_REQUIREMENTS_FILE: lock},
        }
    name = str(row.get("task_id") or task)
    metadata: dict[str, JsonValue] = {}
    for key in _METADATA_COLUMNS:
        value = row.get(key)
        if isinstance(value, list | tuple):
            value = [str(v) for v in value]
        if value is not None:
            metadata[key] = value
    command = " ".join([A.PDL_TEST_COMMAND, *(shlex.quote(f) for f in test_files(f2p + p2p))])
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name="pdl",
            instance_id=task,
            slug=make_slug(task),
            language="python",
            metadata=metadata,
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(
            name=f"{A.PDL_REPO_PREFIX}/{name}",
            base_commit=inline_commit_sha(files),
            files=files,
            workdir=A.PDL_WORKDIR,
        ),
        environment=Environment(packages=A.PDL_PACKAGES, **python_env),
        gold_patch=check_patch(row.get("patch"), task, "patch"),
        grading=Grading(
            rule="formula",
            parser="pytest",
            test_command=command,
            test_patch=test_patch,
            protected_paths=hidden_paths,
            formula=formula,
            hidden_tests=f2p,
            public_tests=p2p,
            build_health="collected",
            patch_allowed=parse_list(row.get("patch_policy_allowed"), task, "patch_policy_allowed"),
            patch_forbidden=parse_list(
                row.get("patch_policy_forbidden"), task, "patch_policy_forbidden"
            ),
        ),
        # The untouched repository passes its public tests and collects, fails every hidden test.
        expectations=Expectations(nop_reward=floor),
    )
