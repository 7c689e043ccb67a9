"""What a packaged dataset costs on disk, and proof that no agent image holds a later commit.

Reads an output folder (`--out`, `--dataset`): every task's images from its result, then
prints, per repository and in all, the images' bytes with every layer counted once, the
bytes only one task's images hold (median and largest), the output folder's bytes (each file
once) and the machine snapshot cache's (`--cache`, default this machine's). With `--mirrors`
and `--sample N`, it also opens the agent image of N tasks per repository, lists every object
in its repository (`git cat-file --batch-all-objects`) and checks, against the mirror, that
each commit is the base commit or one of its ancestors.

    python benchmarks/economics.py --out build-rows --dataset rows \\
        [--mirrors DIR --rows rows.jsonl --sample 3]

Run it on the output of the code before a change and after it (the same rows) to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.images.build import connect  # noqa: E402
from packager.release.clean import folder_bytes, layer_use  # noqa: E402
from packager.storage import SNAPSHOTS, human_bytes  # noqa: E402


def results(folder: Path) -> dict[str, dict]:
    """task -> its result (the plain result files, not the checks' ones)."""
    found = {}
    for path in sorted((folder / "results").glob("*.json")):
        if path.name.count(".") == 1:
            data = json.loads(path.read_text())
            found[data["instance_id"]] = data
    return found


def commits_beyond_base(client, image: str, base: str, mirror: Path) -> tuple[int, list[str]]:
    """How many commits the image's repository holds, and those not `base` or its ancestors."""
    listing = client.containers.run(
        image,
        ["git", "cat-file", "--batch-all-objects", "--batch-check"],
        remove=True,
        network_mode="none",
        user="root",
    ).decode()
    commits = [line.split()[0] for line in listing.splitlines() if line.split()[1] == "commit"]
    history = subprocess.run(
        ["git", "rev-list", base], cwd=mirror, capture_output=True, text=True, check=True
    ).stdout.split()
    beyond = sorted(set(commits) - set(history))
    return len(commits), beyond


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--cache", type=Path, help="the machine cache (default: this machine's)")
    parser.add_argument("--mirrors", type=Path, help="<dir>/<owner>/<name>.git")
    parser.add_argument("--sample", type=int, default=0, help="agent images checked per repo")
    parser.add_argument("--rows", type=Path, help="the rows (.jsonl): their base commits")
    args = parser.parse_args()
    folder = args.out / args.dataset
    found = results(folder)
    built = {
        task: list(r["images"].values())
        for task, r in found.items()
        if r.get("images") and r["status"] in ("built", "verified", "flaky")
    }
    client = connect()
    total, per_task = layer_use(client, built)
    by_repo: dict[str, list[int]] = defaultdict(list)
    for task, size in per_task.items():
        by_repo[task.rsplit("-", 1)[0]].append(size)
    print("| repository | tasks | unique bytes per task, median | largest |\n|---|---|---|---|")
    for repo, sizes in sorted(by_repo.items()):
        print(
            f"| {repo} | {len(sizes)} | {human_bytes(int(statistics.median(sizes)))} "
            f"| {human_bytes(max(sizes))} |"
        )
    everything = sorted(per_task.values())
    cache = (args.cache / SNAPSHOTS.name) if args.cache else SNAPSHOTS.path()
    print(
        f"\n{len(built)} tasks with images ({len(found)} results). Images, every layer once: "
        f"{human_bytes(total)}; unique per task: median "
        f"{human_bytes(int(statistics.median(everything))) if everything else '-'}; "
        f"output folder: {human_bytes(folder_bytes(folder))}; "
        f"snapshot cache: {human_bytes(folder_bytes(cache))}"
    )
    if args.mirrors and args.sample and args.rows:
        bases = {
            row["instance_id"]: row["base_commit"]
            for row in map(json.loads, args.rows.read_text().splitlines())
        }
        print("\n| task | commits in the agent image | beyond its base |\n|---|---|---|")
        taken: dict[str, int] = defaultdict(int)
        bad = 0
        for task, result in sorted(found.items()):
            repo = task.rsplit("-", 1)[0]
            if task not in built or taken[repo] >= args.sample:
                continue
            taken[repo] += 1
            owner, name = repo.split("__", 1)
            mirror = args.mirrors / owner / f"{name}.git"
            base = bases[task]
            count, beyond = commits_beyond_base(client, result["images"]["agent"], base, mirror)
            bad += len(beyond)
            print(f"| {task} | {count} | {len(beyond)} |")
        if bad:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
