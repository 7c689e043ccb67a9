"""Recipes, mirrors and history modes end to end on the real engine.

Small variants of the sample rows in a temporary dataset whose repositories come only from a
folder of mirrors (`--repo-source DIR`, layout `<dir>/<owner>/<name>.git`):
- a recipe whose `env_vars` prepend to PATH (`/opt/extra/bin:$PATH`): Docker expands it in the
  image, and grading must run with the image's environment (git and sh still found);
- a PDL row whose `requirements.lock` names a package: installed with pip at build time;
- `--history base-only`: the agent image's repository is one commit holding the base tree, and
  gold/nop are taken against that commit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, run_cli, sample_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUNDLES = ROOT / "packager" / "samples" / "repos"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DATASET = "recipes"


def _row(instance: str, new_id: str, **changes: Any) -> dict[str, Any]:
    row = next(r for r in sample_rows() if r.get("instance_id") == instance)
    return {**row, "instance_id": new_id, **changes}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("recipes")
    mirrors = tmp / "mirrors"
    (mirrors / "samples").mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(BUNDLES / "samples__textkit.bundle"),
         str(mirrors / "samples" / "textkit.git")],
        check=True,
    )  # fmt: skip
    inventory = _row("samples__inventory-4", "recipes__pdl-lock")
    inventory["files"] = [
        {**f, "content": "six==1.16.0\n"} if f["path"] == "requirements.lock" else f
        for f in inventory["files"]
    ]
    rows = [
        _row("samples__textkit-1", "recipes__env-path"),
        _row("samples__textkit-1", "recipes__base-only"),
        inventory,
    ]
    (tmp / "data").mkdir()
    (tmp / "data" / f"{DATASET}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shipped = yaml.safe_load((ROOT / "packager" / "samples" / "recipes.yaml").read_text())
    textkit = shipped["samples/textkit@1.0"]
    recipes = {
        **shipped,
        "recipes__env-path": {
            **textkit,
            "env_vars": {"PATH": "/opt/extra/bin:$PATH", "TEXTKIT_NOTE": "a b"},
        },
    }
    (tmp / "recipes.yaml").write_text(yaml.safe_dump(recipes))
    return tmp


def _package(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    extra = ["--ca-bundle", str(CA_BUNDLE)] if CA_BUNDLE.is_file() else []
    return run_cli(
        "package",
        *args,
        "--dataset",
        str(work / "data" / f"{DATASET}.jsonl"),
        "--recipes",
        str(work / "recipes.yaml"),
        "--repo-source",
        str(work / "mirrors"),
        "--out",
        str(work / "out"),
        "--oracle-runs",
        "1",
        *extra,
        timeout=1800,
    )


def _result(work: Path, task: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (work / "out" / DATASET / "results" / f"{task}.json").read_text()
    )
    return data


def test_env_vars_expand_in_the_image_and_grading_keeps_them(
    work: Path, docker_client: Any
) -> None:
    task = "recipes__env-path"
    proc = _package(work, task)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _result(work, task)["status"] == "verified"
    task_dir = work / "out" / DATASET / "tasks" / task
    assert json.loads((task_dir / "tests" / "plan.json").read_text())["env"] == {}
    dockerfile = (task_dir / "environment" / "Dockerfile").read_text()
    assert 'ENV PATH="/opt/extra/bin:$PATH"' in dockerfile
    path = docker_client.containers.run(
        _result(work, task)["images"]["grader"], ["sh", "-c", "echo $PATH; command -v git"],
        remove=True, network_mode="none",
    ).decode()  # fmt: skip
    assert path.startswith("/opt/extra/bin:/opt/venv/bin:") and "/usr/bin/git" in path


def test_pdl_requirements_lock_is_installed_at_build_time(work: Path, docker_client: Any) -> None:
    task = "recipes__pdl-lock"
    proc = _package(work, task)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "verified"
    assert result["nop"]["reward"] == pytest.approx(0.2)
    out = docker_client.containers.run(
        result["images"]["agent"], ["python", "-c", "import six; print(six.__version__)"],
        remove=True, network_mode="none",
    ).decode()  # fmt: skip
    assert out.strip() == "1.16.0"


def test_history_base_only_gives_one_commit_with_the_base_tree(
    work: Path, docker_client: Any
) -> None:
    task = "recipes__base-only"
    proc = _package(work, task, "--history", "base-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(work, task)
    assert result["status"] == "verified"
    base = next(r for r in sample_rows() if r.get("instance_id") == "samples__textkit-1")
    tree = subprocess.run(
        ["git", "--git-dir", str(work / "mirrors" / "samples" / "textkit.git"), "rev-parse",
         f"{base['base_commit']}^{{tree}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    out = docker_client.containers.run(
        result["images"]["agent"],
        ["bash", "-c", "git log --all --format='%H %T' && git rev-list --all --count"],
        remove=True,
        network_mode="none",
    ).decode()
    lines = out.split()
    assert lines[-1] == "1", out  # exactly one commit
    head, head_tree = lines[0], lines[1]
    assert head_tree == tree and head != base["base_commit"]
    collect = json.loads((work / "out" / DATASET / "manifests" / task / "oracle.json").read_text())[
        "collect"
    ]
    assert head in collect
