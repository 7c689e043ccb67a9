"""Resources measured on the gold runs: the runtime's cgroup reading and the task's figures."""

from __future__ import annotations

from pathlib import Path

from packager.checks.resources import measured_resources
from packager.grading.processes import cgroup_usage
from packager.models.spec import RunResult, TaskResult
from packager.release.report import _resource_lines


def test_cgroup_v2_and_v1_are_read(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.peak").write_text("314572800\n")
    (v2 / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert cgroup_usage(v2) == {"memory_peak_mb": 300.0, "cpu_sec": 2.5}
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "cpuacct").mkdir()
    (v1 / "memory" / "memory.max_usage_in_bytes").write_text("104857600\n")
    (v1 / "cpuacct" / "cpuacct.usage").write_text("1500000000\n")
    assert cgroup_usage(v1) == {"memory_peak_mb": 100.0, "cpu_sec": 1.5}
    assert cgroup_usage(tmp_path / "none") == {}


def _run(kind: str, seconds: float, used: dict[str, float] | None) -> RunResult:
    return RunResult(
        kind=kind,  # type: ignore[arg-type]
        reward=1.0, grade_status="graded", duration_sec=seconds, log_dir="x", resources=used,
    )  # fmt: skip


def test_the_largest_gold_run_sets_the_figures_and_the_margin_the_limits() -> None:
    result = TaskResult(
        task="t", instance_id="t", dataset="d", status="verified", engine="local",
        oracle=(
            _run("oracle", 10.0, {"memory_peak_mb": 300.0, "cpu_sec": 12.0}),
            _run("oracle", 14.0, {"memory_peak_mb": 420.0, "cpu_sec": 9.0}),
        ),
        nop=_run("nop", 30.0, {"memory_peak_mb": 5000.0, "cpu_sec": 60.0}),  # not a gold run
    )  # fmt: skip
    m = measured_resources(result)
    assert m is not None
    assert (m["memory_peak_mb"], m["cpu_sec"], m["wall_sec"], m["runs"]) == (420.0, 12.0, 14.0, 2)
    assert m["memory_limit_mb"] == 768  # 420 × 1.5 = 630, up to the next 256 MiB
    assert m["cpus"] == 1 and m["verifier_timeout_sec"] == 60  # floors
    line = _resource_lines([result.model_copy(update={"resources": m})])[-1]
    assert line == "| `t` | 420 MiB | 12.0 | 14.0 | 768 MiB / 1 / 60 s |"
    unmeasured = result.model_copy(update={"oracle": (_run("oracle", 1.0, None),)})
    assert measured_resources(unmeasured) is None
