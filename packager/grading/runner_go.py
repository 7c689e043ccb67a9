"""The Go family (``go test -v``): canaries that must pass and tripwires that must fail in
every test package, and only results printed in a package whose canary ran are trusted.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import canaries, parsers, runner_base
elif __package__:
    from . import canaries, parsers, runner_base
else:  # run from the zipapp: sys.path[0] holds the siblings
    import canaries
    import parsers
    import runner_base

Tests = runner_base.Tests


class GoTest(runner_base.Family):
    parsers = frozenset({"gotest"})

    def prepare(self, run: runner_base.Run) -> None:
        go = canaries.write_go_canaries(run.repo)
        for canary in go:
            run.guard(canary, (canary.name, canary.tripwire))
        run.state["go"] = go

    def check(self, run: runner_base.Run, tests: Tests, printed: str, code: int) -> Tests:
        go = run.state["go"]
        canaries.check_go_tripwires(parsers.parse_gotest(printed), go)
        tests = parsers.gotest_trusted(printed, [c.name for c in go])
        dropped = {c.tripwire for c in go}
        tests = {k: v for k, v in tests.items() if k.split("/", 1)[0] not in dropped}
        if go and not tests and parsers.parse_gotest(printed):
            run.note("go test output without the grading canary: results not trusted")
        return tests


FAMILY = GoTest()
FAMILIES = (FAMILY,)
