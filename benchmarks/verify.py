"""Overhead of the local engine: one full nop run (`packager.run.patch.grade_patch`: agent
container, collect, fresh grader container, grading runtime) next to the raw test command alone
in the same grader image.

Measured alternately in one run (machines are noisy); prints medians and their difference.
Target: under 1.5 s of overhead per run. Needs built images: run `make package` first, or
this script builds them (`packager build`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.datasets.sources import open_dataset  # noqa: E402
from packager.images.build import connect  # noqa: E402
from packager.render.harbor import make_harbor_task  # noqa: E402
from packager.run.patch import grade_patch  # noqa: E402
from packager.run.select import Selection, iter_specs  # noqa: E402
from packager.run.store import OutputPaths  # noqa: E402

TASKS = ["samples__textkit-1", "samples__intset-2", "samples__kvstore-3", "samples__inventory-4"]
ROUNDS = 5
OUT = ROOT / "build" / "bench"


def main() -> int:
    subprocess.run(
        [sys.executable, "-m", "packager", "build", *TASKS, "--out", str(OUT)],
        check=True,
        capture_output=True,
    )
    client = connect()
    paths = OutputPaths(OUT, "samples")
    sel = Selection(dataset=open_dataset(None), task_ids=tuple(TASKS))
    print(f"{'task':24} {'engine run':>11} {'raw tests':>10} {'overhead':>9}")
    worst = 0.0
    for spec in iter_specs(sel):
        task = make_harbor_task(spec)
        slug = spec.provenance.slug
        images = {"agent": task.agent_image, "grader": task.grader_image}
        command = spec.grading.test_command or "true"
        grader_dir = "/tests"
        if spec.grading.rule == "script":
            # Where the runtime runs the row's grader: the plan's script.dir, under /tests.
            plan_json = paths.task_dir(slug) / "tests" / "plan.json"
            script = json.loads(plan_json.read_text())["script"]
            grader_dir = f"/tests/{script.get('dir') or '.'}"
            command = (
                f"echo '{json.dumps(script.get('criteria') or [])}' > /tmp/criteria.json && "
                f"{{ cd {grader_dir} || exit 125; }} && {spec.grading.grader_command}"
            )
        # The raw command is timed inside a fresh grader container (as the engine runs it, with
        # cold caches), so container start-up counts as engine overhead, not as test time.
        timed = (
            "s=$(date +%s%N); ( " + command + " ) >/dev/null 2>&1; c=$?; e=$(date +%s%N); "
            "echo $c $(( (e - s) / 1000000 ))"
        )
        env = {
            "REPO_DIR": spec.repo.workdir,
            "GRADER_DIR": grader_dir,
            "REWARD_FILE": "/tmp/r.json",
            "CRITERIA_FILE": "/tmp/criteria.json",
            **spec.grading.env,
        }
        engine, raw = [], []
        for i in range(ROUNDS):
            log_dir = OUT / "bench-logs" / slug / str(i)
            started = time.perf_counter()
            grade_patch(client, spec, paths, images, "nop", log_dir=log_dir, label=f"bench/{slug}")
            engine.append(time.perf_counter() - started)
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
            # A raw command that cannot even start (no grader folder: 125; 126, 127) times
            # nothing: the difference would not be overhead.
            assert code not in ("125", "126", "127"), f"{spec.task_id}: raw command exit {code}"
            raw.append(int(millis) / 1000)
        e, r = statistics.median(engine), statistics.median(raw)
        worst = max(worst, e - r)
        print(f"{spec.task_id:24} {e:10.2f}s {r:9.2f}s {e - r:8.2f}s")
    print(
        f"worst overhead {worst:.2f} s per run (target <= 0.6 s); "
        f"medians of {ROUNDS} alternating rounds"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
