"""A task's verdict from its runs: the status the oracle, nop and perturbed runs give
(DESIGN §7) and the `TaskResult` that carries them, for every engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from packager.models.spec import RunResult, Status, TaskResult

NOT_RUN = "not_run"
"""The grade status of a perturbed run that could not be made on this machine: no verdict."""


def decide_status(
    oracle: list[RunResult],
    nop: RunResult | None,
    expected_nop: float | None,
    more_nops: Sequence[RunResult] = (),
    perturbed: Sequence[RunResult] = (),
) -> tuple[Status, str | None]:
    """The task status from its runs (see DESIGN §7); the extra nop runs and the perturbed
    gold runs must agree with the first nop and the plain gold runs, else the task is flaky.
    """
    perturbed = [r for r in perturbed if r.grade_status != NOT_RUN]
    runs = [*oracle, *([nop] if nop else []), *more_nops, *perturbed]
    judged = next((r for r in runs if r.grade_status == "needs_judge"), None)
    if judged is not None:
        return "needs_judge", judged.reason
    broken = [r for r in runs if r.reward is None or r.grade_status == "infra_error"]
    if broken:
        return "infra_error", f"{broken[0].kind} run: {broken[0].reason}"
    solved = [r.reward == 1.0 for r in oracle]
    offline = next((r for r in oracle if r.network_hosts is not None), None)
    if not any(solved) and offline is not None:
        # Not a verdict on the gold patch either: its tests reach for the network, which
        # grading does not give (offline by default, as it must be to grade unseen patches).
        hosts = ", ".join(offline.network_hosts or []) or "no host named in the output"
        return "needs_network", (
            f"the gold run's tests tried to reach the network, which grading does not give "
            f"({hosts}); oracle reward {offline.reward} ({offline.grade_status}: {offline.reason})"
        )
    if not any(solved) and all(r.tests_run == 0 for r in runs):
        # Not a verdict on the gold patch: the environment cannot run the tests at all (the
        # runner is missing, or collection dies on an import) - a build problem.
        first = oracle[0]
        return "build_failed", (
            f"the environment's test command step failed: it reported no test "
            f"(exit {first.exit_code}) in any run; {first.test_tail or 'no output'}"
        )
    if not any(solved):
        worst = oracle[0]
        reason = f"oracle reward {worst.reward} ({worst.grade_status}: {worst.reason})"
        if worst.apply_log:
            reason += f"; gold patch did not apply: {worst.apply_excerpt} (log: {worst.apply_log})"
        return "gold_failed", reason
    if not all(solved):
        return "flaky", f"oracle rewards {[r.reward for r in oracle]}"
    assert nop is not None and nop.reward is not None
    if any(r.reward != nop.reward for r in more_nops):
        return "flaky", f"nop rewards {[r.reward for r in (nop, *more_nops)]}"
    shaken = [r for r in perturbed if r.reward != 1.0]
    if shaken:
        said = ", ".join(f"{r.perturbation} {r.reward}" for r in shaken)
        return "flaky", f"oracle rewards 1.0 on every plain run but {said} when perturbed"
    if nop.reward >= 1.0:
        return "nop_solved", "the untouched repository already scores 1.0"
    if expected_nop is not None and abs(nop.reward - expected_nop) > 1e-6:
        return "nop_mismatch", f"nop reward {nop.reward} != the row's base reward {expected_nop}"
    if nop.judge is not None and nop.subscores.get("target") == 1.0:
        # A browser-judged task must fail its target workflow on the untouched app (the bug is
        # there); a nop that fails only the preservation workflow proves nothing about the fix.
        return "nop_mismatch", "the untouched app passes the target workflow (it fails another)"
    return "verified", None


def make_result(
    *,
    task: str,
    instance_id: str,
    dataset: str,
    engine: str,
    images: dict[str, str],
    oracle: list[RunResult],
    nop: RunResult | None,
    expected_nop: float | None,
    durations: dict[str, float],
    logs: dict[str, str],
    more_nops: Sequence[RunResult] = (),
    perturbed: Sequence[RunResult] = (),
) -> TaskResult:
    """Assemble a TaskResult with its status."""
    status, reason = decide_status(oracle, nop, expected_nop, more_nops, perturbed)
    return TaskResult(
        task=task,
        instance_id=instance_id,
        dataset=dataset,
        status=status,
        reason=reason,
        engine=engine,
        images=images,
        oracle=tuple(oracle),
        nop=nop,
        more_nops=tuple(more_nops),
        perturbed=tuple(perturbed),
        expected_nop=expected_nop,
        durations=durations,
        logs=logs,
    )
