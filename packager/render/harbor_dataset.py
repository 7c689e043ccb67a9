"""A rendered dataset as Harbor reads it: `dataset.toml`, `registry.json` and task digests.

`task_digest` (a task folder on disk) and `content_digest` (a task folder still in memory, a
render's file tree) are the content hash `harbor dataset add` computes: sha256 over one line
per file (its path, a NUL, its own sha256) for the files Harbor's publisher collects (task.toml,
instruction.md, environment/, tests/, solution/, ..., filtered by the task's .gitignore).
`write_harbor_dataset` writes the dataset's `dataset.toml` (those digests) and `registry.json`
(for `harbor run -d <name>@<version> --registry-path registry.json`, run from
`<out>/<dataset>`).
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import tomli_w

from packager.models.spec import TaskSpec
from packager.render.harbor import TASK_ORG, file_sha256
from packager.render.write import write_text

if TYPE_CHECKING:
    from packager.render import FileTree
    from packager.storage import OutputPaths

# Harbor's publish filter (publisher/packager.py): these names, unless the task has a .gitignore.
_DEFAULT_IGNORES = ("*.pyc", ".DS_Store", "*.swp", "*.swo", "*~")
_TASK_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
_TASK_DIRS = ("environment", "tests", "solution", "steps")


def _ignore_rules(gitignore: str | None, where: str) -> tuple[list[str], list[str], list[str]]:
    """(directory names, basename globs, anchored paths) of a task's .gitignore text, or
    Harbor's defaults. Supports the simple patterns this renderer writes; others raise.
    """
    lines = gitignore.splitlines() if gitignore is not None else ["__pycache__/", *_DEFAULT_IGNORES]
    dirs, globs, anchored = [], [], []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!") or "**" in line:
            raise ValueError(f"{where}: pattern {line!r} is not supported here")
        if line.startswith("/"):
            anchored.append(line[1:])
        elif line.endswith("/") and "/" not in line[:-1]:
            dirs.append(line[:-1])
        elif "/" not in line:
            globs.append(line)
        else:
            anchored.append(line)
    return dirs, globs, anchored


def select_task_files(rels: Iterable[str], gitignore: str | None, where: str) -> list[str]:
    """The paths Harbor hashes for a task (`Packager.collect_files`), from all of its paths.

    Harbor drops every .harborignore file; their rules (only honoured in tests/, solution/ and
    steps/) are not supported here, so a task that has one raises.
    """
    found: list[str] = []
    for rel in rels:
        parts = rel.split("/")
        if len(parts) == 1:
            if rel in _TASK_FILES:
                found.append(rel)
            continue
        if parts[0] not in _TASK_DIRS:
            continue
        if parts[-1] == ".harborignore":
            if parts[0] in ("tests", "solution", "steps"):
                raise ValueError(f"{where}/{rel}: not supported by the digest here")
            continue
        found.append(rel)
    try:
        dirs, glob, anchored = _compiled_rules(gitignore)
    except ValueError:
        _ignore_rules(gitignore, f"{where}/.gitignore")  # the same error, naming the task
        raise

    def ignored(rel: str) -> bool:
        parts = rel.split("/")
        return (
            any(part in dirs for part in parts[:-1])
            or glob.match(parts[-1]) is not None
            or any(a.match(rel) is not None or rel.startswith(prefix) for a, prefix in anchored)
        )

    return sorted(rel for rel in found if not ignored(rel))


@functools.lru_cache(maxsize=16)
def _compiled_rules(
    gitignore: str | None,
) -> tuple[frozenset[str], re.Pattern[str], tuple[tuple[re.Pattern[str], str], ...]]:
    """`_ignore_rules` as patterns, compiled once per .gitignore text (every task of a render
    has the same one): the basename globs as one pattern, each anchored path with its prefix.
    """
    dirs, globs, anchored = _ignore_rules(gitignore, ".gitignore")
    glob = re.compile("|".join(fnmatch.translate(g) for g in globs) or r"(?!)")
    return (
        frozenset(dirs),
        glob,
        tuple((re.compile(fnmatch.translate(a)), a.rstrip("/") + "/") for a in anchored),
    )


def task_files(task_dir: Path) -> list[str]:
    """The files Harbor hashes for a task folder on disk, as sorted POSIX paths."""
    task_dir = task_dir.resolve()
    rels = [p.relative_to(task_dir).as_posix() for p in task_dir.rglob("*") if p.is_file()]
    gitignore = task_dir / ".gitignore"
    text = gitignore.read_text() if gitignore.is_file() else None
    return select_task_files(rels, text, str(task_dir))


def _digest(entries: Iterable[tuple[str, bytes]]) -> str:
    """Harbor's content hash of (path, bytes) entries in the given order."""
    outer = hashlib.sha256()
    for rel, data in entries:
        outer.update(f"{rel}\0{file_sha256(data)}\n".encode())
    return f"sha256:{outer.hexdigest()}"


def task_digest(task_dir: Path) -> str:
    """`sha256:<hex>` exactly as `harbor dataset add` computes it (`compute_content_hash`)."""
    return _digest((rel, (task_dir / rel).read_bytes()) for rel in task_files(task_dir))


def content_digest(files: FileTree, where: str) -> str:
    """`task_digest` of a task folder still in memory (a render's file tree)."""
    gitignore = files.get(".gitignore")
    text = gitignore.data.decode() if gitignore is not None else None
    rels = select_task_files(files, text, where)
    return _digest((rel, files[rel].data) for rel in rels)


def folder_task_name(task_dir: Path) -> str:
    """The task name a task folder's task.toml gives (default: `packager/<folder name>`)."""
    config = tomllib.loads((task_dir / "task.toml").read_text())
    name = config.get("task", {}).get("name")
    return str(name) if name else f"{TASK_ORG}/{task_dir.name}"


def write_harbor_dataset(
    paths: OutputPaths,
    specs_or_task_dirs: Iterable[TaskSpec | Path] | None = None,
    name: str | None = None,
    version: str = "1.0",
    description: str | None = None,
    known_digests: dict[Path, str] | None = None,
    known_names: dict[Path, str] | None = None,
) -> tuple[Path, Path]:
    """Write `<out>/<dataset>/dataset.toml` and `registry.json`; returns both paths.

    Tasks: the given specs or task folders, or (None) every task folder under `tasks/`, so a
    render of a few rows keeps the others. `name` (default: the dataset folder name) is bare:
    `harbor run -d <name>@<version> --registry-path registry.json` from `<out>/<dataset>`
    (task paths in registry.json are relative to that folder); dataset.toml names it
    `packager/<name>`. `known_digests` and `known_names` (task folder → digest, name) skip
    re-reading folders that were just written from memory.
    """
    base = paths.base
    if specs_or_task_dirs is None:
        folders = sorted(p.parent for p in (base / "tasks").glob("*/task.toml"))
    else:
        folders = [
            paths.task_dir(item.provenance.slug) if isinstance(item, TaskSpec) else Path(item)
            for item in specs_or_task_dirs
        ]
    name = name or paths.dataset
    if "/" in name or "@" in name:
        raise ValueError(f"dataset name {name!r}: use a bare name (Harbor reads org/name as Hub)")
    text = description or f"{paths.dataset}: tasks made by packager"
    entries = []
    known_digests = known_digests or {}
    known_names = known_names or {}
    resolved_base = base.resolve()
    tasks = base / "tasks"
    plain = not tasks.is_symlink()  # then a folder just written there is tasks/<name>
    for folder in folders:
        digest = known_digests.get(folder)
        if digest is not None and plain and folder.parent == tasks:
            path = f"tasks/{folder.name}"  # just written there: no symlink to resolve
        else:
            resolved = folder.resolve()
            rel = os.path.relpath(resolved, resolved_base)
            path = Path(rel).as_posix() if not rel.startswith("..") else str(resolved)
        digest = digest or task_digest(folder)
        entry_name = known_names.get(folder) or folder_task_name(folder)
        entries.append({"name": entry_name, "digest": digest, "path": path})
    entries.sort(key=lambda e: e["name"])
    manifest = {
        "schema_version": "1.0",
        "dataset": {"name": f"{TASK_ORG}/{name}", "version": version, "description": text},
        "tasks": [{"name": e["name"], "digest": e["digest"]} for e in entries],
    }
    registry = [
        {
            "name": name,
            "version": version,
            "description": text,
            "metrics": [],
            "tasks": [{"name": e["name"], "path": e["path"]} for e in entries],
        }
    ]
    manifest_path = base / "dataset.toml"
    registry_path = base / "registry.json"
    write_text(manifest_path, tomli_w.dumps(manifest))
    write_text(registry_path, json.dumps(registry, indent=2, sort_keys=True) + "\n")
    return manifest_path, registry_path
