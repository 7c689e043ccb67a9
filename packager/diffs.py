r"""Unified diffs as host code reads them: one parser for git and plain patches.

`parse_diff` cuts a patch into file sections (`FileDiff`, each with its old and new path, its
status and its hunks) and the text between them (`Junk`: a commit message, a mail signature),
losslessly: `PatchSet.text` is the patch again, byte for byte. It understands what `git diff`
and `diff -u` write: `diff --git` headers (with or without `---`/`+++` lines after them), paths
C-quoted by git (`"a/sp\303\251ce"`), `/dev/null` sides, timestamps after a tab, new and deleted
files, renames and copies, mode lines, `GIT binary patch` data and `Binary files ... differ`,
`\ No newline at end of file`, and sections that start at `--- a/` or at `new file mode` without
a `diff --git` line (PDL rows). Hunks are read by their line counts, so a removed line that
looks like a header (`--- old comment` in SQL) stays in its hunk.

Pure and stdlib-only. The grading runtime has its own reader (`packager/grading/patching.py`,
packed into every task); this module is for the host: the adapters, the leak audit and the
quality checks.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

FileStatus = Literal["modified", "added", "deleted", "renamed", "copied"]
LineKind = Literal[" ", "+", "-", "\\"]

HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$", re.DOTALL)
"""An `@@ -a,b +c,d @@ section` line: groups old start, old length, new start, new length and
the rest of the line (the section heading git adds, with the line ending)."""

DEV_NULL = "/dev/null"


@dataclass(frozen=True)
class Hunk:
    """One hunk of a file's diff, with its header numbers as the patch gives them."""

    file: str
    """The path of the file section the hunk belongs to (`FileDiff.path`)."""
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    text: str
    """The hunk as it stands in the patch: its `@@` line and its body, line endings kept."""
    lines: tuple[tuple[LineKind, str], ...]
    r"""The body: (marker, text without the marker and the line ending) per line; `\` is a
    `No newline at end of file` marker for the line before it."""

    @property
    def added(self) -> tuple[tuple[int, str], ...]:
        """Lines the hunk adds: (line number in the new file, text)."""
        return tuple((n, text) for kind, text, _, n in self._numbered() if kind == "+")

    @property
    def removed(self) -> tuple[tuple[int, str], ...]:
        """Lines the hunk removes: (line number in the old file, text)."""
        return tuple((n, text) for kind, text, n, _ in self._numbered() if kind == "-")

    @property
    def new_ends_without_newline(self) -> bool:
        r"""Whether the new side's last line has no line ending (a `\` after a `+` or ` `)."""
        last: LineKind | None = None
        for kind, _ in self.lines:
            if kind == "\\" and last in ("+", " "):
                return True
            last = kind
        return False

    @property
    def delta(self) -> int:
        """How many lines the hunk adds to the file (negative when it removes more)."""
        return self.new_len - self.old_len

    @property
    def where(self) -> str:
        """`file: new lines a-b, old lines c-d`, ranges in each side's own numbering."""
        return f"{self.file}: new {_range(self.new_start, self.new_len)}, old " + _range(
            self.old_start, self.old_len
        )

    def _numbered(self) -> Iterator[tuple[LineKind, str, int, int]]:
        old, new = self.old_start, self.new_start
        for kind, text in self.lines:
            yield kind, text, old, new
            old += kind in (" ", "-")
            new += kind in (" ", "+")


def _range(start: int, length: int) -> str:
    if length == 0:
        return f"none (after line {start})"
    return f"line {start}" if length == 1 else f"lines {start}-{start + length - 1}"


@dataclass(frozen=True)
class FileDiff:
    """One file section of a diff: its header lines and its hunks."""

    index: int
    """Position among the patch's file sections."""
    old_path: str | None
    """The path before the patch (None when the patch creates the file)."""
    new_path: str | None
    """The path after the patch (None when the patch deletes the file)."""
    status: FileStatus
    header: str
    """Everything before the first hunk: `diff --git`, mode, index, `---`/`+++` lines, and a
    binary section's data."""
    hunks: tuple[Hunk, ...]
    git: bool = False
    """The section starts with a `diff --git` line."""
    git_names: tuple[str, ...] = ()
    """The names that line gives (old, then new when it differs); `paths` is what the patch
    touches, these are what the header claims (a checker of paths wants both)."""
    binary: bool = False
    """A binary section (`GIT binary patch` or `Binary files ... differ`)."""
    binary_data: bool = False
    """It carries the binary content (`GIT binary patch`), so git can apply it."""
    old_mode: str | None = None
    new_mode: str | None = None
    """File modes from `old mode`/`new mode` (or `deleted file mode`/`new file mode`)."""

    @property
    def path(self) -> str:
        """The path after the patch (before it, for a deleted file)."""
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the section touches: the old one, then the new one when it differs."""
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p is not None))

    @property
    def mode_change(self) -> bool:
        """An `old mode`/`new mode` pair: the file's mode changes (its content may too)."""
        return self.status not in ("added", "deleted") and self.old_mode != self.new_mode

    @property
    def text(self) -> str:
        """The section as it stands in the patch."""
        return self.header + "".join(h.text for h in self.hunks)


@dataclass(frozen=True)
class Junk:
    """Text that belongs to no file section (a commit message, a mail signature)."""

    text: str


@dataclass(frozen=True)
class PatchSet:
    """A whole patch: its file sections and the text between them, in order."""

    sections: tuple[FileDiff | Junk, ...]

    @property
    def files(self) -> tuple[FileDiff, ...]:
        """The file sections."""
        return tuple(s for s in self.sections if isinstance(s, FileDiff))

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the patch touches (old and new sides), sorted."""
        return tuple(sorted({p for f in self.files for p in f.paths}))

    @property
    def text(self) -> str:
        """The patch as parsed."""
        return "".join(s.text for s in self.sections)


# --------------------------------------------------------------------------- paths


def split_lines(text: str) -> list[str]:
    """Lines with their newline (the last may have none); only LF ends a line, as in git."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _bare(line: str) -> str:
    return line.rstrip("\n").rstrip("\r")


def unquote(name: str) -> str:
    r"""A path as git prints it: C-quoted (`"a/t\303\251st"`) when it has special characters."""
    if len(name) >= 2 and name[0] == '"' and name[-1] == '"':
        raw = codecs.escape_decode(name[1:-1].encode("utf-8", "surrogateescape"))[0]
        return bytes(raw).decode("utf-8", "surrogateescape")
    return name


def _strip_prefix(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def side_path(rest: str) -> str | None:
    """The path of a `---`/`+++` line after its marker (None for /dev/null), without `a/`/`b/`
    and without a timestamp after a tab.
    """
    rest = _bare(rest)
    if not rest.startswith('"') and "\t" in rest:
        rest = rest.split("\t", 1)[0]
    name = unquote(rest.strip())
    return None if name == DEV_NULL else _strip_prefix(name)


def _quoted_end(text: str) -> int:
    """The index just past the closing quote of the C-quoted name `text` starts with (-1)."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return -1


def git_header_paths(line: str) -> tuple[str | None, str | None]:
    """The old and new paths of a `diff --git a/P b/Q` line, without `a/`/`b/` (None where the
    line cannot be split: unquoted names with ` b/` inside them, which only the `---`/`+++` or
    `rename` lines resolve).
    """
    rest = _bare(line[len("diff --git ") :])
    if rest.startswith('"'):
        end = _quoted_end(rest)
        if end < 0 or rest[end : end + 1] != " ":
            return None, None
        return _strip_prefix(unquote(rest[:end])), _strip_prefix(unquote(rest[end + 1 :]))
    if rest.endswith('"') and ' "' in rest:
        left, _, right = rest.rpartition(' "')
        return _strip_prefix(left), _strip_prefix(unquote('"' + right))
    n = len(rest)
    if n % 2 == 1 and rest[: n // 2][2:] == rest[n // 2 + 1 :][2:]:
        return _strip_prefix(rest[: n // 2]), _strip_prefix(rest[n // 2 + 1 :])
    if " b/" in rest:
        left, _, right = rest.rpartition(" b/")
        return _strip_prefix(left), right
    return None, None


# --------------------------------------------------------------------------- sections


@dataclass
class _Builder:
    """A file section while its lines are read."""

    index: int
    header: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)
    git: bool = False
    git_old: str | None = None
    git_new: str | None = None
    sides: tuple[str | None, str | None] | None = None
    """The `---`/`+++` paths, once seen."""
    moved: tuple[str | None, str | None] = (None, None)
    """`rename from`/`copy from` and `rename to`/`copy to`."""
    copied: bool = False
    new_file: bool = False
    deleted_file: bool = False
    binary: bool = False
    binary_data: bool = False
    old_mode: str | None = None
    new_mode: str | None = None

    def path(self) -> str | None:
        """The path hunks belong to (None while the section has named no file yet)."""
        if self.sides is not None:
            return self.sides[1] or self.sides[0]
        return self.moved[1] or self.git_new or self.moved[0] or self.git_old

    def header_line(self, line: str) -> None:
        """Take one extended header line (mode, rename, copy, binary...)."""
        self.header.append(line)
        bare = _bare(line)
        word, _, value = bare.partition(" mode ")
        if bare.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            self.new_file |= word == "new file"
            self.deleted_file |= word == "deleted file"
            if word in ("deleted file", "old"):
                self.old_mode = value
            else:
                self.new_mode = value
        elif bare.startswith(("rename from ", "copy from ")):
            self.copied = bare.startswith("copy")
            self.moved = (unquote(bare.split(" from ", 1)[1]), self.moved[1])
        elif bare.startswith(("rename to ", "copy to ")):
            self.moved = (self.moved[0], unquote(bare.split(" to ", 1)[1]))
        elif bare.startswith("Binary files ") and bare.endswith(" differ"):
            self.binary = True

    def _paths(self) -> tuple[str | None, str | None]:
        if self.sides is not None:
            old, new = self.sides
        elif self.moved == (None, None):
            # No rename or copy: git names one file (when the sides differ, git apply refuses
            # the section; its new side is taken, as for hunks).
            old = new = self.git_new or self.git_old
        else:
            old = self.moved[0] or self.git_old
            new = self.moved[1] or self.git_new
        if self.new_file:
            old = None
        if self.deleted_file:
            new = None
        return old, new

    def _status(self, old: str | None, new: str | None) -> FileStatus:
        if old is None:
            return "added"
        if new is None:
            return "deleted"
        if self.moved[0] is not None or self.moved[1] is not None or old != new:
            return "copied" if self.copied else "renamed"
        return "modified"

    def finish(self) -> FileDiff | Junk:
        """The section (or, when it never named a file, its text as junk)."""
        text = "".join(self.header)
        path = self.path()
        if path is None:
            return Junk(text + "".join(h.text for h in self.hunks))
        old, new = self._paths()
        return FileDiff(
            index=self.index,
            old_path=old,
            new_path=new,
            status=self._status(old, new),
            header=text,
            hunks=tuple(self.hunks),
            git=self.git,
            git_names=tuple(dict.fromkeys(p for p in (self.git_old, self.git_new) if p)),
            binary=self.binary,
            binary_data=self.binary_data,
            old_mode=self.old_mode,
            new_mode=self.new_mode,
        )


def read_hunk(lines: Sequence[str], i: int, file: str) -> tuple[Hunk, int]:
    """The hunk whose `@@` line is lines[i], read by its line counts; the index after it."""
    match = HUNK_HEADER.match(lines[i])
    if match is None:
        raise ValueError(f"not a hunk header: {lines[i]!r}")
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_len = int(match.group(2)) if match.group(2) is not None else 1
    new_len = int(match.group(4)) if match.group(4) is not None else 1
    body = [lines[i]]
    parsed: list[tuple[LineKind, str]] = []
    old_left, new_left = old_len, new_len
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
        line = lines[i]
        tag = line[:1]
        if tag in ("+", "-", "\\"):
            kind: LineKind = "+" if tag == "+" else "-" if tag == "-" else "\\"
            parsed.append((kind, _bare(line[1:])))
            old_left -= tag == "-"
            new_left -= tag == "+"
        elif tag in (" ", "\n", "\r"):
            # A context line; some tools strip the space of an empty one.
            parsed.append((" ", _bare(line[1:] if tag == " " else "")))
            old_left -= 1
            new_left -= 1
        else:
            break  # a malformed hunk ends here; git apply will say why
        body.append(line)
        i += 1
    hunk = Hunk(file, old_start, old_len, new_start, new_len, "".join(body), tuple(parsed))
    return hunk, i


class _Reader:
    """Cuts a patch's lines into sections, one line (or a few) at a time."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.out: list[FileDiff | Junk] = []
        self.cur: _Builder | None = None
        self.index = 0

    def start(self) -> _Builder:
        """Close the current section and open the next one."""
        if self.cur is not None:
            self._close()
        self.cur = _Builder(self.index)
        return self.cur

    def _close(self) -> None:
        assert self.cur is not None
        done = self.cur.finish()
        self.index += isinstance(done, FileDiff)
        self.out.append(done)
        self.cur = None

    def step(self, i: int) -> int:
        """Read what starts at lines[i]; the index after it."""
        lines, cur = self.lines, self.cur
        line = lines[i]
        if cur is not None and cur.path() is not None and HUNK_HEADER.match(line):
            hunk, i = read_hunk(lines, i, cur.path() or "")
            cur.hunks.append(hunk)
            return i
        if line.startswith("diff --git "):
            cur = self.start()
            cur.header.append(line)
            cur.git = True
            cur.git_old, cur.git_new = git_header_paths(line)
            return i + 1
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if cur is None or cur.sides is not None or cur.hunks or cur.binary:
                cur = self.start()
            cur.header.extend(lines[i : i + 2])
            cur.sides = (side_path(line[4:]), side_path(lines[i + 1][4:]))
            return i + 2
        if _bare(line) == "GIT binary patch" and cur is not None:
            # Base85 data up to the next file: none of its lines starts with "diff --git ".
            cur.binary = cur.binary_data = True
            while i < len(lines) and not lines[i].startswith("diff --git "):
                cur.header.append(lines[i])
                i += 1
            return i
        if cur is None or cur.hunks or cur.binary:
            # A section without `diff --git` (PDL: `new file mode` first), or text after one.
            cur = self.start()
        cur.header_line(line)
        return i + 1

    def read(self) -> PatchSet:
        """The whole patch."""
        i = 0
        while i < len(self.lines):
            i = self.step(i)
        if self.cur is not None:
            self._close()
        return PatchSet(tuple(self.out))


def parse_diff(text: str | None) -> PatchSet:
    """The patch cut into file sections and the text between them (see the module's doc)."""
    return _Reader(split_lines(text or "")).read()


def decode_patch(data: str | bytes | None) -> str:
    """A patch as text; bytes that are not UTF-8 survive a round trip (`surrogateescape`)."""
    if data is None:
        return ""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


def encode_line(text: str) -> bytes:
    """A line of a parsed patch as the bytes it was (the inverse of `decode_patch`)."""
    return text.encode("utf-8", "surrogateescape")
