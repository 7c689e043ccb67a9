"""The audit's pure logic: a task's secrets (hidden tests, grader files, test and gold patch) as
needles, the evidence lines of a file, and the units of lines that together prove a leak.

A file leaks a hunk when it holds every *distinctive* added line of it, i.e. every stripped line
of MIN_LINE+ characters that is not already a line of the base tree (see `make_units`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packager.checks.audit.report import FindingKind
from packager.diffs import decode_patch, encode_line, parse_diff

if TYPE_CHECKING:
    from packager.models.spec import TaskSpec

MIN_LINE = 8
"""A line shorter than this (after strip) is never evidence: `}`, `return x`, `pass`."""
MAX_UNIT_LINES = 8
"""A long hunk or hidden file is split into windows of this many distinctive lines, so a file
holding part of it (one copied test function) is still caught."""


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, in hex: how exact copies are matched."""
    return hashlib.sha256(data).hexdigest()


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


def parse_patch(text: str | bytes | None) -> list[PatchFile]:
    """The text files of a unified (git or plain) diff that have hunks (`packager.diffs`).
    Sections without text are skipped: binary ones, pure renames and mode changes.
    """
    files: list[PatchFile] = []
    for fd in parse_diff(decode_patch(text)).files:
        if fd.binary or not fd.hunks:
            continue
        hunks = tuple(tuple(encode_line(line) for _, line in h.added) for h in fd.hunks)
        new_content = None
        if fd.status == "added":
            body = b"\n".join(line for hunk in hunks for line in hunk)
            no_newline = any(h.new_ends_without_newline for h in fd.hunks)
            new_content = body if no_newline or not body else body + b"\n"
        files.append(PatchFile(fd.path, fd.old_path, fd.status == "added", hunks, new_content))
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


def secrets_of(spec: TaskSpec) -> Secrets:
    """The task's hidden tests, grader files, test patch and gold patch as needles."""
    g = spec.grading
    sources: list[Source] = []
    exact: dict[str, tuple[FindingKind, str, bytes]] = {}

    def whole(kind: FindingKind, label: str, data: bytes) -> None:
        exact.setdefault(sha256_hex(data), (kind, label, data))
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
            sha256_hex(text.encode()), (patch_kind, f"{kind.replace('_', ' ')} text", text.encode())
        )
        for pf in parse_patch(text):
            if pf.new_content is not None:
                new_kind: FindingKind = "hidden_test" if patch_kind == "test_patch" else patch_kind
                exact.setdefault(
                    sha256_hex(pf.new_content),
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
    if sha256_hex(content) in base_digests:
        return False
    if is_binary(content):
        return len(content) >= 64
    return any(s not in base_lines for s in candidate_lines(content.splitlines()))
