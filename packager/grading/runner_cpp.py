"""The C/C++ test frameworks (googletest, doctest): a named must-fail tripwire test compiled
into a test file the command builds.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import runner_base, tripwires
elif __package__:
    from . import runner_base, tripwires
else:  # run from the zipapp: sys.path[0] holds the siblings
    import runner_base
    import tripwires

Tests = runner_base.Tests


class CppFrameworks(runner_base.Family):
    parsers = frozenset(tripwires.CPP_FRAMEWORKS)

    def prepare(self, run: runner_base.Run) -> None:
        added = tripwires.write_cpp_tripwire(run.repo, run.command, run.parser)
        run.state["added"] = run.guard(added, added.names if added is not None else ())

    def check(self, run: runner_base.Run, tests: Tests, printed: str, code: int) -> Tests:
        added = run.state["added"]
        if added is None:
            return tests
        return tripwires.check_named_tripwire(tests, added.names, run.report)


FAMILY = CppFrameworks()
FAMILIES = (FAMILY,)
