"""Pure summaries of task results: report.md, the self-contained report.html and the rows of
the terminal table. Nothing here does I/O; callers write the text.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Iterable
from typing import get_args

from packager.models.spec import RunResult, Status, TaskResult
from packager.release.causes import by_cause
from packager.storage import human_bytes


def fmt_reward(value: float | None) -> str:
    """A reward for humans: 3 decimals, or '-' when there is none."""
    return "-" if value is None else f"{value:.3f}"


def python_cell(result: TaskResult) -> str:
    """The Python a task's environment asked for and got: `3.9`, `3.6 -> 3.9` when
    substituted, `-` for environments that name none.
    """
    asked = result.environment.get("python_requested")
    used = result.environment.get("python_used")
    if not asked:
        return "-"
    return asked if asked == used else f"{asked} -> {used}"


def table_rows(results: Iterable[TaskResult]) -> list[list[str]]:
    """One row per task: task, status, oracle rewards, nop reward (expected), Python asked and
    used, seconds, logs.
    """
    rows = []
    for r in results:
        oracle = ", ".join(fmt_reward(o.reward) for o in r.oracle) or "-"
        nop = fmt_reward(r.nop.reward) if r.nop else "-"
        if r.expected_nop is not None:
            nop += f" (expect {r.expected_nop:.3f})"
        runs: list[RunResult] = [*r.oracle, *([r.nop] if r.nop else [])]
        seconds = sum(x.duration_sec for x in runs) + sum(r.durations.values())
        rows.append(
            [
                r.instance_id,
                r.status,
                oracle,
                nop,
                python_cell(r),
                f"{seconds:.1f}",
                r.logs.get("dir", "-"),
            ]
        )
    return rows


HEADERS = ["task", "status", "oracle", "nop", "python", "seconds", "logs"]
CAUSE_IDS = 5
"""Instance ids shown per cause in report.md (the table below lists every task)."""


def make_markdown(dataset: str, results: list[TaskResult]) -> str:
    """report.md: a summary line and one table row per task, with reasons underneath."""
    counts = Counter(r.status for r in results)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = [f"# {dataset}: {len(results)} task(s): {summary or 'none'}", ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for row in table_rows(results):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    groups = by_cause(results)
    if groups:
        lines += ["", "## Not verified, by cause", "", "| cause | tasks | which |", "|---|---|---|"]
        for name, ids in groups:
            shown = ", ".join(ids[:CAUSE_IDS]) + (
                f", … {len(ids) - CAUSE_IDS} more" if len(ids) > CAUSE_IDS else ""
            )
            cell = name.replace("|", "\\|")
            lines.append(f"| {cell} | {len(ids)} | {shown} |")
    dated = Counter(
        r.environment["resolved_as_of"] for r in results if r.environment.get("resolved_as_of")
    )
    if dated:
        lines += ["", "## Environments resolved as of", ""]
        lines += [f"- {stamp}: {n} task(s)" for stamp, n in sorted(dated.items())]
    dropped = [r for r in results if r.environment.get("dropped")]
    if dropped:
        lines += ["", "## Dropped from environments (pip could not install them)", ""]
        lines += [f"- `{r.instance_id}`: {r.environment['dropped']}" for r in dropped]
    moved = Counter(
        f"Python {r.environment.get('python_used', '?')}: {r.environment['pins_moved_for_python']}"
        for r in results
        if r.environment.get("pins_moved_for_python")
    )
    if moved:
        lines += ["", "## Pins moved for the Python used (no wheel of the pinned release)", ""]
        lines += [f"- {what}: {n} task(s)" for what, n in sorted(moved.items())]
    flagged = {
        r.instance_id: sorted({s for run in r.oracle for s in run.suspicious or []})
        for r in results
    }
    if any(flagged.values()):
        lines += ["", "## For review: the gold patch reaches into a test runner's names", ""]
        lines += [f"- `{t}`: {'; '.join(hits)}" for t, hits in sorted(flagged.items()) if hits]
    lines += _label_lines(results)
    lines += _stability_lines(results)
    lines += _resource_lines(results)
    reasons = [r for r in results if r.reason]
    if reasons:
        lines += ["", "## Reasons", ""]
        lines += [f"- `{r.instance_id}` ({r.status}): {r.reason}" for r in reasons]
    return "\n".join(lines) + "\n"


def _label_lines(results: list[TaskResult]) -> list[str]:
    """The section "Labels checked against the runs": counts per kind, then each finding."""
    checked = [r for r in results if r.labels is not None]
    if not checked:
        return []
    found = [(r.instance_id, f) for r in checked for f in (r.labels or {}).get("findings", [])]
    unlisted = sum((r.labels or {})["derived"]["unlisted_fail_to_pass"] for r in checked)
    kinds = Counter(f["kind"] for _, f in found)
    said = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no finding"
    lines = ["", "## Labels checked against the runs", ""]
    lines.append(
        f"{len(checked)} task(s) checked: {said}; {unlisted} test(s) the runs show failing at "
        "base and passing with the gold patch that the dataset does not list."
    )
    lines += [""] + [
        f"- `{task}` {f['kind']} ({f['group']}) `{f['id']}`: {f['detail']}" for task, f in found
    ]
    return lines


def _stability_lines(results: list[TaskResult]) -> list[str]:
    """The section "Stability": per task with a stability record, its runs, the listed tests
    that changed outcome (flip rate: runs away from the usual outcome over all runs) and what
    changed them, and the seconds the runs beyond one gold and one nop added.
    """
    measured = [r for r in results if r.stability]
    if not measured:
        return []
    flaky = sum(1 for r in measured if (r.stability or {}).get("flaky"))
    lines = ["", "## Stability", ""]
    lines.append(f"{len(measured)} task(s) run more than once: {flaky} with flaky listed tests.")
    lines += ["", "| task | gold / nop runs | perturbed | flaky listed tests | added s |"]
    lines += ["|---|---|---|---|---|"]
    for r in measured:
        st = r.stability or {}
        runs = st.get("runs", {})
        tests = "; ".join(
            f"`{f['id']}` {_flip_rate(f['outcomes'])} ({', '.join(f['changed_by'])})"
            for f in st.get("flaky", [])
        )
        lines.append(
            f"| `{r.instance_id}` | {runs.get('gold', 0)} / {runs.get('nop', 0)} | "
            f"{', '.join(runs.get('perturbed', [])) or '-'} | {tests or 'none'} | "
            f"{st.get('added_sec', 0):.1f} |"
        )
    return lines


def _flip_rate(outcomes: dict[str, str]) -> str:
    """`k/n`: gold runs whose outcome is not the usual one, over all gold runs."""
    gold = [v for k, v in outcomes.items() if k.startswith("oracle-")]
    usual = Counter(gold).most_common(1)[0][1] if gold else 0
    return f"{len(gold) - usual}/{len(gold)} gold runs flipped"


def _resource_lines(results: list[TaskResult]) -> list[str]:
    """The section "Resources measured on the gold runs": per task, what its largest gold run
    used and the limits it suggests (`checks/resources.py`).
    """
    measured = [(r.instance_id, r.resources) for r in results if r.resources]
    if not measured:
        return []
    lines = ["", "## Resources measured on the gold runs", ""]
    lines += ["| task | peak memory | CPU s | wall s | suggests memory / CPUs / verifier timeout |"]
    lines += ["|---|---|---|---|---|"]
    for task, m in measured:
        lines.append(
            f"| `{task}` | {m.get('memory_peak_mb', 0):.0f} MiB | {m.get('cpu_sec', 0):.1f} | "
            f"{m.get('wall_sec', 0):.1f} | {m.get('memory_limit_mb', 0):.0f} MiB / "
            f"{m.get('cpus', 0):.0f} / {m.get('verifier_timeout_sec', 0):.0f} s |"
        )
    return lines


# --- report.html -------------------------------------------------------------------------------
#
# Issue 10: a self-contained page next to report.md. Everything is inline (CSS, SVG charts built
# here as text); a Content-Security-Policy forbids every fetch, so a reference that slipped in
# would show as broken rather than quietly reach the network when the page is opened.

STATUS_COLOURS: dict[str, str] = {
    "verified": "#2e7d32",
    "leak": "#c62828",
    "gold_failed": "#c62828",
    "infra_error": "#ef6c00",
    "build_failed": "#ef6c00",
    "flaky": "#1565c0",
    "nop_solved": "#1565c0",
    "nop_mismatch": "#1565c0",
    "needs_judge": "#1565c0",
    "needs_network": "#1565c0",
}
"""Status -> bar/badge colour; anything else is grey. Labels carry the meaning, not colours."""
OTHER_STATUS_COLOUR = "#757575"

STAGE_ORDER = ("build", "audit", "app_check")
"""Stages from `TaskResult.durations` in pipeline order; others follow by name, then the runs."""
RUN_STAGES = ("oracle", "nop")
STAGE_COLOURS = ("#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")
STAGE_MAX_HEIGHT = 3000
"""Pixels the per-task chart may take: past 166 tasks its rows get thinner (labels go)."""

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right}
tr.reason td{border-top:none;color:#555;font-size:.8rem;white-space:pre-wrap}
.badge{display:inline-block;padding:0 .4rem;border-radius:.3rem;color:#fff;font-weight:600}
.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:1rem;font-size:.85rem}
.swatch{display:inline-block;width:.9rem;height:.9rem;margin-right:.3rem;vertical-align:middle}
svg text{font-size:11px;fill:#222}
""".strip()


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _secs(value: float) -> float:
    """Seconds as drawn: negative, NaN and infinite durations count as nothing."""
    return value if value > 0 and math.isfinite(value) else 0.0


def _status_colour(status: str) -> str:
    return STATUS_COLOURS.get(status, OTHER_STATUS_COLOUR)


def _stages(result: TaskResult) -> dict[str, float]:
    """Seconds per stage of one task: its `durations`, the oracle runs summed, the nop run."""
    stages = {name: _secs(sec) for name, sec in result.durations.items()}
    if result.oracle:
        stages["oracle"] = sum(_secs(o.duration_sec) for o in result.oracle)
    if result.nop is not None:
        stages["nop"] = _secs(result.nop.duration_sec)
    return stages


def _stage_names(per_task: list[dict[str, float]]) -> list[str]:
    seen = {name for stages in per_task for name in stages}
    known = [s for s in STAGE_ORDER if s in seen]
    others = sorted(seen - set(STAGE_ORDER) - set(RUN_STAGES))
    return known + others + [s for s in RUN_STAGES if s in seen]


def _ticks(top: float) -> list[float]:
    """About five round axis ticks (1, 2 or 5 times a power of ten) from 0 to past `top`."""
    if top <= 0:
        return [0.0]
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _fmt_tick(value: float) -> str:
    return f"{value:g}"


def _status_chart(counts: Counter[str]) -> list[str]:
    """Vertical bars, one per status present, each with its count and name as text."""
    if not counts:
        return ["<p>No tasks.</p>"]
    order = [s for s in get_args(Status) if s in counts] + sorted(
        set(counts) - set(get_args(Status))
    )
    bar, gap, plot, top, bottom = 70, 24, 160, 20, 36
    width = gap + len(order) * (bar + gap)
    height = top + plot + bottom
    most = max(counts.values())
    total = sum(counts.values())
    label = ", ".join(f"{counts[s]} {s}" for s in order)
    parts = [
        f'<svg class="chart" role="img" aria-label="tasks per status: {_e(label)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f'<line x1="0" y1="{top + plot}" x2="{width}" y2="{top + plot}" stroke="#999"/>',
    ]
    for i, status in enumerate(order):
        n = counts[status]
        h = plot * n / most
        x = gap + i * (bar + gap)
        y = top + plot - h
        share = 100 * n / total
        parts.append(
            f'<g id="status-{_e(status)}"><title>{_e(status)}: {n} task(s), {share:.0f}%</title>'
            f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{h:.1f}" '
            f'fill="{_status_colour(status)}"/>'
            f'<text x="{x + bar / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{n}</text>'
            f'<text x="{x + bar / 2:.1f}" y="{top + plot + 14}" text-anchor="middle">'
            f"{_e(status)}</text></g>"
        )
    parts.append("</svg>")
    return parts


def _stage_chart(ordered: list[TaskResult]) -> list[str]:
    """Horizontal stacked bars, one per task: seconds per stage, on one shared axis.

    Rows shrink so the chart stays under STAGE_MAX_HEIGHT pixels; every task keeps its bar (and
    a tooltip naming it), and row labels are drawn while rows are tall enough to read them.
    """
    if not ordered:
        return ["<p>No tasks.</p>"]
    per_task = [_stages(r) for r in ordered]
    names = _stage_names(per_task)
    colours = {name: STAGE_COLOURS[i % len(STAGE_COLOURS)] for i, name in enumerate(names)}
    totals = [sum(s.values()) for s in per_task]
    ticks = _ticks(max(totals))
    scale_top = ticks[-1] or 1.0
    row = min(18.0, STAGE_MAX_HEIGHT / len(ordered))
    labelled = row >= 12
    left = 230 if labelled else 10
    plot, right, top, axis = 640, 70, 6, 30
    width = left + plot + right
    height = top + row * len(ordered) + axis
    parts = ['<ul class="legend">']
    parts += [
        f'<li><span class="swatch" style="background:{colours[n]}"></span>{_e(n)}</li>'
        for n in names
    ]
    parts.append("</ul>")
    parts.append(
        f'<svg class="chart" role="img" aria-label="seconds per stage per task" '
        f'width="{width}" height="{height:.0f}" viewBox="0 0 {width} {height:.1f}">'
    )
    base = top + row * len(ordered)
    for t in ticks:
        x = left + plot * t / scale_top
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{base:.1f}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{base + 14:.1f}" text-anchor="middle">{_fmt_tick(t)}</text>'
        )
    parts.append(
        f'<text x="{left + plot / 2:.1f}" y="{base + 27:.1f}" text-anchor="middle">seconds</text>'
    )
    bar_h = max(row * 0.75, min(row, 1.0))
    for i, (result, stages, total) in enumerate(zip(ordered, per_task, totals, strict=True)):
        y = top + i * row + (row - bar_h) / 2
        each = ", ".join(f"{n} {stages[n]:.1f} s" for n in names if n in stages)
        tip = f"{result.instance_id}: {total:.1f} s ({each or 'no stages'})"
        parts.append(f"<g><title>{_e(tip)}</title>")
        if labelled:
            name = result.instance_id
            short = name if len(name) <= 36 else name[:35] + "\u2026"
            ty = y + bar_h - 3
            parts.append(f'<text x="{left - 6}" y="{ty:.1f}" text-anchor="end">{_e(short)}</text>')
        x = float(left)
        for n in names:
            sec = stages.get(n, 0.0)
            if sec <= 0:
                continue
            w = plot * sec / scale_top
            parts.append(
                f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{bar_h:.2f}" '
                f'fill="{colours[n]}"/>'
            )
            x += w
        if labelled:
            parts.append(f'<text x="{x + 4:.1f}" y="{y + bar_h - 3:.1f}">{total:.1f}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return parts


def _table(ordered: list[TaskResult]) -> list[str]:
    """report.md's table; each task row is `task-<instance id>`, its reason in a row below."""
    parts = ["<table><thead><tr>"]
    parts += [f"<th>{_e(h)}</th>" for h in HEADERS]
    parts.append("</tr></thead><tbody>")
    for result, row in zip(ordered, table_rows(ordered), strict=True):
        task, status, oracle, nop, python, seconds, logs = row
        parts.append(
            f'<tr id="task-{_e(result.instance_id)}"><td>{_e(task)}</td>'
            f'<td><span class="badge" style="background:{_status_colour(status)}">'
            f"{_e(status)}</span></td><td>{_e(oracle)}</td><td>{_e(nop)}</td>"
            f'<td>{_e(python)}</td><td class="num">{_e(seconds)}</td>'
            f"<td><code>{_e(logs)}</code></td></tr>"
        )
        notes = [result.reason] if result.reason else []
        if result.environment.get("resolved_as_of"):
            notes.append(f"environment resolved as of {result.environment['resolved_as_of']}")
        if result.environment.get("dropped"):
            notes.append(f"dropped from the environment: {result.environment['dropped']}")
        if result.environment.get("pins_moved_for_python"):
            moved = result.environment["pins_moved_for_python"]
            notes.append(f"pins moved for Python {python}: {moved}")
        flagged = sorted({s for run in result.oracle for s in run.suspicious or []})
        if flagged:
            notes.append(
                "for review, the gold patch reaches into a test runner: " + "; ".join(flagged)
            )
        for note in notes:
            parts.append(f'<tr class="reason"><td colspan="{len(HEADERS)}">{_e(note)}</td></tr>')
    parts.append("</tbody></table>")
    return parts


QualityRow = tuple[str, str, str, str]
"""A task's quality for the reports: task, hunks covered (e.g. "2/3"), uncovered hunks, leaks."""


def quality_markdown(rows: list[QualityRow]) -> str:
    """report.md's quality section (`packager quality`, `package --quality`)."""
    if not rows:
        return ""
    lines = ["", "## Quality (hunks the tests need, instruction leaks)", ""]
    lines += ["| task | hunks covered | uncovered hunks | leaks |", "|---|---|---|---|"]
    for row in sorted(rows):
        lines.append("| " + " | ".join(c.replace("|", "\\|") or "-" for c in row) + " |")
    return "\n".join(lines) + "\n"


def _quality_table(rows: list[QualityRow]) -> list[str]:
    parts = ['<h2>Quality</h2><table id="quality"><thead><tr>']
    parts += [f"<th>{h}</th>" for h in ("task", "hunks covered", "uncovered hunks", "leaks")]
    parts.append("</tr></thead><tbody>")
    for row in sorted(rows):
        parts.append("<tr>" + "".join(f"<td>{_e(c) or '-'}</td>" for c in row) + "</tr>")
    parts.append("</tbody></table>")
    return parts


def make_html(
    dataset: str,
    results: list[TaskResult],
    disk: dict[str, int] | None = None,
    quality: list[QualityRow] | None = None,
) -> str:
    """report.html: one self-contained page (inline CSS and SVG, no scripts, nothing fetched)
    with the status counts, seconds per stage per task and report.md's table, sorted by
    instance id. The same input gives the same bytes. `disk` is `clean.disk_use`'s summary.
    """
    ordered = sorted(results, key=lambda r: (r.instance_id, r.task))
    counts: Counter[str] = Counter(r.status for r in ordered)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    title = f"{dataset}: {len(ordered)} task(s): {summary or 'none'}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # Nothing may be fetched when the page is viewed: only the inline style applies.
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    if disk is not None:
        parts.append(
            f'<p id="disk">Docker disk use: {disk["images"]} images, '
            f"{human_bytes(disk['size_bytes'])} "
            f"({human_bytes(disk['unique_bytes'])} not shared)</p>"
        )
        if "dataset_bytes" in disk:
            parts.append(
                f'<p id="dataset-disk">This dataset\'s images, every layer counted once: '
                f"{human_bytes(disk['dataset_bytes'])}; bytes only one task's images hold: "
                f"median {human_bytes(disk['task_unique_median'])}, largest "
                f"{human_bytes(disk['task_unique_max'])}</p>"
            )
        if "output_bytes" in disk:
            parts.append(
                f'<p id="output-disk">This output folder: {human_bytes(disk["output_bytes"])} '
                "(each file once; no task keeps its repository, the machine's snapshot cache "
                f"does: {human_bytes(disk['snapshot_cache_bytes'])})</p>"
            )
    parts.append("<h2>Tasks per status</h2>")
    parts += _status_chart(counts)
    parts.append("<h2>Seconds per stage per task</h2>")
    parts += _stage_chart(ordered)
    groups = by_cause(ordered)
    if groups:
        parts.append(
            '<h2>Not verified, by cause</h2><table id="causes"><thead><tr>'
            "<th>cause</th><th>tasks</th><th>which</th></tr></thead><tbody>"
        )
        for name, ids in groups:
            parts.append(
                f'<tr><td>{_e(name)}</td><td class="num">{len(ids)}</td>'
                f"<td>{_e(', '.join(ids))}</td></tr>"
            )
        parts.append("</tbody></table>")
    parts.append("<h2>Tasks</h2>")
    parts += _table(ordered)
    if quality:
        parts += _quality_table(quality)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
