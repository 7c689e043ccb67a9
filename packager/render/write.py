"""Atomic writes of rendered trees into the output folder. The only module that writes files
for the render stage.

A folder is written completely into a hidden staging folder beside it, then renamed into place,
so a failed run leaves the previous output intact and never a half-written folder. A render
stages every task before it places any (`Staging`), so a bad row leaves nothing behind at all.

Creating files dominates a render (issue 10: about 30 per task), so each one costs the fewest
system calls: folders are made once, and modes are set by `open`/`mkdir` themselves unless the
umask would change them (then each is fixed with `chmod`). A large file every task carries
(the grading runtime's zipapp, twice per task) is written once per staging process and
hard-linked after that: 2,000 tasks would otherwise write 470 MB of the same bytes.
A file made from the very bytes object of a file staged before (the grader payload, in both
the task's tests/ and its HUD folder; a constant such as the task's .gitignore) is a hard link
too (issue 20): a link allocates no inode, and allocating inodes is most of a render's kernel
time (on ext4 without a journal, each one skips every recently freed inode of its group). Two
paths of one staged folder never share a file (a build context holds no hard links).
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from packager.render import FileTree

DIR_MODE = 0o755
SHARE_MIN_BYTES = 32 * 1024
"""Files at least this large are hard-linked to an identical file staged before."""
SHARE_MAX_FILES = 32
"""Distinct large files remembered per Staging (memory stays flat over any number of rows)."""
SAME_MAX_FILES = 256
"""Smaller files remembered by their bytes object, newest first (a few MB at most)."""
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class Staging:
    """Folders of `root` written into a hidden `root/.staging-*` folder, then placed one by one.

    `write(dest, tree)` stages a folder (`dest` is inside `root`); `place(dest)` renames it over
    `dest`, so `dest` appears complete or not at all. Leaving the `with` block removes whatever
    was not placed; when it is left by an exception, so are the empty folders made for the
    staging folder (a render that fails on a bad row leaves no trace).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dir: str | None = None
        self._created: Path | None = None
        """The topmost folder made for the staging folder (removed again on failure)."""
        self._made: set[str] = set()
        """Shared folders known to exist (a handful: not one per task)."""
        self._kept_bits: int | None = None
        """The bits of DIR_MODE the umask lets through (found on the first folder made)."""
        self._old = 0
        self._shared: dict[tuple[bytes, int], str] = {}
        """A staged copy of each large file, by content and mode (see SHARE_MIN_BYTES)."""
        self._same: dict[tuple[int, int], tuple[bytes, str]] = {}
        """A staged copy of each recent smaller file, by the id of its bytes object and its
        mode (the object is kept, so its id is not reused while it is remembered)."""

    def __enter__(self) -> Staging:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(failed=exc_type is not None)

    def close(self, *, failed: bool = False) -> None:
        """Remove the staging folder (and, when `failed`, the empty folders made for it)."""
        if self._dir is None:
            return
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
        if failed and self._created is not None:
            folder = self.root
            while True:
                try:
                    folder.rmdir()  # only while empty: never anything another writer put there
                except OSError:
                    break
                if folder == self._created:
                    break
                folder = folder.parent

    def folder(self) -> str:
        """The staging folder (made on first use)."""
        if self._dir is None:
            missing = self.root
            while not missing.parent.exists() and missing.parent != missing:
                missing = missing.parent
            self._created = missing if not missing.exists() else None
            self.root.mkdir(parents=True, exist_ok=True)
            self._dir = tempfile.mkdtemp(dir=self.root, prefix=".staging-")
        return self._dir

    def _mkdir(self, path: str) -> None:
        """Make one folder (its parent exists), mode DIR_MODE."""
        os.mkdir(path, DIR_MODE)
        if self._kept_bits is None:  # the first folder made tells what the umask keeps
            self._kept_bits = os.stat(path).st_mode & DIR_MODE
        if self._kept_bits != DIR_MODE:
            os.chmod(path, DIR_MODE)  # mkdir's mode is masked by the umask

    def _makedirs(self, path: str) -> None:
        """Make a shared folder (`tasks/`, ...) and its missing parents, once per Staging."""
        if path in self._made:
            return
        parent = os.path.dirname(path)
        if parent != path and parent not in self._made and not os.path.isdir(parent):
            self._makedirs(parent)
        try:
            self._mkdir(path)
        except FileExistsError:
            pass
        self._made.add(path)

    def write(self, dest: Path, tree: FileTree) -> None:
        """Stage `tree` as the folder `dest` (files with their modes, folders 0755)."""
        rel = dest.relative_to(self.root).as_posix()
        top = os.path.join(self.folder(), rel)
        self._makedirs(os.path.dirname(top))
        self._mkdir(top)
        folders = set()
        for path in tree:
            folder = posixpath.dirname(path)
            while folder and folder not in folders:
                folders.add(folder)
                folder = posixpath.dirname(folder)
        for folder in sorted(folders):
            self._mkdir(os.path.join(top, folder))
        kept = self._kept_bits or 0  # set by the mkdir of `top`; 0 would chmod every file
        used: set[str] = set()
        """The staged files this folder has a path to (no two of its paths share one)."""
        for path, item in tree.items():
            target = os.path.join(top, path)
            data, mode = item.data, item.mode
            large = len(data) >= SHARE_MIN_BYTES
            if self._link(data, mode, target, large, used):
                continue
            fd = os.open(target, _CREATE, mode)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            if mode & ~kept:
                os.chmod(target, mode)  # open's mode is masked by the umask
            used.add(target)
            if large:
                if len(self._shared) < SHARE_MAX_FILES:
                    self._shared[(data, mode)] = target
            elif (id(data), mode) not in self._same:
                self._same[(id(data), mode)] = (data, target)
                if len(self._same) > SAME_MAX_FILES:
                    del self._same[next(iter(self._same))]  # the oldest

    def _link(self, data: bytes, mode: int, target: str, large: bool, used: set[str]) -> bool:
        """Hard-link `target` to a staged file with these bytes and mode (large: equal bytes;
        smaller: the same bytes object), if one is still in the staging folder and not yet in
        this folder (a placed folder has moved: then the bytes are written again). Files are
        only ever created, never rewritten, so the names sharing a file stay alike.
        """
        if large:
            staged = self._shared.get((data, mode))
        else:
            found = self._same.get((id(data), mode))
            staged = found[1] if found is not None and found[0] is data else None
        if staged is None or staged in used:
            return False
        try:
            os.link(staged, target)
        except OSError:
            if large:
                del self._shared[(data, mode)]
            else:
                del self._same[(id(data), mode)]
            return False
        if not large:  # remembered as the newest: a constant every task has stays
            self._same[(id(data), mode)] = self._same.pop((id(data), mode))
        used.add(staged)
        return True

    def place_new(self, dest: Path) -> bool:
        """Rename the staged folder `dest` (a folder of folders, e.g. `tasks/`) into place
        whole when nothing is there yet: one rename instead of one per task. False (nothing
        moved) when `dest` holds something, or nothing of it was staged.
        """
        if self._dir is None or os.path.lexists(dest):
            return False
        staged = os.path.join(self._dir, dest.relative_to(self.root).as_posix())
        if not os.path.isdir(staged):
            return False
        self._makedirs(str(dest.parent))
        try:
            os.rename(staged, dest)  # an empty folder made meanwhile is replaced, too
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                return False  # made and filled meanwhile: placed one by one instead
            raise
        self._made = {m for m in self._made if m != staged and not m.startswith(staged + "/")}
        return True

    def place(self, dest: Path) -> Path:
        """Rename the staged `dest` into place, replacing (then removing) what is there."""
        if self._dir is None:
            raise ValueError(f"{dest}: nothing staged")
        rel = dest.relative_to(self.root).as_posix()
        staged = os.path.join(self._dir, rel)
        self._makedirs(str(dest.parent))
        try:
            os.rename(staged, dest)  # replaces a missing or empty folder in one step
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
            self._old += 1
            old = os.path.join(self._dir, f".old-{self._old}")
            os.rename(dest, old)
            os.rename(staged, dest)
            if os.path.isdir(old) and not os.path.islink(old):
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.unlink(old)
        return dest


def write_tree(dest: Path, tree: FileTree) -> None:
    """Replace `dest` with exactly `tree` (files with fixed modes, folders 0755)."""
    with Staging(dest.parent) as staging:
        staging.write(dest, tree)
        staging.place(dest)


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
