"""The gold patch cut into file sections and hunks (pure): `split_hunks` and the lossless
`_sections` that `ablation` rebuilds a patch from. Git diffs and plain unified diffs alike:
quoted paths, renames, mode changes and binary sections are recognised, never ablated.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$", re.DOTALL)

FileStatus = Literal["modified", "added", "deleted", "renamed"]


@dataclass(frozen=True)
class Hunk:
    """One hunk of a file's diff, with its header numbers as the patch gives them."""

    file: str
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    text: str
    """The hunk as it stands in the patch: its `@@` line and its body, line endings kept."""
    added: tuple[tuple[int, str], ...]
    """Lines the hunk adds: (line number in the new file, text without `+` and line ending)."""

    @property
    def delta(self) -> int:
        """How many lines the hunk adds to the file (negative when it removes more)."""
        return self.new_len - self.old_len

    @property
    def where(self) -> str:
        """`file: new lines a-b (old c-d)`, ranges in each side's own numbering."""
        return f"{self.file}: new {_range(self.new_start, self.new_len)}, old " + _range(
            self.old_start, self.old_len
        )


def _range(start: int, length: int) -> str:
    if length == 0:
        return f"none (after line {start})"
    return f"line {start}" if length == 1 else f"lines {start}-{start + length - 1}"


@dataclass(frozen=True)
class FileDiff:
    """One file section of a diff: its header lines and its hunks."""

    index: int
    """Position among the patch's file sections (what an `Ablation` refers to)."""
    path: str
    """The path after the patch (before it, for a deleted file)."""
    old_path: str | None
    """The path before the patch (None for a new file)."""
    status: FileStatus
    header: str
    """Everything before the first hunk: `diff --git`, mode, index, `---`/`+++` lines."""
    hunks: tuple[Hunk, ...]
    binary: bool = False
    """A binary section (`GIT binary patch` or `Binary files ... differ`): never ablated."""
    mode_change: bool = False

    @property
    def text(self) -> str:
        """The section as it stands in the patch."""
        return self.header + "".join(h.text for h in self.hunks)

    @property
    def skipped(self) -> str | None:
        """Why the section has nothing to ablate (None when it has hunks)."""
        if self.binary:
            return "binary"
        if not self.hunks:
            return "rename or mode change only" if self.status == "renamed" else "no hunks"
        return None


@dataclass(frozen=True)
class _Junk:
    """Text that belongs to no file section (a commit message, a mail signature)."""

    text: str


def _lines(text: str) -> list[str]:
    """Lines with their newline (the last may have none); only LF ends a line, as in git."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _unquote(name: str) -> str:
    """A path as git prints it: C-quoted when it has special characters."""
    if len(name) >= 2 and name[0] == '"' and name[-1] == '"':
        raw = codecs.escape_decode(name[1:-1].encode("utf-8", "surrogateescape"))[0]
        return bytes(raw).decode("utf-8", "surrogateescape")
    return name


def _side_path(rest: str) -> str | None:
    """The path of a `---`/`+++` line (None for /dev/null), without a/ b/ and timestamps."""
    rest = rest.rstrip("\n").rstrip("\r")
    if not rest.startswith('"') and "\t" in rest:
        rest = rest.split("\t", 1)[0]
    name = _unquote(rest.strip())
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _git_header_path(line: str) -> str | None:
    """The path of `diff --git a/P b/P` when both sides agree (pure renames say it otherwise)."""
    rest = line[len("diff --git ") :].rstrip("\n").rstrip("\r")
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        if end > 0:
            return _side_path(rest[end + 2 :])
        return None
    n = len(rest)
    if n % 2 == 1:
        left, right = rest[: n // 2], rest[n // 2 + 1 :]
        if left[2:] == right[2:] and left[:2] == "a/" and right[:2] == "b/":
            return right[2:]
    if " b/" in rest:
        return rest.rsplit(" b/", 1)[1]
    return None


class _FileBuilder:
    def __init__(self, index: int) -> None:
        self.index = index
        self.header: list[str] = []
        self.hunks: list[Hunk] = []
        self.old: str | None = None
        self.new: str | None = None
        self.saw_sides = False
        self.git_path: str | None = None
        self.rename_from: str | None = None
        self.rename_to: str | None = None
        self.new_file = False
        self.deleted_file = False
        self.binary = False
        self.mode_change = False

    def path(self) -> str | None:
        if self.saw_sides:
            return self.new or self.old
        return self.rename_to or self.git_path

    def finish(self) -> FileDiff | _Junk:
        path = self.path()
        text = "".join(self.header)
        if path is None:
            return _Junk(text + "".join(h.text for h in self.hunks))
        status: FileStatus = "modified"
        old_path: str | None = self.old if self.saw_sides else (self.rename_from or path)
        if self.new_file or (self.saw_sides and self.old is None):
            status, old_path = "added", None
        elif self.deleted_file or (self.saw_sides and self.new is None):
            status = "deleted"
        elif self.rename_from is not None or (old_path is not None and old_path != path):
            status = "renamed"
        hunks = tuple(
            Hunk(path, h.old_start, h.old_len, h.new_start, h.new_len, h.text, h.added)
            for h in self.hunks
        )
        return FileDiff(
            index=self.index,
            path=path,
            old_path=old_path,
            status=status,
            header=text,
            hunks=hunks,
            binary=self.binary,
            mode_change=self.mode_change,
        )


def _read_hunk(lines: Sequence[str], i: int, file: str) -> tuple[Hunk, int]:
    """The hunk whose `@@` line is lines[i], read by its line counts; the index after it."""
    match = _HUNK_HEADER.match(lines[i])
    assert match is not None
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_len = int(match.group(2)) if match.group(2) is not None else 1
    new_len = int(match.group(4)) if match.group(4) is not None else 1
    body = [lines[i]]
    added: list[tuple[int, str]] = []
    old_left, new_left = old_len, new_len
    line_no = new_start
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        tag = line[:1]
        if tag == "+":
            added.append((line_no, line[1:].rstrip("\n").rstrip("\r")))
            line_no += 1
            new_left -= 1
        elif tag == "-":
            old_left -= 1
        elif tag in (" ", "\n", "\r"):
            # A context line; some tools strip the space of an empty one.
            old_left -= 1
            new_left -= 1
            line_no += 1
        elif tag != "\\":
            break  # a malformed hunk ends here; git apply will say why
        body.append(line)
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        body.append(lines[i])  # "\ No newline at end of file"
        i += 1
    hunk = Hunk(file, old_start, old_len, new_start, new_len, "".join(body), tuple(added))
    return hunk, i


def _sections(patch: str) -> list[FileDiff | _Junk]:
    """The patch cut into file sections (and text between them), in order, losslessly."""
    lines = _lines(patch)
    out: list[FileDiff | _Junk] = []
    cur: _FileBuilder | None = None
    index = 0

    def start() -> _FileBuilder:
        nonlocal cur, index
        if cur is not None:
            done = cur.finish()
            if isinstance(done, FileDiff):
                index += 1
            out.append(done)
        cur = _FileBuilder(index)
        return cur

    i = 0
    while i < len(lines):
        line = lines[i]
        bare = line.rstrip("\n").rstrip("\r")
        if cur is not None and cur.path() is not None and _HUNK_HEADER.match(line):
            hunk, i = _read_hunk(lines, i, cur.path() or "")
            cur.hunks.append(hunk)
            continue
        if line.startswith("diff --git "):
            cur = start()
            cur.header.append(line)
            cur.git_path = _git_header_path(line)
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if cur is None or cur.saw_sides or cur.hunks or cur.binary:
                cur = start()
            cur.header.extend(lines[i : i + 2])
            cur.old, cur.new = _side_path(line[4:]), _side_path(lines[i + 1][4:])
            cur.saw_sides = True
            i += 2
            continue
        elif bare == "GIT binary patch" and cur is not None:
            # Base85 data up to the next file: none of its lines starts with "diff --git ".
            cur.binary = True
            while i < len(lines) and not lines[i].startswith("diff --git "):
                cur.header.append(lines[i])
                i += 1
            continue
        else:
            if cur is None or cur.hunks or cur.binary:
                # A section without `diff --git` (PDL: `new file mode` first), or text after one.
                cur = start()
            cur.header.append(line)
            if line.startswith("new file mode "):
                cur.new_file = True
            elif line.startswith("deleted file mode "):
                cur.deleted_file = True
            elif line.startswith(("old mode ", "new mode ")):
                cur.mode_change = True
            elif line.startswith("rename from "):
                cur.rename_from = _unquote(bare[len("rename from ") :])
            elif line.startswith("rename to "):
                cur.rename_to = _unquote(bare[len("rename to ") :])
            elif line.startswith("Binary files "):
                cur.binary = True
        i += 1
    if cur is not None:
        out.append(cur.finish())
    return out


def split_hunks(patch: str) -> list[FileDiff]:
    """The file sections of a unified diff (git or plain, `--- a/` first lines included) with
    their hunks. New, deleted and renamed files are sections like others; binary sections and
    pure renames or mode changes have no hunks (`FileDiff.skipped` says why).
    """
    return [s for s in _sections(patch) if isinstance(s, FileDiff)]
