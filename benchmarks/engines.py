"""Local engine vs Harbor: wall time of one oracle run of each gradeable sample task.

One local-engine run (`packager.engines.patch.grade_patch` of the oracle: agent container, collect,
fresh grader container) and one `harbor run -p TASK -a oracle` trial (prebuilt images, compose,
separate verifier), measured alternately (local, harbor, local, harbor, ...) for ROUNDS rounds
in one run, because machines are noisy. Prints the medians and their ratio (target: Harbor at
least 30 times slower). `--compare DIR` times another checkout's local engine too, interleaved
(each checkout in its own worker process, see benchmarks/verify.py), against the same Harbor
trials. Needs Docker and the pinned Harbor (`make harbor`); builds the images first
(`packager build`, cached by content).

Run: `python benchmarks/engines.py [--rounds N] [--compare DIR]`
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from verify import Worker  # noqa: E402

TASKS = ["samples__textkit-1", "samples__intset-2", "samples__kvstore-3", "samples__inventory-4"]
ROUNDS = 3


def _build(code: Path) -> Path:
    out = code / "build" / "bench-engines"
    subprocess.run(
        [sys.executable, "-m", "packager", "build", *TASKS, "--out", str(out)],
        check=True,
        capture_output=True,
        cwd=code,
    )
    return out


def serve(code: Path, commands: TextIO, answers: TextIO) -> int:
    """The worker: one local oracle run per line `TASK ROUND`, answering `SECONDS REWARD`."""
    sys.path.insert(0, str(code))
    from packager.datasets.sources import open_dataset

    try:
        from packager.engines.patch import grade_patch
    except ImportError:  # a checkout from before packager/engines/patch.py (--compare)
        from packager.run.patch import grade_patch  # type: ignore[no-redef]
    from packager.images.build import connect
    from packager.render.harbor import make_harbor_task
    from packager.run.select import Selection, iter_specs

    try:
        from packager.storage import OutputPaths
    except ImportError:  # a checkout from before packager/storage.py (--compare)
        from packager.run.store import OutputPaths  # type: ignore[no-redef]

    out = _build(code)
    client = connect()
    paths = OutputPaths(out, "samples")
    sel = Selection(dataset=open_dataset(None), task_ids=tuple(TASKS))
    specs = {spec.task_id: spec for spec in iter_specs(sel)}
    for line in commands:
        task_id, index = line.split()
        spec = specs[task_id]
        task = make_harbor_task(spec)
        slug = spec.provenance.slug
        images = {"agent": task.agent_image, "grader": task.grader_image}
        started = time.perf_counter()
        run = grade_patch(
            client,
            spec,
            paths,
            images,
            "oracle",
            log_dir=out / "bench-logs" / slug / index,
            label=f"bench/{slug}",
        )
        seconds = time.perf_counter() - started
        answers.write(f"{seconds} {run.reward if run.reward is not None else -1}\n")
        answers.flush()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--compare", type=Path, help="another checkout's local engine too")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return serve(args.worker.resolve(), sys.stdin, sys.stdout)

    sys.path.insert(0, str(ROOT))
    from packager.context import RunContext
    from packager.engines.harbor import read_trials, run_jobs, task_job

    try:
        from packager.storage import OutputPaths
    except ImportError:  # a checkout from before packager/storage.py (--compare)
        from packager.run.store import OutputPaths  # type: ignore[no-redef]

    out = _build(ROOT)
    paths = OutputPaths(out, "samples")
    codes = [ROOT] + ([args.compare.resolve()] if args.compare else [])
    workers = [Worker(code, __file__) for code in codes]
    local: dict[str, dict[str, list[float]]] = {w.name: {} for w in workers}
    harbor: dict[str, list[float]] = {}
    rewards: dict[str, list[str]] = {}
    try:
        for slug in TASKS:
            for i in range(args.rounds):
                got = []
                for worker in workers if i % 2 == 0 else workers[::-1]:
                    seconds, reward = worker.run(slug, i)
                    local[worker.name].setdefault(slug, []).append(seconds)
                    got.append(f"{reward:g}")
                job = task_job(
                    paths.task_dir(slug),
                    "oracle",
                    out / "bench-jobs" / slug / str(i),
                    timeout_sec=1800.0,
                    cleanup_labels={"packager.task": f"samples/{slug}"},
                )
                started = time.perf_counter()
                run_jobs([job], label=f"bench/{slug}", run=RunContext())
                harbor.setdefault(slug, []).append(time.perf_counter() - started)
                trials = read_trials(job.job_dir)
                result = trials[0].rewards if trials else None
                got.append(str(result.get("reward") if result else None))
                rewards.setdefault(slug, []).append("/".join(got))
    finally:
        for worker in workers:
            worker.close()
    names = [w.name for w in workers]
    print(f"{'task':24} {'harbor s':>9} " + " ".join(f"{n + ' s':>16} {'ratio':>6}" for n in names))
    ratios: dict[str, list[float]] = {n: [] for n in names}
    for slug in TASKS:
        hm = statistics.median(harbor[slug])
        row = f"{slug:24} {hm:9.2f} "
        for name in names:
            lm = statistics.median(local[name][slug])
            ratios[name].append(hm / lm)
            row += f"{lm:16.2f} {hm / lm:6.1f} "
        print(row + " rewards " + " ".join(rewards[slug]))
    for name in names:
        print(f"median ratio harbor/local ({name}): {statistics.median(ratios[name]):.1f}x")
    print(f"over {args.rounds} rounds (rewards: local {'/'.join(names)}/harbor per round)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
