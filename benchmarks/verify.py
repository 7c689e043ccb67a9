"""Overhead of the local engine: one full nop run (`packager.engines.patch.grade_patch`: agent
container, collect, fresh grader container, grading runtime) next to the raw test command alone
in the same grader image.

Measured alternately in one run (machines are noisy); prints medians and their difference.
Target: at most 0.6 s of overhead per run. `--compare DIR` times another checkout's code too
(DIR/.venv or this Python), interleaved run by run with this one, and prints both and their
ratio. Each checkout runs in its own worker process, which builds its images first
(`packager build`, cached by content).

Run: `python benchmarks/verify.py [--rounds N] [--compare DIR]`
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
TASKS = ["samples__textkit-1", "samples__intset-2", "samples__kvstore-3", "samples__inventory-4"]
ROUNDS = 5


class Worker:
    """One checkout's code in its own process (`script --worker CODE`, in CODE/.venv's Python
    when there is one): `run(task, round)` sends one line and returns the numbers it answers.
    """

    def __init__(self, code: Path, script: str = __file__) -> None:
        self.name = "this" if code == ROOT else code.name
        python = code / ".venv" / "bin" / "python"
        argv = [str(python if python.exists() else Path(sys.executable))]
        self.proc = subprocess.Popen(
            [*argv, script, "--worker", str(code)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, task: str, index: int) -> list[float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{task} {index}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the worker died (exit {self.proc.wait()})")
        return [float(word) for word in line.split()]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def serve(code: Path, commands: TextIO, answers: TextIO) -> int:
    """The worker: build the tasks with `code`'s packager, then time one nop run and one raw
    test command per line `TASK ROUND` read, answering `ENGINE_S RAW_S`.
    """
    sys.path.insert(0, str(code))
    from packager.datasets.sources import open_dataset
    from packager.images.build import connect
    from packager.run.select import Selection, iter_specs

    try:
        from packager.storage import OutputPaths
    except ImportError:  # a checkout from before packager/storage.py (--compare)
        from packager.run.store import OutputPaths  # type: ignore[no-redef]

    out = code / "build" / "bench"
    subprocess.run(
        [sys.executable, "-m", "packager", "build", *TASKS, "--out", str(out)],
        check=True,
        capture_output=True,
        cwd=code,
    )
    client = connect()
    paths = OutputPaths(out, "samples")
    sel = Selection(dataset=open_dataset(None), task_ids=tuple(TASKS))
    specs = {spec.task_id: spec for spec in iter_specs(sel)}
    for line in commands:
        task, index = line.split()
        engine, raw = _time_task(client, specs[task], paths, out, int(index))
        answers.write(f"{engine} {raw}\n")
        answers.flush()
    return 0


def _time_task(client: Any, spec: Any, paths: Any, out: Path, index: int) -> tuple[float, float]:
    try:
        from packager.engines.patch import grade_patch
    except ImportError:  # a checkout from before packager/engines/patch.py (--compare)
        from packager.run.patch import grade_patch  # type: ignore[no-redef]
    from packager.render.harbor import make_harbor_task

    task = make_harbor_task(spec)
    slug = spec.provenance.slug
    images = {"agent": task.agent_image, "grader": task.grader_image}
    command = spec.grading.test_command or "true"
    grader_dir = "/tests"
    plan = json.loads((paths.task_dir(slug) / "tests" / "plan.json").read_text())
    if spec.grading.rule == "script":
        # Where the runtime runs the row's grader: the plan's script.dir, under /tests.
        script = plan["script"]
        grader_dir = f"/tests/{script.get('dir') or '.'}"
        command = (
            f"echo '{json.dumps(script.get('criteria') or [])}' > /tmp/criteria.json && "
            f"{{ cd {grader_dir} || exit 125; }} && {spec.grading.grader_command}"
        )
    # The raw command is timed inside a fresh grader container (as the engine runs it, with
    # cold caches), so container start-up counts as engine overhead, not as test time. It runs
    # on the tree the grader tests: the row's test patch applied and its hidden files copied
    # first, outside the timer (without them a command names test files that are not there,
    # or runs fewer of them, and the difference is not overhead).
    failed = "|| { echo 125 0; exit; }; "
    setup = ""
    if plan.get("test_patch"):
        setup += f"git apply --whitespace=nowarn /tests/{plan['test_patch']} {failed}"
    if plan.get("hidden_files"):
        setup += f"cp -a /tests/{plan['hidden_files']}/. . {failed}"
    timed = (
        setup + "s=$(date +%s%N); ( " + command + " ) >/dev/null 2>&1; c=$?; e=$(date +%s%N); "
        "echo $c $(( (e - s) / 1000000 ))"
    )
    env = {
        "REPO_DIR": spec.repo.workdir,
        "GRADER_DIR": grader_dir,
        "REWARD_FILE": "/tmp/r.json",
        "CRITERIA_FILE": "/tmp/criteria.json",
        **spec.grading.env,
    }
    log_dir = out / "bench-logs" / slug / str(index)
    started = time.perf_counter()
    grade_patch(client, spec, paths, images, "nop", log_dir=log_dir, label=f"bench/{slug}")
    engine = time.perf_counter() - started
    ms = client.containers.run(
        task.grader_image,
        ["bash", "-c", timed],
        remove=True,
        network_mode="none",
        environment=env,
        labels={"packager.tool": "packager"},
        working_dir=spec.repo.workdir,
    )
    code, millis = ms.decode().split()[-2:]
    # A raw command that cannot even start (no grader folder: 125; 126, 127) times nothing:
    # the difference would not be overhead.
    assert code not in ("125", "126", "127"), f"{spec.task_id}: raw command exit {code}"
    return engine, int(millis) / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--compare", type=Path, help="another checkout to time too (interleaved)")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return serve(args.worker.resolve(), sys.stdin, sys.stdout)
    workers = [Worker(ROOT)] + ([Worker(args.compare.resolve())] if args.compare else [])
    times: dict[str, dict[str, list[list[float]]]] = {w.name: {} for w in workers}
    try:
        for task in TASKS:
            for i in range(args.rounds):
                for worker in workers if i % 2 == 0 else workers[::-1]:
                    times[worker.name].setdefault(task, []).append(worker.run(task, i))
    finally:
        for worker in workers:
            worker.close()
    worst: dict[str, float] = {}
    print(f"{'task':24} {'code':>14} {'engine run':>11} {'raw tests':>10} {'overhead':>9}")
    for task in TASKS:
        for worker in workers:
            runs = times[worker.name][task]
            e = statistics.median(t[0] for t in runs)
            r = statistics.median(t[1] for t in runs)
            worst[worker.name] = max(worst.get(worker.name, 0.0), e - r)
            print(f"{task:24} {worker.name:>14} {e:10.2f}s {r:9.2f}s {e - r:8.2f}s")
    for name, value in worst.items():
        print(f"worst overhead ({name}) {value:.2f} s per run (target <= 0.6 s)")
    if len(workers) == 2:
        this, other = (worst[w.name] for w in workers)
        print(f"ratio this/{workers[1].name}: {this / other:.2f}")
    print(f"medians of {args.rounds} alternating rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
