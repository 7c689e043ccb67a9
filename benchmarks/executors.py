"""The Ray executor against the local executor on the same N generated tasks (default 20).

A real two-node Ray cluster on this machine (tests/raycluster.py: `ray start --head` and a
second node process, 2 CPUs each, one job per node) and a loopback registry (Debian's
docker-registry), against `packager package -j 2` (the same two jobs at once). Both nodes use
this machine's one Docker engine, so what the ratio measures is the executor's own overhead:
shipping task folders and repository bundles through Ray's object store, the registry pushes and
pulls, the results coming back.

The images are built once before timing (`packager build`, content-hash tags); then each
executor packages the tasks into a fresh output folder (`--force` for the local one), alternately
local, ray, local, ray (these machines are noisy). Prints each run, the best of each, their
wall-time ratio, and whether the statuses are identical task by task.

    .venv/bin/python benchmarks/executors.py [N]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.samples.generate import generate  # noqa: E402
from tests.raycluster import Cluster, ray_command  # noqa: E402
from tests.services import start_registry  # noqa: E402


def packager(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "packager", *args], capture_output=True, text=True, cwd=ROOT
    )
    return time.perf_counter() - started, proc


def statuses(out: Path) -> dict[str, str]:
    return {
        p.stem: str(json.loads(p.read_text())["status"])
        for p in sorted((out / "rows" / "results").glob("*.json"))
        if p.name.count(".") == 1
    }


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 20
    with tempfile.TemporaryDirectory(prefix="bench-executors-") as tmp_name:
        tmp = Path(tmp_name)
        data = generate(tmp / "ds", n)
        common = ["--all", "--dataset", str(data)]
        wall, proc = packager("build", *common, "--out", str(tmp / "warm"), "-j", "2")
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-2000:])
            return 1
        print(f"images of {n} tasks built first: {wall:.1f} s")

        registry, stop_registry = start_registry(tmp / "registry")
        ray_command("stop", "--force")
        (tmp / "ray").mkdir()
        cluster = Cluster(tmp / "ray")
        try:
            cluster.start_head()
            cluster.add_worker()
            ray_args = [
                "--executor", "ray", "--ray-address", cluster.address,
                "--workers-per-node", "1", "--registry", f"{registry}/bench",
            ]  # fmt: skip
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            seen: dict[str, dict[str, str]] = {}
            for round_no, name in enumerate(["local", "ray", "local", "ray"]):
                out = tmp / f"out-{round_no}"
                extra = ["-j", "2", "--force"] if name == "local" else ray_args
                wall, proc = packager("package", *common, "--out", str(out), *extra)
                found = statuses(out)
                counts = {s: list(found.values()).count(s) for s in sorted(set(found.values()))}
                code = proc.returncode
                print(f"{name:5}: {len(found)} tasks in {wall:6.1f} s, exit {code}, {counts}")
                if proc.returncode not in (0, 1):
                    print(proc.stdout[-2000:] + proc.stderr[-2000:])
                    return 1
                walls[name].append(wall)
                if name in seen and seen[name] != found:
                    print(f"{name}: statuses differ between its two runs")
                seen[name] = found
                shutil.rmtree(out, ignore_errors=True)
        finally:
            cluster.stop()
            stop_registry()
        local, ray = min(walls["local"]), min(walls["ray"])
        same = seen["local"] == seen["ray"] and len(seen["ray"]) == n
        print(
            f"best wall: local -j 2 {local:.1f} s, ray 2 nodes x 1 {ray:.1f} s; "
            f"ray / local = {ray / local:.2f}; statuses identical task by task: {same}"
        )
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
