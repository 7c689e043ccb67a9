"""What a test run that reported no test printed about why: its first error (a collection or
import error, a missing command), the missing module named, never the grader's own tripwire.
"""

from __future__ import annotations

import re

from packager.grading.tripwires import GO_TRIPWIRE_PREFIX, NODE_CANARY_PREFIX, TRIPWIRE_PREFIX

OUTPUT_MARKS = (
    "grading tripwire",
    "grading canary",
    TRIPWIRE_PREFIX,
    NODE_CANARY_PREFIX,
    GO_TRIPWIRE_PREFIX,
    "TestGradingCanary",
    "GradingTripwire",
)
"""Text in a test run's output that comes from a tripwire or canary the grader added (its
name, its own failure message, as grading/tripwires.py writes them): never why a run failed."""

SHOWN = 6
"""Lines shown at most."""
_ERROR = re.compile(
    r"\b\w*(Error|Exception)\b(:|$)|No module named|command not found|cannot import name"
    r"|No such file or directory|INTERNALERROR|\berror: ",
    re.IGNORECASE,
)
_HEADER = re.compile(r"ERROR collecting|ImportError while loading|while importing test module")
_RULE = re.compile(r"^[=_!*-]{5,}")
"""A runner's section rule (`==== FAILURES ====`): no news, unless it is a header above."""
_MISSING = re.compile(r"No module named '?([\w.]+)'?")
_LOOK_BACK = 30
"""Lines before the first error searched for the header naming what failed to load."""


def _kept(line: str) -> bool:
    if not line.strip() or any(mark in line for mark in OUTPUT_MARKS):
        return False
    return bool(_HEADER.search(line)) or not _RULE.match(line.strip())


def output_excerpt(text: str) -> str:
    """`first error: ...` (with `module X is missing` in front when an import failed), else
    `last lines: ...`; tripwire and canary lines are left out either way.
    """
    lines = [line.rstrip()[:200] for line in text.splitlines() if _kept(line)]
    first = next((i for i, line in enumerate(lines) if _ERROR.search(line)), None)
    if first is None:
        return "last lines: " + (" | ".join(lines[-SHOWN:]) or "-")
    before = range(first - 1, max(first - _LOOK_BACK, 0) - 1, -1)
    header = next((i for i in before if _HEADER.search(lines[i])), None)
    shown = [lines[header].strip(" =_")] if header is not None else []
    shown += lines[first:][: SHOWN - len(shown)]
    missing = _MISSING.search(lines[first])
    lead = f"module {missing.group(1)} is missing; " if missing else ""
    return f"{lead}first error: " + " | ".join(shown)
