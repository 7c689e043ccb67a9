"""The stability table of packaged rows: per task, its runs, which perturbations took, the
listed tests whose outcome changed with what changed them, and the seconds the runs beyond one
gold and one nop added (read from `results/<task>.json`, `TaskResult.stability`).

    python benchmarks/stability.py OUT/DATASET [OUT/DATASET ...] [--md FILE]

Package the rows first with `--runs G,N --perturb all` (e.g. through
`benchmarks/swebench_rows.py --runs 2,1 --perturb all`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def rows_of(folder: Path) -> list[dict[str, Any]]:
    results = sorted((folder / "results").glob("*.json"))
    return [
        json.loads(p.read_text())
        for p in results
        if p.name.count(".") == 1  # not .audit.json, .error.json, .quality.json
    ]


def table(results: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    lines = [
        "| row | status | gold / nop runs | perturbed (took) | flaky listed tests | added s | "
        "base s |",
        "|---|---|---|---|---|---|---|",
    ]
    added: list[float] = []
    flaky_rows = 0
    found: dict[str, int] = {}
    for r in results:
        st = r.get("stability")
        if not st:
            lines.append(f"| {r['instance_id']} | {r['status']} | - | - | - | - | - |")
            continue
        runs = st["runs"]
        took = [p for p in runs["perturbed"] if p not in st.get("not_applied", {})]
        shown = ", ".join(f"{p}{'' if p in took else ' (repeat)'}" for p in runs["perturbed"])
        tests = "; ".join(
            f"`{f['id']}` ({', '.join(f['changed_by'])})" for f in st.get("flaky", [])
        )
        for f in st.get("flaky", []):
            for why in f["changed_by"]:
                found[why] = found.get(why, 0) + 1
        flaky_rows += bool(st.get("flaky"))
        base = sum(
            run["duration_sec"] for run in (r["oracle"][:1] + ([r["nop"]] if r.get("nop") else []))
        )
        added.append(st["added_sec"])
        lines.append(
            f"| {r['instance_id']} | {r['status']} | {runs['gold']} / {runs['nop']} | "
            f"{shown or '-'} | {tests or 'none'} | {st['added_sec']:.1f} | {base:.1f} |"
        )
    summary = {
        "rows": len(results),
        "measured": len(added),
        "with_flaky_tests": flaky_rows,
        "flaky_tests_by_cause": found,
        "added_sec_median": round(statistics.median(added), 1) if added else None,
        "added_sec_total": round(sum(added), 1),
    }
    return lines, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="OUT/DATASET folders")
    parser.add_argument("--md", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    results = [r for folder in args.folders for r in rows_of(folder)]
    lines, summary = table(results)
    text = "\n".join(lines) + "\n\n" + json.dumps(summary, sort_keys=True) + "\n"
    print(text, end="")
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
