"""Snapshot seconds per real row: this checkout's `write_snapshot_repo` + `write_snapshot_tar`
against another checkout's (`--compare DIR`, e.g. the code before a change), interleaved row by
row, with a check that both cut the same repository (same objects, refs, HEAD, index, status).
The snapshot tar cache is not involved: every row is cut from its mirror (with
`--shared-packs DIR`, this checkout's rows share the history up to a tag through DIR).

    python benchmarks/snapshots.py --mirrors DIR [--rows FILE] [--ids ID,...] [--compare DIR] \\
        [--shared-packs DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.realrows import DEFAULT_IDS, DEFAULT_ROWS  # noqa: E402


def load_snapshot_module(root: Path) -> ModuleType:
    """`packager.repos.snapshot` of the checkout at `root` (a fresh import)."""
    for name in [m for m in sys.modules if m == "packager" or m.startswith("packager.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("packager.repos.snapshot")
    finally:
        sys.path.remove(str(root))


def fingerprint(repo: Path) -> str:
    """What a snapshot holds: its objects, refs, HEAD, index and status."""

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout

    objects = sorted(git("cat-file", "--batch-all-objects", "--batch-check").splitlines())
    facts = [
        b"\n".join(objects),
        git("for-each-ref", "--format=%(refname) %(objectname)"),
        git("rev-parse", "HEAD"),
        git("ls-files", "-s"),
        git("status", "--porcelain"),
    ]
    return hashlib.sha256(b"\0".join(facts)).hexdigest()[:16]


def cut(
    module: ModuleType, git_dir: Path, base_commit: str, task: str, shared: Path | None
) -> tuple[float, str]:
    """Seconds to write the snapshot and its tar, and the snapshot's fingerprint."""
    extra = {"shared_packs": shared} if shared is not None else {}
    with tempfile.TemporaryDirectory(prefix="bench-snap-") as tmp:
        started = time.monotonic()
        module.write_snapshot_repo(
            Path(tmp) / "repo", git_dir=git_dir, base_commit=base_commit, task=task, **extra
        )
        module.write_snapshot_tar(Path(tmp) / "repo", Path(tmp) / "repo.tar")
        return time.monotonic() - started, fingerprint(Path(tmp) / "repo")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=DEFAULT_ROWS)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--ids", default=DEFAULT_IDS)
    parser.add_argument("--compare", type=Path, help="another checkout, cut in turn")
    parser.add_argument(
        "--shared-packs",
        type=Path,
        help="this checkout shares each repository's history up to a tag through this folder "
        "(as the machine cache does); without it, every row writes its whole history",
    )
    args = parser.parse_args(argv)
    ids = [i.strip() for i in args.ids.split(",") if i.strip()]
    rows = {r["instance_id"]: r for r in map(json.loads, args.rows.read_text().splitlines())}
    codes = {"this": load_snapshot_module(ROOT)}
    if args.compare:
        codes["other"] = load_snapshot_module(args.compare.resolve())
    seconds: dict[str, list[float]] = {name: [] for name in codes}
    differ = 0
    for n, i in enumerate(ids):
        row = rows[i]
        owner, name = row["repo"].split("/")
        git_dir = args.mirrors.resolve() / owner / f"{name}.git"
        order = list(codes) if n % 2 == 0 else list(reversed(codes))
        prints = {}
        for which in order:
            shared = args.shared_packs if which == "this" else None
            took, prints[which] = cut(codes[which], git_dir, row["base_commit"], i, shared)
            seconds[which].append(took)
        same = len(set(prints.values())) == 1
        differ += not same
        figures = ", ".join(f"{w} {seconds[w][-1]:.1f} s" for w in codes)
        print(f"{i}: {figures}{'' if same else ', DIFFERENT SNAPSHOTS'}", flush=True)
    medians = {w: statistics.median(s) for w, s in seconds.items()}
    line = ", ".join(f"{w} {m:.1f} s" for w, m in medians.items())
    if "other" in medians:
        line += f"; other/this {medians['other'] / medians['this']:.2f}x"
    print(f"median: {line}; rows whose snapshots differ: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
