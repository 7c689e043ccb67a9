"""Walking an image's layers: the `docker save` stream read member by member (never extracted),
each layer tar indexed (`index.IndexBuilder`) under the sha256 of its bytes; the `Layer` view of
an index (files, whiteouts, opaque folders, the workdir repository's metadata), what the final
filesystem shows, and the content check of the files read outside a layer index (git blobs, the
image config).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any

from packager.checks.audit.evidence import Secrets, is_binary, norm_lines, sha256_hex
from packager.checks.audit.index import (
    MAX_LINE_SCAN,
    IndexBuilder,
    LayerIndex,
    clean_name,
    layer_view,
)

MAX_SMALL_FILE = 16 * 1024 * 1024
"""Members of the saved image (manifest, config) above this size are not kept."""


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


def chunk_stream(chunks: Iterator[bytes]) -> IO[bytes]:
    """A buffered binary stream over an iterator of byte chunks."""
    return io.BufferedReader(_ChunkReader(chunks), 1 << 20)


class HashingReader(io.RawIOBase):
    """Reads `fh` and hashes every byte read (a layer's diff id is the sha256 of its tar)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._fh.read(len(b))
        b[: len(data)] = data
        self.sha.update(data)
        return len(data)


def index_tar(fh: IO[bytes], builder: IndexBuilder) -> LayerIndex:
    """Index one layer tar (plain or gzip) read from `fh`, under the sha256 of the plain tar."""
    head = fh.read(512)
    body: IO[bytes] = io.BufferedReader(_Prefixed(head, fh), 1 << 20)
    if head[:2] == b"\x1f\x8b":
        body = gzip.GzipFile(fileobj=body, mode="rb")  # type: ignore[assignment]
    hashed = HashingReader(body)
    builder.read_tar(io.BufferedReader(hashed, 1 << 20))
    while hashed.read(1 << 20):
        pass
    return builder.finish("sha256:" + hashed.sha.hexdigest())


def index_chunks(chunks: Iterator[bytes], builder: IndexBuilder) -> LayerIndex:
    """Index one plain layer tar given as byte chunks, under the sha256 of all of them."""
    sha = hashlib.sha256()

    def hashed() -> Iterator[bytes]:
        for chunk in chunks:
            sha.update(chunk)
            yield chunk

    fh = chunk_stream(hashed())
    builder.read_tar(fh)
    while fh.read(1 << 20):
        pass
    return builder.finish("sha256:" + sha.hexdigest())


def export_layers(
    chunks: Iterator[bytes], new_builder: Callable[[], IndexBuilder]
) -> tuple[dict[str, LayerIndex], dict[str, bytes]]:
    """Read a `docker save` stream: every layer tar indexed (`index_tar`), keyed by its name
    in the stream; and the other small members (manifest, config) by name.
    """
    seen: dict[str, LayerIndex] = {}
    small: dict[str, bytes] = {}
    raw = chunk_stream(chunks)
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
            if name not in seen and (head[257:262] == b"ustar" or head[:2] == b"\x1f\x8b"):
                seen[name] = index_tar(
                    io.BufferedReader(_Prefixed(head, fh), 1 << 20), new_builder()
                )
            elif member.size <= MAX_SMALL_FILE:
                small[name] = head + fh.read()
    return seen, small


def layer_order(
    manifest: Any, config: dict[str, Any], seen: Iterable[str]
) -> list[tuple[str, str]]:
    """The saved layers bottom-up: (name in the stream, diff id and build step as in
    `describe`); anything the manifest does not name still counts (at the top, conservatively).
    """
    entry = manifest[0] if isinstance(manifest, list) and manifest else {}
    names = [str(x) for x in entry.get("Layers", [])]
    diff_ids = [str(d) for d in config.get("rootfs", {}).get("diff_ids", [])]
    steps = describe(config, len(names))
    present = set(seen)
    ordered: list[tuple[str, str]] = []
    for n, name in enumerate(names):
        if name in present:
            diff_id = diff_ids[n] if n < len(diff_ids) else name
            ordered.append((name, f"{diff_id}\0{steps[n]}"))
    ordered.extend((key, f"{key}\0") for key in present if key not in names)
    return ordered


def describe(config: dict[str, Any], count: int) -> list[str]:
    """`layer n/count: <build step>` of each layer, from the image config's history."""
    steps = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]
    out = []
    for n in range(count):
        step = " ".join(str(steps[n]).split())[:160] if n < len(steps) else ""
        out.append(f"layer {n + 1}/{count}: {step}")
    return out


def make_layer(key: str, index: LayerIndex, git_prefix: str) -> Layer:
    """The `Layer` view of an index for a workdir repository at `git_prefix` (relative)."""
    files, meta = layer_view(index, git_prefix)
    return Layer(key, files, set(index.deleted), set(index.opaque), meta)


def visible(layers: Sequence[Layer], index: int, path: str) -> bool:
    """Whether `path` of layer `index` is what the final filesystem shows."""
    ancestors = [str(p) for p in PurePosixPath(path).parents]
    for later in layers[index + 1 :]:
        if path in later.files or path in later.deleted:
            return False
        if any(a in later.deleted or a in later.opaque for a in ancestors):
            return False
    return True
