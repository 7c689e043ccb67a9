"""Local engine vs Harbor: wall time of one oracle run of each gradeable sample task.

One local-engine run (`packager.run.patch.grade_patch` of the oracle: agent container, collect,
fresh grader container) and one `harbor run -p TASK -a oracle` trial (prebuilt images, compose,
separate verifier), measured alternately (local, harbor, local, harbor, ...) for ROUNDS rounds
in one run, because machines are noisy. Prints the medians and their ratio. Needs Docker and the
pinned Harbor (`make harbor`); builds the images first (`packager build`, cached by content).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.datasets.sources import open_dataset  # noqa: E402
from packager.engines.harbor import read_trials, run_jobs, task_job  # noqa: E402
from packager.images.build import connect  # noqa: E402
from packager.render.harbor import make_harbor_task  # noqa: E402
from packager.run.patch import grade_patch  # noqa: E402
from packager.run.select import Selection, iter_specs  # noqa: E402
from packager.run.store import OutputPaths  # noqa: E402

TASKS = ["samples__textkit-1", "samples__intset-2", "samples__kvstore-3", "samples__inventory-4"]
ROUNDS = 3
OUT = ROOT / "build" / "bench-engines"


def main() -> int:
    subprocess.run(
        [sys.executable, "-m", "packager", "build", *TASKS, "--out", str(OUT)],
        check=True,
        capture_output=True,
    )
    client = connect()
    paths = OutputPaths(OUT, "samples")
    sel = Selection(dataset=open_dataset(None), task_ids=tuple(TASKS))
    print(f"{'task':24} {'local s':>8} {'harbor s':>9} {'ratio':>6}  rewards (local / harbor)")
    ratios = []
    for spec in iter_specs(sel):
        slug = spec.provenance.slug
        task = make_harbor_task(spec)
        images = {"agent": task.agent_image, "grader": task.grader_image}
        local, harbor, rewards = [], [], []
        for i in range(ROUNDS):
            log_dir = OUT / "bench-logs" / slug / str(i)
            started = time.perf_counter()
            run = grade_patch(
                client, spec, paths, images, "oracle", log_dir=log_dir, label=f"bench/{slug}"
            )
            local.append(time.perf_counter() - started)
            job = task_job(
                paths.task_dir(slug),
                "oracle",
                OUT / "bench-jobs" / slug / str(i),
                timeout_sec=1800.0,
                cleanup_labels={"packager.task": f"samples/{slug}"},
            )
            started = time.perf_counter()
            run_jobs([job], label=f"bench/{slug}")
            harbor.append(time.perf_counter() - started)
            trials = read_trials(job.job_dir)
            got = trials[0].rewards if trials else None
            harbor_reward = got.get("reward") if got else None
            rewards.append(f"{run.reward}/{harbor_reward}")
        lm, hm = statistics.median(local), statistics.median(harbor)
        ratios.append(hm / lm)
        print(f"{slug:24} {lm:8.2f} {hm:9.2f} {hm / lm:6.1f}  {' '.join(rewards)}")
    print(f"median ratio harbor/local: {statistics.median(ratios):.1f}x over {ROUNDS} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
