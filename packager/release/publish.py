"""`packager publish`: release verified tasks where other machines can run them.

For each selected task (only `verified` ones unless asked otherwise):

1. **Images.** Tag its agent and grader images into `--registry HOST[:PORT]/NAMESPACE` and push
   them. An image whose pushed digest the registry already serves under the same tag is not
   pushed again.
2. **Release copy.** Write the task folder to `<out>/<dataset>/release/tasks/<task>/`, without
   the repository snapshot (baked into the agent image). Its `task.toml` names both images by
   digest (`HOST/NS/NAME@sha256:…`), so `harbor lint --select unpinned-image` is clean and a
   machine that never built them pulls exactly what was verified.
3. **Dataset files.** Write `dataset.toml` (task digests), `registry.json` and the release's
   evidence (`release.json`: per task its digests, images, verdict, label findings and stage
   seconds; `release/evidence.py`) beside the release tasks. A task whose folder's digest is no
   longer the one its verification recorded is refused: the release would ship bytes no run saw.
4. **Dataset repository** (`--dataset-repo PATH|URL`). Commit the release there, in the layout
   `harbor run -d NAME@VERSION --registry-path <clone>/registry.json` resolves:
   - tasks under `datasets/<name>/<task>/`;
   - `registry.json` at the root. Other datasets' and versions' entries are kept. This
     dataset's entry names the repository (`git_url`) and the commit holding its tasks
     (`git_commit_id`).

   Publishing again with nothing changed makes no commit. A PATH that does not exist yet becomes
   a new bare repository.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from packager.errors import PackagerError
from packager.images.build import base_images, image_exists
from packager.models.spec import TaskResult
from packager.release import evidence
from packager.render.harbor import SNAPSHOT_FILES
from packager.render.harbor_dataset import folder_task_name, task_digest
from packager.render.write import swap_into_place, write_text

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.storage import OutputPaths

RELEASE_DIR = "release"
DATASETS_DIR = "datasets"
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    )
)
_REGISTRY = re.compile(
    r"^(?P<host>[A-Za-z0-9.-]+(?::\d{1,5})?)/(?P<ns>[a-z0-9]+(?:[._-][a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)$"
)
LOOPBACK = ("localhost", "127.0.0.1", "::1")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "packager",
    "GIT_AUTHOR_EMAIL": "packager@example.invalid",
    "GIT_COMMITTER_NAME": "packager",
    "GIT_COMMITTER_EMAIL": "packager@example.invalid",
}


class PublishError(PackagerError):
    """Publishing could not be done (the message says what and how to fix it)."""


@dataclass(frozen=True)
class Registry:
    """Where images go: `host[:port]` and a namespace (`team/tasks`)."""

    host: str
    namespace: str

    @classmethod
    def parse(cls, text: str) -> Registry:
        """`HOST[:PORT]/NAMESPACE`; PublishError names what is wrong."""
        match = _REGISTRY.match(text.strip())
        if not match:
            raise PublishError(
                f"--registry {text!r}: expected HOST[:PORT]/NAMESPACE, e.g. 127.0.0.1:5000/tasks "
                "(namespace in lower case letters, digits and . _ -)"
            )
        return cls(match["host"], match["ns"])

    @property
    def plain_http(self) -> bool:
        """A registry on loopback speaks plain HTTP (as the Docker engine allows there)."""
        return self.host.rsplit(":", 1)[0] in LOOPBACK

    def remote(self, local_tag: str) -> tuple[str, str]:
        """The remote repository and tag for a local `packager/<dataset>.<slug>:<role>-<h>`."""
        repo, tag = local_tag, "latest"
        if ":" in local_tag.rsplit("/", 1)[-1]:
            repo, _, tag = local_tag.rpartition(":")
        name = repo.split("/", 1)[1] if repo.startswith("packager/") else repo
        return f"{self.host}/{self.namespace}/{name}", tag

    def manifest_digest(self, repository: str, tag: str, timeout: float = 30) -> str | None:
        """The digest the registry serves for `repository:tag`, or None when it has none."""
        path = repository.split("/", 1)[1]
        scheme = "http" if self.plain_http else "https"
        request = urllib.request.Request(
            f"{scheme}://{self.host}/v2/{path}/manifests/{tag}",
            method="HEAD",
            headers={"Accept": MANIFEST_TYPES},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                digest = response.headers.get("Docker-Content-Digest")
                return str(digest) if digest else None
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise PublishError(f"registry {self.host}: {exc.code} {exc.reason} for {path}") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise PublishError(
                f"registry {self.host} does not answer ({exc}); is it running and reachable?"
            ) from exc


@dataclass
class PublishedImage:
    role: str
    local: str
    reference: str
    """`host/ns/name@sha256:…`."""
    pushed: bool


@dataclass
class PublishedTask:
    task: str
    status: str
    images: list[PublishedImage] = field(default_factory=list)


@dataclass
class PublishReport:
    tasks: list[PublishedTask]
    skipped: dict[str, str]
    """Task → why it was not published (not verified, no images)."""
    release_dir: Path
    registry_json: Path
    dataset_repo: str | None = None
    branch: str | None = None
    """The dataset repository's branch the release was committed on."""
    commits: list[str] = field(default_factory=list)

    @property
    def pushed(self) -> int:
        return sum(1 for t in self.tasks for i in t.images if i.pushed)

    @property
    def unchanged(self) -> int:
        return sum(1 for t in self.tasks for i in t.images if not i.pushed)


def push_image(
    client: DockerClient, registry: Registry, local: str, log: Callable[[str], None]
) -> tuple[str, bool]:
    """Push `local` to the registry unless it already serves that very image; returns the
    digest reference and whether anything was pushed.
    """
    import docker.errors

    repository, tag = registry.remote(local)
    try:
        image = client.images.get(local)
    except docker.errors.ImageNotFound:
        raise PublishError(f"image {local} is not on this engine: package the task first") from None
    known = set(image.attrs.get("RepoDigests") or [])
    served = registry.manifest_digest(repository, tag)
    if served is not None and f"{repository}@{served}" in known:
        return f"{repository}@{served}", False
    image.tag(repository, tag)
    digest = None
    errors: list[str] = []
    for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
        if "error" in chunk:
            errors.append(str(chunk["error"]).strip())
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("Digest"):
            digest = str(aux["Digest"])
        if chunk.get("status") and chunk.get("id") is None:
            log(str(chunk["status"]))
    if errors or digest is None:
        raise PublishError(
            f"push of {repository}:{tag} failed: {errors[-1] if errors else 'no digest'}"
        )
    return f"{repository}@{digest}", True


def resolve_image(
    client: DockerClient | None, registry: Registry, local: str, log: Callable[[str], None]
) -> tuple[str, bool]:
    """`push_image` when this machine's engine has `local`; else the digest reference the
    registry already serves under its tag (pushed there by a Ray job, `--executor ray`).
    """
    if client is not None and image_exists(client, local):
        return push_image(client, registry, local, log)
    repository, tag = registry.remote(local)
    served = registry.manifest_digest(repository, tag)
    if served is None:
        where = "on this engine nor " if client is not None else ""
        raise PublishError(
            f"image {local} is neither {where}in {registry.host}/{registry.namespace}: package "
            "the task first (with --executor ray, give package the same --registry)"
        )
    return f"{repository}@{served}", False


def dockerfile_images(task_dir: Path) -> list[str]:
    """Every image a FROM line of the task's Dockerfiles names (build stages excluded)."""
    found: list[str] = []
    for dockerfile in sorted(task_dir.glob("*/Dockerfile")):
        for image in base_images(dockerfile.read_text(encoding="utf-8")):
            if image not in found:
                found.append(image)
    return found


def pin_dockerfile(text: str, pins: dict[str, str]) -> str:
    """`text` with every FROM of an image in `pins` naming its digest reference instead."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "FROM":
            image = next((w for w in words[1:] if not w.startswith("--")), "")
            if image in pins:
                lines[i] = line.replace(image, pins[image], 1)
    return "".join(lines)


def release_task(
    task_dir: Path, dest: Path, references: dict[str, str], pins: dict[str, str] | None = None
) -> None:
    """Copy a task folder without its snapshot: task.toml names the images by digest, and the
    Dockerfiles' FROM lines too (`pins`: image -> digest reference; the grader's base is the
    agent image).
    """
    ignore = shutil.ignore_patterns(*SNAPSHOT_FILES, "__pycache__")
    shutil.copytree(task_dir, dest, ignore=ignore, symlinks=True)
    for dockerfile in sorted(dest.glob("*/Dockerfile")):
        text = dockerfile.read_text(encoding="utf-8")
        dockerfile.write_text(pin_dockerfile(text, pins or {}), encoding="utf-8")
    toml_path = dest / "task.toml"
    config = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    config.setdefault("environment", {})["docker_image"] = references["agent"]
    verifier = config.setdefault("verifier", {})
    verifier.setdefault("environment", {})["docker_image"] = references["grader"]
    metadata = config.setdefault("metadata", {})
    metadata["agent_image"] = references["agent"]
    metadata["grader_image"] = references["grader"]
    toml_path.write_text(tomli_w.dumps(config), encoding="utf-8")


def registry_entry(
    name: str,
    version: str,
    description: str,
    tasks: Sequence[tuple[str, str]],
    *,
    git_url: str | None = None,
    git_commit_id: str | None = None,
) -> dict[str, Any]:
    """One dataset of a Harbor `registry.json` (tasks: (name, path) pairs)."""
    entries = []
    for task_name, path in sorted(tasks):
        item: dict[str, Any] = {"name": task_name, "path": path}
        if git_url is not None:
            item.update(git_url=git_url, git_commit_id=git_commit_id)
        entries.append(item)
    return {
        "name": name,
        "version": version,
        "description": description,
        "metrics": [],
        "tasks": entries,
    }


def merge_registry(existing: Any, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """`existing` (a registry.json array) with `entry` replacing the same name@version."""
    items = [
        e
        for e in (existing if isinstance(existing, list) else [])
        if isinstance(e, dict)
        and (e.get("name"), e.get("version")) != (entry["name"], entry["version"])
    ]
    items.append(entry)
    return sorted(items, key=lambda e: (str(e.get("name")), str(e.get("version"))))


def _git(args: Sequence[str], cwd: Path) -> str:
    # Not repos.git's environment: pushing may need the user's own git configuration
    # (credential helpers, URL rewrites), which that environment leaves out on purpose.
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_IDENTITY},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise PublishError(
            f"git {' '.join(args)} failed in the dataset repository: {proc.stderr.strip()}"
        )
    return proc.stdout.strip()


def repo_url(location: str) -> str:
    """The dataset repository as Harbor will clone it: local paths become `file://` URLs (a
    plain path would make git ignore `--depth`).
    """
    if re.match(r"^[a-z][a-z0-9+.-]*://", location) or re.match(r"^[\w.-]+@[\w.-]+:", location):
        return location
    return Path(location).resolve().as_uri()


def commit_release(
    location: str,
    release_tasks: Path,
    *,
    name: str,
    version: str,
    description: str,
    task_names: dict[str, str],
    branch: str | None = None,
) -> tuple[str, str, list[str]]:
    """Commit the release into the dataset repository; returns its URL, the branch committed
    on and the new commits.

    The commits go to `branch` when one is named, else to the branch the repository's HEAD
    names (an empty repository's too: `git init --bare` may name `master`), so that a plain
    clone of the repository checks the release out.
    """
    url = repo_url(location)
    if url.startswith("file://"):
        path = Path(location).resolve()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _git(["init", "--quiet", "--bare", "--initial-branch=main", str(path)], path.parent)
        if (path / "config").is_file() and not (path / ".git").exists():
            # Harbor fetches a task's commit by id, shallowly, with a blob filter.
            _git(["config", "uploadpack.allowAnySHA1InWant", "true"], path)
            _git(["config", "uploadpack.allowFilter", "true"], path)
    commits: list[str] = []
    with tempfile.TemporaryDirectory(prefix="packager-release-") as tmp:
        work = Path(tmp) / "repo"
        _git(["clone", "--quiet", url, str(work)], Path(tmp))
        branch = _release_branch(work, branch)
        rel = f"{DATASETS_DIR}/{name}"
        target = work / rel
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(release_tasks, target, symlinks=True)
        _git(["add", "-A", "--", rel], work)
        if _git(["status", "--porcelain", "--", rel], work):
            _git(
                ["commit", "--quiet", "-m", f"Release {name}@{version}: {len(task_names)} tasks"],
                work,
            )
            commits.append(_git(["rev-parse", "HEAD"], work))
        tasks_commit = _git(["log", "-1", "--format=%H", "--", rel], work)
        registry_path = work / "registry.json"
        existing = json.loads(registry_path.read_text()) if registry_path.is_file() else []
        entry = registry_entry(
            name,
            version,
            description,
            [(task_names[slug], f"{rel}/{slug}") for slug in sorted(task_names)],
            git_url=url,
            git_commit_id=tasks_commit,
        )
        text = json.dumps(merge_registry(existing, entry), indent=2, sort_keys=True) + "\n"
        if not registry_path.is_file() or registry_path.read_text() != text:
            registry_path.write_text(text)
            _git(["add", "registry.json"], work)
            _git(
                [
                    "commit",
                    "--quiet",
                    "-m",
                    f"registry.json: {name}@{version} at {tasks_commit[:12]}",
                ],
                work,
            )
            commits.append(_git(["rev-parse", "HEAD"], work))
        if commits:
            _git(["push", "--quiet", "origin", f"HEAD:refs/heads/{branch}"], work)
    return url, branch, commits


def _release_branch(work: Path, branch: str | None) -> str:
    """Check out the branch the release is committed on in the clone `work` and name it:
    `branch` (from the remote's branch of that name when there is one, else new from the
    remote's HEAD), or the branch the remote's HEAD names: git's clone checks that one out,
    an empty repository's unborn branch included. A detached remote HEAD gets `main`.
    """
    if branch is None:
        head = _git_ok(["symbolic-ref", "--quiet", "--short", "HEAD"], work)
        return head if head is not None else _checkout(work, "main")
    if _git_ok(["check-ref-format", "--branch", branch], work) is None:
        raise PublishError(f"--branch {branch!r} is not a valid git branch name")
    if _git_ok(["rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{branch}"], work):
        _git(["checkout", "--quiet", "-B", branch, f"origin/{branch}"], work)
        return branch
    return _checkout(work, branch)


def _checkout(work: Path, branch: str) -> str:
    """A new branch `branch` at the clone's HEAD (unborn in an empty clone)."""
    _git(["checkout", "--quiet", "-b", branch], work)
    return branch


def _git_ok(args: list[str], cwd: Path) -> str | None:
    """The output of git, or None when it exits non-zero (a question, not a failure)."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def select(results: Sequence[TaskResult], ids: Sequence[str], where: Path) -> list[TaskResult]:
    """The results of `ids` (instance ids or task names), in that order; all when `ids` is
    empty. An id with no result is an error naming them all (`where`: the results folder).
    """
    if not ids:
        return list(results)
    by_id = {r.instance_id: r for r in results} | {r.task: r for r in results}
    missing = [t for t in ids if t not in by_id]
    if missing:
        raise PackagerError(
            f"no results for {', '.join(missing)} under {where}: run `packager package` first"
        )
    return [by_id[t] for t in ids]


def publish(
    client: DockerClient | None,
    paths: OutputPaths,
    results: Sequence[TaskResult],
    *,
    registry: Registry,
    include_unverified: bool = False,
    dataset_repo: str | None = None,
    branch: str | None = None,
    name: str | None = None,
    version: str = "1.0",
    log: Callable[[str], None] = lambda _: None,
) -> PublishReport:
    """Push, copy and commit the release of `results` (see the module docstring)."""
    name = name or paths.dataset
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise PublishError(f"--name {name!r}: a bare dataset name (letters, digits, . _ -)")
    description = f"{paths.dataset}: tasks made and verified by packager"
    chosen, skipped = _publishable(paths, results, include_unverified)
    unbound = evidence.unbound_tasks(chosen, {r.task: paths.task_dir(r.task) for r in chosen})
    if unbound:
        raise PublishError(
            "not published: a release ships only the bytes that were verified; "
            + "; ".join(unbound)
        )
    release = paths.base / RELEASE_DIR
    release.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=release.parent, prefix=".release.tmp-"))
    try:
        published, task_names = _stage_tasks(client, registry, paths, chosen, staging, log)
        digests = _write_dataset_toml(staging, task_names, name, version, description)
        entries = {
            e.task: evidence.task_entry(
                r, task_names[e.task], digests[e.task], _roles(e.images), _metadata(paths, r.task)
            )
            for e, r in zip(published, chosen, strict=True)
        }
        write_text(
            staging / evidence.MANIFEST_FILE,
            evidence.dumps(evidence.manifest(name, version, entries)),
        )
        url = committed_on = None
        commits: list[str] = []
        if dataset_repo is not None:
            url, committed_on, commits = commit_release(
                dataset_repo,
                staging / "tasks",
                name=name,
                version=version,
                description=description,
                task_names=task_names,
                branch=branch,
            )
        local = registry_entry(
            name, version, description, [(task_names[s], f"tasks/{s}") for s in task_names]
        )
        write_text(staging / "registry.json", json.dumps([local], indent=2, sort_keys=True) + "\n")
        swap_into_place(staging, release)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return PublishReport(
        tasks=published,
        skipped=skipped,
        release_dir=release,
        registry_json=release / "registry.json",
        dataset_repo=url,
        branch=committed_on,
        commits=commits,
    )


def _roles(images: Sequence[PublishedImage]) -> dict[str, str]:
    """A task's published images by role (`base NAME` for each base image)."""
    return {i.role if i.role != "base" else f"base {i.local}": i.reference for i in images}


def _publishable(
    paths: OutputPaths, results: Sequence[TaskResult], include_unverified: bool
) -> tuple[list[TaskResult], dict[str, str]]:
    """The results to publish, and why each other one is skipped (none to publish: an error)."""
    chosen: list[TaskResult] = []
    skipped: dict[str, str] = {}
    for result in results:
        if result.status != "verified" and not include_unverified:
            skipped[result.task] = f"status {result.status} (--include-unverified publishes it)"
        elif set(result.images) != {"agent", "grader"}:
            skipped[result.task] = "no images built"
        elif not (paths.task_dir(result.task) / "task.toml").is_file():
            skipped[result.task] = "no task folder: render it again"
        else:
            chosen.append(result)
    if not chosen:
        raise PublishError(
            "nothing to publish: "
            + ("; ".join(f"{k}: {v}" for k, v in skipped.items()) or "no results")
        )
    return chosen, skipped


def _stage_tasks(
    client: DockerClient | None,
    registry: Registry,
    paths: OutputPaths,
    chosen: Sequence[TaskResult],
    staging: Path,
    log: Callable[[str], None],
) -> tuple[list[PublishedTask], dict[str, str]]:
    """Push each task's images and write its release copy under `staging/tasks`; the published
    tasks and each one's Harbor task name.
    """
    published: list[PublishedTask] = []
    task_names: dict[str, str] = {}
    for result in chosen:
        entry = PublishedTask(result.task, result.status)
        references = {}
        pins: dict[str, str] = {}
        for role in ("agent", "grader"):
            reference, pushed = resolve_image(client, registry, result.images[role], log)
            references[role] = reference
            pins[result.images[role]] = reference
            entry.images.append(PublishedImage(role, result.images[role], reference, pushed))
        # Base images (and the judge's) are pushed too, so every FROM in the release is
        # pinned and a rebuild from it starts from exactly what was verified.
        for image in dockerfile_images(paths.task_dir(result.task)):
            if image not in pins and "@sha256:" not in image:
                reference, pushed = resolve_image(client, registry, image, log)
                pins[image] = reference
                entry.images.append(PublishedImage("base", image, reference, pushed))
        release_task(paths.task_dir(result.task), staging / "tasks" / result.task, references, pins)
        task_names[result.task] = folder_task_name(staging / "tasks" / result.task)
        published.append(entry)
    return published, task_names


def _write_dataset_toml(
    staging: Path, task_names: dict[str, str], name: str, version: str, description: str
) -> dict[str, str]:
    """`dataset.toml`: the release's tasks by name with their content digests (returned, by
    task folder).
    """
    digests = {slug: task_digest(staging / "tasks" / slug) for slug in sorted(task_names)}
    manifest = {
        "schema_version": "1.0",
        "dataset": {"name": f"packager/{name}", "version": version, "description": description},
        "tasks": [
            {"name": task_names[s], "digest": digests[s]}
            for s in sorted(task_names, key=lambda t: task_names[t])
        ],
    }
    write_text(staging / "dataset.toml", tomli_w.dumps(manifest))
    return digests


def _metadata(paths: OutputPaths, slug: str) -> dict[str, Any]:
    """A task's task.toml metadata (empty when it cannot be read)."""
    try:
        config = tomllib.loads((paths.task_dir(slug) / "task.toml").read_text())
    except (OSError, ValueError):
        return {}
    metadata = config.get("metadata")
    return metadata if isinstance(metadata, dict) else {}
