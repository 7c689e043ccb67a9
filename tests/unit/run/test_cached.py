"""A rerun skips a verified task only for the very images and the very task folder it verified."""

from __future__ import annotations

from pathlib import Path

import pytest

from packager.datasets.sources import open_dataset
from packager.errors import BuildError
from packager.models.spec import RunResult, TaskResult
from packager.render.harbor_dataset import task_digest
from packager.run import store
from packager.run.materialize import render_selection
from packager.run.select import Selection
from packager.run.store import cached_result, write_result
from packager.settings import VerifyConfig
from packager.stages import job as job_module
from packager.stages.build import BuildOptions, BuildOutcome, Rendered, image_tags
from packager.stages.job import Job, TaskJob
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
    # More nop runs or a perturbation the saved runs lack: verified again.
    assert cached_result(paths, spec, oracle_runs=2, nop_runs=2) is None
    assert cached_result(paths, spec, oracle_runs=2, perturb=("clock",)) is None
    shaken = _run("oracle", 1.0).model_copy(update={"perturbation": "clock"})
    write_result(paths, result.model_copy(update={"perturbed": (shaken,)}))
    assert cached_result(paths, spec, oracle_runs=2, perturb=("clock",)) is not None


def test_the_render_decides_tags_and_digest_once_for_the_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tags and the folder digest a render decided are what the cache check and the job
    use: neither renders the task again (each task was rendered 3 times per run)."""
    sel = Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))
    rendered: dict[str, Rendered] = {}
    (spec,) = render_selection(sel, tmp_path, rendered=rendered)
    paths = OutputPaths(tmp_path, spec.provenance.dataset)
    done = rendered[TASK]
    assert done == Rendered(image_tags(spec), task_digest(paths.task_dir(TASK)))
    result = TaskResult(
        task=TASK, instance_id=TASK, dataset=spec.provenance.dataset, status="verified",
        engine="local", images=done.tags.images,
        oracle=(_run("oracle", 1.0), _run("oracle", 1.0)), nop=_run("nop", 0.0),
        task_digest=done.digest,
    )  # fmt: skip
    write_result(paths, result)

    def no_render(*args: object, **kwargs: object) -> None:
        raise AssertionError("rendered again")

    monkeypatch.setattr(store, "image_tags", no_render)
    monkeypatch.setattr(store, "task_digest", no_render)
    monkeypatch.setattr(job_module, "image_tags", no_render)
    monkeypatch.setattr(job_module, "task_digest", no_render)
    assert cached_result(paths, spec, oracle_runs=2, rendered=done) == result

    seen: dict[str, object] = {}

    def built(*args: object, **kwargs: object) -> BuildOutcome:
        seen["tags"] = args[5]
        raise BuildError(TASK, done.tags.agent, "stop here", None)

    monkeypatch.setattr(job_module, "build_task", built)
    job = Job(
        paths=paths, repo_sources={}, build_opts=BuildOptions(), verify=True,
        settings=VerifyConfig(oracle_runs=1), rendered=rendered,
    )  # fmt: skip
    failed = TaskJob(job, None)(spec)  # type: ignore[arg-type]
    assert seen == {"tags": done.tags}
    assert (failed.status, failed.task_digest) == ("build_failed", done.digest)
