"""Calibration: a verified task's measured limits go into its task.toml, and a rerun renders the
very same task.toml (so its digest, and the cached verdict, hold).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packager.datasets.sources import open_dataset
from packager.models.spec import Calibration
from packager.render.harbor_dataset import task_digest
from packager.run.materialize import render_selection
from packager.run.select import Selection
from packager.stages.calibrate import calibrate, calibrated, calibration_of
from packager.storage import OutputPaths

TASK = "samples__textkit-1"
MEASURED = {
    "memory_peak_mb": 175.8,
    "cpu_sec": 9.2,
    "wall_sec": 10.5,
    "memory_limit_mb": 512.0,
    "cpus": 1.0,
    "verifier_timeout_sec": 60.0,
}


def test_the_limits_of_the_measured_figures() -> None:
    assert calibration_of(MEASURED, image_mb=700.0) == Calibration(
        cpus=1, memory_limit_mb=512, storage_limit_mb=2048, verifier_timeout_sec=60.0
    )
    assert calibration_of(MEASURED, image_mb=0.0).storage_limit_mb == 1024  # at least 1 GiB


def test_a_calibrated_task_toml_is_rendered_again_byte_for_byte(tmp_path: Path) -> None:
    sel = Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))
    (spec,) = render_selection(sel, tmp_path)
    paths = OutputPaths(tmp_path, spec.provenance.dataset)
    folder = paths.task_dir(TASK)
    before = task_digest(folder)
    plain = tomllib.loads((folder / "task.toml").read_text())
    assert "memory_mb" not in plain["environment"]

    digest = calibrate(spec, paths, MEASURED, image_mb=700.0)
    config = tomllib.loads((folder / "task.toml").read_text())
    limits = {"cpus": 1, "memory_mb": 512, "storage_mb": 2048}
    assert {k: config["environment"][k] for k in limits} == limits
    assert {k: config["verifier"]["environment"][k] for k in limits} == limits
    assert config["verifier"]["timeout_sec"] == 60.0
    assert config["agent"] == plain["agent"]  # the oracle's seconds say nothing of a model's
    assert digest == task_digest(folder) != before

    tasks_py = (paths.source_dir(TASK) / "tasks.py").read_text()
    assert "RuntimeResources(cpu=1.0, memory_mb=512, storage_mb=2048)" in tasks_py
    compile(tasks_py, "tasks.py", "exec")

    (again,) = render_selection(sel, tmp_path)  # a rerun reads the calibration back
    assert again.calibration == calibration_of(MEASURED, 700.0)
    assert task_digest(folder) == digest
    assert (paths.source_dir(TASK) / "tasks.py").read_text() == tasks_py  # the HUD row too
    assert calibrated(spec, OutputPaths(tmp_path / "elsewhere", "x")) == spec  # none kept there
