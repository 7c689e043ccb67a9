"""The C/C++ test frameworks (googletest, doctest): a named must-fail tripwire test compiled
into a test file the command builds.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import runner_base, tripwires
elif __package__:
    from . import runner_base, tripwires
else:  # run from the zipapp: sys.path[0] holds the siblings
    import runner_base
    import tripwires

Tests = runner_base.Tests


class CppFrameworks(runner_base.AddsTests):
    parsers = frozenset(tripwires.CPP_FRAMEWORKS)

    def write(self, run: runner_base.Run) -> tripwires.AddedTest | None:
        return tripwires.write_cpp_tripwire(run.repo, run.command, run.parser)

    def confirm(self, run: runner_base.Run, tests: Tests, printed: str, added: Any) -> Tests:
        return tripwires.check_named_tripwire(tests, added.names, run.report)


FAMILY = CppFrameworks()
FAMILIES = (FAMILY,)
