"""Names and bodies for the tests the grader adds to a run, drawn per run from the files they go
into, so that nothing tells them from the repository's own tests.

A tripwire (a test that must fail) catches code under test that reports failures as passes
only while that code cannot recognise it: a fixed prefix (``grading_tripwire_``), a fixed
length or alphabet (12 hex digits) or a fixed failure message is the first thing an adaptive
cheat spares. Here a name is a few words of the file's own identifiers and titles, in the
naming style of its runner (``test_`` + snake case for pytest and SymPy, ``Test`` + camel case
for Go and GoogleTest, a free sentence for JavaScript titles and doctest), never one that occurs
in the files it is checked against; a body compares values made of the same words and fails
with an ordinary assertion. The only constant left is what the runner itself requires of every
test (pytest collects ``test*`` functions, go ``Test*``); docs/security.md states what a cheat
could still read.

Standard library only, Python >= 3.9 (part of the grading runtime).
"""

from __future__ import annotations

import builtins
import json
import keyword
import random
import re
from typing import Callable, Iterable, List, Sequence

RNG = random.SystemRandom()
"""Per-run choices: the operating system's randomness, so no seed or state predicts them."""

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_STOP = frozenset(
    set(keyword.kwlist)
    | {
        "test", "tests", "testing", "self", "cls", "assert", "function", "const", "let", "var",
        "return", "require", "import", "export", "default", "describe", "expect", "true",
        "false", "null", "undefined", "this", "new", "typeof", "void", "int", "char", "auto",
        "include", "define", "namespace", "std", "func", "package", "grading", "tripwire",
        "canary", "todo", "skip", "only", "pytest", "mark", "fixture", "param", "the", "and",
    }
)  # fmt: skip
FALLBACK = (
    "value", "result", "input", "output", "count", "items", "order", "first", "second",
    "empty", "single", "nested", "default", "limit", "update", "remove", "handle", "parse",
    "format", "check", "match", "merge", "range", "state", "entry", "record", "option", "mode",
)  # fmt: skip
"""Words used when a file has too few of its own (a near-empty test file)."""
MIN_WORDS = 12


def vocabulary(texts: Iterable[str]) -> List[str]:
    """Lower-case words of 3 to 12 letters from the identifiers and titles in ``texts``
    (snake_case and camelCase split), keywords and test-runner words left out; padded with
    ``FALLBACK`` to at least ``MIN_WORDS``.
    """
    words = set()
    for text in texts:
        for identifier in _IDENTIFIER.findall(text):
            for part in _PART.findall(identifier):
                word = part.lower()
                if 3 <= len(word) <= 12 and word not in _STOP:
                    words.add(word)
    found = sorted(words)
    if len(found) < MIN_WORDS:
        found = sorted(set(found) | set(FALLBACK))
    return found


def pick(words: Sequence[str], low: int = 1, high: int = 4) -> List[str]:
    """Between ``low`` and ``high`` distinct words, in random order."""
    return RNG.sample(list(words), min(len(words), RNG.randint(low, high)))


def fresh(make: Callable[[], str], avoid: Iterable[str], tries: int = 200) -> str:
    """A name from ``make`` that occurs in none of the ``avoid`` texts (so no real test's id can
    contain it, and a check matching it finds only the added test). Each miss makes another.
    """
    texts = list(avoid)
    name = make()
    for _ in range(tries):
        if not any(name in text for text in texts):
            return name
        name = make()
    suffix = ""
    while any(name + suffix in text for text in texts):
        suffix += RNG.choice(FALLBACK)
    return name + suffix


def snake(words: Sequence[str], prefix: str = "test_") -> str:
    """``test_`` + 1-4 of ``words`` joined by underscores."""
    return prefix + "_".join(pick(words))


def camel(words: Sequence[str], prefix: str = "Test") -> str:
    """``Test`` + 1-4 of ``words`` capitalised (Go, GoogleTest)."""
    return prefix + "".join(w.capitalize() for w in pick(words))


def sentence(words: Sequence[str]) -> str:
    """3-5 of ``words`` separated by spaces (a JavaScript or doctest title)."""
    return " ".join(pick(words, 3, 5))


def _two(words: Sequence[str]) -> List[str]:
    pool = list(words)
    return RNG.sample(pool, 2) if len(pool) >= 2 else ["first", "second"]


def _local(words: Sequence[str], taken: Sequence[str] = ()) -> str:
    """A local variable name: one or two words (never a keyword or one already used)."""
    while True:
        name = "_".join(pick(words, 1, 2))
        usable = name.isidentifier() and not keyword.iskeyword(name)
        if usable and name not in taken and not hasattr(builtins, name):
            return name


def python_test(name: str, words: Sequence[str]) -> str:
    """A pytest/SymPy test function named ``name`` that fails with a plain ``assert`` on values
    made of ``words``; one of several shapes, chosen per call.
    """
    a, b = _two(words)
    x = _local(words)
    y = _local(words, [x])
    n = RNG.randint(2, 97)
    shapes = [
        f"    {x} = {a!r}\n    assert {x} == {b!r}\n",
        f"    {x} = [{a!r}, {n}]\n    assert {b!r} in {x}\n",
        f"    {x} = {{{a!r}: {n}}}\n    assert {x}.get({a!r}) == {n + RNG.randint(1, 9)}\n",
        f"    {x} = {a!r}\n    {y} = {x}.upper()\n    assert {y} == {x}\n",
        f"    {x} = len({a!r})\n    assert {x} == {len(a) + RNG.randint(1, 5)}\n",
        f"    {x} = ({a!r}, {b!r})\n    assert {x}[0] == {x}[1]\n",
    ]
    return f"def {name}():\n{RNG.choice(shapes)}"


def js_test(title: str, words: Sequence[str], call: str = "it", suite: str = "") -> str:
    """A test registered with the runner's global ``call`` (``it`` or ``test``, whichever the
    file uses), inside ``describe(suite)`` when given, failing with a plain Error whose message
    is made of ``words``. Only for files that already call it: nothing guards the call, so
    nothing constant marks it.
    """
    a, b = (json.dumps(w) for w in _two(words))
    n = RNG.randint(2, 97)
    word = RNG.choice(list(words) or FALLBACK)
    shapes = [
        f"const {word}Value = [{a}][0]; if ({word}Value !== {b}) throw new Error({b});",
        f"const list = [{a}, {n}]; if (!list.includes({b})) throw new Error({a});",
        f"const size = {a}.length; if (size !== {n + 20}) throw new Error('size ' + size);",
    ]
    function = RNG.choice(["function ()", "() =>"])
    body = f"{call}({json.dumps(title)}, {function} {{ {RNG.choice(shapes)} }});"
    if suite:
        body = f"describe({json.dumps(suite)}, {function} {{ {body} }});"
    return f"\n{body}\n"


_JS_CALL = re.compile(r"""^[ \t]*(it|test)(?:\.\w+)?\s*\(\s*['"`]""", re.MULTILINE)
_JS_SUITE = re.compile(r"""^describe\s*\(\s*(['"])([^'"\\\n]{1,80})\1""", re.MULTILINE)


def js_call(text: str) -> str:
    """``it`` or ``test``: the test function a JavaScript test file calls most; empty if none."""
    calls = [m.group(1) for m in _JS_CALL.finditer(text)]
    return max(("it", "test"), key=calls.count) if calls else ""


def js_suites(text: str) -> List[str]:
    """Titles of the top-level ``describe`` calls (at a line start) of a JavaScript source."""
    return [m.group(2) for m in _JS_SUITE.finditer(text)]
