"""Tar streams exchanged with containers: one file or a folder out of a `get_archive` stream,
and a stream of files for `put_archive`.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def read_tar_member(archive: bytes, name: str) -> bytes | None:
    """One file out of a `get_archive` tar stream, or None."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.isfile() and (member.name == name or member.name.endswith("/" + name)):
                fh = tar.extractfile(member)
                return fh.read() if fh else None
    return None


def extract_tree(archive: bytes, prefix: str, dest: Path) -> int:
    """Write the regular files under `prefix` of a `get_archive` tar stream into `dest`
    (paths below the prefix kept; anything that would land outside `dest` skipped).
    Returns how many files were written.
    """
    written = 0
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            rel = Path(member.name[len(prefix) :])
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                continue
            fh = tar.extractfile(member)
            if fh is None:
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fh.read())
            written += 1
    return written


def make_tar(files: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    """A tar stream for `put_archive` (paths relative to the target folder)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs: set[str] = set()
        for name in sorted(files):
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o777 if d.startswith("logs") else 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            info.mode = (modes or {}).get(name, 0o644)
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()
