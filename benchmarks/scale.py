"""Whole-dataset figures on 20 generated tasks of one repository (packager.samples.generate),
all measured in one run (these machines are noisy; ratios are what to compare):

1. Build: total build time of the 20 tasks against one environment build plus 2 s per task
   (the environment is made new for this run, so its build is cold); the grader image's size
   minus the agent image's.
2. Unchanged rerun of the 20 verified tasks: builds, runs and seconds.
3. `-j 2` against `-j 1` on the same 20 tasks (`--force`, images built): verified tasks per
   minute, and their ratio.

    .venv/bin/python benchmarks/scale.py [N]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.images.build import connect  # noqa: E402
from packager.samples.generate import generate  # noqa: E402


def packager(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "packager", *args], capture_output=True, text=True, cwd=ROOT
    )
    return time.perf_counter() - started, proc


def results(out: Path) -> list[dict[str, object]]:
    return [
        json.loads(p.read_text())
        for p in sorted((out / "rows" / "results").glob("*.json"))
        if p.name.count(".") == 1
    ]


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 20
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        data = generate(Path(tmp) / "ds", n)
        # A fresh environment for this run: its layers cannot come from an earlier run's cache.
        recipes = Path(tmp) / "ds" / "recipes.yaml"
        unique = f"  env_vars:\n    BENCH_RUN: {uuid.uuid4().hex}\n"
        recipes.write_text(recipes.read_text() + unique, encoding="utf-8")
        out = Path(tmp) / "out"
        common = ["--all", "--dataset", str(data), "--out", str(out)]

        # 1. Builds, one at a time so the seconds add up.
        wall, proc = packager("build", *common, "-j", "1")
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-2000:])
            return 1
        built = results(out)
        # An agent image's build, with the environment image's when that task built it.
        agent = sorted(
            float(r["durations"].get("agent_build", 0))  # type: ignore[union-attr]
            + float(r["durations"].get("environment_build", 0))  # type: ignore[union-attr]
            for r in built
        )
        first = max(agent)  # the one that built the environment
        rest = sum(agent) - first
        grader = sum(float(r["durations"].get("grader_build", 0)) for r in built)  # type: ignore[union-attr]
        total = sum(agent) + grader
        bound = first + 2.0 * n
        print(
            f"build {n} tasks: {total:.1f} s of builds ({wall:.1f} s wall); environment "
            f"{first:.1f} s, the other {n - 1} agent images {rest / max(1, n - 1):.2f} s each, "
            f"graders {grader / n:.2f} s each; bound env + 2 s/task = {bound:.1f} s; "
            f"ratio {total / bound:.2f} (target <= 1)"
        )
        ok &= total <= bound
        client = connect()
        sizes = []
        for r in built:
            images = r["images"]
            assert isinstance(images, dict)
            a = client.images.get(images["agent"]).attrs["Size"]
            g = client.images.get(images["grader"]).attrs["Size"]
            sizes.append(g - a)
        print(
            f"grader minus agent image: max {max(sizes) / 1e6:.3f} MB, median "
            f"{sorted(sizes)[len(sizes) // 2] / 1e6:.3f} MB (target < 1 MB)"
        )
        ok &= max(sizes) < 1_000_000

        # Verify everything once (-j 2), then 2. the unchanged rerun.
        wall, proc = packager("package", *common, "-j", "2")
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-2000:])
            return 1
        wall, proc = packager("package", *common, "-j", "2")
        summary = [line for line in proc.stdout.splitlines() if line.startswith("summary:")]
        print(f"unchanged rerun of {n} verified tasks: {wall:.2f} s; {summary[-1]} (target < 2 s)")
        ok &= wall < 2.0 and f"({n} cached, 0 built or run now)" in proc.stdout

        # 3. -j 1 against -j 2, runs only (--force; the images exist).
        rates = {}
        for jobs in ("1", "2", "1", "2"):
            wall, proc = packager("package", *common, "-j", jobs, "--force")
            verified = sum(1 for r in results(out) if r["status"] == "verified")
            rate = verified / (wall / 60)
            rates.setdefault(jobs, []).append(rate)
            print(f"-j {jobs}: {verified} verified in {wall:.1f} s = {rate:.1f} tasks/min")
        best = {j: max(v) for j, v in rates.items()}
        ratio = best["2"] / best["1"]
        print(f"-j 2 / -j 1 verified tasks per minute: {ratio:.2f} (target >= 1.6)")
        ok &= ratio >= 1.6
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
