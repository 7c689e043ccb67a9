"""One task's job (`packager/stages/job.py::TaskJob`) and the typed build outcome it reads
(`packager/stages/build.py::BuildOutcome`): the result a build failure, a leak-free build and a
build-only job give, with the durations and logs keys the result files have always had. No
Docker: the build and the audit are replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from packager.checks import seam
from packager.errors import BuildError, RowError
from packager.models.spec import TaskSpec
from packager.settings import VerifyConfig
from packager.stages import job as job_module
from packager.stages.build import (
    BuildOptions,
    BuildOutcome,
    Flattening,
    ImageBuild,
    ImageTags,
    image_tags,
)
from packager.stages.job import Job, TaskJob
from packager.storage import OutputPaths

TASK = "samples__textkit-1"


def _spec() -> TaskSpec:
    from packager.datasets.sources import open_dataset
    from packager.run.select import Selection, iter_specs

    return next(iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))))


def _job(tmp_path: Path, spec: TaskSpec, *, verify: bool) -> Job:
    return Job(
        paths=OutputPaths(tmp_path, spec.provenance.dataset),
        repo_sources={},
        build_opts=BuildOptions(),
        verify=verify,
        settings=VerifyConfig(oracle_runs=1),
    )


class _NoImages:
    """An engine that knows no image: ids are only a cache key, so the job goes on."""

    class images:  # noqa: N801 - docker-py's attribute name
        @staticmethod
        def get(name: str) -> Any:
            raise LookupError(name)


def test_build_outcome_gives_the_durations_and_logs_keys_of_the_result_files() -> None:
    outcome = BuildOutcome(
        agent=ImageBuild("packager/agent:a"),  # there already: 0 seconds, no log
        grader=ImageBuild("packager/grader:g", True, 1.5, "/logs/build-grader.log"),
        environment=ImageBuild("packager/environment:e", True, 9.25, "/logs/env.log"),
        flattening=Flattening("img@sha256:1", 3.0, 120.0, None),
    )
    assert outcome.images == {"agent": "packager/agent:a", "grader": "packager/grader:g"}
    assert outcome.durations() == {
        "agent_build": 0.0,
        "grader_build": 1.5,
        "flatten": 3.0,
        "environment_build": 9.25,
    }
    assert outcome.logs() == {
        "environment_log": "/logs/env.log",
        "grader_log": "/logs/build-grader.log",
    }
    assert outcome.flattened_from == "img@sha256:1"
    assert BuildOutcome(ImageBuild("a"), ImageBuild("g")).flattened_from is None


def test_image_tags_are_the_rendered_tasks() -> None:
    from packager.render.harbor import make_harbor_task

    spec = _spec()
    task = make_harbor_task(spec)
    assert image_tags(spec) == ImageTags(task.agent_image, task.grader_image)


def test_a_build_error_is_the_tasks_build_failed_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec()
    log = tmp_path / "build-grader.log"

    def failing(*args: Any, **kwargs: Any) -> BuildOutcome:
        raise BuildError(TASK, "packager/grader:g", "no space left", log)

    monkeypatch.setattr(job_module, "build_task", failing)
    result = TaskJob(_job(tmp_path, spec, verify=True), _NoImages()).build(spec)
    assert not isinstance(result, job_module.Staged)
    assert result.status == "build_failed"
    assert result.engine == "local"
    assert "no space left" in (result.reason or "")
    assert result.logs == {
        "dir": str(OutputPaths(tmp_path, spec.provenance.dataset).log_dir(spec.provenance.slug)),
        "build": str(log),
    }


@pytest.mark.parametrize(
    "error",
    [
        BuildError(
            TASK, "packager/agent:a", "write /testbed/x.pack: no space left on device", None
        ),
        RowError(TASK, "repo", "checking out (exit 128): No space left on device"),
        RowError(TASK, "repo", "cannot copy the history: ... write error. Out of diskspace"),
    ],
)
def test_a_build_that_filled_the_disk_is_an_infrastructure_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """ENOSPC during a build or a snapshot is the machine's fault, not the row's."""
    spec = _spec()

    def failing(*args: Any, **kwargs: Any) -> BuildOutcome:
        raise error

    monkeypatch.setattr(job_module, "build_task", failing)
    result = TaskJob(_job(tmp_path, spec, verify=True), _NoImages()).build(spec)
    assert not isinstance(result, job_module.Staged)
    assert result.status == "infra_error"
    assert (result.reason or "").startswith("the machine's disk is full: ")


def test_a_build_only_job_ends_built_with_its_tags_computed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.checks import audit

    spec = _spec()
    tags = image_tags(spec)
    seen: dict[str, object] = {}

    def built(*args: Any, **kwargs: Any) -> BuildOutcome:
        seen["build_tags"] = args[5]
        return BuildOutcome(ImageBuild(tags.agent), ImageBuild(tags.grader, True, 2.0, "g.log"))

    def audited(client: Any, spec: TaskSpec, paths: OutputPaths, tag: str) -> Any:
        seen["audit_tag"] = tag
        return audit.AuditReport(tag, "sha256:x", True, [], {"seconds": 0.5})

    monkeypatch.setattr(job_module, "build_task", built)
    monkeypatch.setattr(seam, "audit_task", audited)
    result = TaskJob(_job(tmp_path, spec, verify=False), _NoImages())(spec)
    assert seen == {"build_tags": tags, "audit_tag": tags.agent}
    assert result.status == "built"
    assert result.images == tags.images
    assert result.image_ids == {}
    assert set(result.durations) == {"build", "agent_build", "grader_build", "audit"}
    assert (result.durations["grader_build"], result.durations["audit"]) == (2.0, 0.5)
    assert set(result.logs) == {"dir", "grader_log", "audit"}


def test_a_verified_job_records_its_run_stage_wall_and_its_environment_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from packager.checks import audit

    spec = _spec()
    tags = image_tags(spec)

    def built(*args: Any, **kwargs: Any) -> BuildOutcome:
        return BuildOutcome(
            ImageBuild(tags.agent, True, 3.0, "a.log"),
            ImageBuild(tags.grader),
            snapshot_seconds=1.5,
            environment_image="packager/environment:e",
        )

    def audited(client: Any, spec: TaskSpec, paths: OutputPaths, tag: str) -> Any:
        return audit.AuditReport(tag, "sha256:x", True, [], {"seconds": 0.5})

    def ran(staged: job_module.Staged, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)  # the run stage's own work, outside any run's seconds
        return staged.finish("verified")

    monkeypatch.setattr(job_module, "build_task", built)
    monkeypatch.setattr(seam, "audit_task", audited)
    monkeypatch.setattr(job_module, "run_stage", ran)
    result = TaskJob(_job(tmp_path, spec, verify=True), _NoImages())(spec)
    assert result.status == "verified"
    assert result.durations["snapshot"] == 1.5
    assert 0.2 <= result.durations["verify"] < 5
    assert result.environment["image"] == "packager/environment:e"


def test_a_reason_naming_a_dropped_module_says_it_was_dropped() -> None:
    from packager.stages.job import with_dropped

    dropped = "cdms2 (packages (environment.yml: ci/env.yml, as pip requirements)); hdf5 (x)"
    reason = (
        "… module cdms2 is missing; first error: E ModuleNotFoundError: No module named 'cdms2'"
    )
    said = with_dropped(reason, dropped)
    assert said is not None and said.startswith(reason)
    tail = "(packages (environment.yml: ci/env.yml, as pip requirements)))"
    assert said.endswith(f"(dropped from the environment, pip could not install it: cdms2 {tail}")
    plain = "oracle reward 0.0 (graded: F2P: 1 not passed)"
    assert with_dropped(plain, dropped) == plain
    assert with_dropped("No module named 'numpy'", dropped) == "No module named 'numpy'"
    assert with_dropped(reason, None) == reason and with_dropped(None, dropped) is None


def test_listed_tests_named_after_a_dropped_package_are_said() -> None:
    """xarray-3305's PASS_TO_PASS holds cdms2 round-trip tests, which skip when cdms2 (conda
    only) is dropped: the reason names the package, and only for tests named after it."""
    from packager.stages.job import with_dropped

    dropped = "cdms2 (packages (environment.yml: x)); hdf5 (packages (environment.yml: x))"
    reason = (
        "oracle reward 0.0 (graded: pass_to_pass: 2 not passed: xarray/tests/test_dataarray.py::"
        "TestDataArray::test_to_and_from_cdms2_classic (missing), xarray/tests/test_dataarray.py"
        "::TestDataArray::test_to_and_from_cdms2_ugrid (missing))"
    )
    said = with_dropped(reason, dropped)
    assert said == (
        f"{reason} (tests named after a package dropped from the environment, which pip could "
        "not install: cdms2 (packages (environment.yml: x)))"
    )
    other = reason.replace("cdms2", "cdms20")  # another name: not this package
    assert with_dropped(other, dropped) == other
