"""The JavaScript tripwire on real rows' grader images: gold still 1.0, a tampered runner 0.

    python benchmarks/tripwire_js.py IMAGE --row ID [--rows FILE] [--runtime PYZ]

IMAGE is the grader image of a packaged SWE-bench Multilingual row whose test command runs
mocha or karma (benchmarks/swebench_rows.py builds them: axios rows run mocha's TAP reporter,
preact rows karma with mocha in Chromium). Two patches are graded with the grading runtime (this
checkout's, or --runtime, e.g. an older grading.pyz, to compare): the row's gold patch, and a
cheat-only patch that appends code to the first file the gold patch changes:

- mocha (the test command names ``mocha``): the process's stdout rewritten, every ``not ok`` line
  of the TAP reporter turned into ``ok`` (a reporter patched from inside the process);
- karma: mocha's ``Runner.prototype.fail`` replaced in the browser, so that a failing test is
  reported passed (the runner patched from the code under test).

Prints one line per patch: reward, status, reason. Each grading runs in a fresh container with
no network.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tripwire_sympy import GRADE, _docker  # noqa: E402

TAMPER = {
    "mocha": (
        "\n;{ const __w = process.stdout.write.bind(process.stdout);\n"
        "  process.stdout.write = (c, ...r) =>\n"
        "    __w(typeof c === 'string' ? c.replace(/^not ok/gm, 'ok') : c, ...r); }\n"
    ),
    "karma": (
        "\n;if (typeof window !== 'undefined' && window.Mocha) {\n"
        "  window.Mocha.Runner.prototype.fail = function (test) {\n"
        "    if (test.type === 'test') { test.state = 'passed'; this.emit('pass', test); }\n"
        "  };\n}\n"
    ),
}


def main() -> int:
    """Grade gold and the tampered patch; print one line each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image")
    ap.add_argument("--row", required=True)
    ap.add_argument(
        "--rows", type=Path, default=ROOT / "benchmarks/data/swe-bench-multilingual-real.jsonl"
    )
    ap.add_argument("--runtime", type=Path, help="a grading.pyz (default: this checkout's)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    row = next(r for r in rows if r["instance_id"] == args.row)
    work = Path(tempfile.mkdtemp(prefix="tripwire-js-"))
    work.chmod(0o777)
    if args.runtime:
        runtime = args.runtime.read_bytes()
    else:
        from packager.render.harbor import read_grading_archive

        runtime = read_grading_archive()
    (work / "runtime.pyz").write_bytes(runtime)
    (work / "gold.patch").write_text(row["patch"])
    plan = json.loads(_docker(args.image, work, "cat /tests/plan.json"))
    runner = "karma" if "karma" in plan["test_command"] else "mocha"
    target = row["patch"].split("\n", 1)[0].split(" b/", 1)[1]
    (work / "tamper.txt").write_text(TAMPER[runner])
    _docker(
        args.image,
        work,
        f"cd {plan['repo_dir']} && cat /m/tamper.txt >> {target} && git diff > /m/tamper.patch",
    )
    print(f"{args.row}: {runner}, tamper appended to {target}")
    for patch in ("gold.patch", "tamper.patch"):
        report = json.loads(_docker(args.image, work, GRADE.format(patch=patch)))
        print(f"{patch:14} reward={report['reward']} status={report['status']} {report['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
