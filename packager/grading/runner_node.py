"""The node:test family (TAP output): a canary test file the run must report as passing.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import canaries, runner_base
elif __package__:
    from . import canaries, runner_base
else:  # run from the zipapp: sys.path[0] holds the siblings
    import canaries
    import runner_base

Tests = runner_base.Tests


class NodeTap(runner_base.Family):
    parsers = frozenset({"tap"})

    def prepare(self, run: runner_base.Run) -> None:
        node = canaries.write_node_canaries(run.repo)
        run.state["node"] = run.guard(node, node.names if node is not None else ())

    def check(self, run: runner_base.Run, tests: Tests, printed: str, code: int) -> Tests:
        node = run.state["node"]
        if node is None:
            return tests
        return canaries.check_node_canary(tests, [printed], node.name, run.report)


FAMILY = NodeTap()
FAMILIES = (FAMILY,)
