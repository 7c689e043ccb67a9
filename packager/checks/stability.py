"""Stability of a task's verdict, test by test.

Every listed FAIL_TO_PASS and PASS_TO_PASS id's outcome in every run (looked up as the grading
rule looks it up, `checks.labels.matching`), and the ids whose outcome changed between runs
that should agree:

- among the gold runs, plain and perturbed: a change seen only in a perturbed run is named by
  that perturbation (`shuffle`, `cpus`, `clock`); a change among the plain runs is `repeat`;
- among the nop runs: `repeat`.

An id no test answers in a run counts as `missing` there, and one whose tests disagree (an id
cut at a space) as `ambiguous` (the label audit reports both); they flip like any outcome.

A task with a flaky listed test is `flaky` (`flaky_reason`), naming the tests and what changed
them, even when its rewards did not move (a PASS_TO_PASS test flipping on the nop side).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from packager.checks.labels import joint_outcome, matching, read_tests
from packager.engines.verdict import NOT_RUN
from packager.models.spec import RunResult, TaskResult, TaskSpec

NAMED = 10
"""How many flaky tests a reason names (the result lists all)."""


def outcome(tests: Mapping[str, str], test_id: str) -> str:
    """`passed`, `failed`, `missing` or `ambiguous`: one id in one run."""
    found = matching(tests, test_id)
    if not found:
        return "missing"
    return joint_outcome(found) or "ambiguous"


def run_name(run: RunResult, index: int) -> str:
    if run.perturbation:
        return f"oracle-{run.perturbation}"
    return f"{run.kind}-{index}"


def flaky_tests(
    listed: Sequence[tuple[str, str]],
    gold: Sequence[tuple[str, str | None, Mapping[str, str]]],
    nops: Sequence[tuple[str, Mapping[str, str]]],
) -> list[dict[str, Any]]:
    """The listed (group, id) whose outcome changed. `gold`: (run name, perturbation or None,
    parsed tests) of every gold run; `nops`: (run name, parsed tests) of every nop run.
    """
    flaky: list[dict[str, Any]] = []
    for group, test_id in listed:
        seen = {name: outcome(tests, test_id) for name, _, tests in gold}
        plain = [seen[name] for name, change, _ in gold if change is None]
        usual = Counter(plain).most_common(1)[0][0] if plain else None
        changed = sorted(
            {change for name, change, _ in gold if change is not None and seen[name] != usual}
        )
        if len(set(plain)) > 1:
            changed.insert(0, "repeat")
        nop_seen = {name: outcome(tests, test_id) for name, tests in nops}
        if len(set(nop_seen.values())) > 1 and "repeat" not in changed:
            changed.insert(0, "repeat")
        if changed:
            flaky.append(
                {
                    "group": group,
                    "id": test_id,
                    "changed_by": changed,
                    "outcomes": {**seen, **nop_seen},
                }
            )
    return flaky


def task_stability(spec: TaskSpec, result: TaskResult) -> dict[str, Any] | None:
    """The stability record of a task's runs; None when it had fewer than two gold runs and
    two nop runs (nothing to compare) or ran none.
    """
    made = [r for r in result.perturbed if r.grade_status != NOT_RUN]
    gold_runs = [*result.oracle, *made]
    nop_runs = [*([result.nop] if result.nop else []), *result.more_nops]
    if not gold_runs or (len(gold_runs) < 2 and len(nop_runs) < 2):
        return None
    every = [*gold_runs, *nop_runs]
    record: dict[str, Any] = {
        "runs": {
            "gold": len(result.oracle),
            "nop": len(nop_runs),
            "perturbed": [r.perturbation for r in made],
        },
        "not_applied": {
            str(r.perturbation): r.perturbation_note
            for r in result.perturbed
            if r.perturbation_note
        },
        "added_sec": round(
            sum(r.duration_sec for r in every) - _baseline_sec(result.oracle, nop_runs), 3
        ),
        "rewards": {
            run_name(r, i): r.reward
            for runs in (result.oracle, nop_runs)
            for i, r in enumerate(runs, 1)
        }
        | {run_name(r, 0): r.reward for r in made},
        "flaky": [],
    }
    g = spec.grading
    if g.rule != "all_pass":
        return record
    gold = [
        (run_name(r, i), r.perturbation, read_tests(r.log_dir)) for i, r in enumerate(gold_runs, 1)
    ]
    nops = [(run_name(r, i), read_tests(r.log_dir)) for i, r in enumerate(nop_runs, 1)]
    if any(t is None for _, _, t in gold) or any(t is None for _, t in nops):
        record["note"] = "a run left no parsed tests: compared by rewards only"
        return record
    listed = [("FAIL_TO_PASS", t) for t in dict.fromkeys(g.fail_to_pass)]
    listed += [("PASS_TO_PASS", t) for t in dict.fromkeys(g.pass_to_pass)]
    record["flaky"] = flaky_tests(
        listed,
        [(name, change, tests or {}) for name, change, tests in gold],
        [(name, tests or {}) for name, tests in nops],
    )
    return record


def flaky_reason(stability: Mapping[str, Any] | None) -> str | None:
    """Why the task is flaky, naming its flaky tests and what changed them (None: none)."""
    flaky = (stability or {}).get("flaky") or []
    if not flaky:
        return None
    named = "; ".join(
        f"{f['id']} ({f['group']}, changed by {', '.join(f['changed_by'])})" for f in flaky[:NAMED]
    )
    more = f" and {len(flaky) - NAMED} more" if len(flaky) > NAMED else ""
    return (
        f"{len(flaky)} listed test(s) change outcome between runs: {named}{more} "
        "(--quarantine grades without them)"
    )


def _baseline_sec(oracle: Sequence[RunResult], nops: Sequence[RunResult]) -> float:
    """Seconds of the runs any verdict needs: the first gold run and the first nop run."""
    return sum(r.duration_sec for r in (*oracle[:1], *nops[:1]))
