"""Atomic writes of rendered trees into the output folder. The only module that writes files
for the render stage.

A folder is written completely into a temporary sibling, then swapped into place, so a failed
run leaves the previous output intact and never a half-written folder.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import tempfile
from pathlib import Path
from typing import Any

from packager.render import FileTree


def write_tree(dest: Path, tree: FileTree) -> None:
    """Replace `dest` with exactly `tree` (files with fixed modes, folders 0755)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp-"))
    try:
        os.chmod(tmp, 0o755)
        root = str(tmp)
        folders = sorted({posixpath.dirname(rel) for rel in tree} - {""})
        for folder in folders:
            os.makedirs(os.path.join(root, folder), mode=0o755, exist_ok=True)
            os.chmod(os.path.join(root, folder), 0o755)  # mkdir's mode is masked by the umask
        for rel in sorted(tree):
            item = tree[rel]
            target = os.path.join(root, rel)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(item.data)
            os.chmod(target, item.mode)
        swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def swap_into_place(new: Path, dest: Path) -> None:
    """Rename `new` to `dest`, moving any old `dest` aside first and removing it after."""
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.old-"))
        os.rmdir(old)
        os.replace(dest, old)
    os.replace(new, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (sorted keys, trailing newline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    """Write text atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
