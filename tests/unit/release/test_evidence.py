"""Release evidence (release/evidence.py): bound to the task bytes, compared by `release diff`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from packager.models.spec import RunResult, TaskResult
from packager.release import evidence
from packager.render.harbor_dataset import task_digest
from tests.conftest import run_cli


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(f'[task]\nname = "packager/{name}"\n')
    (folder / "instruction.md").write_text(f"Fix {name}.\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\n")
    return folder


def _run(kind: str, reward: float) -> RunResult:
    return RunResult(kind=kind, reward=reward, grade_status="graded", duration_sec=1.0, log_dir="x")


def _result(task: str, digest: str | None, gold: float = 1.0, labels: Any = None) -> TaskResult:
    return TaskResult(
        task=task, instance_id=task, dataset="ds", status="verified", engine="local",
        oracle=(_run("oracle", gold), _run("oracle", gold)), nop=_run("nop", 0.0),
        task_digest=digest, labels=labels, durations={"verify": 2.0},
    )  # fmt: skip


def test_a_task_is_bound_to_the_bytes_it_was_verified_with(tmp_path: Path) -> None:
    a, b, c = (_folder(tmp_path, n) for n in ("a", "b", "c"))
    results = [_result("a", task_digest(a)), _result("b", task_digest(b)), _result("c", None)]
    folders = {"a": a, "b": b, "c": c}
    (b / "instruction.md").write_text("Fix b, and also something else.\n")
    problems = evidence.unbound_tasks(results, folders)
    assert [p.split(":")[0] for p in problems] == ["b", "c"]
    assert "changed since it was verified" in problems[0]
    assert "records no task digest" in problems[1]
    # The repository snapshot is not task content (.gitignore'd, as Harbor digests it).
    (a / ".gitignore").write_text("/environment/repo.tar\n")
    results[0] = _result("a", task_digest(a))
    (a / "environment").mkdir()
    (a / "environment" / "repo.tar").write_bytes(b"snapshot")
    assert evidence.unbound_tasks(results[:1], folders) == []


def _manifest(tmp_path: Path, name: str, changed: dict[str, Any] | None = None) -> Path:
    entries = {}
    for task in ("a", "b", "c"):
        result = _result(task, f"sha256:{task * 64}")
        entry = evidence.task_entry(result, f"packager/{task}", f"sha256:{task * 64}", {
            "agent": f"reg/ns/ds.{task}@sha256:{'1' * 64}",
            "grader": f"reg/ns/ds.{task}@sha256:{'2' * 64}",
        })  # fmt: skip
        entries[task] = entry | (changed or {}).get(task, {})
    path = tmp_path / name / evidence.MANIFEST_FILE
    path.parent.mkdir()
    path.write_text(evidence.dumps(evidence.manifest("ds", "1.0", entries)))
    return path


def test_diff_lists_exactly_the_changed_task(tmp_path: Path) -> None:
    old = evidence.load(_manifest(tmp_path, "old").parent)
    assert evidence.diff(old, old) == []
    findings = ["label_ambiguous t::x[a,"]
    new = evidence.load(
        _manifest(tmp_path, "new", {"b": {"digest": "sha256:" + "f" * 64, "labels": findings}})
    )
    changes = evidence.diff(old, new)
    assert [(c.task, c.what) for c in changes] == [("b", "digest,labels")]
    assert "+label_ambiguous t::x[a," in changes[0].detail
    verdict = evidence.load(_manifest(tmp_path, "verdict", {"c": {"oracle": [1.0, 0.0]}}))
    assert [(c.task, c.what) for c in evidence.diff(old, verdict)] == [("c", "verdict")]
    del new["tasks"]["a"]
    assert [(c.task, c.what) for c in evidence.diff(old, new)][0] == ("a", "removed")


def test_the_manifest_holds_the_verdict_and_labels() -> None:
    labels = {"findings": [{"kind": "label_missing", "id": "t::y"}]}
    entry = evidence.task_entry(
        _result("a", "sha256:x", labels=labels), "packager/a", "sha256:y", {}
    )
    assert entry["oracle"] == [1.0, 1.0] and entry["nop"] == 0.0
    assert entry["runs"] == {"oracle": 2, "nop": 1, "perturbed": []}
    assert entry["labels"] == ["label_missing t::y"]
    assert (entry["graded_labels"], entry["quarantined"], entry["flaky"]) == ("dataset", {}, [])
    flaky = {"flaky": [{"id": "t::z", "changed_by": ["clock"]}]}
    quarantined = evidence.task_entry(
        _result("a", "sha256:x").model_copy(update={"stability": flaky}),
        "packager/a", "sha256:y", {}, {"labels": "derived", "quarantined": {"t::z": 1}},
    )  # fmt: skip
    assert quarantined["flaky"] == ["t::z (clock)"]
    assert (quarantined["graded_labels"], quarantined["quarantined"]) == ("derived", {"t::z": 1})
    assert entry["verified_digest"] == "sha256:x" and entry["digest"] == "sha256:y"
    data = evidence.manifest("ds", "1.0", {"a": entry})
    assert json.loads(evidence.dumps(data))["packager_version"]


@pytest.mark.parametrize("text", ["", "[]", '{"schema": "other", "tasks": {}}', "{not json"])
def test_a_file_that_is_not_a_manifest_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "release.json"
    path.write_text(text)
    with pytest.raises(evidence.EvidenceError, match="not a release manifest"):
        evidence.load(path)


def test_release_diff_command(tmp_path: Path) -> None:
    old = _manifest(tmp_path, "old")
    new = _manifest(tmp_path, "new", {"a": {"status": "flaky"}})
    proc = run_cli("release", "diff", str(old.parent), str(new))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("a: verdict: verdict verified")
    assert proc.stdout.splitlines()[-1] == "1 task(s) changed"
    same = run_cli("release", "diff", str(old), str(old))
    assert same.returncode == 0 and same.stdout.strip() == "0 task(s) changed"
    bad = run_cli("release", "diff", str(tmp_path / "missing"), str(old))
    assert bad.returncode == 2 and "not a release manifest" in bad.stderr
