"""Real SWE-bench rows, packaged with no configuration: seconds per stage per row, cold and warm,
one worker and two, all measured in one run (these machines are noisy; compare the ratios).

The rows are published ones, unedited (benchmarks/data/, see its README), their repositories
fetched mirrors (`<dir>/<owner>/<name>.git`), their environments the SWE-bench harness's own
specs. Each pass packages every row into an output folder of its own (`OUT/<pass>`), with
`--force`, after removing the images this benchmark makes for them:

* warm: the rows' agent and grader images are removed; their environment images stay (built
  by an earlier pass or run), so each row builds only what is its own;
* cold: the environment images the rows were built on (as an earlier pass recorded them in
  the results) are removed as well, so every environment is built again (its downloads may
  come from the machine's caches).

Nothing else is removed: no base image, no image of another dataset, no build cache.

    python benchmarks/realrows.py --mirrors DIR [--rows FILE] [--ids ID,...] [--out DIR] \\
        [--ca-bundle FILE] [--passes warm-j1,warm-j2,cold-j1,cold-j2] [--quick] [--code DIR]

`--quick` runs the warm `-j 1` pass only. Prints, per pass, a table of each row's seconds
(its wall, snapshot, environment build, agent build, grader build, audit, each run, the other
build and run steps) with the medians, then the ratios cold/warm and j1/j2; writes them to
OUT/realrows.md and OUT/realrows.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_ROWS = ROOT / "benchmarks" / "data" / "swebench-verified-real.jsonl"
DATASET = "swebench-real"
"""The dataset's name in the output folders (the rows file is copied under this name)."""
DEFAULT_IDS = (
    "sympy__sympy-11618,sympy__sympy-12096,sympy__sympy-12419,sympy__sympy-12481,"
    "sympy__sympy-12489,pytest-dev__pytest-10051,pytest-dev__pytest-10081,"
    "pytest-dev__pytest-10356,pytest-dev__pytest-5787,pytest-dev__pytest-5840,"
    "pylint-dev__pylint-4551,pylint-dev__pylint-4604,pylint-dev__pylint-6386,"
    "pylint-dev__pylint-6528"
)
STAGES = (
    "wall",
    "snapshot",
    "environment_build",
    "agent_build",
    "grader_build",
    "audit",
    "oracle_1",
    "oracle_2",
    "nop",
    "build_other",
    "run_other",
    "bookkeeping",
)
"""Per-row columns. `wall`: the time between this row's result and the one before (the
command's start for the first row): builds of later rows overlap runs of earlier ones, so this
is the row's share of the pass, not the sum of its stages. `build_other`: the build stage
outside the snapshot and the three image builds (tags, base checks, contexts); `run_other`: the
run stage outside the runs' own seconds (run plans, containers, grading set-up);
`bookkeeping`: the two together."""


CODE = ROOT
"""The checkout whose packager runs (`--code`: another one, e.g. the code before a change)."""


def packager(*args: str) -> tuple[float, int]:
    """Run the CLI; its wall seconds and exit code (its output goes to ours)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "packager", *args], cwd=CODE, check=False)
    return time.monotonic() - started, proc.returncode


def rendered_tags(base: Path, ids: list[str]) -> list[str]:
    """The agent and grader image tags of the rendered tasks."""
    tags = []
    for i in ids:
        meta = tomllib.loads((base / "tasks" / i / "task.toml").read_text())
        found = _find_key(meta, ("agent_image", "grader_image"))
        tags += found
    return sorted(set(tags))


def _find_key(data: Any, keys: tuple[str, ...]) -> list[str]:
    if isinstance(data, dict):
        found = [str(v) for k, v in data.items() if k in keys and isinstance(v, str)]
        for value in data.values():
            found += _find_key(value, keys)
        return found
    return []


def remove_images(client: Any, tags: list[str]) -> int:
    """Remove these tags (only these); how many were there."""
    removed = 0
    for tag in tags:
        try:
            client.images.remove(tag)
            removed += 1
        except Exception as exc:  # noqa: BLE001 - absent is fine; in use is reported
            if "No such image" not in str(exc) and "not found" not in str(exc).lower():
                print(f"  could not remove {tag}: {exc}")
    return removed


def row_stages(result: dict[str, Any], wall: float | None) -> dict[str, float | None]:
    """A result's seconds per stage (None: not recorded)."""
    d = {k: float(v) for k, v in result.get("durations", {}).items()}
    runs = {f"oracle_{n + 1}": r.get("duration_sec") for n, r in enumerate(result["oracle"])}
    runs["nop"] = (result.get("nop") or {}).get("duration_sec")
    built = sum(d.get(k, 0.0) for k in ("snapshot", "environment_build", "agent_build"))
    built += d.get("grader_build", 0.0)
    ran = sum(float(v) for v in runs.values() if v is not None)
    row: dict[str, float | None] = {
        "wall": round(wall, 3) if wall is not None else None,
        "snapshot": d.get("snapshot"),
        "environment_build": d.get("environment_build", 0.0),
        "agent_build": d.get("agent_build"),
        "grader_build": d.get("grader_build"),
        "audit": d.get("audit"),
        **{k: (float(v) if v is not None else None) for k, v in runs.items()},
        "build_other": round(d["build"] - built, 3) if "build" in d else None,
        "run_other": round(d["verify"] - ran, 3) if "verify" in d else None,
    }
    other = [v for v in (row["build_other"], row["run_other"]) if v is not None]
    row["bookkeeping"] = round(sum(other), 3) if len(other) == 2 else None
    return row


def median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(statistics.median(got), 2) if got else None


def run_pass(
    name: str, args: argparse.Namespace, ids: list[str], client: Any, env_tags: set[str]
) -> dict[str, Any]:
    """One pass: remove this benchmark's images of the rows (and, cold, their environment
    images), package every row, read the results.
    """
    mode, workers = name.split("-j")
    out = args.out / name
    rows_file = args.out / "rows" / f"{DATASET}.jsonl"
    common = ["--dataset", str(rows_file), "--repo-source", str(args.mirrors), "--out", str(out)]
    render_wall, code = packager("render", *ids, *common)
    if code != 0:
        raise SystemExit(f"{name}: render failed (exit {code})")
    removed = remove_images(client, rendered_tags(out / DATASET, ids))
    if mode == "cold":
        removed += remove_images(client, sorted(env_tags))
    print(f"== {name}: removed {removed} image(s); render alone {render_wall:.1f} s", flush=True)
    command = ["package", *ids, *common, "-j", workers, "--force"]
    if args.ca_bundle:
        command += ["--ca-bundle", str(args.ca_bundle)]
    started = time.time()
    wall, code = packager(*command)
    files = {i: out / DATASET / "results" / f"{i}.json" for i in ids}
    results = {i: json.loads(f.read_text()) for i, f in files.items()}
    walls: dict[str, float] = {}
    previous = started
    for i in sorted(ids, key=lambda i: files[i].stat().st_mtime):
        walls[i] = files[i].stat().st_mtime - previous
        previous = files[i].stat().st_mtime
    for result in results.values():
        image = result.get("environment", {}).get("image")
        if image:
            env_tags.add(image)
    rows = {i: row_stages(r, walls[i]) for i, r in results.items()}
    return {
        "pass": name,
        "workers": int(workers),
        "exit": code,
        "wall": round(wall, 1),
        "render_wall": round(render_wall, 1),
        "status": {i: r["status"] for i, r in results.items()},
        "rows": rows,
        "medians": {s: median([r.get(s) for r in rows.values()]) for s in STAGES},
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(done: dict[str, Any]) -> str:
    lines = [
        f"### {done['pass']}: {done['wall']:.0f} s wall for {len(done['rows'])} rows "
        f"(exit {done['exit']}; {done['wall'] / len(done['rows']):.1f} s per row; a render "
        f"of the rows alone takes {done['render_wall']:.1f} s)",
        "",
        "| row | status | " + " | ".join(STAGES) + " |",
        "|---|---|" + "---|" * len(STAGES),
    ]
    for i, row in done["rows"].items():
        cells = " | ".join(_fmt(row.get(s)) for s in STAGES)
        lines.append(f"| {i} | {done['status'][i]} | {cells} |")
    cells = " | ".join(_fmt(done["medians"][s]) for s in STAGES)
    lines.append(f"| **median** | | {cells} |")
    return "\n".join(lines) + "\n"


def ratios(passes: dict[str, dict[str, Any]]) -> str:
    lines = []
    for j in ("1", "2"):
        cold, warm = passes.get(f"cold-j{j}"), passes.get(f"warm-j{j}")
        if cold and warm:
            lines.append(
                f"- cold/warm, -j {j}: pass wall {cold['wall'] / warm['wall']:.2f}x, "
                f"median row wall {_ratio(cold, warm, 'wall')}"
            )
    for mode in ("warm", "cold"):
        one, two = passes.get(f"{mode}-j1"), passes.get(f"{mode}-j2")
        if one and two:
            lines.append(
                f"- j1/j2, {mode}: pass wall {one['wall'] / two['wall']:.2f}x "
                f"(rows per minute {60 * len(one['rows']) / one['wall']:.1f} vs "
                f"{60 * len(two['rows']) / two['wall']:.1f}), median row wall "
                f"{_ratio(one, two, 'wall')}"
            )
    return "\n".join(lines) + ("\n" if lines else "")


def _ratio(a: dict[str, Any], b: dict[str, Any], stage: str) -> str:
    x, y = a["medians"][stage], b["medians"][stage]
    return f"{x / y:.2f}x" if x and y else "-"


def main(argv: list[str] | None = None) -> int:
    from packager.images.build import connect

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=DEFAULT_ROWS)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--ids", default=DEFAULT_IDS, help="comma-separated instance ids")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "realrows")
    parser.add_argument("--ca-bundle", type=Path)
    parser.add_argument("--passes", default="warm-j1,warm-j2,cold-j1,cold-j2")
    parser.add_argument("--quick", action="store_true", help="only the warm -j 1 pass")
    parser.add_argument("--code", type=Path, help="run the packager of this checkout instead")
    args = parser.parse_args(argv)
    global CODE
    CODE = (args.code or ROOT).resolve()
    # The packager runs in `--code`'s folder: every path it is given is absolute.
    args.out, args.mirrors = args.out.resolve(), args.mirrors.resolve()
    args.ca_bundle = args.ca_bundle.resolve() if args.ca_bundle else None
    ids = [i.strip() for i in args.ids.split(",") if i.strip()]
    rows = {}
    for line in args.rows.read_text().splitlines():
        if line.strip() and json.loads(line)["instance_id"] in ids:
            rows[json.loads(line)["instance_id"]] = line
    missing = sorted(set(ids) - set(rows))
    if missing:
        raise SystemExit(f"not in {args.rows}: {', '.join(missing)}")
    rows_file = args.out / "rows" / f"{DATASET}.jsonl"
    rows_file.parent.mkdir(parents=True, exist_ok=True)
    rows_file.write_text("".join(rows[i] + "\n" for i in ids))  # the published lines as they are
    names = ["warm-j1"] if args.quick else [p.strip() for p in args.passes.split(",")]
    client = connect()
    env_tags: set[str] = set()
    passes: dict[str, dict[str, Any]] = {}
    # A cold pass needs the environment tags a pass recorded: a warm pass runs first.
    if any(n.startswith("cold") for n in names) and not names[0].startswith("warm"):
        raise SystemExit("put a warm pass first: it records the environment images to remove")
    for name in names:
        passes[name] = run_pass(name, args, ids, client, env_tags)
        print(table(passes[name]), flush=True)
    text = "\n".join(table(p) for p in passes.values()) + "\n" + ratios(passes)
    (args.out / "realrows.md").write_text(text)
    (args.out / "realrows.json").write_text(json.dumps(passes, indent=2) + "\n")
    print(ratios(passes))
    return 0 if all(p["exit"] == 0 for p in passes.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
