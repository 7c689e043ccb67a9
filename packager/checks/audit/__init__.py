"""Leak audit of an agent image: nothing from grading and no later history, in any layer.

The image is read through the Docker SDK only (`images.get(tag).save()`), streamed: every layer
tar is read member by member and never extracted as a whole. Three things are looked for.

1. **Grading content in any file of any layer**, including files a later layer deletes (a
   whiteout hides a file from the container, not from anyone holding the image): a hidden test,
   a grader file, the test patch or the gold patch. Exact copies are found by sha256; pieces are
   found by lines (see `make_units`): a file leaks a hunk when it holds every *distinctive* added
   line of it, i.e. every stripped line of 8+ characters that is not already a line of the base
   tree. Lines present at base are no evidence, which keeps the legitimate repository, the
   system's libraries and look-alike code from being flagged.
2. **Git objects**: every object store in the image (the workdir repository and any other
   `objects/` folder, loose objects and packs, from every layer) is gathered into a scratch bare
   repository and read with host `git`. Any commit that is not `base_commit` or one of its
   ancestors is a leak (a future commit, reachable or dangling), an annotated tag object is a
   leak unless it is a *past tag* (it names `base_commit` or an ancestor and was made no later
   than `base_commit`: history, which the snapshot keeps for `git describe`), and every blob
   not reachable from `base_commit` is checked like a file (a dangling `git hash-object -w`
   of the fixed file is a leak).
3. **Repository metadata of the workdir repository, in every layer**: any ref other than a
   branch at `base_commit` or a past tag (other tags, other branches, remote-tracking refs,
   stash, ORIG_HEAD, FETCH_HEAD), any non-empty reflog, any configured remote, any alternates
   file.

`audit_image` returns an `AuditReport`; `audit_task` also writes
`<out>/<dataset>/results/<task>.audit.json`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Literal

from packager.errors import PackagerError

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import TaskSpec
    from packager.run.store import OutputPaths

FindingKind = Literal[
    "hidden_test",
    "grader_file",
    "test_patch",
    "gold_patch",
    "commit",
    "tag",
    "ref",
    "reflog",
    "remote",
    "alternates",
    "repo",
]

MIN_LINE = 8
"""A line shorter than this (after strip) is never evidence: `}`, `return x`, `pass`."""
MAX_UNIT_LINES = 8
"""A long hunk or hidden file is split into windows of this many distinctive lines, so a file
holding part of it (one copied test function) is still caught."""
MAX_LINE_SCAN = 64 * 1024 * 1024
"""Files above this size are hashed (exact copies are still found) but not split into lines."""
CONFIG_LAYER = "<image config>"

_OBJ_RE = re.compile(
    r"^(?P<store>(?:.*/)?objects)/(?P<rest>[0-9a-f]{2}/[0-9a-f]{38}|pack/pack-[0-9a-f]+\.(?:pack|idx))$"
)
_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "LC_ALL": "C",
}


class AuditError(PackagerError):
    """The image cannot be read (missing, or the engine failed while exporting it)."""


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Finding:
    """One piece of evidence that the agent image holds something it must not."""

    kind: FindingKind
    layer: str
    """The layer's diff id (`sha256:…`, as `docker image inspect` lists them), or
    `<image config>`."""
    path: str
    """Absolute path of the file in that layer (for git objects: the object store)."""
    object_id: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain data for the JSON report."""
        return {
            "kind": self.kind,
            "layer": self.layer,
            "path": self.path,
            "object_id": self.object_id,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class AuditReport:
    """The audit of one image: `clean` when there are no findings."""

    image: str
    image_id: str
    clean: bool
    findings: list[Finding] = field(default_factory=list)
    stats: dict[str, float | int] = field(default_factory=dict)

    @property
    def status(self) -> Literal["clean", "leak"]:
        """`clean` or `leak`."""
        return "clean" if self.clean else "leak"

    @property
    def kinds(self) -> set[str]:
        """The finding kinds present."""
        return {f.kind for f in self.findings}

    def summary(self, limit: int = 3) -> str:
        """One line for a result's `reason`."""
        if self.clean:
            return "audit clean"
        parts = [
            f"{f.kind} at {f.path}" + (f" ({f.object_id[:12]})" if f.object_id else "")
            for f in self.findings[:limit]
        ]
        more = len(self.findings) - limit
        return f"leak: {'; '.join(parts)}" + (f"; and {more} more" if more > 0 else "")

    def to_json(self) -> dict[str, Any]:
        """Plain data for `<task>.audit.json`."""
        return {
            "image": self.image,
            "image_id": self.image_id,
            "status": self.status,
            "clean": self.clean,
            "findings": [f.to_json() for f in self.findings],
            "stats": dict(sorted(self.stats.items())),
        }


# --------------------------------------------------------------------------- diff logic (pure)


@dataclass(frozen=True)
class PatchFile:
    """One file of a unified diff: its added lines per hunk, and its content when it is new."""

    path: str
    old_path: str | None
    """The path before the patch (None when the patch creates the file)."""
    new_file: bool
    hunks: tuple[tuple[bytes, ...], ...]
    """Added lines of each hunk, without the `+` and the line ending."""
    new_content: bytes | None
    """The whole post-patch file when the patch creates it (else None)."""


def _diff_path(raw: bytes) -> str | None:
    name = raw.split(b"\t")[0].strip().decode("utf-8", "replace")
    if name == "/dev/null":
        return None
    if name.startswith('"') and name.endswith('"'):
        name = name[1:-1]
    return name[2:] if name[:2] in ("a/", "b/") else name


_HUNK_RE = re.compile(rb"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def parse_patch(text: str | bytes | None) -> list[PatchFile]:
    """Files of a unified (git or plain) diff. Binary sections are skipped."""
    if not text:
        return []
    data = text.encode() if isinstance(text, str) else text
    lines = data.split(b"\n")
    files: list[PatchFile] = []
    i = 0
    old_path: str | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "):
            old_path = _diff_path(line[4:])
            new_path = _diff_path(lines[i + 1][4:])
            i += 2
            hunks: list[tuple[bytes, ...]] = []
            no_newline_at_end = False
            while i < len(lines):
                match = _HUNK_RE.match(lines[i])
                if not match:
                    break
                old_left = int(match.group(1) or b"1")
                new_left = int(match.group(2) or b"1")
                i += 1
                added: list[bytes] = []
                while i < len(lines) and (old_left > 0 or new_left > 0):
                    body = lines[i]
                    tag = body[:1]
                    if tag == b"+":
                        added.append(body[1:].rstrip(b"\r"))
                        new_left -= 1
                    elif tag == b"-":
                        old_left -= 1
                    elif tag in (b" ", b""):
                        old_left -= 1
                        new_left -= 1
                    elif tag != b"\\":
                        break
                    i += 1
                if i < len(lines) and lines[i].startswith(b"\\"):
                    no_newline_at_end = True
                    i += 1
                hunks.append(tuple(added))
            path = new_path or old_path or "?"
            new_content = None
            if old_path is None and new_path is not None:
                body = b"\n".join(line for hunk in hunks for line in hunk)
                new_content = body if no_newline_at_end or not body else body + b"\n"
            files.append(PatchFile(path, old_path, old_path is None, tuple(hunks), new_content))
            continue
        i += 1
    return files


def norm_lines(data: bytes) -> set[bytes]:
    """The evidence lines of a file: stripped lines of MIN_LINE+ characters, plus, for lines
    of a diff (`+x`), the line without its marker, so a copied .patch file matches too.
    """
    stripped = set(map(bytes.strip, data.splitlines()))
    extra = {s[1:].strip() for s in stripped if s[:1] in (b"+", b"-")}
    return {s for s in stripped | extra if len(s) >= MIN_LINE}


def candidate_lines(lines: Iterable[bytes]) -> tuple[bytes, ...]:
    """Stripped lines of MIN_LINE+ characters, first occurrence order, no repeats."""
    out: dict[bytes, None] = {}
    for line in lines:
        s = line.strip()
        if len(s) >= MIN_LINE:
            out.setdefault(s, None)
    return tuple(out)


def is_binary(data: bytes) -> bool:
    """Git's rule: a NUL byte in the first 8000 bytes."""
    return b"\0" in data[:8000]


@dataclass(frozen=True)
class Source:
    """One secret piece of text (a hunk, a hidden file) and where weak pieces pool."""

    kind: FindingKind
    label: str
    group: str
    lines: tuple[bytes, ...]


@dataclass(frozen=True)
class Unit:
    """Lines that together are evidence: a file holding all of them leaks `label`."""

    kind: FindingKind
    label: str
    lines: frozenset[bytes]


def is_strong(lines: Sequence[bytes]) -> bool:
    """Enough text to be evidence on its own: 2+ lines of 40+ characters, or one of 60+."""
    total = sum(len(s) for s in lines)
    return (len(lines) >= 2 and total >= 40) or total >= 60


def _windows(lines: Sequence[bytes]) -> list[tuple[bytes, ...]]:
    chunks = [tuple(lines[i : i + MAX_UNIT_LINES]) for i in range(0, len(lines), MAX_UNIT_LINES)]
    if len(chunks) > 1 and not is_strong(chunks[-1]):
        last = chunks.pop()
        chunks[-1] = chunks[-1] + last
    return chunks


def make_units(sources: Iterable[Source], base_lines: set[bytes]) -> tuple[list[Unit], int]:
    """Evidence units from sources, ignoring lines already in the base tree.

    A source with strong distinctive lines gives one unit per window of MAX_UNIT_LINES lines;
    weak sources pool with others of their group (e.g. one patched file), then with all of their
    kind; what is still weak is dropped. Returns the units and the number of dropped sources.
    """
    units: list[Unit] = []
    by_group: dict[tuple[FindingKind, str], list[bytes]] = {}
    group_labels: dict[tuple[FindingKind, str], list[str]] = {}
    for src in sources:
        lines = [s for s in src.lines if s not in base_lines]
        if not lines:
            continue
        if is_strong(lines):
            windows = _windows(lines)
            for n, window in enumerate(windows):
                label = src.label if len(windows) == 1 else f"{src.label} (part {n + 1})"
                units.append(Unit(src.kind, label, frozenset(window)))
        else:
            key = (src.kind, src.group)
            by_group.setdefault(key, []).extend(lines)
            group_labels.setdefault(key, []).append(src.label)
    by_kind: dict[FindingKind, list[bytes]] = {}
    kind_labels: dict[FindingKind, list[str]] = {}
    dropped = 0
    for (kind, group), lines in by_group.items():
        merged = list(dict.fromkeys(lines))
        if is_strong(merged):
            units.append(Unit(kind, f"{group} (small hunks together)", frozenset(merged)))
        else:
            by_kind.setdefault(kind, []).extend(merged)
            kind_labels.setdefault(kind, []).extend(group_labels[(kind, group)])
    for kind, lines in by_kind.items():
        merged = list(dict.fromkeys(lines))
        if is_strong(merged):
            units.append(Unit(kind, f"{kind} (small pieces together)", frozenset(merged)))
        else:
            dropped += len(kind_labels[kind])
    return units, dropped


@dataclass(frozen=True)
class Secrets:
    """Everything of a task that must not reach the agent image, as matchable needles."""

    sources: tuple[Source, ...]
    exact: dict[str, tuple[FindingKind, str, bytes]]
    """sha256 → (kind, label, content) of whole secret files and patch texts."""

    @property
    def anchors(self) -> frozenset[bytes]:
        """Every line that can be part of a unit (the base filter comes later)."""
        return frozenset(line for src in self.sources for line in src.lines)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def secrets_of(spec: TaskSpec) -> Secrets:
    """The task's hidden tests, grader files, test patch and gold patch as needles."""
    g = spec.grading
    sources: list[Source] = []
    exact: dict[str, tuple[FindingKind, str, bytes]] = {}

    def whole(kind: FindingKind, label: str, data: bytes) -> None:
        exact.setdefault(_sha(data), (kind, label, data))
        if not is_binary(data):
            sources.append(Source(kind, label, label, candidate_lines(data.splitlines())))

    for path, data in sorted(g.hidden_files.items()):
        whole("hidden_test", f"hidden file {path}", data)
    for path, data in sorted(g.grader_files.items()):
        whole("grader_file", f"grader file {path}", data)
    if g.workflows:
        whole("grader_file", "judge workflows", g.workflows.encode())
    for kind, text in (("test_patch", g.test_patch), ("gold_patch", spec.gold_patch)):
        if not text:
            continue
        patch_kind: FindingKind = "test_patch" if kind == "test_patch" else "gold_patch"
        exact.setdefault(
            _sha(text.encode()), (patch_kind, f"{kind.replace('_', ' ')} text", text.encode())
        )
        for pf in parse_patch(text):
            if pf.new_content is not None:
                new_kind: FindingKind = "hidden_test" if patch_kind == "test_patch" else patch_kind
                exact.setdefault(
                    _sha(pf.new_content),
                    (new_kind, f"{kind.replace('_', ' ')}: new file {pf.path}", pf.new_content),
                )
            for n, hunk in enumerate(pf.hunks):
                sources.append(
                    Source(
                        patch_kind,
                        f"{kind.replace('_', ' ')}: {pf.path} hunk {n + 1}",
                        f"{kind.replace('_', ' ')}: {pf.path}",
                        candidate_lines(hunk),
                    )
                )
    return Secrets(tuple(sources), exact)


def informative(content: bytes, base_lines: set[bytes], base_digests: set[str]) -> bool:
    """Whether an exact copy of `content` tells anything: not a base file, not trivial."""
    if _sha(content) in base_digests:
        return False
    if is_binary(content):
        return len(content) >= 64
    return any(s not in base_lines for s in candidate_lines(content.splitlines()))


# --------------------------------------------------------------------------- layer walking


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
class _Candidate:
    layer: str
    path: str
    object_id: str | None
    digest: str
    hits: frozenset[bytes]


@dataclass
class _Layer:
    key: str
    files: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    opaque: set[str] = field(default_factory=set)
    git_meta: dict[str, bytes] = field(default_factory=dict)


@dataclass
class _Scan:
    secrets: Secrets
    anchors: frozenset[bytes]
    candidates: list[_Candidate] = field(default_factory=list)
    digests: dict[str, list[tuple[str, str, str | None]]] = field(default_factory=dict)
    files: int = 0
    n_bytes: int = 0
    not_line_scanned: int = 0

    def check(self, data: bytes, layer: str, path: str, object_id: str | None = None) -> None:
        self.files += 1
        self.n_bytes += len(data)
        digest = _sha(data)
        hits: frozenset[bytes] = frozenset()
        if len(data) > MAX_LINE_SCAN:
            self.not_line_scanned += 1
        elif not is_binary(data):
            hits = frozenset(self.anchors.intersection(norm_lines(data)))
        self.digests.setdefault(digest, []).append((layer, path, object_id))
        if hits:
            self.candidates.append(_Candidate(layer, path, object_id, digest, hits))


def _clean_name(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.strip("/")


def _read_layer(fh: IO[bytes], layer: _Layer, scan: _Scan, git_prefix: str, stores: Path) -> None:
    """Scan one layer tar: content of every regular file, whiteouts, git stores and metadata."""
    with tarfile.open(fileobj=fh, mode="r|*") as tar:
        for member in tar:
            name = _clean_name(member.name)
            base = PurePosixPath(name).name
            parent = str(PurePosixPath(name).parent)
            if base == ".wh..wh..opq":
                layer.opaque.add("/" + parent if parent != "." else "/")
                continue
            if base.startswith(".wh."):
                gone = base[4:]
                layer.deleted.add("/" + (f"{parent}/{gone}" if parent != "." else gone))
                continue
            if not member.isfile():
                continue
            path = "/" + name
            layer.files.add(path)
            src = tar.extractfile(member)
            if src is None:
                continue
            obj = _OBJ_RE.match(name)
            if obj is not None:
                store = stores / hashlib.sha1(obj["store"].encode()).hexdigest()[:16]  # noqa: S324
                target = store / "objects" / obj["rest"]
                (store / "where").parent.mkdir(parents=True, exist_ok=True)
                (store / "where").write_text("/" + obj["store"])
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with target.open("wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    (store / "origin").mkdir(exist_ok=True)
                    (store / "origin" / obj["rest"].replace("/", "_")).write_text(layer.key)
                continue
            data = src.read()
            if name.startswith(git_prefix):
                rel = name[len(git_prefix) :]
                if rel in (
                    "HEAD",
                    "ORIG_HEAD",
                    "FETCH_HEAD",
                    "packed-refs",
                    "config",
                    "shallow",
                    "objects/info/alternates",
                    "objects/info/http-alternates",
                ) or (rel.endswith("_HEAD") or rel.startswith(("refs/", "logs/"))):
                    layer.git_meta[rel] = data
            scan.check(data, layer.key, path)


def _visible(layers: Sequence[_Layer], index: int, path: str) -> bool:
    """Whether `path` of layer `index` is what the final filesystem shows."""
    ancestors = [str(p) for p in PurePosixPath(path).parents]
    for later in layers[index + 1 :]:
        if path in later.files or path in later.deleted:
            return False
        if any(a in later.deleted or a in later.opaque for a in ancestors):
            return False
    return True


# --------------------------------------------------------------------------- git


def _git(
    git_dir: Path, *args: str, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        input=stdin,
        capture_output=True,
        check=check,
        env={**os.environ, **_GIT_ENV},
        timeout=1800,
    )


def _cat_batch(git_dir: Path, oids: Sequence[str]) -> Iterator[tuple[str, str, bytes]]:
    """(oid, type, content) of each object, through one `git cat-file --batch`."""
    if not oids:
        return
    out = _git(git_dir, "cat-file", "--batch", stdin=("\n".join(oids) + "\n").encode()).stdout
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) < 3:  # "<oid> missing"
            continue
        size = int(header[2])
        yield header[0].decode(), header[1].decode(), out[pos : pos + size]
        pos += size + 1


@dataclass
class _Store:
    where: str
    git_dir: Path
    origin: dict[str, str]
    """object id → layer key it came from."""


def _open_store(root: Path) -> _Store:
    """Make a bare repository around a gathered objects folder; map objects to layers."""
    where = (root / "where").read_text()
    origin: dict[str, str] = {}
    for marker in sorted((root / "origin").iterdir()) if (root / "origin").is_dir() else []:
        origin[marker.name] = marker.read_text()
    git_dir = root
    for sub in ("refs/heads", "refs/tags", "objects/info"):
        (git_dir / sub).mkdir(parents=True, exist_ok=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    oid_origin: dict[str, str] = {}
    pack_dir = git_dir / "objects" / "pack"
    for name, layer in origin.items():
        if name.endswith(".pack"):
            pack = pack_dir / name.removeprefix("pack_")
            idx = pack.with_suffix(".idx")
            if not idx.exists():
                _git(git_dir, "index-pack", str(pack), check=False)
            if idx.exists():
                listing = _git(git_dir, "show-index", stdin=idx.read_bytes(), check=False).stdout
                for row in listing.decode().splitlines():
                    parts = row.split()
                    if len(parts) >= 2:
                        oid_origin.setdefault(parts[1], layer)
        elif not name.endswith(".idx"):
            oid_origin.setdefault(name.replace("_", ""), layer)
    return _Store(where, git_dir, oid_origin)


def _all_objects(store: _Store) -> dict[str, str]:
    out = _git(
        store.git_dir,
        "cat-file",
        "--batch-all-objects",
        "--unordered",
        "--batch-check=%(objectname) %(objecttype)",
        check=False,
    ).stdout
    pairs = (line.split() for line in out.decode().splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def _reachable(store: _Store, base: str) -> set[str] | None:
    probe = _git(store.git_dir, "cat-file", "-e", f"{base}^{{commit}}", check=False)
    if probe.returncode != 0:
        return None
    out = _git(store.git_dir, "rev-list", "--objects", base).stdout
    return {line.split(b" ", 1)[0].decode() for line in out.splitlines() if line}


def _base_content(store: _Store, base: str) -> tuple[set[bytes], set[str]]:
    """Lines and sha256 digests of every file of the base tree."""
    listing = _git(store.git_dir, "ls-tree", "-r", "-z", base).stdout
    oids = []
    for entry in listing.split(b"\0"):
        meta, _, _ = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == b"blob":
            oids.append(parts[2].decode())
    lines: set[bytes] = set()
    digests: set[str] = set()
    for _, _, data in _cat_batch(store.git_dir, sorted(set(oids))):
        digests.add(_sha(data))
        if not is_binary(data):
            lines |= norm_lines(data)
    return lines, digests


def _patched_files(store: _Store, base: str, patch: str | None) -> dict[str, bytes]:
    """The files a patch changes, as it leaves them (applied to the base tree on the host)."""
    files = parse_patch(patch)
    if not patch or not files:
        return {}
    with tempfile.TemporaryDirectory(prefix="packager-audit-apply-") as tmp:
        root = Path(tmp)
        for pf in files:
            if pf.old_path is None:
                continue
            blob = _git(store.git_dir, "cat-file", "blob", f"{base}:{pf.old_path}", check=False)
            if blob.returncode == 0:
                target = root / pf.old_path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob.stdout)
        applied = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "-"],
            cwd=root,
            input=patch.encode(),
            capture_output=True,
            env={**os.environ, **_GIT_ENV, "GIT_CEILING_DIRECTORIES": tmp},
            timeout=300,
            check=False,
        )
        if applied.returncode != 0:
            return {}
        return {
            pf.path: (root / pf.path).read_bytes() for pf in files if (root / pf.path).is_file()
        }


def _past_tag_values(store: _Store, base: str, ancestors: set[str]) -> set[str]:
    """Ids a past tag may hold in `store`: annotated tag objects naming `base` or an ancestor,
    tagged no later than `base` was committed; and those ancestors themselves (a lightweight
    tag names the commit), committed no later than `base`.
    """
    dates = _git(store.git_dir, "log", "-1", "--format=%ct", base, check=False).stdout.split()
    if not dates:
        return set()
    made = int(dates[0])
    allowed: set[str] = set()
    tags = [oid for oid, kind in _all_objects(store).items() if kind == "tag"]
    for oid, _, data in _cat_batch(store.git_dir, tags):
        header = data.split(b"\n\n", 1)[0].decode("utf-8", "replace").splitlines()
        fields = {line.split(" ", 1)[0]: line.partition(" ")[2] for line in header}
        tagged = fields.get("tagger", "").rsplit(" ", 2)
        when = int(tagged[1]) if len(tagged) == 3 and tagged[1].isdigit() else None
        if (
            fields.get("type") == "commit"
            and fields.get("object") in ancestors
            and when is not None
            and when <= made
        ):
            allowed.add(oid)
    listing = _git(store.git_dir, "log", "--format=%H %ct", base, check=False).stdout
    for row in listing.decode().splitlines():
        sha, _, when_text = row.partition(" ")
        if when_text.isdigit() and int(when_text) <= made:
            allowed.add(sha)
    return allowed


def _ref_findings(
    layer: _Layer, workdir_git: str, base: str, past_tags: Set[str] = frozenset()
) -> list[Finding]:
    """Refs, reflogs, remotes and alternates in one layer's copy of the workdir repository;
    a tag holding one of `past_tags` is history, not a finding.
    """
    out: list[Finding] = []
    meta = layer.git_meta

    def add(kind: FindingKind, rel: str, detail: str, oid: str | None = None) -> None:
        out.append(Finding(kind, layer.key, f"{workdir_git}/{rel}", oid, detail))

    refs: list[tuple[str, str, str]] = []  # (file, refname, value)
    for rel, data in sorted(meta.items()):
        text = data.decode("utf-8", "replace").strip()
        if rel.startswith("refs/"):
            refs.append((rel, rel, text))
        elif rel == "packed-refs":
            for row in text.splitlines():
                if row and not row.startswith(("#", "^")) and " " in row:
                    sha, name = row.split(" ", 1)
                    refs.append((rel, name.strip(), sha))
        elif rel.startswith("logs/"):
            if text:
                entries = text.splitlines()
                new = entries[-1].split(" ")[1] if len(entries[-1].split(" ")) > 1 else None
                add("reflog", rel, f"reflog with {len(entries)} entries", new)
        elif rel == "HEAD":
            if not text.startswith("ref: refs/heads/") and text != base:
                add("ref", rel, f"detached HEAD at {text[:40]}", text[:40])
        elif rel.endswith("_HEAD"):
            sha = text.split()[0] if text else ""
            if rel == "FETCH_HEAD" or sha != base:
                add("ref", rel, f"{rel} present", sha[:40] or None)
        elif rel == "config":
            for remote in sorted(set(re.findall(r'^\s*\[remote\s+"([^"]*)"\]', text, re.M))):
                add("remote", rel, f"remote {remote!r} configured")
        elif rel.startswith("objects/info/") and text:
            add("alternates", rel, f"objects borrowed from {text.splitlines()[0]}")
    for rel, name, value in refs:
        if value.startswith("ref: "):
            if not name.startswith("refs/heads/"):
                kind: FindingKind = "remote" if name.startswith("refs/remotes/") else "ref"
                add(kind, rel, f"symbolic ref {name} -> {value[5:]}")
            continue
        if name.startswith("refs/tags/"):
            if value[:40] not in past_tags:
                add("tag", rel, f"tag {name[10:]} -> {value[:12]}", value[:40])
        elif name.startswith("refs/remotes/"):
            add("remote", rel, f"remote-tracking ref {name[13:]} -> {value[:12]}", value[:40])
        elif not name.startswith("refs/heads/") or value != base:
            add(
                "ref",
                rel,
                f"ref {name} -> {value[:12]} (only a branch at base_commit is allowed)",
                value[:40],
            )
    return out


# --------------------------------------------------------------------------- the audit


def _layer_order(
    manifest: Any, config: dict[str, Any], seen: dict[str, _Layer]
) -> tuple[list[_Layer], dict[str, str]]:
    """Layers bottom-up, and their display names (diff id) and build steps."""
    entry = manifest[0] if isinstance(manifest, list) and manifest else {}
    names = [str(x) for x in entry.get("Layers", [])]
    diff_ids = list(config.get("rootfs", {}).get("diff_ids", []))
    steps = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]
    ordered: list[_Layer] = []
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


def audit_image(client: DockerClient, image_tag: str, spec: TaskSpec) -> AuditReport:
    """Audit every layer and every git object of `image_tag` for `spec`'s secrets and history."""
    import docker.errors

    started = time.monotonic()
    try:
        image = client.images.get(image_tag)
    except docker.errors.ImageNotFound as exc:
        raise AuditError(f"{spec.task_id}: image {image_tag} not found; build it first") from exc
    # The snapshot's HEAD: base_commit, or with `--history base-only` the one commit holding its
    # tree (then no other commit is allowed at all).
    base = spec.repo.head
    workdir_git = spec.repo.workdir.rstrip("/") + "/.git"
    git_prefix = workdir_git.strip("/") + "/"
    secrets = secrets_of(spec)
    scan = _Scan(secrets, secrets.anchors)
    seen: dict[str, _Layer] = {}
    small: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="packager-audit-") as tmp:
        stores = Path(tmp)
        try:
            raw = io.BufferedReader(_ChunkReader(iter(image.save(named=False))), 1 << 20)
            with tarfile.open(fileobj=raw, mode="r|") as outer:
                for member in outer:
                    name = _clean_name(member.name)
                    if not member.isfile():
                        continue
                    fh = outer.extractfile(member)
                    if fh is None:
                        continue
                    if name.endswith("layer.tar") or name.startswith("blobs/"):
                        head = fh.read(512)
                        is_tar = head[257:262] == b"ustar" or head[:2] == b"\x1f\x8b"
                        if is_tar:
                            layer = seen.setdefault(name, _Layer(name))
                            _read_layer(
                                io.BufferedReader(_Prefixed(head, fh), 1 << 20),
                                layer,
                                scan,
                                git_prefix,
                                stores,
                            )
                            continue
                        if member.size <= 16 * 1024 * 1024:
                            small[name] = head + fh.read()
                    elif member.size <= 16 * 1024 * 1024:
                        small[name] = fh.read()
        except (docker.errors.APIError, tarfile.TarError, OSError) as exc:
            raise AuditError(f"{spec.task_id}: cannot export {image_tag}: {exc}") from exc
        manifest = json.loads(small.get("manifest.json", b"[]"))
        config_name = manifest[0].get("Config", "") if manifest else ""
        config_bytes = small.get(_clean_name(config_name), b"{}")
        config = json.loads(config_bytes)
        layers, described = _layer_order(manifest, config, seen)
        scan.check(config_bytes, CONFIG_LAYER, "/" + _clean_name(config_name))

        findings: list[Finding] = []
        # Git object stores: the workdir repository first (it defines the base content).
        store_roots = sorted(p for p in stores.iterdir() if (p / "where").exists())
        opened = [_open_store(p) for p in store_roots]
        workdir_objects = f"/{git_prefix}objects"
        opened.sort(key=lambda s: s.where != workdir_objects)
        base_lines: set[bytes] = set()
        base_digests: set[str] = set()
        workdir_store = opened[0] if opened and opened[0].where == workdir_objects else None
        if workdir_store is None:
            findings.append(
                Finding("repo", "", workdir_git, None, "no git objects at the workdir repository")
            )
        elif _reachable(workdir_store, base) is None:
            findings.append(
                Finding(
                    "repo",
                    "",
                    workdir_git,
                    base,
                    "base_commit is not in the workdir repository",
                )
            )
        else:
            base_lines, base_digests = _base_content(workdir_store, base)
            patches: tuple[tuple[FindingKind, str | None], ...] = (
                ("test_patch", spec.grading.test_patch),
                ("gold_patch", spec.gold_patch),
            )
            for patch_kind, text in patches:
                for fpath, data in sorted(_patched_files(workdir_store, base, text).items()):
                    label = f"{patch_kind.replace('_', ' ')}: {fpath} after the patch"
                    secrets.exact.setdefault(_sha(data), (patch_kind, label, data))
        if spec.repo.files is not None:
            for data in spec.repo.files.values():
                base_digests.add(_sha(data))
                if not is_binary(data):
                    base_lines |= norm_lines(data)
        n_objects = 0
        stray = 0
        past_tags: set[str] = set()
        for store in opened:
            objects = _all_objects(store)
            n_objects += len(objects)
            reachable = _reachable(store, base) or set()
            if store is workdir_store:
                past_tags = _past_tag_values(store, base, reachable)
            loose_blobs: list[str] = []
            for oid, kind in sorted(objects.items()):
                if oid in reachable:
                    continue
                layer_key = store.origin.get(oid, "")
                if kind == "commit":
                    findings.append(
                        Finding(
                            "commit",
                            layer_key,
                            store.where,
                            oid,
                            "commit that is not base_commit or an ancestor",
                        )
                    )
                elif kind == "tag":
                    if store is workdir_store and oid in past_tags:
                        continue
                    findings.append(
                        Finding("tag", layer_key, store.where, oid, "annotated tag object")
                    )
                elif kind == "blob":
                    loose_blobs.append(oid)
                else:
                    stray += 1
            for oid, _, data in _cat_batch(store.git_dir, loose_blobs):
                scan.check(data, store.origin.get(oid, ""), store.where, oid)
        for layer in layers:
            findings.extend(_ref_findings(layer, workdir_git, base, past_tags))

    units, dropped = make_units(secrets.sources, base_lines)
    exact = {d: v for d, v in secrets.exact.items() if informative(v[2], base_lines, base_digests)}
    index = {layer.key: n for n, layer in enumerate(layers)}
    found: dict[tuple[str, str, str | None], _Candidate] = {
        (c.layer, c.path, c.object_id): c for c in scan.candidates
    }
    for digest in exact:
        for layer_key, fpath, obj_id in scan.digests.get(digest, []):
            found.setdefault(
                (layer_key, fpath, obj_id),
                _Candidate(layer_key, fpath, obj_id, digest, frozenset()),
            )
    for cand in found.values():
        hits: list[tuple[FindingKind, str]] = []
        if cand.digest in exact:
            kind, label, _ = exact[cand.digest]
            hits.append((kind, f"exact copy of {label}"))
        for unit in units:
            if unit.lines <= cand.hits:
                hits.append((unit.kind, f"holds every distinctive line of {unit.label}"))
        done: set[FindingKind] = set()
        for kind, detail in hits:
            if kind in done:
                continue
            done.add(kind)
            if cand.object_id is None and cand.layer in index:
                if not _visible(layers, index[cand.layer], cand.path):
                    detail += "; deleted by a later layer (still in the image)"
            findings.append(Finding(kind, cand.layer, cand.path, cand.object_id, detail))

    named: list[Finding] = []
    for f in findings:
        diff_id, _, step = described.get(f.layer, f"{f.layer}\0").partition("\0")
        detail = f"{f.detail} [{step}]" if step else f.detail
        named.append(Finding(f.kind, diff_id, f.path, f.object_id, detail))
    named.sort(key=lambda f: (f.kind, f.layer, f.path, f.object_id or ""))
    stats: dict[str, float | int] = {
        "seconds": round(time.monotonic() - started, 3),
        "layers": len(layers),
        "files_scanned": scan.files,
        "bytes_scanned": scan.n_bytes,
        "files_not_line_scanned": scan.not_line_scanned,
        "git_objects": n_objects,
        "stray_trees": stray,
        "evidence_units": len(units),
        "weak_sources_dropped": dropped,
    }
    return AuditReport(image_tag, str(image.id), not named, named, stats)


def audit_path(paths: OutputPaths, slug: str) -> Path:
    """`<out>/<dataset>/results/<task>.audit.json`."""
    return paths.base / "results" / f"{slug}.audit.json"


def audit_key(spec: TaskSpec, image_id: str) -> str:
    """What a clean audit depends on: the image (by id), the task's secrets and history rule,
    and this module's code. The same key means the same verdict.
    """
    g = spec.grading
    h = hashlib.sha256()
    for part in (
        Path(__file__).read_bytes(),
        image_id.encode(),
        spec.repo.head.encode(),
        spec.repo.workdir.encode(),
        (g.workflows or "").encode(),
        (g.test_patch or "").encode(),
        (spec.gold_patch or "").encode(),
        *(k.encode() + b"\0" + v for k, v in sorted(g.hidden_files.items())),
        *(k.encode() + b"\0" + v for k, v in sorted(g.grader_files.items())),
    ):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def machine_audit_path(key: str) -> Path:
    """Where this machine keeps the clean verdict of the audit with `key` (any output folder)."""
    from packager.run.store import cache_root

    return cache_root() / "audits" / key[:2] / f"{key}.json"


def _saved_clean(path: Path, key: str) -> dict[str, Any] | None:
    """The saved audit at `path` when it is the clean verdict for `key`."""
    try:
        saved = json.loads(path.read_text()) if path.is_file() else {}
    except (ValueError, OSError):
        return None
    if isinstance(saved, dict) and saved.get("cache_key") == key and saved.get("clean") is True:
        return saved
    return None


def audit_task(
    client: DockerClient, spec: TaskSpec, paths: OutputPaths, tag: str | None = None
) -> AuditReport:
    """Audit the task's agent image (`tag`, else the rendered task's) and write its audit JSON.

    A clean audit of the very same image for the same secrets (`audit_key`) is not repeated:
    its saved verdict is returned (stats `cached` = 1, 0 seconds), from the task's audit JSON
    or, for another output folder, from this machine's cache (`machine_audit_path`), which is
    then copied to the task's audit JSON. Only clean verdicts are kept there: a leak is
    audited again, so its findings are always those of this audit code.
    """
    import docker.errors

    from packager.render.harbor import make_harbor_task
    from packager.render.write import write_json

    tag = tag or make_harbor_task(spec).agent_image
    target = audit_path(paths, spec.provenance.slug)
    key = None
    try:
        image_id = str(client.images.get(tag).id)
        key = audit_key(spec, image_id)
    except (docker.errors.ImageNotFound, ValueError, OSError):
        pass  # audit_image says what is missing
    if key is not None:
        if _saved_clean(target, key) is not None:
            return AuditReport(tag, image_id, True, [], {"seconds": 0.0, "cached": 1})
        saved = _saved_clean(machine_audit_path(key), key)
        if saved is not None:
            write_json(target, {**saved, "task": spec.provenance.slug, "instance_id": spec.task_id})
            return AuditReport(tag, image_id, True, [], {"seconds": 0.0, "cached": 1})
    report = audit_image(client, tag, spec)
    data = {"task": spec.provenance.slug, "instance_id": spec.task_id, **report.to_json()}
    if key is not None:
        data["cache_key"] = key
    write_json(target, data)
    if key is not None and report.clean:
        try:
            write_json(machine_audit_path(key), data)
        except OSError:  # a read-only or full cache: the verdict is in the task's JSON anyway
            pass
    return report
