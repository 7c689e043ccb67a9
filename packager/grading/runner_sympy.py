"""The sympy family (sympy's own ``bin/test`` runner): a must-fail tripwire in a test file the
command runs.

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


class SympyTest(runner_base.AddsTests):
    parsers = frozenset({"sympy"})

    def write(self, run: runner_base.Run) -> tripwires.AddedTest | None:
        return tripwires.write_sympy_tripwire(run.repo, run.command)

    def confirm(self, run: runner_base.Run, tests: Tests, printed: str, added: Any) -> Tests:
        return tripwires.check_sympy_tripwire(tests, printed, added.names)


FAMILY = SympyTest()
FAMILIES = (FAMILY,)
