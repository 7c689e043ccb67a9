"""SWEeper-Bench rows → TaskSpec (grading rule `judge`: browser workflows judged by a model).

The gold change is `git diff base_commit reference_commit`, read from the repository source
when the task is rendered (this adapter does no I/O).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import yaml

from packager.adapters import Context
from packager.adapters.common import get_sha, get_str, parse_list
from packager.errors import RowError
from packager.model import Environment, Grading, Provenance, Repo, TaskSpec
from packager.naming import make_slug


def _check_workflows(text: str, task: str) -> str:
    try:
        flows = _load_yaml(text)
    except yaml.YAMLError as exc:
        raise RowError(task, "workflows", f"not YAML: {exc}") from exc
    if not isinstance(flows, list) or not flows:
        raise RowError(task, "workflows", "expected a non-empty list of workflows")
    kinds = set()
    for flow in flows:
        if not isinstance(flow, dict) or not flow.get("name") or not flow.get("steps"):
            raise RowError(task, "workflows", "each workflow needs a name and steps")
        kinds.add(flow.get("kind"))
    if not {"target", "preservation"} <= kinds:
        raise RowError(task, "workflows", "needs a target and a preservation workflow")
    return text if text.endswith("\n") else text + "\n"


@functools.lru_cache(maxsize=64)
def _load_yaml(text: str) -> Any:
    """Parse once per distinct text (rows of one app often share their workflows)."""
    return yaml.safe_load(text)


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWEeper row."""
    task = get_str(row, "?", "instance_id")
    base = get_sha(row, task, "base_commit")
    reference = get_sha(row, task, "reference_commit")
    if reference == base:
        raise RowError(task, "reference_commit", "equals base_commit: there is no change")
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name="sweeper",
            instance_id=task,
            slug=make_slug(task),
            language=str(row.get("language") or "javascript"),
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(name=get_str(row, task, "repo"), base_commit=base, reference_commit=reference),
        environment=Environment(packages=parse_list(row.get("packages"), task, "packages")),
        gold_patch=None,
        grading=Grading(
            rule="judge",
            workflows=_check_workflows(get_str(row, task, "workflows"), task),
            test_command=get_str(row, task, "start_command"),
            env={
                "PORT": str(row.get("port") or 3000),
                "TASK_SCOPED": str(bool(row.get("task_scoped"))),
            },
        ),
    )
