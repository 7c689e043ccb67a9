"""The SymPy tripwire on a real row's grader image: gold still 1.0, a tampered runner 0.

    python benchmarks/tripwire_sympy.py IMAGE [--row ID] [--rows FILE] [--runtime PYZ]

IMAGE is the grader image of a packaged SymPy row (benchmarks/realrows.py builds them; the
default row is sympy__sympy-12489). Two patches are graded with the grading runtime (this
checkout's, or --runtime, e.g. an older grading.pyz, to compare): the row's gold patch, and a
cheat-only patch that appends to the first file the gold patch changes a monkeypatch making
sympy's ``PyTestReporter`` report every failure and error as a pass. Prints one line per
patch: reward, status, reason. Each grading runs in a fresh container with no network.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TAMPER = (
    "\nfrom sympy.utilities import runtests as _r\n"
    "_r.PyTestReporter.test_fail = lambda self, exc_info: self.test_pass()\n"
    "_r.PyTestReporter.test_exception = lambda self, exc_info: self.test_pass()\n"
)
GRADE = (
    "python3 -I -S /m/runtime.pyz /tests/plan.json --out /tmp/out --patch /m/{patch} "
    ">/dev/null 2>&1; cat /tmp/out/report.json"
)


def _docker(image: str, mount: Path, script: str) -> str:
    proc = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{mount}:/m", image, "sh", "-c"]
        + [script],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def prepare(rows_file: Path, row_id: str, runtime_file: Path | None) -> tuple[dict, Path]:
    """The row, and a fresh folder (mounted at /m) holding the runtime and the gold patch."""
    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    row = next(r for r in rows if r["instance_id"] == row_id)
    work = Path(tempfile.mkdtemp(prefix="tripwire-"))
    work.chmod(0o777)
    if runtime_file:
        runtime = runtime_file.read_bytes()
    else:
        from packager.render.harbor import read_grading_archive

        runtime = read_grading_archive()
    (work / "runtime.pyz").write_bytes(runtime)
    (work / "gold.patch").write_text(row["patch"])
    return row, work


def main() -> int:
    """Grade gold and the tampered patch; print one line each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image")
    ap.add_argument("--row", default="sympy__sympy-12489")
    ap.add_argument(
        "--rows", type=Path, default=ROOT / "benchmarks/data/swebench-verified-real.jsonl"
    )
    ap.add_argument("--runtime", type=Path, help="a grading.pyz (default: this checkout's)")
    args = ap.parse_args()
    row, work = prepare(args.rows, args.row, args.runtime)
    target = row["patch"].split("\n", 1)[0].split(" b/", 1)[1]
    (work / "tamper.txt").write_text(TAMPER)
    repo = (
        'cd "$(python3 -c \'import json;print(json.load(open("/tests/plan.json"))["repo_dir"])\')"'
    )
    _docker(
        args.image, work, f"{repo} && cat /m/tamper.txt >> {target} && git diff > /m/tamper.patch"
    )
    for patch in ("gold.patch", "tamper.patch"):
        report = json.loads(_docker(args.image, work, GRADE.format(patch=patch)))
        print(f"{patch:14} reward={report['reward']} status={report['status']} {report['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
