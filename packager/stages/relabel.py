"""Which labels a task grades with.

By default the dataset's FAIL_TO_PASS and PASS_TO_PASS, as published, so that verdicts keep
matching the harness's. After a task's runs its label record is kept in `labels/<task>.json`
(`label_record`, `keep_label_record`): the labels the runs derive (passing on every gold run and
failing or absent on every nop run; passing on every run, `checks.labels.derived_labels`) and
the listed tests the runs saw change outcome, with how many runs flipped each
(`checks.stability`). The render reads it back (`relabeled`):

- `--labels derived`: the task grades with the derived labels (the dataset's while no run has
  derived any);
- `--quarantine`: the flipping tests are taken out of the labels it grades with.

Either way task.toml's metadata says which labels (`labels`), and names each quarantined test
with its flip count (`quarantined`); the release manifest carries them. The grader grades with
what it is given, so the grader image changes and the task is built and verified again.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from packager.checks.labels import derived_labels, read_tests
from packager.engines.verdict import NOT_RUN
from packager.render.write import write_json

if TYPE_CHECKING:
    from packager.models.spec import TaskResult, TaskSpec
    from packager.storage import OutputPaths


def label_record(result: TaskResult) -> dict[str, Any] | None:
    """The labels a task's runs derive and the listed tests they saw flip (None: a run left no
    parsed tests, or the task has no nop run).
    """
    made = [r for r in result.perturbed if r.grade_status != NOT_RUN]
    gold_runs = [*result.oracle, *made]
    nop_runs = [*([result.nop] if result.nop else []), *result.more_nops]
    gold = [read_tests(r.log_dir) for r in gold_runs]
    nops = [read_tests(r.log_dir) for r in nop_runs]
    if not nops or any(t is None for t in (*gold, *nops)):
        return None
    f2p, p2p = derived_labels([t for t in gold if t], [t for t in nops if t])
    flips: dict[str, int] = {}
    for flaky in (result.stability or {}).get("flaky", []):
        seen = [v for k, v in flaky["outcomes"].items() if k.startswith("oracle-")]
        usual = Counter(seen).most_common(1)[0][1] if seen else 0
        nop_seen = [v for k, v in flaky["outcomes"].items() if k.startswith("nop-")]
        nop_usual = Counter(nop_seen).most_common(1)[0][1] if nop_seen else 0
        flips[flaky["id"]] = (len(seen) - usual) + (len(nop_seen) - nop_usual)
    return {
        "derived": {"fail_to_pass": f2p, "pass_to_pass": p2p},
        "flaky": dict(sorted(flips.items())),
        "runs": len(gold_runs) + len(nop_runs),
    }


def keep_label_record(paths: OutputPaths, slug: str, result: TaskResult) -> None:
    """Keep the label record of a task's runs (nothing when they give none)."""
    record = label_record(result)
    if record is not None:
        write_json(paths.labels_file(slug), record)


def relabeled(spec: TaskSpec, paths: OutputPaths, mode: str, quarantine: bool) -> TaskSpec:
    """`spec` grading with the labels `mode` and `quarantine` choose (see the module doc)."""
    if spec.grading.rule != "all_pass" or (mode == "dataset" and not quarantine):
        return spec
    try:
        target = paths.labels_file(spec.provenance.slug)
        record = json.loads(target.read_text()) if target.is_file() else {}
    except (OSError, ValueError):
        record = {}
    g = spec.grading
    f2p, p2p, used = list(g.fail_to_pass), list(g.pass_to_pass), "dataset"
    derived = record.get("derived")
    if mode == "derived" and isinstance(derived, dict):
        f2p, p2p, used = list(derived["fail_to_pass"]), list(derived["pass_to_pass"]), "derived"
    metadata: dict[str, Any] = {**spec.provenance.metadata, "labels": used}
    flaky = record.get("flaky") or {}
    if quarantine and flaky:
        f2p = [t for t in f2p if t not in flaky]
        p2p = [t for t in p2p if t not in flaky]
        metadata["quarantined"] = {t: n for t, n in flaky.items()}
    return spec.model_copy(
        update={
            "grading": g.model_copy(
                update={"fail_to_pass": tuple(f2p), "pass_to_pass": tuple(p2p)}
            ),
            "provenance": spec.provenance.model_copy(update={"metadata": metadata}),
        }
    )
