"""Grade real agent patches on packaged tasks and compare with the official harness's verdicts.

Input: a JSON list of real model patches for SWE-bench rows, each with the verdict the
official SWE-bench harness gave it (`{"instance_id", "patch", "resolved", "source", ...}`, e.g.
read from a leaderboard submission's or a public evaluation's `patch.diff` and `report.json`),
and the rows exactly as published. The tasks are packaged as `benchmarks/swebench_rows.py`
packages them (no configuration; pass `--skip-package` when they are already), then every
patch is graded through the project's own patch path (`packager verify TASK --patch FILE`, on
the verified task's images) and its reward compared with the official verdict: 1.0 is
"resolved", anything below is not.

    python benchmarks/differential.py --patches patches.json --rows verified.jsonl \\
        --mirrors DIR --out OUT [--ids a,b] [-j 2] [--skip-package]

Prints a table per patch (task, source run, official, ours, status) and the agreement figures,
and writes them to OUT/differential.md and OUT/differential.json. Patches of tasks that did not
verify here are counted apart (nothing to grade them on). Exits 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASET = "swebench-rows"
"""The dataset name `benchmarks/swebench_rows.py` packages the rows under (its file's name)."""


@dataclass
class Graded:
    instance_id: str
    source: str
    official: bool
    reward: float | None
    status: str
    seconds: float
    empty: bool

    @property
    def ours(self) -> bool | None:
        return None if self.reward is None else self.reward >= 1.0

    @property
    def agrees(self) -> bool | None:
        return None if self.ours is None else self.ours == self.official


def _task_status(out: Path, instance_id: str) -> str | None:
    result = out / DATASET / "results" / f"{instance_id}.json"
    if not result.is_file():
        return None
    return str(json.loads(result.read_text()).get("status"))


def _grade(entry: dict[str, Any], rows: Path, out: Path, scratch: Path, mirrors: Path) -> Graded:
    patch = str(entry.get("patch") or "")
    digest = hashlib.sha256(patch.encode()).hexdigest()[:12]
    patch_file = scratch / f"{entry['instance_id']}-{digest}.patch"
    patch_file.write_text(patch)
    command = [
        sys.executable, "-m", "packager", "verify", entry["instance_id"],
        "--dataset", str(rows), "--out", str(out), "--patch", str(patch_file),
        "--repo-source", str(mirrors),
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = round(time.monotonic() - started, 1)
    reward: float | None = None
    status = f"exit {proc.returncode}"
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        reward = answer.get("reward")
        status = str(answer.get("status") or status)
    except (ValueError, IndexError, AttributeError):
        status = f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-200:]}"
    return Graded(
        entry["instance_id"], str(entry.get("source", "")), bool(entry["resolved"]), reward,
        status, seconds, not patch.strip(),
    )  # fmt: skip


def _table(graded: list[Graded]) -> list[str]:
    lines = [
        "| task | source | official | ours (reward) | status | agrees | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in graded:
        official = "resolved" if g.official else "not resolved"
        ours = (
            "-"
            if g.reward is None
            else f"{'resolved' if g.ours else 'not resolved'} ({g.reward:.2f})"
        )
        agrees = {True: "yes", False: "**NO**", None: "-"}[g.agrees]
        run = g.source.rsplit("/", 3)[-3] if g.source.count("/") >= 3 else g.source
        empty = " (empty patch)" if g.empty else ""
        cells = (g.instance_id, f"{run}{empty}", official, ours, g.status, agrees, g.seconds)
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=Path, required=True)
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ids", help="comma-separated instance ids (default: every patch's)")
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--skip-package", action="store_true", help="the tasks are packaged")
    args = parser.parse_args(argv)
    entries = json.loads(args.patches.read_text())
    wanted = [i.strip() for i in args.ids.split(",")] if args.ids else None
    if wanted is not None:
        entries = [e for e in entries if e["instance_id"] in wanted]
    ids = list(dict.fromkeys(e["instance_id"] for e in entries))
    if not args.skip_package:
        package = [
            sys.executable, str(ROOT / "benchmarks" / "swebench_rows.py"),
            "--rows", str(args.rows), "--mirrors", str(args.mirrors), "--ids", ",".join(ids),
            "--out", str(args.out), "-j", str(args.workers), "--oracle-runs", "1",
        ]  # fmt: skip
        subprocess.run(package, cwd=ROOT, check=False)
    rows = args.out / "rows" / f"{DATASET}.jsonl"
    verified = {i for i in ids if _task_status(args.out, i) == "verified"}
    todo = [e for e in entries if e["instance_id"] in verified]
    skipped = [e for e in entries if e["instance_id"] not in verified]
    scratch = args.out / "differential-patches"
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        graded = list(pool.map(lambda e: _grade(e, rows, args.out, scratch, args.mirrors), todo))
    wall = time.monotonic() - started
    decided = [g for g in graded if g.agrees is not None]
    agree = sum(1 for g in decided if g.agrees)
    disagree = [g for g in decided if not g.agrees]
    both = {
        "official resolved": sum(1 for g in graded if g.official),
        "official not resolved": sum(1 for g in graded if not g.official),
        "empty patches": sum(1 for g in graded if g.empty),
    }
    summary = [
        "",
        f"{len(graded)} patches graded on {len({g.instance_id for g in graded})} verified tasks "
        f"({', '.join(f'{k}: {v}' for k, v in both.items())}); "
        f"{wall:.0f} s wall, -j {args.workers}.",
        f"agreement with the official verdicts: {agree} of {len(decided)}"
        + (f" ({100 * agree / len(decided):.1f}%)" if decided else "")
        + f"; ungraded (no reward): {len(graded) - len(decided)}.",
        f"not graded, task not verified here: {len(skipped)} patches of "
        f"{len({e['instance_id'] for e in skipped})} tasks "
        f"({', '.join(sorted({e['instance_id'] for e in skipped})) or 'none'}).",
    ]
    text = "\n".join(_table(graded) + summary)
    print(text)
    (args.out / "differential.md").write_text(text + "\n")
    (args.out / "differential.json").write_text(
        json.dumps(
            {"graded": [asdict(g) for g in graded], "agree": agree, "decided": len(decided)},
            indent=2,
        )
        + "\n"
    )
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
