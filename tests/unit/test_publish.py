"""Publishing logic with real git (no Docker): registry names, the release copy's task.toml,
registry.json merging and the dataset repository's commits."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from packager.publish import (
    PublishError,
    Registry,
    commit_release,
    merge_registry,
    registry_entry,
    release_task,
    repo_url,
)


def test_registry_parse_and_names() -> None:
    reg = Registry.parse("127.0.0.1:5000/team/tasks")
    assert (reg.host, reg.namespace, reg.plain_http) == ("127.0.0.1:5000", "team/tasks", True)
    assert reg.remote("packager/samples.samples__textkit-1:agent-0123456789ab") == (
        "127.0.0.1:5000/team/tasks/samples.samples__textkit-1",
        "agent-0123456789ab",
    )
    assert Registry.parse("registry.example.org/x").plain_http is False
    assert reg.remote("debian:bookworm-slim") == (
        "127.0.0.1:5000/team/tasks/debian",
        "bookworm-slim",
    )
    assert reg.remote("ubuntu") == ("127.0.0.1:5000/team/tasks/ubuntu", "latest")
    for bad in ("127.0.0.1:5000", "host/UPPER", "/ns", "host:port/ns", ""):
        with pytest.raises(PublishError, match="HOST\\[:PORT\\]/NAMESPACE"):
            Registry.parse(bad)


def test_manifest_digest_unreachable_registry_is_a_clear_error() -> None:
    reg = Registry.parse("127.0.0.1:9/none")
    with pytest.raises(PublishError, match="does not answer"):
        reg.manifest_digest("127.0.0.1:9/none/x", "tag", timeout=2)


def test_pin_dockerfile_pins_only_named_images() -> None:
    from packager.publish import pin_dockerfile

    text = (
        "ARG X=1\nFROM --platform=linux/amd64 debian:bookworm-slim AS base\nFROM base\nRUN true\n"
    )
    pinned = pin_dockerfile(text, {"debian:bookworm-slim": "h/ns/debian@sha256:" + "3" * 64})
    assert "FROM --platform=linux/amd64 h/ns/debian@sha256:333" in pinned
    assert "FROM base\n" in pinned and pinned.endswith("RUN true\n")


def test_release_task_pins_images_and_drops_the_snapshot(tmp_path: Path) -> None:
    src = tmp_path / "task"
    (src / "environment").mkdir(parents=True)
    (src / "environment" / "repo.tar").write_bytes(b"snapshot")
    (src / "environment" / "Dockerfile").write_text("FROM x\n")
    (src / "task.toml").write_text(
        '[task]\nname = "packager/t"\n[environment]\ndocker_image = "packager/a:agent-1"\n'
        '[verifier]\ntimeout_sec = 10.0\n[verifier.environment]\ndocker_image = "packager/a:g"\n'
    )
    refs = {"agent": "h/ns/a@sha256:" + "1" * 64, "grader": "h/ns/a@sha256:" + "2" * 64}
    release_task(src, tmp_path / "out", refs)
    config = tomllib.loads((tmp_path / "out" / "task.toml").read_text())
    assert config["environment"]["docker_image"] == refs["agent"]
    assert config["verifier"]["environment"]["docker_image"] == refs["grader"]
    assert config["verifier"]["timeout_sec"] == 10.0
    assert config["metadata"]["grader_image"] == refs["grader"]
    assert not (tmp_path / "out" / "environment" / "repo.tar").exists()
    assert (tmp_path / "out" / "environment" / "Dockerfile").is_file()


def test_merge_registry_replaces_only_the_same_name_and_version() -> None:
    old = [
        registry_entry("a", "1.0", "", [("packager/x", "p")]),
        registry_entry("a", "2.0", "", [("packager/x", "p")]),
        registry_entry("b", "1.0", "", []),
    ]
    new = registry_entry("a", "2.0", "new", [("packager/y", "q")], git_url="u", git_commit_id="c")
    merged = merge_registry(old, new)
    assert [(e["name"], e["version"]) for e in merged] == [("a", "1.0"), ("a", "2.0"), ("b", "1.0")]
    assert merged[1]["tasks"] == [
        {"name": "packager/y", "path": "q", "git_url": "u", "git_commit_id": "c"}
    ]
    assert merge_registry("not a list", new) == [new]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def _release(tmp_path: Path, text: str) -> Path:
    tasks = tmp_path / f"release-{text}"
    for slug in ("t1", "t2"):
        (tasks / slug).mkdir(parents=True, exist_ok=True)
        (tasks / slug / "task.toml").write_text(f'[task]\nname = "packager/{slug}"\n# {text}\n')
    return tasks


def test_commit_release_is_idempotent_and_resolvable_by_commit(tmp_path: Path) -> None:
    repo = tmp_path / "ds.git"  # does not exist yet: created bare
    names = {"t1": "packager/t1", "t2": "packager/t2"}
    kw = {"name": "samples", "version": "1.0", "description": "d", "task_names": names}
    url, commits = commit_release(str(repo), _release(tmp_path, "v1"), **kw)  # type: ignore[arg-type]
    assert url == repo.resolve().as_uri()
    assert len(commits) == 2
    assert _git("config", "uploadpack.allowAnySHA1InWant", cwd=repo) == "true"
    # Same content again: no commit at all.
    assert commit_release(str(repo), _release(tmp_path, "v1"), **kw)[1] == []  # type: ignore[arg-type]
    # A changed task: one commit for the tasks, one for registry.json naming it.
    _, commits = commit_release(str(repo), _release(tmp_path, "v2"), **kw)  # type: ignore[arg-type]
    assert len(commits) == 2
    registry = json.loads(_git("show", "main:registry.json", cwd=repo))
    [entry] = registry
    task_commit = entry["tasks"][0]["git_commit_id"]
    assert task_commit == commits[0]
    assert entry["tasks"][0]["path"] == "datasets/samples/t1"
    # Fetch that commit the way Harbor does (shallow, blob filter, by id).
    clone = tmp_path / "harbor-clone"
    _git("clone", "-q", "--filter=blob:none", "--depth", "1", "--no-checkout", url, str(clone),
         cwd=tmp_path)  # fmt: skip
    _git("fetch", "-q", "--depth", "1", "origin", task_commit, cwd=clone)
    _git("checkout", "-q", task_commit, cwd=clone)
    assert "# v2" in (clone / "datasets" / "samples" / "t1" / "task.toml").read_text()


def test_repo_url_forms(tmp_path: Path) -> None:
    assert repo_url("https://example.org/x.git") == "https://example.org/x.git"
    assert repo_url("git@example.org:team/x.git") == "git@example.org:team/x.git"
    assert repo_url(str(tmp_path / "x.git")) == (tmp_path / "x.git").resolve().as_uri()
