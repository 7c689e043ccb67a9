"""Rendered task folders, checked by Harbor's own models (its pinned venv, in a subprocess).

Harbor 0.25 needs Python 3.12 and lives in `.harbor/venv`; these tests ask it to validate every
sample task.toml (`TaskConfig`), to resolve the images it would run, and to compute the task
digests that `write_harbor_dataset` puts into dataset.toml.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.harbor]

CHECK_TASKS = r"""
import json, sys
from pathlib import Path
from harbor.models.task.config import TaskConfig
from harbor.models.task.paths import TaskPaths
from harbor.models.task.verifier_mode import (
    resolve_task_verifier_mode, resolve_verifier_environment_definition)
from harbor.environments.definition import should_use_prebuilt_docker_image
from harbor.publisher.packager import Packager

out = {}
for task_dir in sorted(Path(sys.argv[1]).iterdir()):
    config = TaskConfig.model_validate_toml((task_dir / "task.toml").read_text())
    paths = TaskPaths(task_dir)
    grader = resolve_verifier_environment_definition(config, paths)
    out[task_dir.name] = {
        "name": config.task.name if config.task else None,
        "mode": resolve_task_verifier_mode(config).value,
        "agent_image": config.environment.docker_image,
        "agent_prebuilt": should_use_prebuilt_docker_image(
            paths.environment_dir, docker_image=config.environment.docker_image,
            force_build=False),
        "grader_image": grader.config.docker_image,
        "grader_dir": grader.directory.name,
        "bundled_tests": grader.bundled_tests,
        "network_mode": config.environment.network_mode.value,
        "digest": "sha256:" + Packager.compute_content_hash(task_dir)[0],
    }
print(json.dumps(out))
"""

CHECK_DATASET = r"""
import json, sys
from pathlib import Path
from harbor.models.dataset.manifest import DatasetManifest
from harbor.models.registry import Registry
base = Path(sys.argv[1])
manifest = DatasetManifest.from_toml_file(base / "dataset.toml")
registry = Registry.from_path(base / "registry.json")
print(json.dumps({
    "dataset": manifest.dataset.name,
    "version": manifest.dataset.version,
    "tasks": {t.name: t.digest for t in manifest.tasks},
    "registry": [
        {"name": d.name, "version": d.version, "paths": [str(t.path) for t in d.tasks]}
        for d in registry.datasets
    ],
}))
"""


def _harbor(harbor_python: Path, script: str, *args: str) -> Any:
    proc = subprocess.run(
        [str(harbor_python), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("render")
    proc = run_cli("render", "--all", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out / "samples"


@pytest.fixture(scope="module")
def harbor_view(rendered: Path, harbor_python: Path) -> dict[str, Any]:
    data: dict[str, Any] = _harbor(harbor_python, CHECK_TASKS, str(rendered / "tasks"))
    return data


def test_every_task_toml_is_a_valid_harbor_task_config(
    rendered: Path, harbor_view: dict[str, Any]
) -> None:
    tasks = sorted(p.name for p in (rendered / "tasks").iterdir())
    assert len(tasks) == 5
    assert sorted(harbor_view) == tasks
    for slug, view in harbor_view.items():
        assert view["name"] == f"packager/{slug}"


def test_harbor_reuses_both_prebuilt_images(rendered: Path, harbor_view: dict[str, Any]) -> None:
    for slug, view in harbor_view.items():
        manifest = json.loads((rendered / "manifests" / slug / "oracle.json").read_text())
        assert view["mode"] == "separate"
        assert view["agent_image"] == manifest["agent_image"]
        assert view["agent_prebuilt"] is True  # never rebuilt from environment/Dockerfile
        assert view["grader_image"] == manifest["grader_image"]
        assert view["grader_dir"] == "tests"
        assert view["bundled_tests"] is True  # /tests comes from the grader image, not uploaded
        # Harbor's own no-network mode needs registry sidecars: the compose file blocks it.
        assert view["network_mode"] == "public"


def test_agent_and_grader_containers_have_no_network(rendered: Path) -> None:
    import yaml

    for task in sorted((rendered / "tasks").iterdir()):
        for folder, role in (("environment", "harbor-agent"), ("tests", "harbor-grader")):
            compose = yaml.safe_load((task / folder / "docker-compose.yaml").read_text())
            main = compose["services"]["main"]
            if task.name == "samples__todo-web-5" and folder == "tests":
                # A browser judge's grader reaches its model endpoint (on the host, by name).
                assert "network_mode" not in main
                assert main["extra_hosts"] == ["host.docker.internal:host-gateway"]
            else:
                assert main["network_mode"] == "none", (task.name, folder)
            assert main["labels"]["packager.tool"] == "packager"
            assert main["labels"]["packager.role"] == role
            assert main["labels"]["packager.task"] == f"samples/{task.name}"


def test_network_can_be_allowed_per_task() -> None:
    from packager.datasets.sources import open_dataset
    from packager.models.spec import Environment
    from packager.render.harbor import make_harbor_task
    from packager.run.select import Selection, iter_specs

    spec = next(iter_specs(Selection(dataset=open_dataset(None, "test"), all_tasks=True)))
    online = spec.model_copy(
        update={"environment": Environment(**{**spec.environment.model_dump(), "network": True})}
    )
    offline_task, online_task = make_harbor_task(spec), make_harbor_task(online)
    assert b"network_mode: none" in offline_task.files["environment/docker-compose.yaml"].data
    assert b"network_mode" not in online_task.files["environment/docker-compose.yaml"].data
    # The grader stays offline, and neither image changes.
    assert (
        online_task.files["tests/docker-compose.yaml"]
        == offline_task.files["tests/docker-compose.yaml"]
    )
    assert (online_task.agent_image, online_task.grader_image) == (
        offline_task.agent_image,
        offline_task.grader_image,
    )


def test_dataset_manifest_digests_match_harbor(
    rendered: Path, harbor_view: dict[str, Any], harbor_python: Path, tmp_path: Path
) -> None:
    from packager.render.harbor_dataset import write_harbor_dataset
    from packager.storage import OutputPaths

    paths = OutputPaths(rendered.parent, "samples")
    write_harbor_dataset(paths, name="samples", version="1.0")
    seen = _harbor(harbor_python, CHECK_DATASET, str(rendered))
    assert seen["dataset"] == "packager/samples"
    assert seen["version"] == "1.0"
    assert seen["tasks"] == {f"packager/{slug}": v["digest"] for slug, v in harbor_view.items()}
    assert seen["registry"] == [
        {"name": "samples", "version": "1.0", "paths": [f"tasks/{s}" for s in sorted(harbor_view)]}
    ]
    # The snapshot `packager build` adds to environment/ does not change a digest.
    task = rendered / "tasks" / "samples__textkit-1"
    (task / "environment" / "repo.tar").write_bytes(b"snapshot")
    try:
        again = _harbor(harbor_python, CHECK_TASKS, str(rendered / "tasks"))
    finally:
        (task / "environment" / "repo.tar").unlink()
    assert again["samples__textkit-1"]["digest"] == harbor_view["samples__textkit-1"]["digest"]
