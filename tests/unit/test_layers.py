"""The packager's layers (pyproject.toml `[tool.importlinter]`, docs/architecture.md) hold: no
package imports from a layer above its own, at module level or inside a function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.is_file(), f"{lint} is missing. Fix: `make install` (the dev extra has it)"
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


LAZY_LIMIT = 15
"""At most this many imports of packager modules inside functions (there were 174 before the
layers held); each one is for a heavy or optional dependency and says so in a comment."""


def _function_level_imports() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted((ROOT / "packager").rglob("*.py")):
        if "grading" in path.relative_to(ROOT).parts:  # the in-container runtime: no packager
            continue
        text = path.read_text()
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("packager"):
                    above = lines[node.lineno - 2].strip()
                    comment = above if above.startswith("#") else ""
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.lineno, comment))
    return found


def test_imports_inside_functions_are_few_and_say_why() -> None:
    found = _function_level_imports()
    assert len(found) <= LAZY_LIMIT, [where for where, _, _ in found]
    # An import right under another one shares its comment.
    uncommented = []
    for i, (where, line, comment) in enumerate(found):
        shares = i > 0 and found[i - 1][0].split(":")[0] == where.split(":")[0]
        if not comment and not (shares and found[i - 1][1] == line - 1):
            uncommented.append(where)
    assert uncommented == []


def test_no_module_binds_a_global_another_module_reassigns() -> None:
    """`module.NAME = ...` somewhere (a Ray worker takes the driver's run id) means every reader
    must look it up as `module.NAME` when used: a `from module import NAME` keeps the old value.
    """
    reassigned: set[str] = set()
    imported: dict[str, list[str]] = {}
    for path in sorted((ROOT / "packager").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr.isupper():
                        reassigned.add(target.attr)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("packager"):
                for alias in node.names:
                    imported.setdefault(alias.name, []).append(where)
    assert "RUN_ID" in reassigned  # the scan sees the Ray worker's assignment
    assert {name: imported[name] for name in reassigned if name in imported} == {}


def test_the_cli_loads_no_pipeline_until_a_command_runs() -> None:
    """`packager --help` and a bad flag answer without importing the pipeline
    (`cli.options.pipeline` loads the driver when a command runs)."""
    code = (
        "import sys, packager.cli; "
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('packager.')}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(done.stdout.strip()))
    heavy = {"run", "stages", "executors", "checks", "release", "images", "adapters", "render"}
    assert "cli" in loaded and loaded & heavy == set()


def test_verify_settings_travel_unchanged_to_the_container() -> None:
    """The run's verify settings go down as one object (`settings.VerifyConfig`: Job →
    VerifyRequest → the engine → the run plan), not re-spelled at every floor: a container
    limit is named only where it is declared (the settings, the flag) and where a container is
    made (the run plan and the container's creation)."""
    allowed = {
        "packager/settings.py",
        "packager/cli/options.py",
        "packager/engines/local.py",
        "packager/engines/containers.py",
    }
    seen = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "packager").rglob("*.py")
        if "memory_mb" in p.read_text(encoding="utf-8")
    }
    assert seen <= allowed, f"memory_mb spelled out in {sorted(seen - allowed)}"
    assert "packager/engines/containers.py" in seen  # the test sees what it looks for
