"""report.html (issue 10): self-contained, escaped, deterministic, every task shown, fast."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Literal

from packager.models.spec import RunResult, Status, TaskResult
from packager.release.report import make_html, make_markdown
from packager.storage import human_bytes as fmt_bytes

STATUSES: list[Status] = ["verified", "leak", "gold_failed", "infra_error", "flaky", "built"]


def _run(kind: Literal["oracle", "nop"], seconds: float, reward: float | None = 1.0) -> RunResult:
    return RunResult(
        kind=kind, reward=reward, grade_status="graded", duration_sec=seconds, log_dir="x"
    )


def _result(
    instance_id: str,
    status: Status = "verified",
    *,
    reason: str | None = None,
    nop: bool = True,
    durations: dict[str, float] | None = None,
    oracle: tuple[float, ...] = (3.2, 2.8),
) -> TaskResult:
    return TaskResult(
        task=f"ds__{instance_id}",
        instance_id=instance_id,
        dataset="ds",
        status=status,
        reason=reason,
        engine="local",
        oracle=tuple(_run("oracle", s) for s in oracle),
        nop=_run("nop", 1.5, 0.0) if nop else None,
        durations={"build": 12.0, "audit": 0.5} if durations is None else durations,
        logs={"dir": f"build/ds/logs/{instance_id}"},
    )


def _many(n: int) -> list[TaskResult]:
    return [
        _result(
            f"repo__proj-{i:05d}",
            STATUSES[i % len(STATUSES)],
            reason=None if i % 2 else f"step {i} failed: <exit 1> & 'more'",
            durations={"build": float(i % 50), "audit": 0.25, "app_check": 1.0},
        )
        for i in range(n)
    ]


def test_every_task_has_a_row_with_its_id_as_text() -> None:
    results = _many(40)
    page = make_html("ds", results)
    for r in results:
        assert f'<tr id="task-{r.instance_id}"><td>{r.instance_id}</td>' in page
    assert page.count('<tr id="task-') == 40


def test_every_status_count_is_shown_in_title_and_chart() -> None:
    results = _many(40)
    page = make_html("ds", results)
    counts = Counter(r.status for r in results)
    title = "ds: 40 task(s): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    assert f"<h1>{title}</h1>" in page
    assert title == make_markdown("ds", results).splitlines()[0][2:]  # as report.md says it
    for status, n in counts.items():
        group = re.search(rf'<g id="status-{status}">(.*?)</g>', page)
        assert group, status
        assert f"<title>{status}: {n} task(s)" in group.group(1)
        assert f">{n}</text>" in group.group(1) and f">{status}</text>" in group.group(1)
    assert page.count('<g id="status-') == len(counts)


def test_status_colours_and_labels() -> None:
    page = make_html("ds", [_result("a", "verified"), _result("b", "leak"), _result("c", "built")])
    assert 'background:#2e7d32">verified</span>' in page
    assert 'background:#c62828">leak</span>' in page
    assert 'background:#757575">built</span>' in page


def test_nothing_is_fetched() -> None:
    page = make_html("ds", _many(30), {"images": 2, "size_bytes": 10, "unique_bytes": 5})
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z]+:)?//""", page, re.I)
    assert not re.search(r"\burl\(", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(?:script|link|img|iframe|object|embed)\b", page, re.I)
    assert "@import" not in page
    assert "default-src 'none'" in page  # a slipped-in reference would not load either


def test_reasons_and_ids_are_escaped() -> None:
    bad = "<script>alert(\"x\")</script> & 'quoted'"
    page = make_html('ds <b>"', [_result('id<"&>', "gold_failed", reason=bad)])
    assert "<script>" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;quoted&#x27;" in page
    assert 'id="task-id&lt;&quot;&amp;&gt;"' in page
    assert "<title>ds &lt;b&gt;&quot;: 1 task(s): 1 gold_failed</title>" in page


def test_reason_sits_under_its_task() -> None:
    page = make_html("ds", [_result("a", "leak", reason="touched the tests"), _result("b")])
    row = page.index('<tr id="task-a">')
    assert page.index("touched the tests") > row
    assert page.index("touched the tests") < page.index('<tr id="task-b">')


def test_same_input_same_bytes_in_any_order() -> None:
    results = _many(25)
    disk = {"images": 3, "size_bytes": 2_500_000_000, "unique_bytes": 340_000_000}
    first = make_html("ds", results, disk)
    assert make_html("ds", list(reversed(results)), disk) == first
    ids = re.findall(r'<tr id="task-([^"]+)"', first)
    assert ids == sorted(ids)


def test_empty_results() -> None:
    page = make_html("ds", [])
    assert "<h1>ds: 0 task(s): none</h1>" in page
    assert page.count("<p>No tasks.</p>") == 2
    assert '<tr id="task-' not in page
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")


def test_zero_durations_and_missing_runs() -> None:
    results = [
        _result("zero", durations={}, oracle=(0.0,), nop=False),
        _result("none", "build_failed", durations={"build": 0.0}, oracle=(), nop=False),
        _result("odd", durations={"build": float("nan"), "audit": -1.0}),
    ]
    page = make_html("ds", results)
    for r in results:
        assert f'<tr id="task-{r.instance_id}">' in page
    assert "none: 0.0 s (build 0.0 s)" in page
    assert "zero: 0.0 s (oracle 0.0 s)" in page
    assert "odd: 7.5 s (build 0.0 s, audit 0.0 s, oracle 6.0 s, nop 1.5 s)" in page
    charts = page[: page.index("<h2>Tasks</h2>")]  # the table shows seconds as report.md does
    assert "nan" not in charts.lower() and "inf" not in charts.lower()


def test_stage_chart_has_legend_and_a_bar_per_task() -> None:
    results = [
        _result("a", durations={"build": 10.0, "extra": 1.0, "app_check": 2.0}),
        _result("b", nop=False),
    ]
    page = make_html("ds", results)
    legend = re.findall(r'<li><span class="swatch"[^>]*></span>([^<]+)</li>', page)
    assert legend == ["build", "audit", "app_check", "extra", "oracle", "nop"]
    assert "a: 20.5 s (build 10.0 s, app_check 2.0 s, extra 1.0 s, oracle 6.0 s, nop 1.5 s)" in page
    assert "b: 18.5 s (build 12.0 s, audit 0.5 s, oracle 6.0 s)" in page


def test_disk_line() -> None:
    disk = {"images": 7, "size_bytes": 2_345_000_000, "unique_bytes": 12_300}
    page = make_html("ds", [_result("a")], disk)
    assert "Docker disk use: 7 images, 2.3 GB (12 kB not shared)" in page
    assert "Docker disk use" not in make_html("ds", [_result("a")])


def test_fmt_bytes_is_decimal() -> None:
    assert [fmt_bytes(n) for n in (0, 999, 1000, 340_000_000, 1_200_000_000)] == [
        "0 B",
        "999 B",
        "1 kB",
        "340.0 MB",
        "1.2 GB",
    ]
    assert fmt_bytes(5_000_000_000_000) == "5.0 TB"


def test_ten_thousand_tasks_render_fast_and_completely() -> None:
    results = _many(10_000)
    began = time.perf_counter()
    page = make_html("ds", results)
    assert time.perf_counter() - began < 2.0
    assert page.count('<tr id="task-') == 10_000
    assert page.count("<g><title>repo__proj-") == 10_000  # a bar for every task
    height = re.search(r'aria-label="seconds per stage per task" width="\d+" height="(\d+)"', page)
    assert height and int(height.group(1)) < 3100
