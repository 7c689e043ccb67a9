"""benchmarks/stability.py reads packaged results into the stability table (run on real rows
for docs/grading.md); a result shape it no longer reads fails here, not in a long run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("stability", ROOT / "benchmarks/stability.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _run(seconds: float) -> dict[str, Any]:
    return {"duration_sec": seconds, "reward": 1.0}


def test_the_table_counts_flaky_tests_by_cause_and_added_seconds(tmp_path: Path) -> None:
    results = tmp_path / "ds" / "results"
    results.mkdir(parents=True)
    flaky = {"id": "t::order", "changed_by": ["shuffle"], "outcomes": {}}
    for name, stability, status in (
        ("a", {"runs": {"gold": 2, "nop": 1, "perturbed": ["shuffle", "cpus"]},
               "not_applied": {"cpus": "no"}, "added_sec": 4.0, "flaky": [flaky]}, "flaky"),
        ("b", {"runs": {"gold": 2, "nop": 1, "perturbed": []}, "added_sec": 2.0, "flaky": []},
         "verified"),
        ("c", None, "gold_failed"),
    ):  # fmt: skip
        result = {"instance_id": name, "status": status, "oracle": [_run(3.0)], "nop": _run(1.0)}
        (results / f"{name}.json").write_text(json.dumps({**result, "stability": stability}))
    (results / "a.audit.json").write_text("{}")
    stability = _module()
    lines, summary = stability.table(stability.rows_of(tmp_path / "ds"))
    row = "| a | flaky | 2 / 1 | shuffle, cpus (repeat) | `t::order` (shuffle) | 4.0 | 4.0 |"
    assert row in lines
    assert "| c | gold_failed | - | - | - | - | - |" in lines
    assert summary == {
        "rows": 3, "measured": 2, "with_flaky_tests": 1, "flaky_tests_by_cause": {"shuffle": 1},
        "added_sec_median": 3.0, "added_sec_total": 6.0,
    }  # fmt: skip
