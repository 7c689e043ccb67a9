"""Dependencies a gold patch declares: the requirement lines it adds to a Python project's
declaration files (setup.py, setup.cfg, pyproject.toml, requirements*.txt / *.in).

A fix may need a package the environment never had (pylint-dev__pylint-4661 adds `appdirs` to
setup.cfg). The SWE-bench harness re-runs the install step with the network before its tests;
an offline grader cannot, so the grader image carries wheels of what the gold patch declares
and the grading runtime re-runs the install step offline after any candidate is applied
(docs/grading.md). Only added lines are read, and only those that are requirements as each file
writes them, so that a stray word (`zip_safe`, a package list) is never taken for one.
"""

from __future__ import annotations

import re

from packager.diffs import parse_diff

DECLARATION_FILE = re.compile(
    r"(^|/)(setup\.py|setup\.cfg|pyproject\.toml|requirements[^/]*\.(txt|in)"
    r"|requirements/[^/]+\.(txt|in))$"
)
"""Files whose added lines may declare a dependency."""

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_EXTRAS = r"(?:\[\s*[A-Za-z0-9._,\s-]*\])?"
_CLAUSE = r"(?:===?|>=|<=|~=|!=|>|<)\s*[A-Za-z0-9.*+!_-]+"
_SPEC = rf"(?:\s*\(?\s*{_CLAUSE}(?:\s*,\s*{_CLAUSE})*\s*\)?)?"
_MARKER = r"(?:\s*;\s*[^#]+)?"
REQUIREMENT = re.compile(rf"^{_NAME}{_EXTRAS}{_SPEC}{_MARKER}$")
"""A PEP 508 requirement without a URL: a name, extras, version clauses, a marker."""

_QUOTED = re.compile(r"""^(?P<q>["'])(?P<req>(?:(?!(?P=q)).)+)(?P=q)\s*,?\s*(?:#.*)?$""")


def _requirement(line: str, path: str) -> str | None:
    """The requirement one added line declares in `path`, or None."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    name = path.rsplit("/", 1)[-1]
    if name in ("setup.py", "pyproject.toml"):
        # Lists of strings: a line that is one quoted requirement (and maybe a comma).
        found = _QUOTED.match(stripped)
        text = found.group("req").strip() if found else None
    elif name == "setup.cfg":
        # install_requires / extras_require continuation lines: indented, bare.
        text = stripped.split(" #", 1)[0].strip() if line[:1] in (" ", "\t") else None
    else:  # requirements files: one requirement per line, options and includes are not
        text = None if stripped.startswith("-") else stripped.split(" #", 1)[0].strip()
    if text is None or not REQUIREMENT.match(text):
        return None
    return text


def added_requirements(patch: str | None) -> tuple[str, ...]:
    """The requirements a patch adds to declaration files, in patch order, each once."""
    found: list[str] = []
    for diff in parse_diff(patch).files:
        path = diff.new_path or diff.old_path or ""
        if not DECLARATION_FILE.search(path):
            continue
        for hunk in diff.hunks:
            for _, text in hunk.added:
                requirement = _requirement(text, path)
                if requirement is not None and requirement not in found:
                    found.append(requirement)
    return tuple(found)
