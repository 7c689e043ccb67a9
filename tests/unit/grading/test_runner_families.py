"""Every runner in one room: what a test runner needs around its command lives in its family's
module (packager/grading/runner_*.py), and runners.py's MODULES is the only list of them. A toy
family, written here as a module of its own plus one line in MODULES, changes how a real run
is graded; the runtime's shared modules name no runner."""

from __future__ import annotations

import ast
import difflib
import shutil
from pathlib import Path

from packager.grading import grade, parsers, runners
from tests.unit.grading.test_grading_runtime import CALC_FIXED, F2P, P2P, Task

GRADING = Path(grade.__file__).resolve().parent

TOY = '''
import runner_base


class Toy(runner_base.Family):
    """Claims pytest ahead of its own family; fails the first listed test it sees."""

    parsers = frozenset({"pytest"})

    def prepare(self, run):
        marker = run.repo / "toy-marker.txt"
        marker.write_text("added for this run")

        class Added:
            def remove(self):
                marker.unlink()

        run.guard(Added(), ["toy_added"])

    def check(self, run, tests, printed, code):
        run.note("toy family checked %d results" % len(tests))
        return {k: ("failed" if k in run.plan["fail_to_pass"] else v) for k, v in tests.items()}


FAMILIES = (Toy(),)
'''


def test_a_new_runner_is_one_module_and_one_line(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    task = Task(tmp_path / "task")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for module in GRADING.glob("*.py"):
        if module.name != "__init__.py":  # run as a script, as from the zipapp
            shutil.copy2(module, runtime / module.name)
    (runtime / "runner_toy.py").write_text(TOY)
    registry = runtime / "runners.py"
    before = registry.read_text()
    after = before.replace(
        'MODULES = (\n    "runner_pytest",', 'MODULES = (\n    "runner_toy",\n    "runner_pytest",'
    )
    registry.write_text(after)
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == ['+    "runner_toy",']

    gold = task.diff({"calc.py": CALC_FIXED})
    reward, report = task.grade(gold, runtime=runtime / "grade.py")
    assert reward["reward"] == 0.0
    assert report["tests"][F2P[0]] == "failed"
    assert report["tests"][P2P[0]] == "passed"
    assert "toy family checked 2 results" in report["notes"]
    assert report["added_tests"] == ["toy_added"]
    assert not (task.repo / "toy-marker.txt").exists()  # taken out after the run
    # The same task with the real runtime: the pytest family grades it.
    reward, report = task.grade(gold)
    assert reward["reward"] == 1.0
    assert report["added_tests"] and report["added_tests"] != ["toy_added"]


ROOMS = ("parsers.py", "parsers_js.py", "parsers_native.py", "tripwires.py", "canaries.py")
"""Where runner names may appear besides the families: the parsers themselves and the
tripwire and canary libraries the families call."""
WORDS = {"camouflage.py": {"pytest"}}
"""Words that are not runner names there: the camouflage vocabulary holds 'pytest'."""
FAMILY_SETS = {"PYTEST_FAMILY", "JS_TRIPWIRED", "FAIL_ONLY", "CPP_FRAMEWORKS"}


def test_the_runtime_names_runners_only_in_their_rooms() -> None:
    claimed = set().union(*(family.parsers for family in runners.FAMILIES))
    assert claimed <= set(parsers.PARSERS)
    assert {"pytest", "gotest", "tap", "sympy", "junit", "googletest", "jest"} <= claimed
    found = {}
    for module in sorted(GRADING.glob("*.py")):
        if module.name in ROOMS or module.name.startswith("runner_"):
            continue
        tree = ast.parse(module.read_text(encoding="utf-8"))
        names = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        } & (claimed - WORDS.get(module.name, set()))
        names |= {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in FAMILY_SETS
        }
        if names:
            found[module.name] = sorted(names)
    assert found == {}


def test_each_parser_has_one_family() -> None:
    owners: dict[str, list[str]] = {}
    for family in runners.FAMILIES:
        for name in family.parsers:
            owners.setdefault(name, []).append(type(family).__name__)
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}
    assert runners.family("pytest_v2") is runners.family("pytest")
    assert runners.family("cargo") is runners.PLAIN  # printed output, parsed as it is
