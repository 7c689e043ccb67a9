"""The pytest family (every pytest-family parser): a JUnit report as proof that the session
ran to its end, a must-fail tripwire test, and the harness's reading of nested test ids.

Standard library only, Python >= 3.9 (it runs in the grader image, see grade.py).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List

if TYPE_CHECKING:
    from . import canaries, parsers, patching, rules, runner_base, tripwires
elif __package__:
    from . import canaries, parsers, patching, rules, runner_base, tripwires
else:  # run from the zipapp: sys.path[0] holds the siblings
    import canaries
    import parsers
    import patching
    import rules
    import runner_base
    import tripwires

Report = runner_base.Report
Tests = runner_base.Tests


def trusted(tests: Tests, proof: Path, report: Report, parser: str = "pytest") -> Tests:
    """Keep only the results pytest's JUnit report confirms (the worse status of the two wins).

    Printed output can be forged by the code under test (a fake summary, then ``os._exit(0)``,
    or an ``atexit`` hook printing after the real one); a session that never finished writes no
    report, so nothing it printed is trusted. ``parser`` is the pytest-family parser that read
    the output: the report's ids are rewritten as it rewrites printed ones.
    """
    if not proof.is_file():
        if tests:
            report.setdefault("notes", []).append(
                "pytest wrote no JUnit report (the session did not finish): results not trusted"
            )
        return {}
    confirmed = parsers.parse_junit(proof.read_text(encoding="utf-8", errors="replace"))
    by_key: Dict[str, str] = {}
    for junit_id, status in confirmed.items():
        key = parsers.junit_key_as(parser, junit_id)
        by_key[key] = parsers.worse(status, by_key.get(key, status))
    kept: Tests = {}
    dropped = 0
    for test_id, status in tests.items():
        other = by_key.get(parsers.pytest_key(test_id))
        if other is None:
            dropped += 1
            continue
        kept[test_id] = parsers.worse(status, other)
    if dropped:
        report.setdefault("notes", []).append(
            f"{dropped} printed pytest result(s) missing from pytest's JUnit report: ignored"
        )
    return kept


def nested_statuses(
    tests: Tests, p2p: List[str], repo: Path, output: Path, report: Report
) -> Tests:
    """Listed PASS_TO_PASS ids that no test of the run answers and whose file is not in the
    repository (a test of a pytest run nested in the output, e.g. a pytester sub-run): their
    status as the harness's line parser reads it from the output, recorded under
    ``nested_ids`` (a label finding); a file there at the base commit is a real test's.
    Never for FAIL_TO_PASS: a line the code under test prints must not make the fix pass.
    """
    missing = [i for i in p2p if rules.resolve(tests, i) is None]
    if not missing or not output.is_file():
        return tests
    lines = parsers.harness_lines(output.read_text(encoding="utf-8", errors="replace"))
    found = {}
    for test_id in missing:
        path = test_id.split("::", 1)[0]
        if test_id not in lines or "::" not in test_id or (repo / path).exists():
            continue
        # Nor at the base commit: a candidate deleting a real test's file gains nothing here.
        if patching.git(repo, "cat-file", "-e", f"HEAD:{path}", check=False).returncode == 0:
            continue
        found[test_id] = lines[test_id]
    if found:
        report["nested_ids"] = sorted(found)
    return {**tests, **found}


class Pytest(runner_base.Family):
    parsers = parsers.PYTEST_FAMILY

    def prepare(self, run: runner_base.Run) -> None:
        # pytest's own JUnit report, at a path the command is not told about on its command
        # line: proof that the session ran to its end (see trusted).
        proof = run.scratch / f"pytest-{secrets.token_hex(8)}.xml"
        run.state["proof"] = proof
        extra = run.env.get("PYTEST_ADDOPTS", "")
        run.env["PYTEST_ADDOPTS"] = f"{extra} --junitxml={proof}".strip()
        plugin = run.guard(canaries.write_proof_plugin(run.env, run.repo, proof))
        if run.env.get(canaries.SHUFFLE_SEED):
            # a perturbed run: the plugin shuffles the tests (none installed: no shuffle)
            run.report["shuffled"] = plugin is not None
        tripwire = tripwires.write_pytest_tripwire(run.repo, run.plan)
        run.state["tripwire"] = run.guard(tripwire, tripwire.names)

    def check(self, run: runner_base.Run, tests: Tests, printed: str, code: int) -> Tests:
        tests = trusted(tests, run.state["proof"], run.report, run.parser)
        tripwire = run.state["tripwire"]
        return tripwires.check_tripwire(tests, tripwire.relative(run.repo))

    def listed(
        self, tests: Tests, p2p: List[str], repo: Path, output: Path, report: Report
    ) -> Tests:
        return nested_statuses(tests, p2p, repo, output, report)


FAMILY = Pytest()
FAMILIES = (FAMILY,)
