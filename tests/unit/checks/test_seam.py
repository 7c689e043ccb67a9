"""The checks behind one seam (`checks.seam`): a task's job runs `AFTER_BUILD` in order until a
verdict ends the task, and sets `AFTER_VERIFY`'s fields on its result; the job names no check."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from packager.adapters import Context, row_id, to_spec
from packager.checks import seam
from packager.checks.seam import Built, Verdict
from packager.context import RunContext
from packager.models.spec import TaskResult, TaskSpec
from packager.stages import job
from packager.storage import OutputPaths
from tests.conftest import sample_rows


def _spec(task: str) -> TaskSpec:
    row = next(r for r in sample_rows() if row_id(r) == task)
    return to_spec(row, Context(dataset="cards", split="test"))


class Fake:
    def __init__(self, name: str, verdict: Verdict, applies: bool = True) -> None:
        self.name = name
        self.verdict = verdict
        self.applied = applies
        self.seen: list[Built] = []

    def applies(self, spec: TaskSpec) -> bool:
        return self.applied

    def __call__(self, task: Built) -> Verdict:
        self.seen.append(task)
        return self.verdict


def _built(tmp_path: Path) -> Built:
    spec = _spec("samples__intset-2")
    images = {"agent": "a:1", "grader": "g:1"}
    return Built(spec, OutputPaths(tmp_path, "cards"), None, images, RunContext(), {}, True)  # type: ignore[arg-type]


def test_checks_run_in_order_until_one_ends_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Fake("first", Verdict(seconds={"first": 1.0}, logs={"first": "f.log"}))
    skipped = Fake("skipped", Verdict(status="leak", reason="never"), applies=False)
    ending = Fake("ending", Verdict(seconds={"ending": 2.0}, status="leak", reason="found it"))
    after = Fake("after", Verdict(seconds={"after": 3.0}))
    monkeypatch.setattr(seam, "AFTER_BUILD", (first, skipped, ending, after))
    verdict = seam.after_build(_built(tmp_path))
    assert (verdict.status, verdict.reason) == ("leak", "found it")
    assert verdict.seconds == {"first": 1.0, "ending": 2.0}
    assert verdict.logs == {"first": "f.log"}
    assert len(first.seen) == 1 and not skipped.seen and not after.seen
    assert first.seen[0].images["agent"] == "a:1"


def test_a_check_that_passes_lets_the_task_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seam, "AFTER_BUILD", (Fake("ok", Verdict(seconds={"ok": 0.5})),))
    verdict = seam.after_build(_built(tmp_path))
    assert verdict.status is None and verdict.seconds == {"ok": 0.5}


def test_the_shipped_checks_and_where_they_apply() -> None:
    assert [c.name for c in seam.AFTER_BUILD] == ["audit", "app"]
    judged, plain = _spec("samples__todo-web-5"), _spec("samples__intset-2")
    app = seam.AFTER_BUILD[1]
    assert app.applies(judged) and not app.applies(plain)
    assert all(c.applies(plain) for c in seam.AFTER_BUILD if c.name == "audit")
    assert [name for name, _ in seam.AFTER_VERIFY] == ["labels", "resources", "stability"]
    assert {name for name, _ in seam.AFTER_VERIFY} <= set(TaskResult.model_fields)


def test_after_verify_sets_each_field(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def labels(spec: TaskSpec, result: TaskResult) -> dict[str, int]:
        seen.append((spec.task_id, result.status))
        return {"checked": 1}

    monkeypatch.setattr(seam, "AFTER_VERIFY", (("labels", labels),))
    spec = _spec("samples__intset-2")
    result = TaskResult(
        task="t", instance_id=spec.task_id, dataset="d", status="verified", engine="local"
    )
    assert seam.after_verify(spec, result) == {"labels": {"checked": 1}}
    assert seen == [(spec.task_id, "verified")]


def test_the_job_names_no_check() -> None:
    tree = ast.parse(Path(job.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("packager")
    }
    assert {m for m in imported if m.startswith("packager.checks")} == {"packager.checks.seam"}
