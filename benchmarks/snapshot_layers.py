"""Seconds to write a row's snapshot as one tar against as a history layer and a row layer
(`repos.layers`), interleaved row by row, and the bytes each writes for the row.

Both write from the same mirror into caches of their own that share nothing but the
repository's shared packs (warmed by a first pass, as on a machine that packaged the
repository before). The layered write's history layer is written once per tag: the first row
after a tag pays for it, which is counted.

    python benchmarks/snapshot_layers.py --rows rows.jsonl --mirrors DIR [--ids ID,...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.repos.stored import write_snapshot  # noqa: E402
from packager.storage import human_bytes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--ids", help="comma-separated (default: every row)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    if args.ids:
        wanted = set(args.ids.split(","))
        rows = [r for r in rows if r["instance_id"] in wanted]
    plain_s: list[float] = []
    layered_s: list[float] = []
    plain_b: list[int] = []
    row_b: list[int] = []
    with tempfile.TemporaryDirectory(prefix="bench-layers-") as tmp:
        work = Path(tmp)
        packs = work / "packs"
        packs.mkdir()
        for row in rows:
            owner, name = row["repo"].split("/")
            git_dir = args.mirrors / owner / f"{name}.git"
            warm = work / "cache-warm"
            if not (warm / "packs").exists():
                warm.mkdir()
                (warm / "packs").symlink_to(packs, target_is_directory=True)
            write_snapshot(  # untimed: the row's shared pack, as a machine that had it before
                work / "warm.tar", git_dir=git_dir, base_commit=row["base_commit"], cache_dir=warm
            )
            for kind in ("plain", "layered"):
                cache = work / f"cache-{kind}"
                cache.mkdir(exist_ok=True)
                if not (cache / "packs").exists():
                    (cache / "packs").symlink_to(packs, target_is_directory=True)
                out = work / "out" / kind / row["instance_id"]
                started = time.perf_counter()
                write_snapshot(
                    out / "repo.tar",
                    git_dir=git_dir,
                    base_commit=row["base_commit"],
                    cache_dir=cache,
                    history_path=(out / "history.tar") if kind == "layered" else None,
                )
                seconds = time.perf_counter() - started
                size = (out / "repo.tar").stat().st_size
                if kind == "plain":
                    plain_s.append(seconds)
                    plain_b.append(size)
                else:
                    layered_s.append(seconds)
                    row_b.append(size)
                shutil.rmtree(out)
            print(
                f"{row['instance_id']}: plain {plain_s[-1]:.2f} s {human_bytes(plain_b[-1])}, "
                f"layered {layered_s[-1]:.2f} s, row layer {human_bytes(row_b[-1])}"
            )
    ratio = statistics.median(layered_s) / statistics.median(plain_s)
    print(
        f"\n{len(rows)} rows: median seconds plain {statistics.median(plain_s):.2f}, "
        f"layered {statistics.median(layered_s):.2f} (ratio layered/plain {ratio:.2f}); "
        f"median bytes: snapshot {human_bytes(int(statistics.median(plain_b)))}, "
        f"row layer {human_bytes(int(statistics.median(row_b)))}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
