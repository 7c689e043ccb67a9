"""Render 1,000 rows (the sample rows repeated with distinct ids): wall time and peak memory.

Targets: under 5 s wall and under 200 MB peak RSS for the render; `packager --help` under 0.5 s.
Run: `python benchmarks/render.py` (prints both figures; exits 1 when a target is missed).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "packager" / "samples"
ROWS = 1000


def make_dataset(folder: Path) -> Path:
    base = [json.loads(line) for line in (SAMPLES / "rows.jsonl").read_text().splitlines() if line]
    # The SWEeper row needs its repo source to resolve gold; keep it, with the bundles beside.
    (folder / "repos").symlink_to(SAMPLES / "repos")
    (folder / "recipes.yaml").symlink_to(SAMPLES / "recipes.yaml")
    data = folder / "rows.jsonl"
    with data.open("w") as fh:
        for i in range(ROWS):
            row = dict(base[i % len(base)])
            key = "case_id" if "case_id" in row else "instance_id"
            row[key] = f"{row[key]}-copy{i:04d}"
            fh.write(json.dumps(row) + "\n")
    return data


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        data = make_dataset(Path(tmp))
        out = Path(tmp) / "out"
        cmd = [
            sys.executable,
            "-m",
            "packager",
            "render",
            "--all",
            "--dataset",
            str(data),
            "--out",
            str(out),
        ]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if proc.returncode != 0:
            print(proc.stderr)
            return 1
        written = len(os.listdir(out / "rows" / "tasks"))
    help_times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "packager", "--help"], capture_output=True, check=True
        )
        help_times.append(time.perf_counter() - started)
    help_median = sorted(help_times)[len(help_times) // 2]
    print(
        f"render {written} rows: {wall:.2f} s wall (target < 5 s), "
        f"peak {peak_mb:.0f} MB (target < 200 MB)"
    )
    print(f"packager --help: median {help_median:.3f} s of 5 (target < 0.5 s)")
    ok = wall < 5 and peak_mb < 200 and help_median < 0.5 and written == ROWS
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
