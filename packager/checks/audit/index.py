"""Layer indexes: what the audit's matching needs from one layer tar, read once and kept on this
machine under the layer's digest (its diff id, the sha256 of the tar as read) and the audit's
code (`code_digest`), so a layer shared by many images (the base, a repository's environment)
is read by the first audit that meets it and never again.

An index holds nothing of any task: every regular file's path, size and sha256; the 8-byte
blake2b hashes of each text file's evidence lines (`norm_lines`, files up to MAX_LINE_SCAN), as
a sorted table from line hash to the files that hold the line; whiteouts and opaque folders;
every git metadata file of any `.git/` folder; and the git objects (loose and packs) as they
are. A task's secrets are matched against it later (`LayerIndex.hits`, `LayerIndex.with_digest`):
the same candidates a full read finds, plus at most a hash collision's (never one fewer).

Indexes are written to a scratch folder next to their place and renamed into it: a reader sees
a whole index or none, and of two processes indexing the same layer the first rename wins.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import time
import uuid
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from packager.checks.audit.evidence import is_binary, norm_lines, sha256_hex
from packager.storage import AUDIT_LAYERS

MAX_LINE_SCAN = 64 * 1024 * 1024
"""Files above this size are hashed (exact copies are still found) but not split into lines."""
ARCHIVE_SUFFIXES = (".whl", ".egg")
"""Zip archives of Python packages whose members are indexed as files under the archive's path
(`…/requests-2.25.1-py2.py3-none-any.whl/requests/models.py`): ensurepip's wheels and
Debian's python-wheels hold zipped copies of packages an installer vendors."""
_META = "meta.json"
_GIT_META = (
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "packed-refs",
    "config",
    "shallow",
    "objects/info/alternates",
    "objects/info/http-alternates",
)


OBJ_RE = re.compile(
    r"^(?P<store>(?:.*/)?objects)/(?P<rest>[0-9a-f]{2}/[0-9a-f]{38}|pack/pack-[0-9a-f]+\.(?:pack|idx))$"
)


def clean_name(name: str) -> str:
    """A tar member's name without leading `./` and surrounding slashes."""
    while name.startswith("./"):
        name = name[2:]
    return name.strip("/")


def whiteout(name: str, deleted: set[str], opaque: set[str]) -> bool:
    """Note a whiteout or opaque marker; whether `name` was one."""
    if not name.rpartition("/")[2].startswith(".wh."):
        return False
    base = PurePosixPath(name).name
    parent = str(PurePosixPath(name).parent)
    if base == ".wh..wh..opq":
        opaque.add("/" + parent if parent != "." else "/")
        return True
    if base.startswith(".wh."):
        gone = base[4:]
        deleted.add("/" + (f"{parent}/{gone}" if parent != "." else gone))
        return True
    return False


def code_digest() -> bytes:
    """The bytes of every module of the audit package, by name, and of the diff parser it
    reads patches with: any change of the audit's code is a new key (of verdicts and indexes).
    """
    here = Path(__file__).parent
    h = hashlib.sha256()
    for path in [*sorted(here.glob("*.py")), here.parent.parent / "diffs.py"]:
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.digest()


def line_hash(line: bytes) -> int:
    """The 8-byte hash an evidence line is indexed under."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


def is_git_meta(rel: str) -> bool:
    """Whether `rel` (a path inside a `.git/` folder) is repository metadata the audit reads."""
    return rel in _GIT_META or rel.endswith("_HEAD") or rel.startswith(("refs/", "logs/"))


def git_meta_name(name: str) -> bool:
    """Whether the tar member `name` is metadata of some `.git/` folder (any workdir)."""
    start = 0
    while (at := name.find(".git/", start)) >= 0:
        if (at == 0 or name[at - 1] == "/") and is_git_meta(name[at + 5 :]):
            return True
        start = at + 1
    return False


def index_root() -> Path:
    """The machine's layer indexes for this audit code (next to the audit verdicts)."""
    return AUDIT_LAYERS.path() / code_digest().hex()[:16]


def index_dir(root: Path, diff_id: str) -> Path:
    """Where the index of the layer `diff_id` lives under `root`."""
    hexa = diff_id.removeprefix("sha256:")
    return root / hexa[:2] / hexa


@dataclass
class LayerIndex:
    """One layer's index, loaded (the line table as arrays; git objects stay in `path`)."""

    path: Path
    diff_id: str
    files: list[tuple[str, str, int]]
    """(path, sha256, size) of every regular file, git objects included (sha256 "")."""
    deleted: set[str] = field(default_factory=set)
    opaque: set[str] = field(default_factory=set)
    git_meta: dict[str, bytes] = field(default_factory=dict)
    """Member name (no leading slash) → content, for every `.git/` metadata file."""
    n_scanned: int = 0
    n_bytes: int = 0
    not_line_scanned: int = 0
    lines: array[int] = field(default_factory=lambda: array("Q"))
    starts: array[int] = field(default_factory=lambda: array("I"))
    fids: array[int] = field(default_factory=lambda: array("I"))
    _by_digest: dict[str, list[int]] | None = None

    def hits(self, anchors: Iterable[tuple[int, bytes]]) -> dict[int, set[bytes]]:
        """File id → the anchor lines it holds, for anchors given as (`line_hash`, line)."""
        out: dict[int, set[bytes]] = {}
        n = len(self.lines)
        for h, line in anchors:
            i = bisect_left(self.lines, h)
            if i < n and self.lines[i] == h:
                for fid in self.fids[self.starts[i] : self.starts[i + 1]]:
                    out.setdefault(fid, set()).add(line)
        return out

    def with_digest(self, digest: str) -> list[int]:
        """The ids of the files whose sha256 is `digest`."""
        if self._by_digest is None:
            self._by_digest = {}
            for fid, (_, d, _) in enumerate(self.files):
                if d:
                    self._by_digest.setdefault(d, []).append(fid)
        return self._by_digest.get(digest, [])

    def object_stores(self) -> list[Path]:
        """The folders of git objects this layer holds (each with its `where`)."""
        root = self.path / "objects"
        return sorted(p for p in root.iterdir() if (p / "where").is_file()) if root.is_dir() else []


def load_index(path: Path) -> LayerIndex | None:
    """The index at `path`, or None when there is none (or it cannot be read whole)."""
    try:
        meta = json.loads((path / _META).read_text())
        tables = [array(code) for code in ("Q", "I", "I")]
        for table, name in zip(tables, ("lines.bin", "starts.bin", "fids.bin"), strict=True):
            table.frombytes((path / name).read_bytes())
            if sys.byteorder == "big":
                table.byteswap()
    except (OSError, ValueError):
        return None
    lines, starts, fids = tables
    if len(starts) != len(lines) + 1 or (len(lines) and starts[-1] != len(fids)):
        return None
    return LayerIndex(
        path,
        str(meta["diff_id"]),
        [(str(p), str(d), int(s)) for p, d, s in meta["files"]],
        set(meta["deleted"]),
        set(meta["opaque"]),
        {k: base64.b64decode(v) for k, v in meta["git_meta"].items()},
        int(meta["n_scanned"]),
        int(meta["n_bytes"]),
        int(meta["not_line_scanned"]),
        lines,
        starts,
        fids,
    )


class IndexBuilder:
    """Builds one layer's index in a scratch folder, member by member."""

    def __init__(self, scratch: Path) -> None:
        self.dir = scratch
        self.dir.mkdir(parents=True)
        self.files: list[tuple[str, str, int]] = []
        self.deleted: set[str] = set()
        self.opaque: set[str] = set()
        self.git_meta: dict[str, bytes] = {}
        self.pairs_h = bytearray()
        """The 8-byte line hashes of every (file, line) pair, as `line_hash` digests."""
        self.pairs_f = array("I")
        self.n_scanned = self.n_bytes = self.not_line_scanned = 0

    def read_tar(self, fh: IO[bytes]) -> None:
        """Index every member of the layer tar `fh` (a stream)."""
        with tarfile.open(fileobj=fh, mode="r|*") as tar:
            for member in tar:
                name = clean_name(member.name)
                if whiteout(name, self.deleted, self.opaque) or not member.isfile():
                    continue
                src = tar.extractfile(member)
                obj = OBJ_RE.match(name)
                if src is not None and obj is not None:
                    self._keep_object(src, obj["store"], obj["rest"])
                    self.files.append(("/" + name, "", member.size))
                elif src is not None:
                    self.add_file(name, src.read())

    def add_file(self, name: str, data: bytes, *, member: bool = False) -> None:
        """Index one regular file (not a git object) of the layer; a Python package archive's
        members too, each as a file under the archive's path (a later layer deleting the
        archive hides them as it hides a folder's files).
        """
        fid = len(self.files)
        digest = sha256_hex(data)
        self.files.append(("/" + name, digest, len(data)))
        self.n_scanned += 1
        self.n_bytes += len(data)
        if git_meta_name(name):
            self.git_meta[name] = data
        if len(data) > MAX_LINE_SCAN:
            self.not_line_scanned += 1
        elif not is_binary(data):
            blake2b = hashlib.blake2b
            hashes = {blake2b(s, digest_size=8).digest() for s in norm_lines(data)}
            self.pairs_h += b"".join(hashes)
            self.pairs_f.extend([fid] * len(hashes))
        if not member and name.lower().endswith(ARCHIVE_SUFFIXES) and data[:4] == b"PK\x03\x04":
            self._add_members(name, data)

    def _add_members(self, name: str, data: bytes) -> None:
        import io
        import zipfile

        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir() and info.file_size <= MAX_LINE_SCAN:
                        inner = info.filename.lstrip("/")
                        self.add_file(f"{name}/{inner}", archive.read(info), member=True)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError):
            return  # not a readable zip: indexed as the one file it is

    def _keep_object(self, src: IO[bytes], store: str, rest: str) -> None:
        """Copy a git object (loose or pack) as it is; the first copy of a path wins."""
        key = hashlib.sha1(store.encode()).hexdigest()[:16]  # noqa: S324
        target = self.dir / "objects" / key / "objects" / rest
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        (self.dir / "objects" / key / "where").write_text("/" + store)
        with target.open("wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)

    def finish(self, diff_id: str) -> LayerIndex:
        """Write the line table and the metadata into the scratch folder; the loaded index."""
        import numpy as np

        hs = np.frombuffer(self.pairs_h, dtype="<u8")
        fs = np.frombuffer(self.pairs_f, dtype=np.uint32).astype("<u4")
        order = np.argsort(hs, kind="stable")
        hs, fs = hs[order], fs[order]
        lines, first = np.unique(hs, return_index=True)
        starts = np.append(first, len(hs)).astype("<u4")
        # Little-endian on disk, whatever the machine (`load_index` swaps on a big-endian one).
        (self.dir / "lines.bin").write_bytes(lines.astype("<u8").tobytes())
        (self.dir / "starts.bin").write_bytes(starts.tobytes())
        (self.dir / "fids.bin").write_bytes(fs.tobytes())
        meta = {
            "diff_id": diff_id,
            "files": self.files,
            "deleted": sorted(self.deleted),
            "opaque": sorted(self.opaque),
            "git_meta": {k: base64.b64encode(v).decode() for k, v in self.git_meta.items()},
            "n_scanned": self.n_scanned,
            "n_bytes": self.n_bytes,
            "not_line_scanned": self.not_line_scanned,
        }
        (self.dir / _META).write_text(json.dumps(meta))
        index = load_index(self.dir)
        if index is None:
            raise OSError(f"cannot read back the layer index at {self.dir}")
        return index


def scratch_dir(root: Path) -> Path:
    """A fresh scratch folder under `root` (same file system as the indexes: rename works)."""
    return root / ".scratch" / uuid.uuid4().hex


def sweep_scratch(root: Path, older_than: float = 86400.0) -> None:
    """Remove scratch folders a killed audit left under `root` (untouched for a day)."""
    now = time.time()
    for path in (root / ".scratch").iterdir() if (root / ".scratch").is_dir() else []:
        try:
            if now - path.stat().st_mtime > older_than:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def publish(index: LayerIndex, root: Path) -> LayerIndex:
    """Move a finished index from its scratch folder to its place under `root`. When another
    process got there first (or the place is not writable), the index stays where it is.
    """
    target = index_dir(root, index.diff_id)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(index.path, target)
    except OSError:
        return index
    index.path = target
    return index


def layer_view(index: LayerIndex, git_prefix: str) -> tuple[set[str], dict[str, bytes]]:
    """The layer's file paths, and its metadata of the repository at `git_prefix` (relative)."""
    meta = {
        name[len(git_prefix) :]: data
        for name, data in index.git_meta.items()
        if name.startswith(git_prefix) and is_git_meta(name[len(git_prefix) :])
    }
    return {path for path, _, _ in index.files}, meta
