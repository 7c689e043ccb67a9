"""The node:test family (TAP output): a canary test file the run must report as passing.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import canaries, runner_base
elif __package__:
    from . import canaries, runner_base
else:  # run from the zipapp: sys.path[0] holds the siblings
    import canaries
    import runner_base

Tests = runner_base.Tests


class NodeTap(runner_base.AddsTests):
    parsers = frozenset({"tap"})

    def write(self, run: runner_base.Run) -> Any:
        return canaries.write_node_canaries(run.repo)

    def confirm(self, run: runner_base.Run, tests: Tests, printed: str, added: Any) -> Tests:
        return canaries.check_node_canary(tests, [printed], added.name, run.report)


FAMILY = NodeTap()
FAMILIES = (FAMILY,)
