"""A release's evidence bound to its bytes: `release.json`, written by `publish` beside
`dataset.toml`, and `packager release diff OLD NEW`.

Per task the manifest holds:
- `digest`: the release copy's content digest (the one `dataset.toml` names), and
  `verified_digest`: the task folder's digest when its images were built and verified
  (`TaskResult.task_digest`). `publish` refuses a task whose folder no longer has that digest
  (edited or rendered again since it was verified): the release would ship bytes no run saw.
- `images`: role → the digest-pinned reference the release's task.toml names.
- the verdict: `status`, `oracle` (each gold run's reward), `nop`, `runs` (how many gold and
  nop runs, and the perturbations), `flaky` (listed tests that changed outcome, and what
  changed them: `checks/stability.py`).
- `graded_labels` (`dataset` or `derived`) and `quarantined` (test → flip count), from the
  task.toml's metadata (`stages/relabel.py`).
- `labels`: the label audit's findings (`checks/labels.py`), as `kind id` strings.
- `seconds`: the measured stage seconds of the result (`durations`); `resources`: what the
  gold runs used and the limits it suggests (`checks/resources.py`).

The manifest names the packager version that wrote it. `diff` compares two manifests task by
task and lists what changed: added or removed tasks, digests, images, verdicts, labels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packager import __version__
from packager.errors import InputError
from packager.models.spec import TaskResult
from packager.render.harbor_dataset import task_digest

MANIFEST_FILE = "release.json"
SCHEMA = "packager.release/1"

VERDICT_KEYS = ("status", "oracle", "nop", "runs")
"""The manifest keys of a task's verdict (what `diff` calls a verdict change)."""


class EvidenceError(InputError):
    """A release manifest that cannot be read (a bad argument: exit 2)."""


def unbound_tasks(results: Sequence[TaskResult], task_dirs: Mapping[str, Path]) -> list[str]:
    """`task: why` for each result whose task folder is not the one it verified: no digest on
    record (verified before digests were kept) or a folder whose digest differs now.
    """
    problems = []
    for result in results:
        if result.task_digest is None:
            problems.append(f"{result.task}: its result records no task digest (package it again)")
            continue
        now = task_digest(task_dirs[result.task])
        if now != result.task_digest:
            problems.append(
                f"{result.task}: its folder changed since it was verified "
                f"(verified {result.task_digest[:19]}, now {now[:19]}; package it again)"
            )
    return problems


def task_entry(
    result: TaskResult,
    name: str,
    digest: str,
    images: Mapping[str, str],
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One task's evidence (see the module docstring); `metadata`: its task.toml's (which
    labels it grades with, the tests quarantined and their flip counts).
    """
    findings = (result.labels or {}).get("findings") or []
    stability = result.stability or {}
    meta = metadata or {}
    return {
        "name": name,
        "digest": digest,
        "verified_digest": result.task_digest,
        "images": dict(sorted(images.items())),
        "status": result.status,
        "oracle": [run.reward for run in result.oracle],
        "nop": result.nop.reward if result.nop is not None else None,
        "runs": {
            "oracle": len(result.oracle),
            "nop": int(result.nop is not None) + len(result.more_nops),
            "perturbed": [r.perturbation for r in result.perturbed],
        },
        "flaky": sorted(
            f"{f['id']} ({', '.join(f['changed_by'])})" for f in stability.get("flaky", [])
        ),
        "graded_labels": meta.get("labels", "dataset"),
        "quarantined": dict(sorted((meta.get("quarantined") or {}).items())),
        "labels": sorted(f"{f.get('kind')} {f.get('id')}" for f in findings),
        "seconds": dict(sorted(result.durations.items())),
        "resources": dict(sorted((result.resources or {}).items())),
    }


def manifest(dataset: str, version: str, tasks: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The release manifest of `tasks` (folder → `task_entry`)."""
    return {
        "schema": SCHEMA,
        "packager_version": __version__,
        "dataset": {"name": dataset, "version": version},
        "tasks": dict(sorted(tasks.items())),
    }


def dumps(data: Mapping[str, Any]) -> str:
    """The manifest's text: sorted keys, so equal evidence is equal bytes."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def load(where: Path) -> dict[str, Any]:
    """A manifest from a release folder (its `release.json`) or the file itself."""
    path = where / MANIFEST_FILE if where.is_dir() else where
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"{path}: not a release manifest ({exc})") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise EvidenceError(f"{path}: not a release manifest (schema is not {SCHEMA})")
    tasks = data.get("tasks")
    if not isinstance(tasks, dict):
        raise EvidenceError(f"{path}: not a release manifest (no tasks table)")
    return data


@dataclass(frozen=True)
class Change:
    """One task's difference between two releases."""

    task: str
    what: str
    """added, removed, or a comma-separated list of digest, images, verdict, labels."""
    detail: str


def _verdict(entry: Mapping[str, Any]) -> str:
    oracle = ", ".join("-" if r is None else f"{r:.3f}" for r in entry.get("oracle") or [])
    nop = entry.get("nop")
    return f"{entry.get('status')} (oracle {oracle or '-'}; nop {'-' if nop is None else nop})"


def _task_changes(task: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Change | None:
    what, detail = [], []
    if old.get("digest") != new.get("digest"):
        what.append("digest")
        detail.append(f"digest {str(old.get('digest'))[:19]} → {str(new.get('digest'))[:19]}")
    if old.get("images") != new.get("images"):
        roles = sorted(
            r
            for r in set(old.get("images") or {}) | set(new.get("images") or {})
            if (old.get("images") or {}).get(r) != (new.get("images") or {}).get(r)
        )
        what.append("images")
        detail.append(f"images {', '.join(roles)}")
    if any(old.get(k) != new.get(k) for k in VERDICT_KEYS):
        what.append("verdict")
        detail.append(f"verdict {_verdict(old)} → {_verdict(new)}")
    if old.get("labels") != new.get("labels"):
        gone = sorted(set(old.get("labels") or []) - set(new.get("labels") or []))
        came = sorted(set(new.get("labels") or []) - set(old.get("labels") or []))
        what.append("labels")
        detail.append("labels" + "".join(f" +{x}" for x in came) + "".join(f" -{x}" for x in gone))
    if not what:
        return None
    return Change(task, ",".join(what), "; ".join(detail))


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """The tasks whose evidence differs between two manifests, in task order."""
    before, after = old["tasks"], new["tasks"]
    changes = []
    for task in sorted(set(before) | set(after)):
        if task not in after:
            changes.append(Change(task, "removed", _verdict(before[task])))
        elif task not in before:
            changes.append(Change(task, "added", _verdict(after[task])))
        elif (change := _task_changes(task, before[task], after[task])) is not None:
            changes.append(change)
    return changes
