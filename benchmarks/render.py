"""Render 10,000 rows (the sample rows repeated with distinct ids): rows/s and flat memory;
then 2,000 rows of each card shape on its own (one sample row per card, repeated).

Issue 10: `packager render --all` must render 10,000 generated rows at >= 500 rows/s with flat
memory. The same run also renders a tenth of the rows, so memory is shown flat by comparing the
two renders' peak RSS (each measured on its own child process): the large render may peak at
most 1.3 x the small one's peak + 20 MB. `packager --help` must stay under 0.5 s.
Issue 20: each of the five card shapes (EC-SWE, SWE-rebench, PDL with its inline `files`,
SWE-bench, SWEeper) must render 2,000 rows at >= 500 rows/s, peak memory < 300 MB.
`--compare DIR` renders every card with another checkout's code too, interleaved, and prints
the ratio of the two (absolute seconds drift on these machines; ratios in one run do not).
Run: `python benchmarks/render.py [--rows N] [--card-rows N] [--compare DIR]` (prints every
figure; exits 1 when a target is missed).

File creation is most of a render, so the run also times bare file creation in its own
folder. On ext4 without a journal (as in the CI VM) creating files is slow for up to six
minutes after many files were deleted nearby (freshly freed inodes are skipped one by one, see
`recently_deleted` in fs/ext4/ialloc.c): this benchmark's own cleanup included, so leave a few
minutes between runs, and read rows/s next to that figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "packager" / "samples"
ROWS = 10_000
MIN_ROWS_PER_SEC = 500.0
FLAT_FACTOR = 1.3
FLAT_SLACK_MB = 20.0
HELP_MAX_SEC = 0.5
CARD_ROWS = 2_000
CARD_MAX_MB = 300.0


def sample_rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in (SAMPLES / "rows.jsonl").read_text().splitlines() if line]


def make_dataset(folder: Path, rows: int = ROWS, only: int | None = None) -> Path:
    """`folder/rows.jsonl`: the sample rows (or only the `only`th) repeated `rows` times in
    all, with distinct ids.
    """
    base = sample_rows()
    if only is not None:
        base = [base[only]]
    # The SWEeper row needs its repo source to resolve gold; keep it, with the bundles beside.
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "repos").symlink_to(SAMPLES / "repos")
    (folder / "recipes.yaml").symlink_to(SAMPLES / "recipes.yaml")
    data = folder / "rows.jsonl"
    with data.open("w") as fh:
        for i in range(rows):
            row = dict(base[i % len(base)])
            key = "case_id" if "case_id" in row else "instance_id"
            row[key] = f"{row[key]}-copy{i:05d}"
            fh.write(json.dumps(row) + "\n")
    return data


@dataclass(frozen=True)
class Render:
    """One `packager render --all` child: how many task folders it wrote, how fast, how big."""

    rows: int
    written: int
    wall_sec: float
    peak_mb: float
    cpu_sec: float = 0.0
    """User + system time of the render and its workers (steadier than wall on a busy machine)."""

    @property
    def rows_per_sec(self) -> float:
        return self.written / self.wall_sec if self.wall_sec > 0 else 0.0


def time_file_creation(folder: Path, tasks: int = 100, files: int = 24) -> float:
    """Microseconds per file made (mkdir per task, then small files), as a render makes them."""
    started = time.perf_counter()
    for t in range(tasks):
        task = folder / f"t{t}"
        task.mkdir(parents=True)
        for f in range(files):
            fd = os.open(task / f"f{f}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"x" * 1000)
            os.close(fd)
    return (time.perf_counter() - started) / (tasks * files) * 1e6


def run_render(folder: Path, rows: int, only: int | None = None, code: Path = ROOT) -> Render:
    """Render `rows` generated rows in a child process (with the packager code at `code`);
    its own peak RSS comes from wait4.
    """
    data = make_dataset(folder, rows, only)
    out = folder / "out"
    cmd = [sys.executable, "-m", "packager", "render", "--all", "--dataset", str(data)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    with (folder / "render.log").open("wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [*cmd, "--out", str(out)], stdout=log, stderr=log, cwd=code, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = (folder / "render.log").read_text(errors="replace")[-4000:]
        raise SystemExit(f"render of {rows} rows exited {proc.returncode}:\n{tail}")
    written = len(os.listdir(out / "rows" / "tasks"))
    return Render(
        rows=rows,
        written=written,
        wall_sec=wall,
        peak_mb=usage.ru_maxrss / 1024,
        cpu_sec=usage.ru_utime + usage.ru_stime,
    )


def time_help(runs: int = 5) -> float:
    """Median wall time of `packager --help`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "packager", "--help"], capture_output=True, check=True
        )
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def card_of(row: dict[str, object]) -> str:
    sys.path.insert(0, str(ROOT))
    from packager.adapters import detect_schema

    return detect_schema(row)


def run_cards(tmp: Path, rows: int, compare: Path | None) -> bool:
    """Render `rows` rows of each card shape (with `compare`'s code too, interleaved); print
    rows/s, peak memory and ratios. True when every card meets the targets.
    """
    ok = True
    for index, row in enumerate(sample_rows()):
        card = card_of(row)
        ours = run_render(tmp / f"card-{index}", rows, only=index)
        line = (
            f"card {card:<12} {ours.written} rows: {ours.wall_sec:5.2f} s, "
            f"{ours.rows_per_sec:4.0f} rows/s, peak {ours.peak_mb:3.0f} MB, "
            f"cpu {ours.cpu_sec / rows * 1e3:4.2f} ms/row"
        )
        if compare is not None:
            theirs = run_render(tmp / f"card-{index}-compare", rows, only=index, code=compare)
            line += (
                f"; {compare.name}: {theirs.rows_per_sec:4.0f} rows/s, peak "
                f"{theirs.peak_mb:3.0f} MB, cpu {theirs.cpu_sec / rows * 1e3:4.2f} ms/row; "
                f"ratio {ours.rows_per_sec / theirs.rows_per_sec:.2f} "
                f"(cpu {theirs.cpu_sec / ours.cpu_sec:.2f})"
            )
        met = (
            ours.rows_per_sec >= MIN_ROWS_PER_SEC
            and ours.peak_mb < CARD_MAX_MB
            and ours.written == rows
        )
        ok = ok and met
        print(line + ("" if met else "  <- misses the target"))
    print(
        f"target per card: >= {MIN_ROWS_PER_SEC:.0f} rows/s at {rows} rows, "
        f"peak < {CARD_MAX_MB:.0f} MB"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS, help="rows of the large render")
    parser.add_argument(
        "--card-rows", type=int, default=CARD_ROWS, help="rows of each card's render (0: none)"
    )
    parser.add_argument(
        "--compare", type=Path, help="another checkout to render each card with too (ratios)"
    )
    args = parser.parse_args(argv)
    small_rows = max(1, args.rows // 10)
    cards_ok = True
    # One folder, removed at the end: files deleted nearby slow the next creations (above).
    with tempfile.TemporaryDirectory() as tmp:
        create_us = time_file_creation(Path(tmp) / "baseline")
        small = run_render(Path(tmp) / "small", small_rows)
        large = run_render(Path(tmp) / "large", args.rows)
        if args.card_rows:
            cards_ok = run_cards(Path(tmp), args.card_rows, args.compare)
    help_median = time_help()
    ratio = large.peak_mb / small.peak_mb
    flat_limit = FLAT_FACTOR * small.peak_mb + FLAT_SLACK_MB
    print(f"file creation here: {create_us:.0f} us per file (mkdir per task, 1 KB files)")
    for r in (small, large):
        print(
            f"render {r.written} rows: {r.wall_sec:.2f} s wall, {r.rows_per_sec:.0f} rows/s, "
            f"peak {r.peak_mb:.0f} MB"
        )
    print(
        f"rows/s at {large.written} rows: {large.rows_per_sec:.0f} "
        f"(target >= {MIN_ROWS_PER_SEC:.0f})"
    )
    print(
        f"peak RSS {large.written} / {small.written} rows: {ratio:.2f} "
        f"({large.peak_mb:.0f} MB vs {small.peak_mb:.0f} MB; "
        f"target <= {FLAT_FACTOR} x + {FLAT_SLACK_MB:.0f} MB = {flat_limit:.0f} MB)"
    )
    print(f"packager --help: median {help_median:.3f} s of 5 (target < {HELP_MAX_SEC} s)")
    ok = (
        cards_ok
        and large.rows_per_sec >= MIN_ROWS_PER_SEC
        and large.peak_mb <= flat_limit
        and help_median < HELP_MAX_SEC
        and small.written == small.rows
        and large.written == large.rows
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
