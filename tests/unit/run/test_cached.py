"""A rerun skips a verified task only for the very images and the very task folder it verified."""

from __future__ import annotations

from pathlib import Path

from packager.datasets.sources import open_dataset
from packager.models.spec import RunResult, TaskResult
from packager.render.harbor_dataset import task_digest
from packager.run.materialize import render_selection
from packager.run.select import Selection
from packager.run.store import cached_result, write_result
from packager.stages.build import image_tags
from packager.storage import OutputPaths

TASK = "samples__textkit-1"


def _run(kind: str, reward: float) -> RunResult:
    return RunResult(kind=kind, reward=reward, grade_status="graded", duration_sec=1.0, log_dir="x")  # type: ignore[arg-type]


def test_an_edited_task_folder_is_verified_again(tmp_path: Path) -> None:
    sel = Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))
    (spec,) = render_selection(sel, tmp_path)
    paths = OutputPaths(tmp_path, spec.provenance.dataset)
    folder = paths.task_dir(TASK)
    result = TaskResult(
        task=TASK, instance_id=TASK, dataset=spec.provenance.dataset, status="verified",
        engine="local", images=image_tags(spec).images,
        oracle=(_run("oracle", 1.0), _run("oracle", 1.0)), nop=_run("nop", 0.0),
        task_digest=task_digest(folder),
    )  # fmt: skip
    write_result(paths, result)
    assert cached_result(paths, spec, oracle_runs=2) == result
    # The same images, but an instruction no run was verified with: verified again.
    (folder / "instruction.md").write_text("Also rewrite the tests.\n")
    assert cached_result(paths, spec, oracle_runs=2) is None
    # A result from before digests were kept: verified again, so it gets one.
    write_result(paths, result.model_copy(update={"task_digest": None}))
    (spec,) = render_selection(sel, tmp_path)  # the folder as rendered
    assert cached_result(paths, spec, oracle_runs=2) is None
    write_result(paths, result)
    assert cached_result(paths, spec, oracle_runs=2) == result
