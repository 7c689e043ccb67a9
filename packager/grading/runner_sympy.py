"""The sympy family (sympy's own ``bin/test`` runner): a must-fail tripwire in a test file the
command runs.

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


class SympyTest(runner_base.Family):
    parsers = frozenset({"sympy"})

    def prepare(self, run: runner_base.Run) -> None:
        added = tripwires.write_sympy_tripwire(run.repo, run.command)
        run.state["added"] = run.guard(added, added.names if added is not None else ())

    def check(self, run: runner_base.Run, tests: Tests, printed: str, code: int) -> Tests:
        added = run.state["added"]
        if added is None:
            return tests
        return tripwires.check_sympy_tripwire(tests, printed, added.names)


FAMILY = SympyTest()
FAMILIES = (FAMILY,)
