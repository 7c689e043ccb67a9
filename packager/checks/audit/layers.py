"""Walking an image's layers: the `docker save` stream read member by member (never extracted),
every regular file of every layer checked against the secrets, whiteouts and opaque folders
noted, git object stores copied aside, and the workdir repository's metadata kept per layer.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from packager.checks.audit.evidence import Secrets, is_binary, norm_lines, sha256_hex

MAX_LINE_SCAN = 64 * 1024 * 1024
"""Files above this size are hashed (exact copies are still found) but not split into lines."""
MAX_SMALL_FILE = 16 * 1024 * 1024
"""Members of the saved image (manifest, config) above this size are not kept."""

_OBJ_RE = re.compile(
    r"^(?P<store>(?:.*/)?objects)/(?P<rest>[0-9a-f]{2}/[0-9a-f]{38}|pack/pack-[0-9a-f]+\.(?:pack|idx))$"
)
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


class _ChunkReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (the SDK's `save()` generator)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class _Prefixed(io.RawIOBase):
    """`head` then the rest of `fh` (to sniff a blob in a non-seekable stream)."""

    def __init__(self, head: bytes, fh: IO[bytes]) -> None:
        self._head = head
        self._fh = fh

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._fh.read(len(b))
        b[: len(data)] = data
        return len(data)


@dataclass
class Candidate:
    """A file (or git blob) that holds some anchor lines or has a secret's digest."""

    layer: str
    path: str
    object_id: str | None
    digest: str
    hits: frozenset[bytes]


@dataclass
class Layer:
    """What one layer tar holds: its files, whiteouts, opaque folders and git metadata."""

    key: str
    files: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    opaque: set[str] = field(default_factory=set)
    git_meta: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Scan:
    """The content check of every file read, and what it found so far."""

    secrets: Secrets
    anchors: frozenset[bytes]
    candidates: list[Candidate] = field(default_factory=list)
    digests: dict[str, list[tuple[str, str, str | None]]] = field(default_factory=dict)
    files: int = 0
    n_bytes: int = 0
    not_line_scanned: int = 0

    def check(self, data: bytes, layer: str, path: str, object_id: str | None = None) -> None:
        """Count `data`, note its digest, and keep it as a candidate when it holds anchors."""
        self.files += 1
        self.n_bytes += len(data)
        digest = sha256_hex(data)
        hits: frozenset[bytes] = frozenset()
        if len(data) > MAX_LINE_SCAN:
            self.not_line_scanned += 1
        elif not is_binary(data):
            hits = frozenset(self.anchors.intersection(norm_lines(data)))
        self.digests.setdefault(digest, []).append((layer, path, object_id))
        if hits:
            self.candidates.append(Candidate(layer, path, object_id, digest, hits))


def clean_name(name: str) -> str:
    """A tar member's name without leading `./` and surrounding slashes."""
    while name.startswith("./"):
        name = name[2:]
    return name.strip("/")


def _keep_object(src: IO[bytes], match: re.Match[str], layer: Layer, stores: Path) -> None:
    """Copy a git object (loose or pack) into its store's scratch folder, first copy wins;
    the store remembers where it was and the object which layer it came from.
    """
    store = stores / hashlib.sha1(match["store"].encode()).hexdigest()[:16]  # noqa: S324
    target = store / "objects" / match["rest"]
    (store / "where").parent.mkdir(parents=True, exist_ok=True)
    (store / "where").write_text("/" + match["store"])
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        (store / "origin").mkdir(exist_ok=True)
        (store / "origin" / match["rest"].replace("/", "_")).write_text(layer.key)


def _is_git_meta(rel: str) -> bool:
    return rel in _GIT_META or rel.endswith("_HEAD") or rel.startswith(("refs/", "logs/"))


def _whiteout(name: str, layer: Layer) -> bool:
    """Note a whiteout or opaque marker; whether `name` was one."""
    base = PurePosixPath(name).name
    parent = str(PurePosixPath(name).parent)
    if base == ".wh..wh..opq":
        layer.opaque.add("/" + parent if parent != "." else "/")
        return True
    if base.startswith(".wh."):
        gone = base[4:]
        layer.deleted.add("/" + (f"{parent}/{gone}" if parent != "." else gone))
        return True
    return False


def read_layer(fh: IO[bytes], layer: Layer, scan: Scan, git_prefix: str, stores: Path) -> None:
    """Scan one layer tar: content of every regular file, whiteouts, git stores and metadata."""
    with tarfile.open(fileobj=fh, mode="r|*") as tar:
        for member in tar:
            name = clean_name(member.name)
            if _whiteout(name, layer) or not member.isfile():
                continue
            path = "/" + name
            layer.files.add(path)
            src = tar.extractfile(member)
            if src is None:
                continue
            obj = _OBJ_RE.match(name)
            if obj is not None:
                _keep_object(src, obj, layer, stores)
                continue
            data = src.read()
            if name.startswith(git_prefix) and _is_git_meta(name[len(git_prefix) :]):
                layer.git_meta[name[len(git_prefix) :]] = data
            scan.check(data, layer.key, path)


def export_layers(
    chunks: Iterator[bytes], scan: Scan, git_prefix: str, stores: Path
) -> tuple[dict[str, Layer], dict[str, bytes]]:
    """Read a `docker save` stream: every layer tar through `read_layer`, keyed by its name in
    the stream; and the other small members (manifest, config) by name.
    """
    seen: dict[str, Layer] = {}
    small: dict[str, bytes] = {}
    raw = io.BufferedReader(_ChunkReader(chunks), 1 << 20)
    with tarfile.open(fileobj=raw, mode="r|") as outer:
        for member in outer:
            name = clean_name(member.name)
            fh = outer.extractfile(member) if member.isfile() else None
            if fh is None:
                continue
            if not (name.endswith("layer.tar") or name.startswith("blobs/")):
                if member.size <= MAX_SMALL_FILE:
                    small[name] = fh.read()
                continue
            head = fh.read(512)
            if head[257:262] == b"ustar" or head[:2] == b"\x1f\x8b":
                layer = seen.setdefault(name, Layer(name))
                body = io.BufferedReader(_Prefixed(head, fh), 1 << 20)
                read_layer(body, layer, scan, git_prefix, stores)
            elif member.size <= MAX_SMALL_FILE:
                small[name] = head + fh.read()
    return seen, small


def layer_order(
    manifest: Any, config: dict[str, Any], seen: dict[str, Layer]
) -> tuple[list[Layer], dict[str, str]]:
    """Layers bottom-up, and their display names (diff id) and build steps."""
    entry = manifest[0] if isinstance(manifest, list) and manifest else {}
    names = [str(x) for x in entry.get("Layers", [])]
    diff_ids = list(config.get("rootfs", {}).get("diff_ids", []))
    steps = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]
    ordered: list[Layer] = []
    described: dict[str, str] = {}
    for n, name in enumerate(names):
        layer = seen.get(name)
        if layer is None:
            continue
        ordered.append(layer)
        diff_id = diff_ids[n] if n < len(diff_ids) else name
        step = " ".join(str(steps[n]).split())[:160] if n < len(steps) else ""
        described[layer.key] = f"{diff_id}\0layer {n + 1}/{len(names)}: {step}"
    # Anything not named by the manifest still counts (at the top, conservatively).
    ordered.extend(layer for key, layer in seen.items() if key not in names)
    return ordered, described


def visible(layers: Sequence[Layer], index: int, path: str) -> bool:
    """Whether `path` of layer `index` is what the final filesystem shows."""
    ancestors = [str(p) for p in PurePosixPath(path).parents]
    for later in layers[index + 1 :]:
        if path in later.files or path in later.deleted:
            return False
        if any(a in later.deleted or a in later.opaque for a in ancestors):
            return False
    return True
