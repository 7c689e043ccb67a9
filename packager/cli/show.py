"""What the commands print: progress bars, the results table and the summary lines."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from packager.checks.quality import QualityReport
    from packager.models.spec import TaskResult
    from packager.run.driver import RunOutcome


def print_table(results: list[TaskResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    # heavy: the report's rows classify failures with the environment modules (see pipeline())
    from packager.release.report import HEADERS, table_rows

    table = Table(*HEADERS)
    for row in table_rows(results):
        table.add_row(*row)
    Console(width=200).print(table)


class ConsoleDisplay:
    """A run on the terminal (`packager.run.driver.Display`): bars and notes on stderr, one
    line per result on stdout.
    """

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.progress: Any = None
        self.bars: list[Any] = []

    def note(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def cached(self, cached: Sequence[tuple[TaskResult, Path]], total: int, todo: int) -> None:
        if not cached:
            return
        for result, where in cached if len(cached) <= 20 else ():
            typer.echo(
                f"{result.instance_id}: {result.status} (cached: same images already "
                f"verified, {where}; --force reruns)"
            )
        names = ", ".join(r.instance_id for r, _ in cached[:5])
        more = f" and {len(cached) - 5} more" if len(cached) > 5 else ""
        typer.echo(
            f"cached: {len(cached)} of {total} task(s) already verified with the same "
            f"images and engine ({names}{more}); --force reruns them"
        )
        if todo:
            typer.echo(f"to do: {todo} task(s) changed, new or not verified before")

    def quality(self, report: QualityReport) -> None:
        # heavy: the quality package loads the engines' patch grading (see pipeline())
        from packager.checks.quality import summary_line

        typer.echo("quality " + summary_line(report))
        for reason in report.reasons:
            typer.echo(f"  - {reason}")

    def skipped(self, task_id: str, status: str) -> None:
        typer.echo(f"{task_id}: skipped ({status}; `packager package` verifies it)")

    def start(self, total: int, verify: bool) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self.progress.start()
        self.bars = [self.progress.add_task("build + audit", total=total)]
        if verify:
            self.bars.append(self.progress.add_task("verify", total=total))

    def built(self) -> None:
        self.progress.advance(self.bars[0])

    def recorded(self, result: TaskResult, kept: Path | None) -> None:
        if len(self.bars) > 1:
            self.progress.advance(self.bars[1])
        typer.echo(
            f"{result.instance_id}: {result.status}"
            + (f" ({result.reason})" if result.reason else "")
            + (f" [earlier result kept; this one in {kept}]" if kept is not None else "")
        )

    def stop(self) -> None:
        self.progress.stop()


def summary(outcome: RunOutcome, strict_quality: bool) -> None:
    """The table and the closing lines of a `build`/`package`/`verify` run."""
    results = outcome.results
    print_table(sorted(results, key=lambda r: r.instance_id))
    counts = collections.Counter(result.status for result in results)
    states = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    ran = len(results) - outcome.cached
    typer.echo(f"summary: {states} ({outcome.cached} cached, {ran} built or run now)")
    typer.echo(f"results: {outcome.results_dir}  report: {outcome.report} (and report.html)")
    if outcome.flagged:
        verdict = (
            "--strict-quality fails the run"
            if strict_quality
            else "not a failure without --strict-quality"
        )
        flagged = ", ".join(sorted(outcome.flagged))
        typer.echo(f"quality: {len(outcome.flagged)} task(s) flagged ({flagged}); {verdict}")
