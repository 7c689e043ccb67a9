"""The JavaScript families: runners (mocha, jest, jasmine, karma, ...) that get a named
must-fail tripwire when their command runs named files, and the fail-only parsers, whose
listed tests absent from the log pass once the log shows the suite ran (the harness's
fail-only grading).

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import parsers, runner_base, tripwires
elif __package__:
    from . import parsers, runner_base, tripwires
else:  # run from the zipapp: sys.path[0] holds the siblings
    import parsers
    import runner_base
    import tripwires

Tests = runner_base.Tests


class Tripwired(runner_base.AddsTests):
    parsers = parsers.JS_TRIPWIRED

    def write(self, run: runner_base.Run) -> tripwires.AddedTest | None:
        return tripwires.write_js_tripwire(run.repo, run.command)

    def confirm(self, run: runner_base.Run, tests: Tests, printed: str, added: Any) -> Tests:
        return tripwires.check_named_tripwire(tests, added.names, run.report)


class FailOnly(runner_base.Family):
    parsers = frozenset(parsers.FAIL_ONLY)

    def check(self, run: runner_base.Run, tests: Tests, printed: str, code: int) -> Tests:
        listed = runner_base.plan_list(run.plan, "fail_to_pass")
        listed += runner_base.plan_list(run.plan, "pass_to_pass")
        filled, count = parsers.fill_fail_only(tests, listed, printed, code)
        if count:
            run.note(
                f"fail-only parser: {count} listed tests absent from the log counted as passed"
            )
        return filled


TRIPWIRED = Tripwired()
FAIL_ONLY = FailOnly()
FAMILIES = (TRIPWIRED, FAIL_ONLY)
