"""Folders of mirrors: where such a folder keeps a repository, and every repository it holds."""

from __future__ import annotations

import os
from pathlib import Path

from packager.repos.names import canonical_repo_name


def _looks_like_source(path: Path) -> bool:
    """A bundle file, a bare repository or a working copy."""
    if path.is_file():
        return path.name.endswith(".bundle")
    if path.is_dir():
        bare = (path / "HEAD").is_file() and (path / "objects").is_dir()
        return bare or (path / ".git").exists()
    return False


def _child(parent: Path, name: str) -> Path | None:
    """`parent/name`, else the one entry whose name matches case-insensitively."""
    exact = parent / name
    if exact.exists():
        return exact
    try:
        entries = sorted(os.listdir(parent))
    except OSError:
        return None
    wanted = name.casefold()
    for entry in entries:
        if entry.casefold() == wanted:
            return parent / entry
    return None


def _mirror_layouts(owner: str, name: str) -> list[tuple[str, ...]]:
    return [
        (owner, f"{name}.git"),
        (owner, name),
        (f"{owner}+{name}.git",),
        (f"{owner}+{name}",),
        (f"{owner}__{name}.git",),
        (f"{owner}__{name}.bundle",),
    ]


def find_mirror(folder: Path, name: str) -> Path | None:
    """Where a folder of mirrors keeps `owner/name`, or None.

    Layouts, first match wins: `<owner>/<name>.git`, `<owner>/<name>` (bare or working copy),
    `<owner>+<name>.git`, `<owner>+<name>`, `<owner>__<name>.git`, `<owner>__<name>.bundle`.
    Names match case-insensitively when the exact spelling is absent.
    """
    owner, repo = canonical_repo_name(name).split("/")
    for parts in _mirror_layouts(owner, repo):
        path: Path | None = folder
        for part in parts:
            path = _child(path, part) if path is not None else None
        if path is not None and _looks_like_source(path):
            return path
    return None


def scan_mirror_dir(folder: Path) -> dict[str, str]:
    """Every repository a folder of mirrors holds: `owner/name` → location (as `find_mirror`)."""
    names: set[str] = set()
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return {}
    for entry in entries:
        base = entry.name
        for suffix in (".bundle", ".git"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        for sep in ("+", "__"):
            if sep in base:
                names.add(base.replace(sep, "/", 1))
                break
        else:
            if entry.is_dir() and not _looks_like_source(entry):
                for sub in sorted(entry.iterdir()):
                    sub_name = sub.name[: -len(".git")] if sub.name.endswith(".git") else sub.name
                    names.add(f"{entry.name}/{sub_name}")
    found: dict[str, str] = {}
    for candidate in sorted(names):
        try:
            canon = canonical_repo_name(candidate)
        except ValueError:
            continue
        location = find_mirror(folder, canon)
        if location is not None:
            found.setdefault(canon, str(location))
    return found
