"""SWE-bench, Lite, Verified and `_oracle` rows → TaskSpec (grading rule `all_pass`).

Quirks owned here: FAIL_TO_PASS/PASS_TO_PASS arrive as JSON strings; `_oracle` rows carry `text`,
a retrieval prompt that names the files to change, so it is never the instruction. The
environment is the row's `install_config` recipe when present (same keys as SWE-rebench), else
the published per-instance image.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packager.adapters import Context
from packager.adapters.common import (
    check_patch,
    get_sha,
    get_str,
    parse_list,
    parse_mapping,
)
from packager.errors import RowError
from packager.model import Environment, Grading, Parser, Provenance, Repo, TaskSpec
from packager.naming import make_slug

_PARSERS: dict[str, Parser] = {
    "pytest": "pytest",
    "parse_log_pytest": "pytest",
    "parse_log_pytest_v2": "pytest",
    "parse_log_pytest_options": "pytest",
    "gotest": "gotest",
    "go": "gotest",
    "parse_log_gotest": "gotest",
    "tap": "tap",
    "node": "tap",
    "junit": "junit",
}


def published_image(instance_id: str) -> str:
    """The SWE-bench harness's per-instance image name."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


def _commands(value: Any, task: str, field: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise RowError(task, field, "expected a command string or a list of them")


def recipe_environment(
    config: Mapping[str, Any], task: str, field: str, base_image: str | None
) -> tuple[Environment, str, Parser, int]:
    """Environment, test command, parser and timeout from an install_config recipe."""
    test_cmd = _commands(config.get("test_cmd"), task, f"{field}.test_cmd")
    if not test_cmd:
        raise RowError(task, f"{field}.test_cmd", "missing: nothing would run the tests")
    parser_name = str(config.get("log_parser") or "pytest")
    if parser_name not in _PARSERS:
        raise RowError(task, f"{field}.log_parser", f"unknown parser {parser_name!r}")
    env_vars = parse_mapping(config.get("env_vars"), task, f"{field}.env_vars")
    timeout = config.get("timeout", 600)
    if not isinstance(timeout, int) or timeout <= 0:
        raise RowError(task, f"{field}.timeout", "expected a positive integer (seconds)")
    environment = Environment(
        base_image=base_image or str(config.get("base_image") or "debian:bookworm-slim"),
        pre_install=_commands(config.get("pre_install"), task, f"{field}.pre_install"),
        install=_commands(config.get("install"), task, f"{field}.install"),
        env={str(k): str(v) for k, v in sorted(env_vars.items())},
    )
    return environment, " && ".join(test_cmd), _PARSERS[parser_name], timeout


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWE-bench row."""
    return to_spec_with(row, ctx, schema="swebench", prebuilt=None)


def to_spec_with(
    row: Mapping[str, Any], ctx: Context, *, schema: Any, prebuilt: str | None
) -> TaskSpec:
    """Shared by SWE-bench and SWE-rebench, which differ only in where the image comes from."""
    task = get_str(row, "?", "instance_id")
    config = parse_mapping(row.get("install_config"), task, "install_config")
    if not config:
        # The published image alone is not enough: the test command lives in the harness's
        # spec tables, which this tool does not carry. A recipe (or a join adding one) is needed.
        raise RowError(task, "install_config", "missing: give a recipe with at least test_cmd")
    environment, test_cmd, parser, timeout = recipe_environment(
        config, task, "install_config", prebuilt
    )
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name=schema,
            instance_id=task,
            slug=make_slug(task),
            language=str(row.get("language") or "python"),
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(name=get_str(row, task, "repo"), base_commit=get_sha(row, task, "base_commit")),
        environment=environment,
        gold_patch=check_patch(row.get("patch"), task, "patch"),
        grading=Grading(
            rule="all_pass",
            parser=parser,
            test_command=test_cmd,
            timeout_sec=timeout,
            env=environment.env,
            test_patch=check_patch(row.get("test_patch"), task, "test_patch"),
            fail_to_pass=parse_list(
                row.get("FAIL_TO_PASS"), task, "FAIL_TO_PASS", allow_empty=False
            ),
            pass_to_pass=parse_list(row.get("PASS_TO_PASS"), task, "PASS_TO_PASS"),
        ),
    )
