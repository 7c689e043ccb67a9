"""SWEeper-Bench rows → TaskSpec (grading rule `judge`: browser workflows judged by a model).

Quirks owned here: the id is `case_id`; `repo` is a URL; the agent's prompt is `task_scoped`
(`--prompt specified` gives `task_specified` instead, the card's discovery/repair split);
`workflows` is one YAML document whose `tests:` list holds a `target` and a `preservation`
test, each with `id`, `category`, `purpose` and `steps`. The gold change is
`git diff base_commit reference_commit`, and how the app starts is detected from the repository
(or taken from a `--recipes` entry keyed by case_id or slug); both are read from the repository
source by the pipeline (this adapter does no I/O).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import yaml

from packager import assumptions as A
from packager.adapters import Context, row_id
from packager.adapters.common import get_sha, get_str, repo_name
from packager.errors import RowError
from packager.models.app import start_from_recipe
from packager.models.spec import Environment, Grading, JsonValue, Provenance, Repo, TaskSpec
from packager.render.naming import make_slug

CATEGORIES = ("target", "preservation")


@functools.lru_cache(maxsize=64)
def _load_yaml(text: str) -> Any:
    """Parse once per distinct text."""
    return yaml.safe_load(text)


def check_workflows(text: str, task: str) -> tuple[dict[str, Any], ...]:
    """The behaviour tests of `workflows`: each has id, category, purpose and steps; there is
    a target test and a preservation test.
    """
    try:
        doc = _load_yaml(text)
    except yaml.YAMLError as exc:
        raise RowError(task, "workflows", f"not YAML: {exc}") from exc
    tests = doc.get("tests") if isinstance(doc, Mapping) else None
    if not isinstance(tests, list) or not tests:
        raise RowError(task, "workflows", "expected a YAML mapping with a non-empty 'tests' list")
    seen: set[str] = set()
    found: list[dict[str, Any]] = []
    for i, test in enumerate(tests):
        where = f"workflows.tests[{i}]"
        if not isinstance(test, Mapping):
            raise RowError(task, where, "expected a mapping")
        for key in ("id", "category", "purpose", "steps"):
            if not test.get(key):
                raise RowError(task, f"{where}.{key}", "missing or empty")
        if test["category"] not in CATEGORIES:
            raise RowError(task, f"{where}.category", f"expected one of {', '.join(CATEGORIES)}")
        if not isinstance(test["steps"], list):
            raise RowError(task, f"{where}.steps", "expected a list of steps")
        seen.add(str(test["category"]))
        found.append(dict(test))
    missing = [c for c in CATEGORIES if c not in seen]
    if missing:
        raise RowError(task, "workflows", f"no {' or '.join(missing)} test")
    return tuple(found)


def _optional_int(row: Mapping[str, Any], task: str, field: str) -> int | None:
    value = row.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RowError(task, field, "expected an integer or null")
    return value


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWEeper row."""
    task = row_id(row) or get_str(row, "?", "case_id")
    slug = get_str(row, task, "slug")
    base = get_sha(row, task, "base_commit")
    reference = get_sha(row, task, "reference_commit")
    if reference == base:
        raise RowError(task, "reference_commit", "equals base_commit: there is no change")
    workflows = get_str(row, task, "workflows")
    tests = check_workflows(workflows, task)
    prompt_field = "task_specified" if ctx.prompt == "specified" else "task_scoped"
    start: str | None = None
    port: int | None = None
    found = ctx.recipes.find([task, slug])
    if found is not None:
        key, recipe = found
        try:
            app = start_from_recipe({"port": A.SWEEPER_DEFAULT_PORT, **recipe})
        except ValueError as exc:
            # start_from_recipe names the key: "recipe key 'port': ..."
            named = re.match(r"recipe key '([\w-]+)': (.*)", str(exc))
            field, problem = named.groups() if named else ("", str(exc))
            raise RowError(task, f"recipes[{key}].{field}".rstrip("."), problem) from exc
        start, port = app.command, app.port
    metadata: dict[str, JsonValue] = {
        "slug": slug,
        "prompt": prompt_field,
        "pr": _optional_int(row, task, "pr"),
        "issue": _optional_int(row, task, "issue"),
        "workflows": [f"{t['category']}:{t['id']}" for t in tests],
    }
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name="sweeper",
            instance_id=task,
            slug=make_slug(task),
            language=A.SWEEPER_LANGUAGE,
            metadata=metadata,
        ),
        instruction=get_str(row, task, prompt_field),
        repo=Repo(
            name=repo_name(row.get("repo"), task, "repo"),
            base_commit=base,
            reference_commit=reference,
            workdir=A.SWEEPER_WORKDIR,
            history=ctx.history,
        ),
        environment=Environment(),
        gold_patch=None,
        grading=Grading(
            rule="judge",
            workflows=workflows if workflows.endswith("\n") else workflows + "\n",
            app_start=start,
            app_port=port,
            app_start_how="recipe" if start else None,
        ),
    )
