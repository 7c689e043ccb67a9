"""The label audit (packager/checks/labels.py) over the saved runs of real rows.

Reads `OUT/<dataset>/results/*.json` of a packaged dataset (e.g. `benchmarks/swebench_rows.py
--out OUT`) and the rows they came from, audits every task whose runs left parsed tests, and
prints one line per finding and the totals: how many tasks were checked, findings per kind, and
tests the runs show flipping that the dataset does not list.

    python benchmarks/labels.py --rows verified.jsonl --out OUT [--out OUT2 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.checks.labels import audit_labels, read_tests  # noqa: E402


def _ids(value: object) -> list[str]:
    return list(json.loads(value)) if isinstance(value, str) else list(value or [])  # type: ignore[call-overload]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, action="append", required=True)
    parser.add_argument("--out", type=Path, action="append", required=True)
    args = parser.parse_args(argv)
    rows = {}
    for path in args.rows:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["instance_id"]] = row
    kinds: Counter[str] = Counter()
    checked = unlisted = 0
    for out in args.out:
        for path in sorted(out.glob("*/results/*.json")):
            if path.name.count(".") > 1:
                continue  # .audit.json, .quality.json, .error.json
            result = json.loads(path.read_text())
            row = rows.get(result["instance_id"])
            if row is None or result.get("nop") is None or not result.get("oracle"):
                continue
            gold = [read_tests(run["log_dir"]) for run in result["oracle"]]
            nop = read_tests(result["nop"]["log_dir"])
            if nop is None or any(tests is None for tests in gold):
                continue
            labels = audit_labels(
                _ids(row["FAIL_TO_PASS"]), _ids(row["PASS_TO_PASS"]),
                [t for t in gold if t is not None], nop,
            )  # fmt: skip
            checked += 1
            unlisted += labels["derived"]["unlisted_fail_to_pass"]
            for f in labels["findings"]:
                kinds[f["kind"]] += 1
                print(f"{result['instance_id']} {f['kind']} {f['group']} {f['id']}: {f['detail']}")
    said = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no finding"
    print(f"{checked} task(s) checked: {said}; {unlisted} unlisted test(s) flipping with gold")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
