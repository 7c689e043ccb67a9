"""Instruction leaks (pure): what a task's instruction gives away of the gold patch (its
non-trivial added lines) or of the hidden tests (files, test names, FAIL_TO_PASS ids), each
only when the base repository does not already hold it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from packager.checks.quality.hunks import split_hunks
from packager.models.spec import Frozen

if TYPE_CHECKING:
    from packager.models.spec import TaskSpec

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
