"""`packager clean`: remove what this tool left on the Docker engine, found by its labels.

Every image and container the tool makes carries `packager.tool=packager`, plus
`packager.task` and `packager.role`. `clean` removes:
- the containers;
- the images, newest first kept per task and role with `--keep-newest N`;
- the dangling intermediate images the legacy builder leaves (its build cache).

It never touches images it did not make: base images, published images pulled by digest, or
other projects' images. `disk_use` sums what the tool's images take, for the report.
`clean_caches` empties the machine cache's derived folders (`DERIVED_CACHES`), on request.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packager.images.build import LABEL_HOST, LABEL_PID, DockerClient, _pid_alive
from packager.render.naming import LABEL_ROLE, LABEL_TASK, LABEL_TOOL
from packager.storage import CACHE_FOLDERS, human_bytes

TOOL_FILTER = {"label": f"{LABEL_TOOL}=packager"}
DERIVED_CACHES = tuple(folder.name for folder in CACHE_FOLDERS if folder.derived)
"""Folders of the machine cache that every run can make again from its inputs
(`packager.storage.CACHE_FOLDERS`). `mirrors` (fetched repositories: a network fetch to make
again) and `locks` are not among them."""


@dataclass
class CleanReport:
    containers: int = 0
    images: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    build_cache: int = 0
    reclaimed_bytes: int = 0


def _created(image: Any) -> str:
    return str(image.attrs.get("Created", ""))


def clean(
    client: DockerClient,
    *,
    keep_newest: int = 0,
    task_glob: str | None = None,
    dry_run: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> CleanReport:
    """Remove the tool's containers, images (but the newest `keep_newest` per task and role)
    and dangling build layers; with `dry_run`, only say what would go.
    """
    import fnmatch

    import docker.errors

    report = CleanReport()
    layers_before = int(client.api.df().get("LayersSize") or 0)
    unique = {
        i["Id"]: max(0, int(i.get("Size") or 0) - max(0, int(i.get("SharedSize") or 0)))
        for i in client.api.df().get("Images") or []
    }
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters=TOOL_FILTER):
        labels = container.labels or {}
        task = labels.get(LABEL_TASK, "")
        if task_glob and not fnmatch.fnmatchcase(task, task_glob):
            continue
        pid = labels.get(LABEL_PID, "")
        if labels.get(LABEL_HOST) == host and pid.isdigit() and _pid_alive(int(pid)):
            log(f"kept container {container.name}: its run (pid {pid}) is still going")
            continue
        report.containers += 1
        if not dry_run:
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
    groups: dict[tuple[str, str], list[Any]] = {}
    for image in client.images.list(filters=TOOL_FILTER):
        labels = image.labels or {}
        task = labels.get(LABEL_TASK, "")
        if task_glob and not fnmatch.fnmatchcase(task, task_glob):
            continue
        groups.setdefault((task, labels.get(LABEL_ROLE, "")), []).append(image)
    doomed: list[Any] = []
    for images in groups.values():
        images.sort(key=_created, reverse=True)
        report.kept += [t for image in images[:keep_newest] for t in image.tags or [image.id]]
        doomed += images[keep_newest:]
    # Children (grader images) before their parents (agent images): newest first does that.
    doomed.sort(key=_created, reverse=True)
    for image in doomed:
        names = image.tags or [image.id]
        if dry_run:
            report.images += names
            report.reclaimed_bytes += unique.get(image.id, 0)
            log(f"would remove {', '.join(names)}")
            continue
        try:
            for name in names[1:]:
                client.images.remove(name)  # untag all but one, then the image itself
            client.images.remove(names[0])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # in use by a container of a live run
            log(f"kept {', '.join(names)}: {exc.explanation or exc}")
            report.kept += names
            continue
        report.images += names
        log(f"removed {', '.join(names)}")
    if not dry_run:
        dangling = {"dangling": True, "until": DANGLING_KEPT_FOR, **TOOL_FILTER}
        pruned = client.images.prune(filters=dangling)
        report.build_cache = len(pruned.get("ImagesDeleted") or [])
        report.reclaimed_bytes = max(0, layers_before - int(client.api.df().get("LayersSize") or 0))
    return report


DANGLING_KEPT_FOR = "2h"
"""Untagged images younger than this are kept: a build running beside the clean (another run
on this engine) has its finished steps as untagged images carrying the tool's label (inherited
from the agent image a grader image is built FROM); pruning one fails that build with "unknown
parent image ID" (seen when a test suite's clean ran beside a whole-dataset run)."""


def disk_use(client: DockerClient) -> dict[str, int]:
    """The tool's images on this engine: how many, their total size and the bytes only they
    use (layers not shared with other images, base images included).
    """
    data = client.api.df()
    images = [
        i for i in data.get("Images") or [] if (i.get("Labels") or {}).get(LABEL_TOOL) == "packager"
    ]
    return {
        "images": len(images),
        "size_bytes": sum(int(i.get("Size") or 0) for i in images),
        "unique_bytes": sum(
            max(0, int(i.get("Size") or 0) - max(0, int(i.get("SharedSize") or 0))) for i in images
        ),
    }


def dataset_disk(client: DockerClient, images: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """What one dataset's images take on the engine (`layer_use`): `dataset_bytes`, every
    layer counted once; `task_unique_*`, the bytes of layers only one task's images hold
    (median and largest over the tasks), what each further row of the dataset costs.
    """
    total, per_task = layer_use(client, images)
    unique = sorted(per_task.values())
    return {
        "dataset_bytes": total,
        "task_unique_median": unique[len(unique) // 2] if unique else 0,
        "task_unique_max": unique[-1] if unique else 0,
    }


def layer_use(
    client: DockerClient, images: Mapping[str, Iterable[str]]
) -> tuple[int, dict[str, int]]:
    """The bytes of every layer of `images` (task -> its image tags) counted once, and per task
    the bytes of the layers only its images hold. An image's own bytes are its size less its
    parent's (the legacy builder keeps every step's image as the parent of the next); walking
    each tag's parents to the base gives the layers it holds.
    """
    inspected: dict[str, dict[str, Any]] = {}
    users: dict[str, set[str]] = {}

    def inspect(ref: str) -> dict[str, Any] | None:
        if ref not in inspected:
            try:
                inspected[ref] = dict(client.api.inspect_image(ref))
            except Exception:  # noqa: BLE001 - an image gone since the run: not counted
                return None
        return inspected[ref]

    def own_bytes(data: Mapping[str, Any]) -> int:
        parent = inspect(str(data.get("Parent") or "")) if data.get("Parent") else None
        below = int(parent.get("Size") or 0) if parent else 0
        return max(0, int(data.get("Size") or 0) - below)

    def chain(ref: str) -> list[tuple[str, int]]:
        out = []
        data = inspect(ref)
        while data is not None:
            out.append((str(data["Id"]), own_bytes(data)))
            data = inspect(str(data["Parent"])) if data.get("Parent") else None
        return out

    own: dict[str, int] = {}
    for task, tags in images.items():
        for tag in tags:
            for node, size in chain(tag):
                own[node] = size
                users.setdefault(node, set()).add(task)
    per_task = {task: sum(own[n] for n, who in users.items() if who == {task}) for task in images}
    return sum(own.values()), per_task


def folder_bytes(path: Path) -> int:
    """The bytes the files under `path` take, each file once however many links it has (the
    snapshot tars an output folder links from the machine cache, a file linked into two task
    folders).
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    for item in path.rglob("*"):
        try:
            info = item.lstat()
        except OSError:
            continue
        if not item.is_file() or item.is_symlink() or (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        total += info.st_size
    return total


def _size(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        try:
            if item.is_file() and not item.is_symlink():
                total += item.stat().st_size
        except OSError:
            continue
    return total


def clean_caches(
    root: Path, *, dry_run: bool = False, log: Callable[[str], None] = lambda _: None
) -> int:
    """Empty the derived folders of the machine cache at `root` (`DERIVED_CACHES`); the bytes
    they held. Files shared by hard links with an output folder stay there.
    """
    total = 0
    for name in DERIVED_CACHES:
        folder = root / name
        if not folder.is_dir():
            continue
        size = _size(folder)
        total += size
        log(f"{'would empty' if dry_run else 'emptied'} {folder} ({human_bytes(size)})")
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
    return total
