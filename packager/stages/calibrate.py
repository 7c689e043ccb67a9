"""Calibration: a verified task's task.toml states the limits its gold runs measured.

After the runs, `checks/resources.py` records what the largest gold run used and the limits
that suggests (memory with a margin, CPUs from CPU over wall seconds, the verifier's timeout
from the wall seconds). For a verified task they are kept in `calibration/<task>.json` and
written into its task.toml: `[environment]` and `[verifier.environment]` get the CPUs,
memory and storage limits Harbor reads (storage: the agent image's size with
`STORAGE_MARGIN`, rounded up to `STORAGE_STEP_MB`: what a sandbox must hold), `[verifier]`
its `timeout_sec`; the HUD environment's task row gets the same as its `RuntimeResources`.
The render reads the file back (`calibrated`), so a rerun renders the very task.toml that was
verified and the task's digest does not move. The agent's timeout stays the dataset's: the oracle's
seconds say nothing of a model's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from packager.models.spec import Calibration, TaskSpec
from packager.render.harbor import make_harbor_task
from packager.render.harbor_dataset import task_digest
from packager.render.hud import make_hud_files
from packager.render.write import write_json, write_text

if TYPE_CHECKING:
    from packager.storage import OutputPaths

STORAGE_MARGIN = 2.0
STORAGE_STEP_MB = 1024


def calibration_of(resources: Mapping[str, float], image_mb: float) -> Calibration:
    """The limits of `resources` (`checks.resources.measured_resources`) for an agent image
    of `image_mb`.
    """
    storage = max(1, math.ceil(image_mb * STORAGE_MARGIN / STORAGE_STEP_MB)) * STORAGE_STEP_MB
    return Calibration(
        cpus=int(resources["cpus"]),
        memory_limit_mb=int(resources["memory_limit_mb"]),
        storage_limit_mb=storage,
        verifier_timeout_sec=float(resources["verifier_timeout_sec"]),
    )


def calibrated(spec: TaskSpec, paths: OutputPaths) -> TaskSpec:
    """`spec` with the calibration its last verification kept (unchanged when there is none
    or it cannot be read).
    """
    target = paths.calibration_file(spec.provenance.slug)
    try:
        data = json.loads(target.read_text()) if target.is_file() else None
        calibration = Calibration.model_validate(data) if data is not None else None
    except (OSError, ValueError):
        calibration = None
    if calibration is None or calibration == spec.calibration:
        return spec
    return spec.model_copy(update={"calibration": calibration})


def calibrate(
    spec: TaskSpec, paths: OutputPaths, resources: Mapping[str, float], image_mb: float
) -> str:
    """Keep the calibration of a verified task and write it into its task.toml; returns the
    task folder's digest after the change.
    """
    calibration = calibration_of(resources, image_mb)
    slug = spec.provenance.slug
    write_json(paths.calibration_file(slug), calibration.model_dump(mode="json"))
    now = spec.model_copy(update={"calibration": calibration})
    task = make_harbor_task(now)
    folder = paths.task_dir(slug)
    write_text(folder / "task.toml", task.files["task.toml"].data.decode())
    hud = make_hud_files(
        now,
        dataset=paths.dataset,
        agent_image=task.agent_image,
        grader_payload=task.grader_payload,
        grader_image=task.grader_image,
    )
    write_text(paths.source_dir(slug) / "tasks.py", hud["tasks.py"].data.decode())
    return task_digest(folder)
