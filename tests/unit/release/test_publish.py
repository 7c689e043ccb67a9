"""Publishing logic with real git (no Docker): registry names, the release copy's task.toml,
registry.json merging and the dataset repository's commits."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from packager.errors import PackagerError
from packager.release.publish import (
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
    from packager.release.publish import pin_dockerfile

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
    url, branch, commits = commit_release(str(repo), _release(tmp_path, "v1"), **kw)  # type: ignore[arg-type]
    assert url == repo.resolve().as_uri()
    assert branch == "main"
    assert len(commits) == 2
    assert _git("config", "uploadpack.allowAnySHA1InWant", cwd=repo) == "true"
    # Same content again: no commit at all.
    assert commit_release(str(repo), _release(tmp_path, "v1"), **kw)[2] == []  # type: ignore[arg-type]
    # A changed task: one commit for the tasks, one for registry.json naming it.
    _, _, commits = commit_release(str(repo), _release(tmp_path, "v2"), **kw)  # type: ignore[arg-type]
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


NAMES = {"t1": "packager/t1", "t2": "packager/t2"}


def _publish_into(repo: Path, tmp_path: Path, text: str, branch: str | None = None) -> str:
    _, committed_on, commits = commit_release(
        str(repo), _release(tmp_path, text), name="samples", version="1.0", description="d",
        task_names=NAMES, branch=branch,
    )  # fmt: skip
    assert len(commits) == 2
    return committed_on


def _plain_clone(repo: Path, to: Path) -> Path:
    """The repository as a user clones it: whatever its HEAD names is checked out."""
    _git("clone", "-q", str(repo), str(to), cwd=to.parent)
    return to


def test_commit_release_goes_to_the_branch_an_empty_repositorys_head_names(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "ds.git"
    _git("init", "-q", "--bare", "--initial-branch=master", str(repo), cwd=tmp_path)
    assert _publish_into(repo, tmp_path, "v1") == "master"
    assert _git("for-each-ref", "--format=%(refname)", cwd=repo) == "refs/heads/master"
    clone = _plain_clone(repo, tmp_path / "clone")
    assert "# v1" in (clone / "datasets" / "samples" / "t1" / "task.toml").read_text()
    assert (clone / "registry.json").is_file()


def test_commit_release_follows_a_repositorys_head_and_a_named_branch(tmp_path: Path) -> None:
    # A dataset repository with history on `trunk`, its HEAD.
    repo = tmp_path / "ds.git"
    _git("init", "-q", "--bare", "--initial-branch=trunk", str(repo), cwd=tmp_path)
    seed = tmp_path / "seed"
    _git("init", "-q", "--initial-branch=trunk", str(seed), cwd=tmp_path)
    (seed / "README.md").write_text("datasets\n")
    _git("add", "README.md", cwd=seed)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=seed)
    _git("push", "-q", str(repo), "trunk", cwd=seed)

    assert _publish_into(repo, tmp_path, "v1") == "trunk"
    clone = _plain_clone(repo, tmp_path / "clone")
    assert (clone / "README.md").is_file() and (clone / "registry.json").is_file()

    # --branch: a new branch starts from HEAD's history; trunk is left as it was.
    trunk = _git("rev-parse", "trunk", cwd=repo)
    assert _publish_into(repo, tmp_path, "v2", branch="next") == "next"
    assert _git("rev-parse", "trunk", cwd=repo) == trunk
    assert _git("merge-base", "--is-ancestor", trunk, "next", cwd=repo) == ""
    assert "# v2" in _git("show", "next:datasets/samples/t1/task.toml", cwd=repo)
    # Publishing on it again continues it (fast-forward), still not touching trunk.
    before = _git("rev-parse", "next", cwd=repo)
    assert _publish_into(repo, tmp_path, "v3", branch="next") == "next"
    assert _git("rev-parse", "next~2", cwd=repo) == before
    assert _git("rev-parse", "trunk", cwd=repo) == trunk

    with pytest.raises(PublishError, match="--branch 'bad..name'"):
        _publish_into(repo, tmp_path, "v4", branch="bad..name")


def test_repo_url_forms(tmp_path: Path) -> None:
    assert repo_url("https://example.org/x.git") == "https://example.org/x.git"
    assert repo_url("git@example.org:team/x.git") == "git@example.org:team/x.git"
    assert repo_url(str(tmp_path / "x.git")) == (tmp_path / "x.git").resolve().as_uri()


def test_select_takes_ids_or_task_names_in_order_and_names_the_missing(tmp_path: Path) -> None:
    from packager.models.spec import TaskResult
    from packager.release.publish import select

    results = [
        TaskResult(task=f"ds__{i}", instance_id=i, dataset="ds", status="verified", engine="local")
        for i in ("a-1", "b-2")
    ]
    assert select(results, [], tmp_path) == results
    assert select(results, ["ds__b-2", "a-1"], tmp_path) == [results[1], results[0]]
    with pytest.raises(PackagerError, match="no results for c-3, d-4 under .*package` first"):
        select(results, ["a-1", "c-3", "d-4"], tmp_path)
