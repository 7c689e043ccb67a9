"""Run folders: a host folder bind-mounted at `/logs` of a run's agent container and another
at `/logs` of its grader container, as Harbor mounts a trial's log folders. The patch and the
grader's results then pass through files, not through three `get_archive`/`put_archive` round
trips of 40-60 ms each.

Used only where the engine sees this process's files as they are (a local engine on a Unix
socket whose host is this host) and can leave files this process may delete (root, or a
rootless engine); otherwise, and whenever a run's folder turns out not to be shared, a run
goes through the archive calls as before (`packager.engines.containers`).

What a container leaves in its folder is untrusted (the agent phase runs the candidate's
solve.sh; the grader runs the candidate's code): it is read without following a symbolic link
at any level and only from regular files, as `get_archive` would have packed it.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MOUNTS_ENV = "PACKAGER_RUN_MOUNTS"
"""`0` turns run folders off (every run goes through the archive calls)."""

_USABLE: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_PROVEN: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def mounts_usable(client: Any) -> bool:
    """Whether runs on `client` may use run folders (asked once per client)."""
    if os.environ.get(MOUNTS_ENV, "1") == "0":
        return False
    try:
        cached = _USABLE.get(client)
    except TypeError:  # a client that cannot be weakly referenced: decide each time
        cached = None
    if cached is not None:
        return cached
    usable = _engine_shares_files(client)
    try:
        _USABLE[client] = usable
    except TypeError:
        pass
    return usable


def mark_shared(client: Any, shared: bool) -> None:
    """What a run showed: its agent container's files were (or were not) in its run folder.
    Not shared: later runs on `client` use the archive calls. Shared: the engine is proven to
    see the folders, so a patch may be handed to a grader through its folder.
    """
    try:
        (_PROVEN if shared else _USABLE)[client] = shared
    except TypeError:
        pass


def mounts_proven(client: Any) -> bool:
    """Whether a run on `client` has shown that its containers see their run folders."""
    try:
        return bool(_PROVEN.get(client)) and mounts_usable(client)
    except TypeError:
        return False


def _engine_shares_files(client: Any) -> bool:
    api = getattr(client, "api", None)
    base_url = str(getattr(api, "base_url", ""))
    if not base_url.startswith("http+docker://"):  # docker-py's URL for a Unix socket
        return False
    try:
        info = client.info()
    except Exception:  # noqa: BLE001 - an engine that cannot say: the archive calls
        return False
    if not isinstance(info, dict) or info.get("Name") != socket.gethostname():
        return False  # e.g. the host's socket mounted into this container
    rootless = any("rootless" in str(opt) for opt in info.get("SecurityOptions") or ())
    return os.geteuid() == 0 or rootless


@dataclass(frozen=True)
class RunFolders:
    """One run's host folders: `agent` is the agent container's /logs, `grader` the grader's."""

    agent: Path
    grader: Path


FOLDER_PREFIX = "packager-run-"
"""Run folders are `<tmp>/packager-run-<pid>-<random>`: a process killed before removing its
own leaves them, and the next process to make one removes those of dead processes."""
_SWEPT: list[bool] = []


def sweep_stale_folders(tmp: Path | None = None) -> int:
    """Remove the run folders of processes that no longer exist; how many were removed."""
    removed = 0
    for folder in Path(tmp or tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*-*"):
        pid = folder.name[len(FOLDER_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's): not ours to remove
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


@contextmanager
def run_folders(enabled: bool) -> Iterator[RunFolders | None]:
    """A run's folders (None when not `enabled`), removed on leaving."""
    if not enabled:
        yield None
        return
    if not _SWEPT:
        _SWEPT.append(True)
        sweep_stale_folders()
    root = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
    try:
        folders = RunFolders(root / "agent", root / "grader")
        for path in (folders.agent, folders.grader):
            path.mkdir()
            path.chmod(0o777)  # as the archive calls made /logs: writable by any image user
        yield folders
    finally:
        shutil.rmtree(root, ignore_errors=True)


def volume(folder: Path | None, solution: Path | None = None) -> dict[str, Any]:
    """The `volumes` argument that mounts `folder` at /logs and `solution` (read-only) at
    /solution (nothing without either). Paths are made absolute: the engine takes a relative
    one for the name of a volume (`--out build` renders the solution under a relative path).
    """
    binds: dict[str, Any] = {}
    if folder is not None:
        binds[os.path.abspath(folder)] = {"bind": "/logs", "mode": "rw"}
    if solution is not None:
        binds[os.path.abspath(solution)] = {"bind": "/solution", "mode": "ro"}
    return {"volumes": binds} if binds else {}


def _open_dir(fd: int, name: str) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)


def read_confined(root: Path, rel: str) -> bytes | None:
    """The regular file `rel` under `root`, or None: missing, not a regular file, or reached
    through a symbolic link anywhere below `root`.
    """
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = _open_dir(fd, part)
            os.close(fd)
            fd = inner
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        file_fd = os.open(parts[-1], flags, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read()


def copy_confined_tree(root: Path, rel: str, dest: Path) -> int:
    """Copy the regular files under `root/rel` into `dest` (paths below `rel` kept), never
    through a symbolic link; how many files were written.
    """
    written = 0
    pending = [rel.strip("/")]
    while pending:
        here = pending.pop()
        folder = root / here
        try:
            if not stat.S_ISDIR(folder.lstat().st_mode):
                continue
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            inner = f"{here}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                pending.append(inner)
                continue
            data = read_confined(root, inner)
            if data is None:
                continue
            target = dest / inner[len(rel.strip("/")) + 1 :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written += 1
    return written


def write_new(root: Path, rel: str, data: bytes, mode: int = 0o644) -> None:
    """Create the file `rel` under `root` (its folders too) for a container to read; fails
    rather than write through anything already there.
    """
    parts = [p for p in rel.split("/") if p]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, dir_fd=fd)
            except FileExistsError:
                pass
            inner = _open_dir(fd, part)
            os.close(fd)
            fd = inner
            os.fchmod(fd, 0o777)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        file_fd = os.open(parts[-1], flags, mode, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "wb") as fh:
        os.fchmod(fh.fileno(), mode)  # the mode asked for, whatever this process's umask
        fh.write(data)
