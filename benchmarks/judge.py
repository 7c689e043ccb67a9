"""Cost and time of the browser judge on the SWEeper sample: model calls, tokens and seconds
per workflow for each run (oracle twice, nop once), from one `packager package --judge replay`
run, and the share of each run's time spent in the browser agent (ratios measured in one run;
absolute seconds drift on these machines).

    .venv/bin/python benchmarks/judge.py [TASK]

With the replay server the token counts are the server's estimates (characters / 4, 85 per
screenshot), close to what the prompts would cost against a real endpoint; the number of calls
is what a real model that followed the same path would be asked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench-judge"
TASK = "samples__todo-web-5"


def main(argv: list[str]) -> int:
    task = argv[1] if len(argv) > 1 else TASK
    proc = subprocess.run(
        [sys.executable, "-m", "packager", "package", task, "--judge", "replay", "--force"]
        + ["--out", str(OUT)],
        capture_output=True,
        text=True,
    )
    result_file = OUT / "samples" / "results" / f"{task}.json"
    if not result_file.is_file():
        print(proc.stdout + proc.stderr)
        return 1
    result = json.loads(result_file.read_text())
    print(f"{task}: {result['status']} ({result.get('reason') or 'oracle 1.0 twice, nop < 1.0'})")
    header = f"{'run':9} {'workflow':30} {'verdict':8} {'calls':>5} {'tokens in':>9}"
    print(header + f" {'out':>5} {'app up s':>8} {'workflow s':>10}")
    shares = []
    for run in [*result["oracle"], *([result["nop"]] if result.get("nop") else [])]:
        judge = run.get("judge") or {}
        name = Path(run["log_dir"]).name
        for w in judge.get("workflows", []):
            print(
                f"{name:9} {w['category'] + ':' + w['id']:30} {w.get('outcome') or '-':8} "
                f"{w.get('calls') or 0:>5} {w.get('prompt_tokens') or 0:>9} "
                f"{w.get('completion_tokens') or 0:>5} {w.get('app_ready_sec') or 0:>8.2f} "
                f"{w.get('seconds') or 0:>10.2f}"
            )
        if judge:
            share = judge["seconds"] / run["duration_sec"] if run["duration_sec"] else 0.0
            shares.append(share)
            print(
                f"{name:9} {'total':30} {'':8} {judge['calls']:>5} {judge['prompt_tokens']:>9} "
                f"{judge['completion_tokens']:>5} {'':>8} {judge['seconds']:>10.2f}"
                f"   ({share:.0%} of the run's {run['duration_sec']:.1f} s)"
            )
    if shares:
        print(f"browser workflows / whole run: {min(shares):.2f}-{max(shares):.2f} (ratio)")
    return 0 if result["status"] == "verified" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
