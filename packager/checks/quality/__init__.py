"""Quality checks of a verified task (issue 12): a task whose gold patch scores 1.0 and whose
untouched repository scores below 1.0 can still be a poor task, because its tests may pass a
partial fix, or its problem statement may quote the fix or name the hidden tests.

Three checks, one report per task (`results/<task>.quality.json`):

- **Hunk ablation**: the gold patch is graded again with each of its hunks (or, when it has
  more than `max_ablations`, each group of hunks, never mixing files until there are more files
  than ablations) left out, through the very engine, images and grading runtime that verified
  the task (`grade_patch` with a candidate patch, as `packager verify --patch` does). A
  hunk whose removal still scores 1.0 is not covered by the tests. The whole gold patch is
  graded first through the same path, as a control: if it does not score 1.0 the ablations
  would prove nothing and are not run.
- **Instruction leak**: the instruction quotes a non-trivial line the gold patch adds, or names
  a hidden test file, a hidden test function or a FAIL_TO_PASS id that the base repository does
  not already have (a name already in the base tree was public).
- **Ladder** (PDL rows): the ablated variants' rewards beside the row's `graded_ladder_rungs`
  names (the row names its rungs but ships neither their diffs nor their rewards).

The package, by stage: `hunks` (the gold patch cut into file sections and hunks), `ablation`
(the plan and the ablated patches), `leaks` and `base` (what the instruction gives away, and
whether the base tree already held it), all pure; `report` (the saved report and its cache key);
`run` (`run_quality`), which grades candidates only through `packager.engines.patch.grade_patch`.
Nothing here prints: the CLI decides what to show and which exit code a flagged task gets.
"""

from packager.checks.quality.ablation import (
    MAX_ABLATIONS_DEFAULT,
    Ablation,
    ablated_patch,
    ablation_plan,
)
from packager.checks.quality.base import base_lookup, base_tree_names, files_names
from packager.checks.quality.hunks import skipped, split_hunks
from packager.checks.quality.leaks import Leak, LeakKind, instruction_leaks, is_trivial_line
from packager.checks.quality.report import (
    QUALITY_VERSION,
    AblationRun,
    AblationStatus,
    HunkResult,
    Ladder,
    QualityReport,
    SkippedFile,
    cached_quality,
    patch_digest,
    quality_path,
    read_quality,
    summary_line,
    to_json,
    write_quality,
)
from packager.checks.quality.run import candidate_bytes, run_quality
from packager.diffs import FileDiff, FileStatus, Hunk

__all__ = [
    "MAX_ABLATIONS_DEFAULT",
    "QUALITY_VERSION",
    "Ablation",
    "AblationRun",
    "AblationStatus",
    "FileDiff",
    "FileStatus",
    "Hunk",
    "HunkResult",
    "Ladder",
    "Leak",
    "LeakKind",
    "QualityReport",
    "SkippedFile",
    "ablated_patch",
    "ablation_plan",
    "base_lookup",
    "base_tree_names",
    "cached_quality",
    "candidate_bytes",
    "files_names",
    "instruction_leaks",
    "is_trivial_line",
    "patch_digest",
    "quality_path",
    "read_quality",
    "run_quality",
    "skipped",
    "split_hunks",
    "summary_line",
    "to_json",
    "write_quality",
]
