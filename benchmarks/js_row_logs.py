"""Real test logs of SWE-bench Multilingual JavaScript rows, for the parity tests.

    python benchmarks/js_row_logs.py ROWS.parquet WORKDIR INSTANCE_ID... --mirrors DIR

For each row: a clone of its repository's fetched mirror (`DIR/<owner>+<name>/repo`, the layout
the search tool's `fetch` leaves)
at the base commit, the test patch applied; the spec's `install` (then `build`, whose failure is
only reported: immutable-js's build ends with a download from outside the npm mirror) run with
the host's node and npm, whose configured mirror serves the packages (`PUPPETEER_SKIP_DOWNLOAD`
set: puppeteer's postinstall fetches Chrome from elsewhere); then the spec's `test_cmd` once with
the gold patch and once without it. Writes `tests/unit/data/harness/js_row_<id>.{gold,nop}.txt`
(paths rewritten to `/testbed`) and the row's ids and command into `js_rows.json`. Karma rows
(preact) need a browser: their test command is run in a container holding Debian's Chromium
(`--chromium-image`), with the host's node mounted. Prints one line per log: the test count the
runtime parser reads and the reward `all_pass` gives. Slow (an install per row): not in `make
test`; tests/unit/datasets/test_harness_parity_js.py reads what it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "unit" / "data" / "harness"


def _sh(command: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1")
    return subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, check=check,
        executable="/bin/bash",
    )  # fmt: skip


def _prepare(row: dict[str, Any], spec: dict[str, Any], work: Path, mirrors: Path) -> None:
    mirror = mirrors / row["repo"].replace("/", "+") / "repo"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror), str(work)], check=True)
    _sh(f"git checkout -q {row['base_commit']}", work)
    (work / ".test.patch").write_text(row["test_patch"])
    (work / ".gold.patch").write_text(row["patch"])
    _sh("git apply .test.patch && git apply .gold.patch", work)
    for command in spec.get("install", []):
        _sh(command, work)
    for command in spec.get("build", []):
        if _sh(command, work, check=False).returncode:
            print(f"  build step failed (ignored): {command}", file=sys.stderr)


def _test(spec: dict[str, Any], work: Path, chromium_image: str | None) -> str:
    cmds = spec["test_cmd"] if isinstance(spec["test_cmd"], list) else [spec["test_cmd"]]
    command = " && ".join(cmds)
    if chromium_image is not None:  # karma: the host's node, Debian's Chromium
        command = command.replace("npx karma", "node node_modules/karma/bin/karma")
        node = shutil.which("node") or "/usr/bin/node"
        command = (
            f"docker run --rm -v {node}:/usr/local/bin/node:ro -v {work}:{work} -w {work} "
            f"-e CHROME_BIN=/usr/bin/chromium {chromium_image} sh -c '{command}'"
        )
    done = _sh(command, work, check=False)
    return (done.stdout + done.stderr).replace(str(work), "/testbed")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", type=Path)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("ids", nargs="+")
    parser.add_argument("--chromium-image", default=None)
    parser.add_argument(
        "--mirrors", type=Path, required=True, help="folder of mirrors: <owner>+<name>/repo"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import pyarrow.parquet as pq

    from packager.datasets import harness_parsers, harness_specs
    from packager.grading import parsers, rules

    rows = {r["instance_id"]: r for r in pq.read_table(args.rows).to_pylist()}
    index_path = DATA / "js_rows.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for iid in args.ids:
        row = rows[iid]
        spec = harness_specs.tables()["specs"][row["repo"]][row["version"]]
        name = harness_specs.tables()["parsers"][row["repo"]]
        work = args.workdir / iid
        if not work.exists():
            _prepare(row, spec, work, args.mirrors)
        f2p, p2p = list(row["FAIL_TO_PASS"]), list(row["PASS_TO_PASS"])
        for mode in ("gold", "nop"):
            if mode == "nop":
                _sh("git apply -R .gold.patch", work)
            text = _test(spec, work, args.chromium_image if name == "parse_log_karma" else None)
            if mode == "nop":
                _sh("git apply .gold.patch", work)
            (DATA / f"js_row_{iid}.{mode}.txt").write_text(text)
            tests = parsers.parse(harness_parsers.runtime_parser(name), text)
            print(
                f"{iid} {mode}: {len(tests)} tests, all_pass {rules.all_pass(tests, f2p, p2p)[0]}"
            )
        index[iid] = {
            "repo": row["repo"],
            "version": row["version"],
            "log_parser": name,
            "test_cmd": spec["test_cmd"],
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": p2p,
        }
    index_path.write_text(
        json.dumps(dict(sorted(index.items())), indent=1, ensure_ascii=False) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
