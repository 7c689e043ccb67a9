"""Package real SWE-bench rows with no configuration, then grade their saved logs with swebench.

Rows are taken exactly as published (a .jsonl of SWE-bench / Verified rows), repositories from
a folder of mirrors (`<dir>/<owner>/<name>.git`); no `--recipes`, no `--base-image`: each row's
environment comes from the SWE-bench harness's own spec for its `(repo, version)`. Then, for
every verified row, the saved test output of each run is read by the harness's own parser and
graded by its own rules (swebench 5.0.2, the test-only dependency): oracle runs must be
RESOLVED_FULL; the nop run must not be (its PASS_TO_PASS failing there is a label finding,
counted apart).

    python benchmarks/swebench_rows.py --rows verified.jsonl --mirrors DIR \\
        --ids django__django-11099,... [--out build-rows] [--ca-bundle FILE] [-j 1]

Prints a Markdown table (status, reason, Python and toolchain asked and used, build seconds,
harness verdicts)
and writes it to OUT/rows.md; exits 1 when a verified row's logs disagree with the harness.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
import tomllib
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SpecStandIn:
    """What the harness parsers read from a TestSpec."""

    instance_id: str
    repo: str
    version: str


def load_harness() -> tuple[dict[str, Any], Any]:
    """swebench 5.0.2's parser registry and grading module (its package __init__ is heavy)."""
    import swebench

    if "swebench.harness" not in sys.modules:
        stand_in = types.ModuleType("swebench.harness")
        stand_in.__path__ = [str(Path(p) / "harness") for p in swebench.__path__]
        sys.modules["swebench.harness"] = stand_in
    parsers = importlib.import_module("swebench.harness.log_parsers")
    grading = importlib.import_module("swebench.harness.grading")
    return dict(parsers.PARSER_REGISTRY), grading


def as_list(value: Any) -> list[str]:
    """FAIL_TO_PASS/PASS_TO_PASS: a JSON string (SWE-bench) or a list (SWE-bench Multilingual)."""
    return list(json.loads(value)) if isinstance(value, str) else list(value)


def harness_verdicts(
    row: dict[str, Any], task_dir: Path, log_dir: Path, registry: dict[str, Any], grading: Any
) -> tuple[str, str]:
    """(oracle verdict, nop verdict) by the harness's parser and rules on the saved logs."""
    meta = tomllib.loads((task_dir / "task.toml").read_text())["metadata"]
    parse = registry[meta["log_parser"]]
    gold = {key: as_list(row[key]) for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    stand_in = SpecStandIn(row["instance_id"], row["repo"], row["version"])
    oracle = []
    nop = "-"
    for run in sorted(p.name for p in log_dir.iterdir() if p.name.startswith(("oracle", "nop"))):
        output = (log_dir / run / "test-output.txt").read_text(errors="replace")
        report = grading.get_eval_tests_report(parse(output, stand_in), gold)
        if run.startswith("oracle"):
            oracle.append(grading.get_resolution_status(report))
        else:
            f2p_passed = report["FAIL_TO_PASS"]["success"]
            p2p_failed = report["PASS_TO_PASS"]["failure"]
            nop = (
                "F2P all fail, P2P all pass"
                if not f2p_passed and not p2p_failed
                else f"F2P passed {len(f2p_passed)}, P2P failed {len(p2p_failed)}"
            )
            if grading.get_resolution_status(report) == "RESOLVED_FULL":
                nop += " (RESOLVED_FULL)"
    return ", ".join(oracle) or "-", nop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--ids", required=True, help="comma-separated instance ids")
    parser.add_argument("--out", type=Path, default=ROOT / "build-rows")
    parser.add_argument("--ca-bundle", type=Path)
    parser.add_argument("-j", "--workers", type=int, default=1)
    parser.add_argument("--oracle-runs", type=int, help="passed on (default: packager's, 2)")
    parser.add_argument(
        "--history", choices=("full", "base-only"), help="passed on (a mirror missing old blobs)"
    )
    parser.add_argument("--as-of", help="passed on: created, a date or none (packager's default)")
    parser.add_argument("--runs", help="passed on: G,N gold and nop runs")
    parser.add_argument("--perturb", help="passed on: shuffle,cpus,clock, all or none")
    parser.add_argument("--skip-package", action="store_true", help="only grade saved logs")
    args = parser.parse_args(argv)
    ids = [i.strip() for i in args.ids.split(",") if i.strip()]
    rows = {}
    for line in args.rows.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if row["instance_id"] in ids:
                rows[row["instance_id"]] = row
    missing = sorted(set(ids) - set(rows))
    if missing:
        raise SystemExit(f"not in {args.rows}: {', '.join(missing)}")
    # The rows, unedited, in a file of their own (the dataset's name is the file's).
    subset = args.out / "rows" / "swebench-rows.jsonl"
    subset.parent.mkdir(parents=True, exist_ok=True)
    subset.write_text("".join(json.dumps(rows[i]) + "\n" for i in ids))
    wall = 0.0
    if not args.skip_package:
        command = [
            sys.executable, "-m", "packager", "package", *ids,
            "--dataset", str(subset), "--repo-source", str(args.mirrors),
            "--out", str(args.out), "-j", str(args.workers),
        ]  # fmt: skip
        if args.ca_bundle:
            command += ["--ca-bundle", str(args.ca_bundle)]
        if args.history:
            command += ["--history", args.history]
        if args.oracle_runs:
            command += ["--oracle-runs", str(args.oracle_runs)]
        if args.as_of:
            command += ["--as-of", args.as_of]
        for flag, value in (("--runs", args.runs), ("--perturb", args.perturb)):
            if value:
                command += [flag, value]
        started = time.monotonic()
        proc = subprocess.run(command, cwd=ROOT, check=False)
        wall = time.monotonic() - started
        print(f"packager package exit {proc.returncode}, {wall:.0f} s wall")
    base = args.out / "swebench-rows"
    registry, grading = load_harness()
    lines = [
        "| row | status | reason | Python asked → used | toolchain asked → used | build s | "
        "harness on oracle | harness on nop |",
        "|---|---|---|---|---|---|---|---|",
    ]
    disagree = findings = 0
    counts: dict[str, int] = {}
    for i in ids:
        result = json.loads((base / "results" / f"{i}.json").read_text())
        status = result["status"]
        counts[status] = counts.get(status, 0) + 1
        env = result.get("environment") or {}
        python = f"{env.get('python_requested', '-')} → {env.get('python_used', '-')}"
        tools = f"{env.get('toolchain_requested', '-')} → {env.get('toolchain_used', '-')}"
        build = float(result["durations"].get("build", 0.0))
        oracle = nop = "-"
        if status == "verified":
            oracle, nop = harness_verdicts(
                rows[i], base / "tasks" / i, base / "logs" / i, registry, grading
            )
            # A disagreement: the harness does not resolve a gold run, or resolves the nop run.
            # P2P tests failing on the nop run (labels the environment of the harness's day
            # passed) are a label finding, counted apart.
            if set(oracle.split(", ")) != {"RESOLVED_FULL"} or nop.endswith("(RESOLVED_FULL)"):
                disagree += 1
            elif not nop.startswith("F2P all"):
                findings += 1
        reason = (result.get("reason") or "").replace("|", "/").replace("\n", " ")[:300]
        lines.append(
            f"| {i} | {status} | {reason or '-'} | {python} | {tools} | {build:.0f} | {oracle} "
            f"| {nop} |"
        )
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    text = "\n".join(lines) + (
        f"\n\n{len(ids)} rows: {summary}; harness disagreements: {disagree}; "
        f"verified rows with PASS_TO_PASS failing on the nop run: {findings}\n"
    )
    (args.out / "rows.md").write_text(text)
    print(text)
    return 1 if disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
