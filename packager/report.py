"""Pure summaries of task results: a Markdown report and the rows of the terminal table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from packager.model import RunResult, TaskResult


def fmt_reward(value: float | None) -> str:
    """A reward for humans: 3 decimals, or '-' when there is none."""
    return "-" if value is None else f"{value:.3f}"


def table_rows(results: Iterable[TaskResult]) -> list[list[str]]:
    """One row per task: task, status, oracle rewards, nop reward (expected), seconds, logs."""
    rows = []
    for r in results:
        oracle = ", ".join(fmt_reward(o.reward) for o in r.oracle) or "-"
        nop = fmt_reward(r.nop.reward) if r.nop else "-"
        if r.expected_nop is not None:
            nop += f" (expect {r.expected_nop:.3f})"
        runs: list[RunResult] = [*r.oracle, *([r.nop] if r.nop else [])]
        seconds = sum(x.duration_sec for x in runs) + sum(r.durations.values())
        rows.append(
            [r.instance_id, r.status, oracle, nop, f"{seconds:.1f}", r.logs.get("dir", "-")]
        )
    return rows


HEADERS = ["task", "status", "oracle", "nop", "seconds", "logs"]


def make_markdown(dataset: str, results: list[TaskResult]) -> str:
    """report.md: a summary line and one table row per task, with reasons underneath."""
    counts = Counter(r.status for r in results)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = [f"# {dataset}: {len(results)} task(s): {summary or 'none'}", ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for row in table_rows(results):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    reasons = [r for r in results if r.reason]
    if reasons:
        lines += ["", "## Reasons", ""]
        lines += [f"- `{r.instance_id}` ({r.status}): {r.reason}" for r in reasons]
    return "\n".join(lines) + "\n"
