"""Quality checks of a verified task (issue 12): a task whose gold patch scores 1.0 and whose
untouched repository scores below 1.0 can still be a poor task, because its tests may pass a
partial fix, or its problem statement may quote the fix or name the hidden tests.

Three checks, one report per task (`results/<task>.quality.json`):

- **Hunk ablation**: the gold patch is graded again with each of its hunks (or, when it has
  more than `max_ablations`, each group of hunks, never mixing files until there are more files
  than ablations) left out, through the very engine, images and grading runtime that verified
  the task (`verify.run_once` with a candidate patch, as `packager verify --patch` does). A
  hunk whose removal still scores 1.0 is not covered by the tests. The whole gold patch is
  graded first through the same path, as a control: if it does not score 1.0 the ablations
  would prove nothing and are not run.
- **Instruction leak**: the instruction quotes a non-trivial line the gold patch adds, or names
  a hidden test file, a hidden test function or a FAIL_TO_PASS id that the base repository does
  not already have (a name already in the base tree was public).
- **Ladder** (PDL rows): the ablated variants' rewards beside the row's `graded_ladder_rungs`
  names (the row names its rungs but ships neither their diffs nor their rewards).

The diff logic (`split_hunks`, `ablation_plan`, `ablated_patch`, `instruction_leaks`) is pure.
This module runs containers only through `packager.engines.containers` and never prints: the CLI
decides what to show and which exit code a flagged task gets.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from packager.errors import InputError, PackagerError
from packager.models.spec import Frozen

if TYPE_CHECKING:
    from packager.engines.containers import RunPlan
    from packager.images.build import DockerClient
    from packager.models.spec import RunResult, TaskResult, TaskSpec
    from packager.run.store import OutputPaths

QUALITY_VERSION = 1
"""Bumped when the checks change, so a saved report is not reused across versions."""
MAX_ABLATIONS_DEFAULT = 12

# --------------------------------------------------------------------------- diffs (pure)

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


@dataclass(frozen=True)
class Ablation:
    """One regrade: the gold patch without some hunks."""

    index: int
    """1-based; its logs go to `logs/<task>/quality/ablation-<index>/`."""
    removes: tuple[tuple[int, int], ...]
    """(file section index, hunk index within that file) of every hunk left out."""
    files: tuple[str, ...]

    def describe(self, files: Sequence[FileDiff]) -> str:
        """What it leaves out, e.g. `src/a.py: new lines 3-5, old lines 3-4`."""
        return "; ".join(files[f].hunks[h].where for f, h in self.removes)


def ablation_plan(patch: str, max_ablations: int = MAX_ABLATIONS_DEFAULT) -> list[Ablation]:
    """Which hunks each ablation leaves out: one hunk each when there are at most
    `max_ablations`; else the hunks of one file each, a file's hunks split in halves while the
    budget allows; with more files than ablations, runs of neighbouring files together. Every
    file with hunks is in exactly one ablation, so every file is covered.
    """
    if max_ablations < 1:
        raise ValueError("max_ablations must be at least 1")
    files = [f for f in split_hunks(patch) if f.skipped is None]
    units = [(f.index, h) for f in files for h in range(len(f.hunks))]
    groups: list[list[tuple[int, int]]]
    if len(units) <= max_ablations:
        groups = [[u] for u in units]
    else:
        per_file = [[(f.index, h) for h in range(len(f.hunks))] for f in files]
        if len(per_file) > max_ablations:
            groups = []
            size, extra = divmod(len(per_file), max_ablations)
            at = 0
            for n in range(max_ablations):
                take = size + (1 if n < extra else 0)
                groups.append([u for group in per_file[at : at + take] for u in group])
                at += take
        else:
            groups = per_file
            while len(groups) < max_ablations:
                biggest = max(range(len(groups)), key=lambda k: (len(groups[k]), -k))
                group = groups[biggest]
                if len(group) < 2:
                    break
                half = (len(group) + 1) // 2
                groups[biggest : biggest + 1] = [group[:half], group[half:]]
    by_index = {f.index: f for f in files}
    return [
        Ablation(
            index=n,
            removes=tuple(group),
            files=tuple(dict.fromkeys(by_index[f].path for f, _ in group)),
        )
        for n, group in enumerate(groups, 1)
    ]


def _renumbered(hunk: Hunk, shift: int) -> str:
    """The hunk with its new-side start moved by `shift` (hunks before it were left out)."""
    if shift == 0:
        return hunk.text
    first, _, rest = hunk.text.partition("\n")
    match = _HUNK_HEADER.match(first)
    assert match is not None
    old = match.group(1) + (f",{match.group(2)}" if match.group(2) is not None else "")
    new = str(hunk.new_start + shift) + (f",{match.group(4)}" if match.group(4) is not None else "")
    return f"@@ -{old} +{new} @@{match.group(5)}\n{rest}"


def _without_hunks(section: FileDiff, drop: set[int]) -> str:
    """A file section without the hunks in `drop` (indices), as a diff git apply accepts."""
    if not drop:
        return section.text
    if len(drop) == len(section.hunks):
        if section.status == "renamed" or section.mode_change:
            # Keep the rename or mode change itself: its git header without the content lines.
            keep = [
                line
                for line in _lines(section.header)
                if not line.startswith(("--- ", "+++ ", "index "))
            ]
            return "".join(keep)
        return ""  # a new, deleted or edited file whose every change is left out: no section
    parts = [section.header]
    shift = 0
    for k, hunk in enumerate(section.hunks):
        if k in drop:
            shift -= hunk.delta
            continue
        parts.append(_renumbered(hunk, shift))
    return "".join(parts)


def ablated_patch(patch: str, ablation: Ablation) -> str:
    """The patch without the hunks `ablation` leaves out. Later hunks of the same file get
    their new-side start moved by what the left-out hunks added, so the diff is exact (git
    apply would also accept the original numbers, as an offset).
    """
    drop: dict[int, set[int]] = {}
    for f, h in ablation.removes:
        drop.setdefault(f, set()).add(h)
    out: list[str] = []
    for section in _sections(patch):
        if isinstance(section, _Junk):
            out.append(section.text)
        else:
            out.append(_without_hunks(section, drop.get(section.index, set())))
    return "".join(out)


def patch_digest(text: str | None) -> str:
    """sha256 of a patch (or instruction) text: part of the cache key of a report."""
    return hashlib.sha256((text or "").encode("utf-8", "surrogateescape")).hexdigest()


# --------------------------------------------------------------------------- leaks (pure)

LeakKind = Literal["added_line", "hidden_file", "test_name", "test_id"]


class Leak(Frozen):
    """One way the instruction gives away the fix or the hidden tests."""

    kind: LeakKind
    text: str
    """What the instruction contains (the line, path, name or id)."""
    where: str
    """Where that text comes from (`gold patch src/x.py:12`, `test_patch`, `FAIL_TO_PASS`)."""


MIN_LINE_CHARS = 12
MIN_NAMES = 2
"""A gold line counts as a leak only when, stripped, it has 12+ characters and 2+ names that
are not keywords: shorter lines (`return out`, `pass`, `}`) match prose by accident."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset(
    """
    and as assert async await break case catch class const continue def default del do elif
    else err except export extends false False final finally fn for from func function go if
    impl import in int interface is let match mod module new nil None nonlocal not null or
    package pass private protected pub public raise require return self static str string
    struct super switch this throw true True try type typeof undefined use var void while
    with yield
    """.split()
)
_COMMENT_PREFIXES = ("#", "//", "/*", "*", "--", ";", "<!--", '"""', "'''", 'r"""', "%")
_NODE_BUILTINS = frozenset(
    "assert buffer child_process crypto events fs http https net os path process "
    "querystring readline stream string_decoder timers tls url util zlib".split()
)
_PY_IMPORT = re.compile(r"^(?:from\s+([\w.]+)\s+import\s+[\w., ()*]+|import\s+([\w., ]+))$")
_JS_REQUIRE = re.compile(
    r"""^(?:(?:const|let|var)\s+[\w{}, ]+\s*=\s*require\(\s*['"](?:node:)?([\w/]+)['"]\s*\);?"""
    r"""|import\s+.*\s+from\s+['"](?:node:)?([\w/]+)['"];?)$"""
)


def _common_import(line: str) -> bool:
    """An import of the Python standard library or a Node built-in: says nothing of the fix."""
    if m := _PY_IMPORT.match(line):
        names = [m.group(1)] if m.group(1) else [p.split(" as ")[0] for p in m.group(2).split(",")]
        return all(n.strip().split(".")[0] in sys.stdlib_module_names for n in names if n.strip())
    if m := _JS_REQUIRE.match(line):
        return (m.group(1) or m.group(2) or "").split("/")[0] in _NODE_BUILTINS
    return False


def is_trivial_line(line: str) -> bool:
    """Whether an added line is too common to be evidence when an instruction holds it: under
    `MIN_LINE_CHARS` stripped, fewer than `MIN_NAMES` non-keyword names (`return result`,
    `else:`, braces), a comment or docstring line, or an import of a standard module.
    """
    s = line.strip()
    if len(s) < MIN_LINE_CHARS or s.startswith(_COMMENT_PREFIXES):
        return True
    names = [t for t in _IDENT.findall(s) if t not in _KEYWORDS]
    if len(names) < MIN_NAMES:
        return True
    return _common_import(s)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w./-]){re.escape(word)}(?![\w])", text) is not None


_TEST_DEF = re.compile(
    r"^\s*(?:async\s+)?def\s+(test\w*)|^\s*func\s+(Test\w*)|^\s*class\s+(Test\w*)",
)


def _test_names_in(text: str) -> list[str]:
    """Test functions and classes a test file (or the added side of a diff) defines."""
    names = []
    for line in text.splitlines():
        m = _TEST_DEF.match(line[1:] if line.startswith("+") else line)
        if m:
            names.append(next(g for g in m.groups() if g))
    return names


def _id_names(test_id: str) -> list[str]:
    """Function and class names in a listed test id: pytest `path::Class::test[p]`, Django
    `test_x (mod.Class)`, Go `TestX/sub`.
    """
    head = test_id.split(" (", 1)[0]
    if "::" in head:
        parts = head.split("::")[1:]
    else:
        parts = [head.split("/", 1)[0]]
    names = []
    for part in parts:
        name = part.split("[", 1)[0]
        if _IDENT.fullmatch(name):
            names.append(name)
    return names


def instruction_leaks(spec: TaskSpec, in_base: Callable[[str], bool]) -> list[Leak]:
    """What `spec.instruction` gives away: non-trivial lines the gold patch adds, and hidden
    test files, hidden test names and FAIL_TO_PASS ids, each only when the base repository does
    not already hold it (`in_base(text)`: a path, a name or a line of the base tree).
    """
    text = spec.instruction
    flat = _squash(text)
    leaks: dict[tuple[str, str], Leak] = {}

    def add(kind: LeakKind, found: str, where: str) -> None:
        leaks.setdefault((kind, found), Leak(kind=kind, text=found, where=where))

    for section in split_hunks(spec.gold_patch or ""):
        for hunk in section.hunks:
            for line_no, line in hunk.added:
                s = _squash(line)
                if is_trivial_line(s) or s not in flat or in_base(line.strip()):
                    continue
                add("added_line", line.strip(), f"gold patch {section.path}:{line_no}")
    g = spec.grading
    hidden: dict[str, str] = {}
    names: dict[str, str] = {}
    if g.test_patch:
        for section in split_hunks(g.test_patch):
            if section.status == "added":
                hidden.setdefault(section.path, "test_patch")
            for hunk in section.hunks:
                added = "\n".join(line for _, line in hunk.added)
                for name in _test_names_in(added):
                    names.setdefault(name, f"test_patch {section.path}")
    for path, data in [*g.hidden_files.items(), *g.grader_files.items()]:
        hidden.setdefault(path, "hidden files")
        for name in _test_names_in(data.decode("utf-8", "replace")):
            names.setdefault(name, f"hidden file {path}")
    for test_id in g.fail_to_pass or g.hidden_tests:
        for name in _id_names(test_id):
            names.setdefault(name, "FAIL_TO_PASS")
        if "::" in test_id:
            hidden.setdefault(test_id.split("::", 1)[0], "FAIL_TO_PASS")
        if test_id in text and not in_base(test_id):
            add("test_id", test_id, "FAIL_TO_PASS")
    for path, where in hidden.items():
        base_name = path.rsplit("/", 1)[-1]
        for candidate in dict.fromkeys((path, base_name)):
            if _has_word(text, candidate) and not in_base(candidate):
                add("hidden_file", candidate, f"{where} {path}")
                break
    listed = {leak.text for leak in leaks.values() if leak.kind == "test_id"}
    for name, where in names.items():
        if any(name in test_id for test_id in listed):
            continue  # already reported with its whole id
        if _has_word(text, name) and not in_base(name):
            add("test_name", name, where)
    return list(leaks.values())


# --------------------------------------------------------------------------- base tree lookup

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


def _path_known(paths: Sequence[str], name: str) -> bool:
    """`name` is a file, a folder, or the file name of a file of the tree."""
    name = name.strip("/")
    if not name:
        return False
    for path in paths:
        if path == name or path.startswith(name + "/") or path.rsplit("/", 1)[-1] == name:
            return True
    return False


def base_tree_names(git_dir: Path, commit: str) -> Callable[[str], bool]:
    """`in_base(text)` for a commit of a repository source: whether `text` is a path (file,
    folder or file name) of the commit's tree, or occurs in one of its files (`git grep`, as a
    whole word when it is a name). Answers are cached per text.
    """
    from packager.repos.read import list_files

    paths = list_files(git_dir, commit)

    @lru_cache(maxsize=1024)
    def in_base(text: str) -> bool:
        if _path_known(paths, text):
            return True
        word = ["-w"] if _IDENT.fullmatch(text) else []
        done = subprocess.run(
            ["git", f"--git-dir={git_dir}", "grep", "-q", "-I", "-F", *word, "-e", text, commit],
            env={**os.environ, **_GIT_ENV, "GIT_CONFIG_GLOBAL": os.devnull},
            capture_output=True,
            timeout=300,
            check=False,
        )
        if done.returncode not in (0, 1):
            raise PackagerError(
                f"git grep in {git_dir} at {commit[:12]} failed: "
                + done.stderr.decode(errors="replace").strip()
            )
        return done.returncode == 0

    return in_base


def files_names(files: Mapping[str, bytes]) -> Callable[[str], bool]:
    """`in_base(text)` for an inline repository (PDL `files`): the same answers as
    `base_tree_names` gives for a commit of those files.
    """
    paths = sorted(files)
    texts = [data.decode("utf-8", "replace") for data in files.values() if b"\0" not in data]

    @lru_cache(maxsize=1024)
    def in_base(text: str) -> bool:
        if _path_known(paths, text):
            return True
        if _IDENT.fullmatch(text):
            pattern = re.compile(rf"(?<!\w){re.escape(text)}(?!\w)")
            return any(pattern.search(t) for t in texts)
        return any(text in t for t in texts)

    return in_base


def base_lookup(
    spec: TaskSpec, repo_sources: Mapping[str, str], mirror_dirs: Sequence[str] = ()
) -> Callable[[str], bool]:
    """`in_base` for a task's base tree: its inline files, or its repository source at
    `base_commit` (the mirror the build used).
    """
    if spec.repo.files is not None:
        return files_names(spec.repo.files)
    from packager import repos

    source = repos.source_for(spec.repo.name, dict(repo_sources), mirror_dirs=tuple(mirror_dirs))
    return base_tree_names(repos.git_dir_for(source), spec.repo.base_commit)


# --------------------------------------------------------------------------- report


class HunkResult(Frozen):
    """One gold hunk and what leaving it out did."""

    file: str
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    where: str
    """`file: new lines a-b, old lines c-d`."""
    ablation: int | None
    """The ablation that left it out (None when ablation did not run)."""
    covered: bool | None
    """False: the gold patch without it still scores 1.0; None: not measured."""
    reward: float | None
    """The reward of the gold patch without it (and the rest of its ablation's group)."""


class AblationRun(Frozen):
    """One graded candidate: the whole gold patch (the control) or an ablation."""

    index: int
    """0 for the control (the whole gold patch)."""
    removes: str
    """What was left out (empty for the control)."""
    files: tuple[str, ...] = ()
    hunks: int = 0
    reward: float | None
    subscores: dict[str, float] = Field(default_factory=dict)
    grade_status: str
    reason: str | None = None
    seconds: float
    log_dir: str


class SkippedFile(Frozen):
    """A file of the gold patch with nothing to ablate."""

    file: str
    reason: str


class Ladder(Frozen):
    """PDL: the row's graded ladder rung names beside the ablated variants' rewards."""

    available: bool
    rungs: tuple[str, ...] = ()
    gold: float | None = None
    floor: float | None = None
    """The row's do-nothing floor (its expected nop reward)."""
    rewards: tuple[float | None, ...] = ()
    """The ablations' rewards, in ablation order (what `ablations` says each left out)."""
    note: str


AblationStatus = Literal["done", "skipped", "control_failed", "nothing_to_ablate"]


class QualityReport(Frozen):
    """The quality of one verified task (`results/<task>.quality.json`)."""

    version: int = QUALITY_VERSION
    task: str
    instance_id: str
    dataset: str
    schema_name: str
    images: dict[str, str]
    image_ids: dict[str, str] = Field(default_factory=dict)
    gold_patch_sha256: str
    instruction_sha256: str
    max_ablations: int
    ablation_status: AblationStatus
    ablation_note: str | None = None
    control: AblationRun | None = None
    ablations: tuple[AblationRun, ...] = ()
    hunks: tuple[HunkResult, ...] = ()
    covered: int | None
    """Hunks whose removal lowered the reward (None when ablation did not run)."""
    total: int
    """Hunks of the gold patch (binary sections and pure renames are not hunks)."""
    skipped_files: tuple[SkippedFile, ...] = ()
    leaks: tuple[Leak, ...] = ()
    ladder: Ladder | None = None
    seconds: float
    flagged: bool
    reasons: tuple[str, ...] = ()
    """Why it is flagged, one sentence each (empty when it is not)."""


def quality_path(paths: OutputPaths, slug: str) -> Path:
    """`<out>/<dataset>/results/<task>.quality.json`."""
    return paths.base / "results" / f"{slug}.quality.json"


def write_quality(paths: OutputPaths, report: QualityReport) -> Path:
    """Write the report atomically to `quality_path`; returns the path."""
    from packager.render.write import write_json

    target = quality_path(paths, report.task)
    write_json(target, report.model_dump(mode="json"))
    return target


def read_quality(paths: OutputPaths, slug: str) -> QualityReport | None:
    """The saved report of a task (None when there is none or it cannot be read)."""
    target = quality_path(paths, slug)
    if not target.is_file():
        return None
    try:
        return QualityReport.model_validate_json(target.read_text())
    except ValueError:
        return None


def cached_quality(
    paths: OutputPaths,
    spec: TaskSpec,
    image_ids: Mapping[str, str],
    *,
    max_ablations: int = MAX_ABLATIONS_DEFAULT,
) -> QualityReport | None:
    """The saved report when it was made by this version of the checks, for the very same
    images (ids), gold patch, instruction and ablation budget; else None (run again).
    """
    saved = read_quality(paths, spec.provenance.slug)
    if saved is None or not image_ids:
        return None
    same = (
        saved.version == QUALITY_VERSION
        and saved.image_ids == dict(image_ids)
        and saved.gold_patch_sha256 == patch_digest(spec.gold_patch)
        and saved.instruction_sha256 == patch_digest(spec.instruction)
        and saved.max_ablations == max_ablations
    )
    return saved if same else None


# --------------------------------------------------------------------------- running


def candidate_bytes(spec: TaskSpec, gold: str) -> bytes:
    """The model.patch an agent applying `gold` would leave: the collect hook diffs against the
    snapshot's HEAD, so a setup patch (applied uncommitted in the agent image) comes first.
    """
    setup = spec.repo.setup_patch or ""
    if setup and not setup.endswith("\n"):
        setup += "\n"
    return (setup + gold).encode("utf-8", "surrogateescape")


def _as_run(
    index: int, removes: str, run: RunResult, files: tuple[str, ...] = (), hunks: int = 0
) -> AblationRun:
    return AblationRun(
        index=index,
        removes=removes,
        files=files,
        hunks=hunks,
        reward=run.reward,
        subscores=dict(run.subscores),
        grade_status=run.grade_status,
        reason=run.reason,
        seconds=run.duration_sec,
        log_dir=run.log_dir,
    )


def _measured(run: AblationRun) -> bool:
    """Whether a run's reward says something about the tests (it applied and was graded)."""
    return run.reward is not None and run.grade_status not in ("infra_error", "patch_failed")


def _ladder(spec: TaskSpec, control: AblationRun | None, runs: Sequence[AblationRun]) -> Ladder:
    raw = spec.provenance.metadata.get("graded_ladder_rungs")
    gold = control.reward if control else None
    floor = spec.expectations.nop_reward
    rewards = tuple(r.reward for r in runs)
    if not isinstance(raw, list):
        return Ladder(
            available=False,
            gold=gold,
            floor=floor,
            rewards=rewards,
            note="graded_ladder_rungs is not in the task's provenance metadata",
        )
    return Ladder(
        available=True,
        rungs=tuple(raw),
        gold=gold,
        floor=floor,
        rewards=rewards,
        note=(
            "the row names its rungs but ships neither their diffs nor their rewards, so "
            "rungs and ablations are shown side by side, not matched"
        ),
    )


@dataclass(frozen=True)
class _Ablated:
    status: AblationStatus
    note: str | None = None
    control: AblationRun | None = None
    runs: tuple[AblationRun, ...] = ()


def _ablate(
    client: DockerClient,
    spec: TaskSpec,
    plan: Sequence[Ablation],
    run_plan: Callable[[], RunPlan],
    qdir: Path,
    say: Callable[[str], None],
) -> _Ablated:
    """The control run, then one run per ablation (unless the task cannot be ablated)."""
    from packager.engines.containers import run_once

    slug = spec.provenance.slug
    gold = spec.gold_patch or ""
    if spec.grading.rule == "judge":
        return _Ablated(
            "skipped",
            "browser-judged task: every ablation would need a model to follow both workflows "
            "in a browser, so hunks are not ablated (instruction leaks are still checked)",
        )
    if not plan:
        return _Ablated(
            "nothing_to_ablate",
            "the gold patch has no text hunks (binary files, renames or mode changes only)",
        )
    rp = run_plan()
    say(f"{slug}: control (the whole gold patch)")
    first = run_once(client, rp, "patch", qdir / "control", candidate_bytes(spec, gold))
    control = _as_run(0, "", first)
    if first.reward != 1.0 or not _measured(control):
        note = (
            f"the whole gold patch, graded as a candidate, scored {first.reward} "
            f"({first.grade_status}: {first.reason}); ablations would prove nothing"
        )
        return _Ablated("control_failed", note, control)
    files = split_hunks(gold)
    runs = []
    for ablation in plan:
        removes = ablation.describe(files)
        say(f"{slug}: ablation {ablation.index}/{len(plan)} without {removes}")
        candidate = candidate_bytes(spec, ablated_patch(gold, ablation))
        run = run_once(client, rp, "patch", qdir / f"ablation-{ablation.index}", candidate)
        runs.append(_as_run(ablation.index, removes, run, ablation.files, len(ablation.removes)))
    return _Ablated("done", None, control, tuple(runs))


def _hunk_results(
    files: Sequence[FileDiff], plan: Sequence[Ablation], runs: Sequence[AblationRun]
) -> list[HunkResult]:
    """Every gold hunk with the ablation that left it out and what that run scored."""
    by_hunk = {
        unit: run for ablation, run in zip(plan, runs, strict=False) for unit in ablation.removes
    }
    hunks = []
    for f in files:
        for h, hunk in enumerate(f.hunks):
            run = by_hunk.get((f.index, h))
            covered = None
            if run is not None and _measured(run):
                covered = bool(run.reward is not None and run.reward < 1.0)
            hunks.append(
                HunkResult(
                    file=hunk.file,
                    old_start=hunk.old_start,
                    old_len=hunk.old_len,
                    new_start=hunk.new_start,
                    new_len=hunk.new_len,
                    where=hunk.where,
                    ablation=run.index if run is not None else None,
                    covered=covered,
                    reward=run.reward if run is not None else None,
                )
            )
    return hunks


def _reasons(hunks: Sequence[HunkResult], leaks: Sequence[Leak]) -> list[str]:
    """Why a task is flagged, one sentence per check that found something."""
    reasons = []
    uncovered = [h for h in hunks if h.covered is False]
    if uncovered:
        reasons.append(
            f"{len(uncovered)} of {len(hunks)} gold hunks not covered by the tests (the gold "
            "patch without them still scores 1.0): " + "; ".join(h.where for h in uncovered)
        )
    if leaks:
        reasons.append(
            "the instruction gives away "
            + "; ".join(f"{leak.kind} {leak.text!r} ({leak.where})" for leak in leaks)
        )
    return reasons


def run_quality(
    client: DockerClient,
    spec: TaskSpec,
    paths: OutputPaths,
    images: Mapping[str, str],
    *,
    result: TaskResult | None = None,
    max_ablations: int = MAX_ABLATIONS_DEFAULT,
    repo_sources: Mapping[str, str] | None = None,
    mirror_dirs: Sequence[str] = (),
    in_base: Callable[[str], bool] | None = None,
    memory_mb: int | None = None,
    log: Callable[[str], None] | None = None,
) -> QualityReport:
    """Ablate the gold patch hunk by hunk and look for instruction leaks (see the module doc).

    `images` are the task's built `agent` and `grader` tags (those it was verified with); when
    `result` is given it must be `verified`. `in_base` answers whether a text is in the base
    tree (default: `base_lookup` over `repo_sources`/`mirror_dirs`). Logs of each run go to
    `logs/<task>/quality/{control,ablation-<n>}/`; `log` receives one line per run.
    An infrastructure fault of a run is recorded in that run (its hunks: covered None).
    """
    from packager.engines.local import make_run_plan

    slug = spec.provenance.slug
    if result is not None and result.status != "verified":
        raise InputError(
            f"{spec.task_id}: quality checks need a verified task; its status is "
            f"{result.status} ({result.reason or 'no reason given'})"
        )
    if not spec.gold_patch:
        raise InputError(f"{spec.task_id}: the task has no gold patch to ablate")
    started = time.monotonic()
    gold = spec.gold_patch
    files = split_hunks(gold)
    lookup = in_base or base_lookup(spec, repo_sources or {}, mirror_dirs)
    leaks = instruction_leaks(spec, lookup)
    try:
        image_ids = {k: str(client.images.get(v).id) for k, v in images.items()}
    except Exception:  # noqa: BLE001 - a fake or failing engine: ids are only a cache key
        image_ids = {}
    qdir = paths.log_dir(slug) / "quality"
    shutil.rmtree(qdir, ignore_errors=True)  # no ablation folder of an earlier run lingers
    plan = ablation_plan(gold, max_ablations)
    done = _ablate(
        client,
        spec,
        plan,
        lambda: make_run_plan(spec, paths, images, memory_mb=memory_mb),
        qdir,
        log or (lambda _line: None),
    )
    hunks = _hunk_results(files, plan, done.runs)
    reasons = _reasons(hunks, leaks)
    return QualityReport(
        task=slug,
        instance_id=spec.task_id,
        dataset=spec.provenance.dataset,
        schema_name=spec.provenance.schema_name,
        images=dict(images),
        image_ids=image_ids,
        gold_patch_sha256=patch_digest(gold),
        instruction_sha256=patch_digest(spec.instruction),
        max_ablations=max_ablations,
        ablation_status=done.status,
        ablation_note=done.note,
        control=done.control,
        ablations=done.runs,
        hunks=tuple(hunks),
        covered=sum(1 for h in hunks if h.covered) if done.status == "done" else None,
        total=len(hunks),
        skipped_files=tuple(SkippedFile(file=f.path, reason=f.skipped) for f in files if f.skipped),
        leaks=tuple(leaks),
        ladder=(
            _ladder(spec, done.control, done.runs) if spec.provenance.schema_name == "pdl" else None
        ),
        seconds=round(time.monotonic() - started, 3),
        flagged=bool(reasons),
        reasons=tuple(reasons),
    )


def summary_line(report: QualityReport) -> str:
    """One line for a terminal: covered/total, leaks, seconds, and flagged or not."""
    hunks = (
        f"{report.covered}/{report.total} hunks covered"
        if report.covered is not None
        else f"ablation {report.ablation_status}"
    )
    leaks = f"{len(report.leaks)} leak(s)" if report.leaks else "no leak"
    flag = "FLAGGED" if report.flagged else "ok"
    return f"{report.task}: {flag}: {hunks}, {leaks}, {report.seconds:.1f} s"


def to_json(report: QualityReport) -> str:
    """The report as the JSON text `write_quality` writes (sorted keys)."""
    return json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
