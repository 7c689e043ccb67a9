"""Which labels a task grades with: the dataset's, the runs' (`--labels derived`), less the
tests the runs saw flip (`--quarantine`), named in task.toml's metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

from packager.checks.labels import derived_labels
from packager.datasets.sources import open_dataset
from packager.models.spec import RunResult, TaskResult
from packager.run.materialize import render_selection
from packager.run.select import Selection
from packager.stages.relabel import label_record, relabeled
from packager.storage import OutputPaths

P, F = "passed", "failed"
TASK = "samples__textkit-1"


def test_derived_labels_need_every_run() -> None:
    gold = [{"a": P, "b": P, "c": P, "d": P}, {"a": P, "b": P, "c": F, "d": P}]
    nops = [{"b": P, "c": P, "d": F}, {"b": P, "c": P, "d": P}]
    assert derived_labels(gold, nops) == (["a"], ["b"])  # c flips on gold, d on nop
    assert derived_labels(gold, []) == ([], [])


def _run(kind: str, folder: Path, tests: dict[str, str], change: str | None = None) -> RunResult:
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"tests": tests}))
    return RunResult(
        kind=kind,  # type: ignore[arg-type]
        reward=1.0,
        grade_status="graded",
        duration_sec=1.0,
        log_dir=str(folder),
        perturbation=change,
    )


def test_the_record_holds_the_derived_labels_and_flip_counts(tmp_path: Path) -> None:
    result = TaskResult(
        task="t", instance_id="t", dataset="d", status="flaky", engine="local",
        oracle=(_run("oracle", tmp_path / "o1", {"fix": P, "keep": P, "order": P}),),
        perturbed=(_run("oracle", tmp_path / "os", {"fix": P, "keep": P, "order": F}, "shuffle"),),
        nop=_run("nop", tmp_path / "n1", {"keep": P, "order": P}),
        stability={"flaky": [{"id": "order", "changed_by": ["shuffle"], "outcomes": {
            "oracle-1": P, "oracle-shuffle": F, "nop-1": P}}]},
    )  # fmt: skip
    record = label_record(result)
    assert record == {
        "derived": {"fail_to_pass": ["fix"], "pass_to_pass": ["keep"]},
        "flaky": {"order": 1},
        "runs": 3,
    }
    (tmp_path / "o1" / "report.json").unlink()
    assert label_record(result) is None  # a run without parsed tests: no record


def test_the_render_grades_with_the_chosen_labels(tmp_path: Path) -> None:
    sel = Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))
    (spec,) = render_selection(sel, tmp_path)
    paths = OutputPaths(tmp_path, spec.provenance.dataset)
    assert relabeled(spec, paths, "derived", True).grading == spec.grading  # no record yet
    f2p, p2p = spec.grading.fail_to_pass, spec.grading.pass_to_pass
    flaky = p2p[0]
    paths.labels_file(TASK).parent.mkdir(parents=True)
    paths.labels_file(TASK).write_text(json.dumps({
        "derived": {"fail_to_pass": [f2p[0]], "pass_to_pass": ["new::test"]},
        "flaky": {flaky: 2},
    }))  # fmt: skip
    assert relabeled(spec, paths, "dataset", False) == spec
    quarantined = relabeled(spec, paths, "dataset", True)
    assert quarantined.grading.pass_to_pass == p2p[1:]
    assert quarantined.provenance.metadata["quarantined"] == {flaky: 2}
    assert quarantined.provenance.metadata["labels"] == "dataset"
    derived = relabeled(spec, paths, "derived", False)
    assert derived.grading.fail_to_pass == (f2p[0],)
    assert derived.grading.pass_to_pass == ("new::test",)
    assert derived.provenance.metadata["labels"] == "derived"

    chosen = Selection(dataset=sel.dataset, task_ids=(TASK,), quarantine=True)
    (again,) = render_selection(chosen, tmp_path)  # through the render: task.toml says so
    toml = (paths.task_dir(TASK) / "task.toml").read_text()
    assert again.grading.pass_to_pass == p2p[1:] and "[metadata.quarantined]" in toml
