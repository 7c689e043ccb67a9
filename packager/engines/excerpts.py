"""What a test run printed about why it failed: when it reported no test, its first error (a
collection or import error, a missing command, the missing module named), never the grader's own
tripwires; and whether it tried to reach the network, which grading does not give, naming hosts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packager.models.spec import SERVICES_ROOT

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


def _kept(line: str, added: Sequence[str]) -> bool:
    if not line.strip() or any(name in line for name in added):
        return False
    return bool(_HEADER.search(line)) or not _RULE.match(line.strip())


_SECTION = re.compile(r"^(?:_{3,}|={3,}) .* (?:_{3,}|={3,})$")
"""A pytest section header: `____ test_name ____` (one test's failure) or `==== FAILURES ====`."""


def _outside_added(text: str, added: Sequence[str]) -> list[str]:
    """The lines of `text` outside pytest's failure sections of the added tests (their bodies
    and assertions name nothing that marks them).
    """
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if _SECTION.match(line.strip()):
            skipping = any(name in line for name in added)
        if not skipping:
            kept.append(line)
    return kept


def output_excerpt(text: str, added: Sequence[str] = ()) -> str:
    """`first error: ...` (with `module X is missing` in front when an import failed), else
    `last lines: ...`; lines naming a test the grader `added` (its tripwires and canaries, named
    anew each run, as its report lists them) are left out either way.
    """
    lines = [line.rstrip()[:200] for line in _outside_added(text, added) if _kept(line, added)]
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


_OFFLINE = re.compile(
    r"Temporary failure in name resolution|Name or service not known|No address associated with"
    r"|nodename nor servname|Network is unreachable|getaddrinfo (ENOTFOUND|EAI_AGAIN)"
    r"|Could not resolve host|UnknownHostException|no such host|NameResolutionError"
    r"|Failed to resolve '|ENETUNREACH|EHOSTUNREACH|\[Errno (101|-2|-3|-5)\]",
    re.IGNORECASE,
)
"""How an offline container answers a test that looks up a name or connects out (Python's
socket and urllib3, glibc, node, Go, curl, Java)."""
_HOST_PATTERNS = (
    re.compile(r"\bhost='([^'\s]+)'"),
    re.compile(r"Failed to resolve '([^'\s]+)'"),
    re.compile(r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN) ([\w.-]+)"),
    re.compile(r"connect (?:ENETUNREACH|EHOSTUNREACH) ([\w.:-]+?)(?::\d+)?\b"),
    re.compile(r"\blookup ([\w.-]+\.[A-Za-z]{2,})\b"),
    re.compile(r"Could not resolve host: ([\w.-]+)"),
    re.compile(r"UnknownHostException: ([\w.-]+)"),
)
_BLOCK_HOSTS = (
    re.compile(r"\b(?:https?|wss?|ftp)://([A-Za-z0-9.-]+\.[A-Za-z]{2,}|\d+(?:\.\d+){3})"),
    re.compile(r"^\s*host = '([^'\s]+)'"),  # a traceback frame's arguments (pytest's long form)
    re.compile(r"^\s*address = \('([^'\s]+)', \d+\)"),
)
"""Where the host is when the error names none (urllib, a bare socket): the URL fetched or a
frame's `host`/`address` argument, in the failing test's block of output."""
_BLOCK_START = re.compile(r"^_{3,} .+ _{3,}$|^={3,} .+ ={3,}$")
"""A pytest section header: where one test's traceback starts."""
_NEAR = 300
"""Lines before a network error searched at most for its block's start."""
_LOCAL = ("localhost", "127.0.0.1", "0.0.0.0", "::1")


_PLAIN_ANSWER = re.compile(r"WRONG_VERSION_NUMBER|SSL routines.*wrong version number", re.I)
"""A TLS handshake answered in plain HTTP: an https request to a server that speaks http."""
_STAND_IN = re.compile(re.escape(SERVICES_ROOT) + r"/([\w.-]+)/bin/")
"""A stand-in service's command in the output (the runtime prints the command it runs)."""


def _stand_in_over_https(lines: list[str]) -> list[str]:
    """`<service> over https …` for each stand-in the run started when a request was answered
    in plain HTTP: its tests wanted the real service's https, which a stand-in cannot give.
    """
    if not any(_PLAIN_ANSWER.search(line) for line in lines):
        return []
    names = sorted({m.group(1) for line in lines[:50] for m in _STAND_IN.finditer(line)})
    return [f"{name} over https: its stand-in serves plain http" for name in names]


def network_hosts(text: str) -> list[str] | None:
    """The hosts a run failed to reach (sorted; empty when the output names none), or None
    when the output shows no failed network access. A stand-in service asked for https
    counts as the real service out of reach.
    """
    lines = text.splitlines()
    errors = [i for i, line in enumerate(lines) if _OFFLINE.search(line)]
    stand_ins = _stand_in_over_https(lines)
    if not errors:
        return stand_ins or None
    hosts: set[str] = set()
    for i in errors:
        hosts.update(m.group(1) for p in _HOST_PATTERNS for m in p.finditer(lines[i]))
    if not hosts:  # the message names no host: look in the failing test's block
        for i in errors:
            start = next(
                (j for j in range(i, max(i - _NEAR, 0) - 1, -1) if _BLOCK_START.match(lines[j])),
                max(i - _NEAR, 0),
            )
            for line in lines[start : i + 1]:
                hosts.update(m.group(1) for p in _BLOCK_HOSTS for m in p.finditer(line))
    found = sorted(h.rstrip(".").lower() for h in hosts if h.rstrip(".").lower() not in _LOCAL)
    return found + stand_ins


def run_evidence(report: dict[str, Any], output: Path) -> dict[str, Any]:
    """What the test command's run showed: how many tests it reported, its exit code, and the
    end of its output when it reported none (the environment could not run the tests).
    """
    tests = report.get("tests")
    if not isinstance(tests, dict):
        return {}
    code = report.get("exit_code")
    evidence: dict[str, Any] = {
        "tests_run": len(tests),
        "exit_code": code if isinstance(code, int) else None,
    }
    text = output.read_text(errors="replace") if output.is_file() else ""
    if not tests and text:
        added = report.get("added_tests")
        names = [str(n) for n in added] if isinstance(added, list) else []
        evidence["test_tail"] = output_excerpt(text, names)
    flagged = report.get("suspicious")
    if isinstance(flagged, list) and flagged:
        evidence["suspicious"] = [
            f"{h.get('path')}:{h.get('line')} {h.get('what')}"
            for h in flagged
            if isinstance(h, dict)
        ]
    nested = report.get("nested_ids")
    if isinstance(nested, list) and nested:
        evidence["nested_ids"] = [str(i) for i in nested]
    hosts = network_hosts(text)
    if hosts is not None:
        evidence["network_hosts"] = hosts
    used = report.get("resources")
    if isinstance(used, dict):
        evidence["resources"] = {
            str(k): float(v) for k, v in used.items() if isinstance(v, int | float)
        }
    return evidence
