"""Runner families of the grading runtime: what a test runner needs around its command.

A family is the steps one kind of test runner needs besides the command itself: what to add
before the run (a tripwire test, a canary, a report the command is not told about) and how to
check what the run printed against it. Each family lives in its own module (``runner_*.py``);
``MODULES`` below is the only place that lists them, first match wins. A new runner is one
module (with its ``FAMILIES``) plus one line there; ``grade.py`` names no runner.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from . import runner_base
elif __package__:
    from . import runner_base
else:  # run from the zipapp: sys.path[0] holds the siblings
    import runner_base

Family = runner_base.Family
Run = runner_base.Run
str_list = runner_base.str_list

MODULES = (
    "runner_pytest",
    "runner_go",
    "runner_node",
    "runner_sympy",
    "runner_js",
    "runner_cpp",
    "runner_junit",
)
"""The family modules, in the order their families claim a parser (first match wins)."""


def _families(name: str) -> Sequence[Family]:
    # Imported with the rest of the runtime, before the candidate patch is applied: nothing the
    # candidate adds to the repository can stand in for a family.
    module = importlib.import_module(f"{__package__}.{name}" if __package__ else name)
    return tuple(module.FAMILIES)


PLAIN = Family()

FAMILIES: Sequence[Family] = tuple(f for name in MODULES for f in _families(name))


def family(parser: str) -> Family:
    """The family of the plan's parser (a parser no family claims runs plain)."""
    for candidate in FAMILIES:
        if parser in candidate.parsers:
            return candidate
    return PLAIN
