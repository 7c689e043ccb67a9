"""A task's resources, measured on its gold runs, and the limits they suggest.

Each gold run's grader reports what its container used when grading ended (its cgroup: peak
memory, CPU seconds; `grading/processes.cgroup_usage`), and the run's wall seconds are the
engine's. The task's figures are the largest of its gold runs; the suggested limits add a
margin: memory × `MEMORY_MARGIN` rounded up to `MEMORY_STEP_MB` (at least `MEMORY_FLOOR_MB`),
CPUs = CPU seconds over wall seconds rounded up (at least 1), the verifier's timeout = wall ×
`TIMEOUT_MARGIN` (at least `TIMEOUT_FLOOR_SEC`). They are recorded, not yet written into
task.toml.
"""

from __future__ import annotations

import math

from packager.models.spec import TaskResult

MEMORY_MARGIN = 1.5
MEMORY_STEP_MB = 256
MEMORY_FLOOR_MB = 512
TIMEOUT_MARGIN = 3.0
TIMEOUT_FLOOR_SEC = 60


def measured_resources(result: TaskResult) -> dict[str, float] | None:
    """The task's measured figures and suggested limits (None: no gold run was measured)."""
    gold = [r for r in result.oracle if r.resources]
    if not gold:
        return None
    peak = max(r.resources.get("memory_peak_mb", 0.0) for r in gold if r.resources)
    cpu = max(r.resources.get("cpu_sec", 0.0) for r in gold if r.resources)
    wall = max(r.duration_sec for r in gold)
    memory = max(MEMORY_FLOOR_MB, math.ceil(peak * MEMORY_MARGIN / MEMORY_STEP_MB) * MEMORY_STEP_MB)
    return {
        "runs": float(len(gold)),
        "memory_peak_mb": peak,
        "cpu_sec": cpu,
        "wall_sec": wall,
        "memory_limit_mb": float(memory),
        "cpus": float(max(1, math.ceil(cpu / wall))) if wall > 0 else 1.0,
        "verifier_timeout_sec": float(max(TIMEOUT_FLOOR_SEC, math.ceil(wall * TIMEOUT_MARGIN))),
    }
