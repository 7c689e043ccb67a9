"""Why a task did not verify, as a cause a maintainer can act on: the environment step and the
package, the module missing at test time, the network hosts, a Python no image serves (when
that substitution is where the build failed), a repository mirror that lacks objects, the gold
patch failing. Pure: a result in, one short label out; reports group tasks by it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from packager.images.failures import CA_HINT
from packager.models.spec import TaskResult

_STEP = re.compile(
    r"the environment's (.+?) step failed(?:: package (\S+) could not be installed)?"
)
_MISSING_MODULE = re.compile(r"module (\S+) is missing")
_DROPPED = re.compile(
    r"dropped from the environment, (?:which )?pip could not install(?: it)?: (\S+)"
)
_HOSTS = re.compile(r"which grading does not give \((.*?)\)(?=;|$)")


def cause(result: TaskResult) -> str | None:
    """The cause of a task that did not verify (None for a verified one)."""
    status, reason = result.status, result.reason or ""
    if status == "verified":
        return None
    if status == "needs_network":
        hosts = _HOSTS.search(reason)
        return f"network: {hosts.group(1) if hosts else 'hosts not named'}"
    if status == "build_failed":
        return _build_cause(result, reason)
    if status == "gold_failed":
        dropped = _DROPPED.search(reason)
        if dropped:
            return f"environment: dropped {dropped.group(1)} (pip could not install it)"
        return "gold failing: patch does not apply" if "did not apply" in reason else "gold failing"
    return status


def _build_cause(result: TaskResult, reason: str) -> str:
    if "lacks" in reason and "object(s)" in reason:
        return "mirror incomplete"
    if "no image serves it" in reason:
        return "Python not served"
    if CA_HINT in reason:
        return "environment: index certificate not trusted (--ca-bundle)"
    missing = _MISSING_MODULE.search(reason)
    if missing:
        return f"environment: module {missing.group(1)} missing at test time"
    step = _STEP.search(reason)
    env = result.environment
    moved = env.get("python_requested") and env.get("python_requested") != env.get("python_used")
    where = f" (Python {env['python_requested']} -> {env['python_used']})" if moved else ""
    if step is None:
        return f"environment: build{where}"
    package = f", package {step.group(2)}" if step.group(2) else ""
    return f"environment: {step.group(1)} step{package}{where}"


def by_cause(results: Iterable[TaskResult]) -> list[tuple[str, list[str]]]:
    """(cause, instance ids) for every task that did not verify, most tasks first."""
    groups: dict[str, list[str]] = defaultdict(list)
    for result in results:
        found = cause(result)
        if found is not None:
            groups[found].append(result.instance_id)
    return sorted(((c, sorted(ids)) for c, ids in groups.items()), key=lambda g: (-len(g[1]), g[0]))
