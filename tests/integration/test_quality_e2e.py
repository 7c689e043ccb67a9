"""Quality checks (packager/checks/quality/) on the real Docker engine, through the
images and the grading runtime that verified each task.

- `samples__textkit-1`: one gold hunk, covered; its statement gives nothing away.
- `samples__inventory-4` (PDL): one gold hunk, covered; the ablated reward (the 0.2 floor)
  beside the row's `graded_ladder_rungs`.
- Two rows derived from the textkit sample in a dataset made here with real git from its
  bundle (gold patches must apply at the base commit):
  `quality__textkit-split`: the same fix as a diff with one line of context, so two hunks (the
  import and the call), both needed by the tests; its statement quotes the call the fix adds;
  `quality__textkit-untested`: that fix plus an unused function added to `textkit/case.py`,
  which no test checks: flagged, with that file and its lines.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from packager.checks.quality import (
    QualityReport,
    cached_quality,
    quality_path,
    run_quality,
    write_quality,
)
from packager.datasets.sources import SAMPLES_DIR, open_dataset
from packager.models.spec import TaskResult, TaskSpec
from packager.run.resolve import resolve_spec
from packager.run.select import Selection, iter_specs
from packager.storage import OutputPaths
from tests.conftest import run_cli, sample_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUNDLE = SAMPLES_DIR / "repos" / "samples__textkit.bundle"
QUOTED = 'text = unicodedata.normalize("NFKD", text)'
UNUSED = (
    "\n\ndef swap_case(text: str) -> str:\n"
    '    """Swap the case of every letter of ``text`` (not used by anything yet)."""\n'
    "    return text.swapcase()\n"
)


def _git(repo: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        input=data,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _textkit_row() -> dict[str, Any]:
    return next(r for r in sample_rows() if r.get("instance_id") == "samples__textkit-1")


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """quality-textkit.jsonl (dataset `quality-textkit`): the two derived rows, next to the
    sample's recipes and bundle."""
    root = tmp_path_factory.mktemp("quality-data")
    row = _textkit_row()
    work = root / "work"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(work)], check=True)
    _git(work, "checkout", "-q", row["base_commit"])
    _git(work, "apply", "-", data=row["patch"].encode())
    split = _git(work, "diff", "-U1")
    case = work / "textkit" / "case.py"
    case.write_text(case.read_text() + UNUSED)
    untested = _git(work, "diff", "-U1")
    shutil.rmtree(work)
    rows = [
        {
            **row,
            "instance_id": "quality__textkit-split",
            "patch": split,
            "problem_statement": row["problem_statement"]
            + f"\n\nNormalise first, as in `{QUOTED}`.\n",
        },
        {**row, "instance_id": "quality__textkit-untested", "patch": untested},
    ]
    data = root / "quality"
    (data / "repos").mkdir(parents=True)
    shutil.copy(BUNDLE, data / "repos" / BUNDLE.name)
    shutil.copy(SAMPLES_DIR / "recipes.yaml", data / "recipes.yaml")
    (data / "quality-textkit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data / "quality-textkit.jsonl"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """One output folder per task: `read_results` (run/store.py) still reads every
    results/*.json as a verification result, `<task>.quality.json` included, until the CLI
    owner makes it skip them as it skips `.audit.json`; images are shared all the same."""
    return tmp_path / "out"


def _quality(docker_client: Any, dataset: str, task: str, out: Path) -> QualityReport:
    """Package the task (cached when already verified), then run its quality checks."""
    proc = run_cli("package", task, "--dataset", dataset, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sel = Selection(open_dataset(dataset), task_ids=(task,))
    [spec] = [resolve_spec(s, sel.merged_repo_sources) for s in iter_specs(sel)]
    paths = OutputPaths(out, sel.dataset.name)
    result = TaskResult.model_validate_json(paths.result_file(spec.provenance.slug).read_text())
    report = run_quality(
        docker_client,
        spec,
        paths,
        result.images,
        result=result,
        repo_sources=sel.merged_repo_sources,
    )
    write_quality(paths, report)
    _check_common(report, spec, paths, result, docker_client)
    return report


def _check_common(
    report: QualityReport, spec: TaskSpec, paths: OutputPaths, result: TaskResult, client: Any
) -> None:
    assert report.ablation_status == "done", report.ablation_note
    assert report.control is not None and report.control.reward == 1.0
    assert report.images == result.images and report.image_ids == result.image_ids
    for run in [report.control, *report.ablations]:
        assert Path(run.log_dir, "reward.json").is_file()
        assert Path(run.log_dir).parent == paths.log_dir(spec.provenance.slug) / "quality"
    saved = json.loads(quality_path(paths, spec.provenance.slug).read_text())
    assert saved["task"] == spec.provenance.slug and "flagged" in saved
    assert cached_quality(paths, spec, result.image_ids) == report
    left = client.containers.list(
        all=True,
        filters={
            "label": [f"packager.task={spec.provenance.dataset}/{report.task}", "packager.run"]
        },
    )
    assert left == [], "containers left behind"


def test_textkit_sample_has_its_one_hunk_covered_and_no_leak(docker_client: Any, out: Path) -> None:
    report = _quality(docker_client, "samples", "samples__textkit-1", out)
    assert (report.covered, report.total) == (1, 1)
    assert report.hunks[0].reward == 0.0 and report.leaks == ()
    assert not report.flagged and report.ladder is None


def test_pdl_sample_shows_ablated_rewards_beside_its_ladder(docker_client: Any, out: Path) -> None:
    report = _quality(docker_client, "samples", "samples__inventory-4", out)
    assert (report.covered, report.total) == (1, 1) and not report.flagged
    ladder = report.ladder
    assert ladder is not None and ladder.available
    assert ladder.rungs == ("cheat.diff",)
    assert ladder.gold == 1.0 and ladder.floor == pytest.approx(0.2)
    assert ladder.rewards == (pytest.approx(0.2),)


def test_split_fix_has_every_hunk_covered_and_its_quoted_line_flagged(
    docker_client: Any, out: Path, derived: Path
) -> None:
    report = _quality(docker_client, str(derived), "quality__textkit-split", out)
    assert (report.covered, report.total) == (2, 2)
    assert [h.reward for h in report.hunks] == [0.0, 0.0]  # without the import: NameError
    assert [(leak.kind, leak.text) for leak in report.leaks] == [("added_line", QUOTED)]
    assert report.leaks[0].where == "gold patch textkit/slug.py:11"
    assert report.flagged and len(report.reasons) == 1 and "instruction" in report.reasons[0]


def test_an_untested_hunk_is_flagged_with_its_file_and_lines(
    docker_client: Any, out: Path, derived: Path
) -> None:
    report = _quality(docker_client, str(derived), "quality__textkit-untested", out)
    assert (report.covered, report.total) == (2, 3)
    [uncovered] = [h for h in report.hunks if not h.covered]
    case_lines = (SAMPLES_DIR / "src/textkit/base/textkit/case.py").read_text().count("\n")
    # Diffed with one line of context: the last old line, then the five new ones.
    assert uncovered.file == "textkit/case.py"
    assert (uncovered.old_start, uncovered.old_len) == (case_lines, 1)
    assert (uncovered.new_start, uncovered.new_len) == (case_lines, 6)
    assert uncovered.where == (
        f"textkit/case.py: new lines {case_lines}-{case_lines + 5}, old line {case_lines}"
    )
    assert uncovered.covered is False and uncovered.reward == 1.0
    assert report.flagged and report.leaks == ()
    assert report.reasons == (
        "1 of 3 gold hunks not covered by the tests (the gold patch without them still scores "
        f"1.0): {uncovered.where}",
    )
    ablation = next(a for a in report.ablations if a.index == uncovered.ablation)
    assert ablation.files == ("textkit/case.py",)
    graded = Path(ablation.log_dir, "model.patch").read_text()
    assert "swap_case" not in graded and "unicodedata" in graded
