"""`packager publish` round trip with a real registry and a real dataset repository.

Two generated tasks get an environment of their own (so their images are this test's alone,
and deleting them touches nothing other tests share). A loopback registry (Debian's
docker-registry, started here) and a local bare git repository receive them. Then the local
images are deleted, and `harbor run -d rows@1.0 --registry-path <fresh clone>/registry.json`
runs oracle and nop from the published dataset, pulling the images by digest.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from packager.engines.harbor import harbor_env, run_dataset
from packager.samples.generate import generate
from packager.storage import OutputPaths
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = ["gen__calc-0", "gen__calc-1"]


def _catalog(host: str) -> list[str]:
    with urllib.request.urlopen(f"http://{host}/v2/_catalog", timeout=10) as response:
        repos: list[str] = json.load(response)["repositories"]
    return repos


def _commits(repo: Path) -> int:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--all", "--count"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def test_publish_round_trip(
    registry: str, tmp_path: Path, docker_client: Any, harbor_python: Path
) -> None:
    data = generate(tmp_path / "ds", len(TASKS))
    recipes = tmp_path / "ds" / "recipes.yaml"
    recipes.write_text(recipes.read_text() + f"  env_vars:\n    PUBLISH_TEST: {uuid.uuid4().hex}\n")
    out = tmp_path / "out"
    proc = run_cli("package", "--all", "--dataset", str(data), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {t: json.loads((out / "rows" / "results" / f"{t}.json").read_text()) for t in TASKS}
    dataset_repo = tmp_path / "dataset.git"
    target = f"{registry}/release-test"

    # First publish: every image pushed, two commits (tasks, then registry.json).
    proc = run_cli(
        "publish", "--all", "--dataset", str(data), "--out", str(out), "--registry", target,
        "--dataset-repo", str(dataset_repo),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Each task's agent and grader images, and their base image once (the second task finds
    # it there already).
    assert "5 image(s) pushed, 1 unchanged" in proc.stdout, proc.stdout
    assert sorted(_catalog(registry)) == sorted(
        ["release-test/debian", *(f"release-test/rows.{t}" for t in TASKS)]
    )
    assert _commits(dataset_repo) == 2
    release = out / "rows" / "release"
    references: dict[str, dict[str, str]] = {}
    for task in TASKS:
        text = (release / "tasks" / task / "task.toml").read_text()
        refs = [line.split('"')[1] for line in text.splitlines() if "docker_image" in line]
        assert len(refs) == 2 and all(f"{target}/" in r and "@sha256:" in r for r in refs)
        references[task] = {"agent": refs[0], "grader": refs[1]}
        assert not (release / "tasks" / task / "environment" / "repo.tar").exists()
    lint = subprocess.run(
        [str(harbor_python.parent / "harbor"), "lint", "--select", "unpinned-image"]
        + [str(release / "tasks" / t) for t in TASKS],
        capture_output=True,
        text=True,
        env=harbor_env(),  # Harbor's Compose plugin
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr

    # Second publish, nothing changed: nothing pushed, no commit.
    proc = run_cli(
        "publish", "--all", "--dataset", str(data), "--out", str(out), "--registry", target,
        "--dataset-repo", str(dataset_repo),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 image(s) pushed, 6 unchanged" in proc.stdout
    assert "no change, no commit" in proc.stdout
    assert _commits(dataset_repo) == 2

    # The release's evidence: both tasks, bound to the bytes they were verified with; the
    # same release again differs in nothing.
    manifest = json.loads((release / "release.json").read_text())
    assert sorted(manifest["tasks"]) == TASKS
    for task in TASKS:
        entry = manifest["tasks"][task]
        assert entry["verified_digest"] == results[task]["task_digest"]
        assert entry["status"] == "verified"
        assert entry["runs"] == {"oracle": 2, "nop": 1, "perturbed": []}
        assert entry["images"]["agent"] == references[task]["agent"]
    same = run_cli("release", "diff", str(release), str(release / "release.json"))
    assert same.returncode == 0 and "0 task(s) changed" in same.stdout, same.stdout
    # One task verified again with three gold runs, then published again: the two releases'
    # evidence differs in exactly that task (its verdict's run counts).
    before = tmp_path / "release-before.json"
    before.write_bytes((release / "release.json").read_bytes())
    proc = run_cli(
        "package", TASKS[0], "--dataset", str(data), "--out", str(out), "--oracle-runs", "3",
        "--force",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli(
        "publish", "--all", "--dataset", str(data), "--out", str(out), "--registry", target,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    changed = run_cli("release", "diff", str(before), str(release))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    lines = changed.stdout.splitlines()
    assert lines[0].startswith(f"{TASKS[0]}: verdict: ") and lines[1:] == ["1 task(s) changed"]
    # A task folder edited after it was verified is refused, before anything is pushed.
    instruction = out / "rows" / "tasks" / TASKS[0] / "instruction.md"
    original = instruction.read_text()
    instruction.write_text(original + "\nAlso rewrite the tests.\n")
    try:
        proc = run_cli(
            "publish", "--all", "--dataset", str(data), "--out", str(out), "--registry", target,
        )  # fmt: skip
        assert proc.returncode != 0 and f"{TASKS[0]}: its folder changed" in proc.stderr, (
            proc.stdout + proc.stderr
        )
        assert TASKS[1] not in proc.stderr
    finally:
        instruction.write_text(original)

    # Delete the local images (every tag, the registry's too), then run from a fresh clone.
    local = {t: results[t]["images"] for t in TASKS}
    ids = {t: {r: docker_client.images.get(tag).id for r, tag in local[t].items()} for t in TASKS}
    try:
        for task in TASKS:
            for role in ("grader", "agent"):
                docker_client.images.remove(ids[task][role], force=True)
                assert ids[task][role] not in {i["Id"] for i in docker_client.api.images()}
        clone = tmp_path / "clone"
        subprocess.run(
            ["git", "clone", "-q", dataset_repo.as_uri(), str(clone / "rows")], check=True
        )
        paths = OutputPaths(clone, "rows")
        oracle = run_dataset(paths, "oracle", concurrency=2)
        nop = run_dataset(paths, "nop", concurrency=2)
        assert sorted(t.task for t in oracle) == sorted(f"packager/{t}" for t in TASKS)
        for trial in oracle:
            assert trial.error is None and trial.rewards and trial.rewards["reward"] == 1.0, trial
        for trial in nop:
            assert trial.error is None and trial.rewards is not None, trial
            assert trial.rewards["reward"] < 1.0, trial
        # The images Harbor ran are exactly the verified ones (pulled by digest, same ids).
        for task in TASKS:
            for role in ("agent", "grader"):
                assert docker_client.images.get(references[task][role]).id == ids[task][role]
    finally:
        for task in TASKS:
            for role in ("grader", "agent"):
                for ref in (references[task][role], local[task][role]):
                    try:
                        docker_client.images.remove(ref, force=True)
                    except Exception:  # noqa: BLE001 - already gone
                        pass
