"""A second cold build of an environment whose downloads are cached, next to the first.

The environment is a real one: the textkit sample's recipe (Debian bookworm's toolchain and
Python 3.11, its venv), with pip packages to download (numpy, pandas, requests, pytest) and sdists
to build (markupsafe, wrapt, simplejson: no wheel for this Python on the index, so pip compiles
them). Its steps before the venv's (the base, apt) are built once, untimed, as a tagged
prefix (apt installs python3-venv and python3-dev there, which the venv's step would otherwise
install: the benchmark times pip's work, not apt's); each timed build starts cold from there
(a variable naming the build sits just before the first pip step, so nothing from there is in
the engine's cache; the images are removed at the end, not between builds, see below). Per
round, in this order:

- plain: the wheelhouse off (PACKAGER_WHEELHOUSE=0), as before it existed;
- first: an empty machine wheelhouse (a fresh PACKAGER_CACHE): downloads, builds, uploads;
- second: the same wheelhouse, now full: nothing downloaded, built or byte-compiled (pip is
  run from the wheelhouse's pip wheel, the byte code comes from the first build's bundles).

Removing a build's image before the next build times the file system more than the build:
this machine's ext4 has no journal and is mounted with discard, so a deletion waits for the
disk's discards, and a new inode skips every inode freed in the last 60 s (300 s while its
inode table block is dirty), one buffer cache lookup each; files created soon after many were
deleted take 300-1,100 us each instead of 30 us. `--delete-between` removes each image right
after its build, as this script did before, for comparison.

Prints seconds per build, the ratios first/second and plain/second (target >= 2x), and which
builds installed from the wheelhouse alone and how many distributions' byte code each took
from it. Needs the engine and the host's CA bundle (pip in the build reaches the index the
image is configured for). Removes only the images it tagged.

    python benchmarks/downloads.py [--rounds N] [--delete-between]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packager.context import RunContext  # noqa: E402
from packager.datasets.sources import open_dataset  # noqa: E402
from packager.images import build, wheelhouse  # noqa: E402
from packager.images.hud_build import host_ca_bundle  # noqa: E402
from packager.render.harbor import SNAPSHOT_FILES, make_harbor_task  # noqa: E402
from packager.run.select import Selection, iter_specs  # noqa: E402
from packager.stages.environment import ensure_environment  # noqa: E402

PACKAGES = (
    "numpy==1.26.4",
    "pandas==2.2.2",
    "requests==2.31.0",
    "pytest==7.4.4",
    "markupsafe==2.0.1",
    "wrapt==1.13.3",
    "simplejson==3.17.6",
)
TASK = "samples__textkit-1"
HELPER_COPY = "COPY packager-pip.py"


def _context(folder: Path, run: str) -> Path:
    """The task's agent context with PACKAGES, and a variable naming this run just before the
    first pip step (so every step from there is cold in every run of this script).
    """
    spec = next(iter_specs(Selection(dataset=open_dataset(None, "test"), task_ids=(TASK,))))
    apt = (*spec.environment.packages, "python3-venv", "python3-dev")
    env = spec.environment.model_copy(update={"pip_packages": PACKAGES, "packages": apt})
    files = make_harbor_task(spec.model_copy(update={"environment": env})).files
    for rel, out in files.items():
        if rel.startswith("environment/"):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(out.data)
    context = folder / "environment"
    text = build.with_base_override((context / "Dockerfile").read_text())
    head, sep, tail = text.partition(HELPER_COPY)
    assert sep, "the Dockerfile has no pip helper step"
    (context / "Dockerfile").write_text(
        f"{head}ENV PACKAGER_BENCH_RUN={run}\nENV PACKAGER_BENCH_BUILD=none\n{sep}{tail}"
    )
    (folder / "prefix").mkdir()
    (folder / "prefix" / "Dockerfile").write_text(f"{head}ENV PACKAGER_BENCH_RUN={run}\n")
    return context


def _build(
    client: object, context: Path, args: dict[str, str], bases: str, log: Path, built: list[str]
) -> float:
    """Builds the environment cold (its variable renamed for this build), returns its seconds."""
    dockerfile = context / "Dockerfile"
    text = dockerfile.read_text()
    head, sep, tail = text.partition("ENV PACKAGER_BENCH_BUILD=")
    rest = tail.partition("\n")[2]
    dockerfile.write_text(f"{head}{sep}{log.stem}\n{rest}")
    outcome = ensure_environment(
        client,  # type: ignore[arg-type]
        context,
        SNAPSHOT_FILES,
        args,
        bases,
        task="bench-downloads",
        log_path=log,
        timeout_sec=3600,
        run=RunContext(),
    )
    assert outcome is not None and outcome.built, "the environment image existed already"
    built.append(outcome.tag)
    return outcome.duration_sec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--delete-between", action="store_true", help="remove each image right after its build"
    )
    options = parser.parse_args()
    rounds = options.rounds
    built: list[str] = []
    client = build.connect()
    ca = host_ca_bundle()
    if ca is None:
        print("no CA bundle on this host", file=sys.stderr)
        return 2
    run = uuid.uuid4().hex[:12]
    work = Path(tempfile.mkdtemp(prefix="bench-downloads-"))
    prefix = f"packager-bench/downloads-prefix:{run}"
    args = {"PACKAGER_BASE": build.ca_base_image(client, "debian:bookworm-slim", ca, work)}
    bases = build.base_ids(client, f"FROM {args['PACKAGER_BASE']}\n")
    context = _context(work, run)
    rows: list[dict[str, float]] = []
    try:
        started = time.monotonic()
        build.build_image(
            client, task="bench-downloads", role="bench", context=work / "prefix", tag=prefix,
            log_path=work / "prefix.log", timeout_sec=3600, buildargs=args,
        )  # fmt: skip
        print(f"prefix (base, apt; untimed below): {time.monotonic() - started:.1f} s")
        print(f"{'round':>5} {'plain':>8} {'first':>8} {'second':>8} {'first/2nd':>10} "
              f"{'plain/2nd':>10}")  # fmt: skip
        for i in range(rounds):
            row: dict[str, float] = {}
            for name, cache, on in (("plain", "off", "0"), ("first", f"c{i}", "1"),
                                    ("second", f"c{i}", "1")):  # fmt: skip
                os.environ["PACKAGER_WHEELHOUSE"] = on
                os.environ["PACKAGER_CACHE"] = str(work / cache)
                if name != "second":
                    wheelhouse.stop()  # the server serves the folder of the cache it started on
                log = work / f"{name}-{i}.log"
                row[name] = _build(client, context, args, bases, log, built)
                if options.delete_between:
                    client.images.remove(built.pop())
                alone = log.read_text().count("installed from the machine wheelhouse alone")
                row[f"{name}_alone"] = alone
                row[f"{name}_code"] = log.read_text().count("packager-pip: byte code of ")
            rows.append(row)
            print(f"{i + 1:>5} {row['plain']:>7.1f}s {row['first']:>7.1f}s {row['second']:>7.1f}s "
                  f"{row['first'] / row['second']:>9.2f}x {row['plain'] / row['second']:>9.2f}x"
                  f"   (pip steps from the wheelhouse alone: first {row['first_alone']:.0f}, "
                  f"second {row['second_alone']:.0f} of 2; byte code reused: "
                  f"{row['first_code']:.0f}, {row['second_code']:.0f})")  # fmt: skip
        first = statistics.median(r["first"] / r["second"] for r in rows)
        plain = statistics.median(r["plain"] / r["second"] for r in rows)
        print(f"median first/second {first:.2f}x, plain/second {plain:.2f}x (target >= 2x)")
        print(f"wheelhouse: {sum(1 for _ in (work / 'c0').rglob('*.whl'))} wheels; logs in {work}")
    finally:
        wheelhouse.stop()
        for tag in (*built, prefix):
            try:
                client.images.remove(tag)
            except Exception:  # noqa: BLE001 - never built, or removed already
                pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
