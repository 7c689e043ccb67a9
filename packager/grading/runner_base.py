"""What every runner family of the grading runtime shares: the run it sees and the base class.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence

Report = Dict[str, Any]
Tests = Dict[str, str]


def plan_list(plan: Mapping[str, Any], field: str) -> List[str]:
    """A plan field that is a list of strings (absent: empty); anything else is a plan error."""
    return str_list(plan.get(field), field)


def str_list(value: Any, field: str) -> List[str]:
    """`value`, a list of strings (None: empty); anything else is a plan error naming `field`."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"plan: {field} must be a list of strings")
    return list(value)


class Run:
    """One run of the test command, as its family sees it. ``guards`` hold what the family
    added to the repository or the interpreter for this run (each has ``remove()``);
    ``added`` the names of the tests it added (new each run, so the host leaves their lines
    out of what it shows of a failed run).
    """

    def __init__(
        self,
        plan: Mapping[str, Any],
        repo: Path,
        env: Dict[str, str],
        scratch: Path,
        command: str,
        parser: str,
        report: Report,
    ) -> None:
        self.plan = plan
        self.repo = repo
        self.env = env
        self.scratch = scratch
        self.command = command
        self.parser = parser
        self.report = report
        self.guards: List[Any] = []
        self.added: List[str] = []
        self.state: Dict[str, Any] = {}

    def guard(self, thing: Any, names: Sequence[str] = ()) -> Any:
        """Keep ``thing`` (None: nothing was added) to take out after the run."""
        if thing is not None:
            self.guards.append(thing)
            self.added.extend(names)
        return thing

    def note(self, text: str) -> None:
        self.report.setdefault("notes", []).append(text)

    def remove(self) -> None:
        for guard in self.guards:
            guard.remove()
        self.guards = []


class Family:
    """A runner with no steps of its own: its output is parsed as printed. The base of every
    family; each overrides what its runner needs.
    """

    parsers: FrozenSet[str] = frozenset()

    def prepare(self, run: Run) -> None:
        """Before the command runs: add what the checks need (through ``run.guard``)."""

    def output(self, run: Run, printed: str) -> Optional[str]:
        """The text the parser reads: what the command printed, unless the family reads a
        report the run wrote (None: the report is missing, so no test ran).
        """
        return printed

    def on_timeout(self, run: Run, printed: str) -> Optional[str]:
        """The text to parse for what finished before a timeout (None: nothing to keep)."""
        return printed

    def check(self, run: Run, tests: Tests, printed: str, code: int) -> Tests:
        """After the run: the parsed results the family's checks leave standing."""
        return tests

    def listed(
        self, tests: Tests, p2p: List[str], repo: Path, output: Path, report: Report
    ) -> Tests:
        """Before the all_pass rule: results for listed PASS_TO_PASS ids no test of the run
        answers that the family can read otherwise (``output``: the saved test output).
        """
        return tests


class AddsTests(Family):
    """A family that adds tests to the repository for the run (a tripwire that must fail, a
    canary that must pass) and checks the run's results against them: `write` adds them (None:
    nothing to add here), `confirm` checks. What `write` added is taken out after the run.
    """

    def write(self, run: Run) -> Any:
        raise NotImplementedError

    def confirm(self, run: Run, tests: Tests, printed: str, added: Any) -> Tests:
        raise NotImplementedError

    def prepare(self, run: Run) -> None:
        added = self.write(run)
        run.state["added"] = run.guard(added, added.names if added is not None else ())

    def check(self, run: Run, tests: Tests, printed: str, code: int) -> Tests:
        added = run.state["added"]
        return tests if added is None else self.confirm(run, tests, printed, added)
