"""The JUnit-report family: a command that writes a JUnit XML report at the plan's
``junit_path`` is graded on that report, not on what it printed (no report: no test ran).

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from . import runner_base
elif __package__:
    from . import runner_base
else:  # run from the zipapp: sys.path[0] holds the siblings
    import runner_base


def _report(run: runner_base.Run) -> Optional[Path]:
    path = run.plan.get("junit_path")
    return run.repo / str(path) if path else None


class JUnitReport(runner_base.Family):
    parsers = frozenset({"junit"})

    def prepare(self, run: runner_base.Run) -> None:
        report = _report(run)
        # A report left in the tree (or shipped by the patch) must not stand in for this run's.
        if report is not None and (report.is_file() or report.is_symlink()):
            report.unlink()

    def on_timeout(self, run: runner_base.Run, printed: str) -> Optional[str]:
        return printed if _report(run) is None else None

    def output(self, run: runner_base.Run, printed: str) -> Optional[str]:
        report = _report(run)
        if report is None:
            return printed
        if not report.is_file():
            return None
        return report.read_text(encoding="utf-8", errors="replace")


FAMILY = JUnitReport()
FAMILIES = (FAMILY,)
