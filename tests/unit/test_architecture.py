"""The architecture's size limits (docs/architecture.md, issue 19) hold: measured with the same
code as benchmarks/architecture.py, so a module or function grown past its limit fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = "packager/grading/"
"""The in-container runtime ships as one zipapp whose bytes the golden trees pin: exempt."""


def _measure(root: Path) -> Any:
    path = ROOT / "benchmarks" / "architecture.py"
    spec = importlib.util.spec_from_file_location("architecture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations there
    try:
        spec.loader.exec_module(module)
        return module.measure(root)
    finally:
        del sys.modules[spec.name]


def test_no_module_or_function_outgrows_its_limit() -> None:
    m = _measure(ROOT)
    assert [where for _, where in m.big_modules if not where.startswith(RUNTIME)] == []
    assert [where for _, where in m.long_functions if not where.startswith(RUNTIME)] == []


def test_the_cli_stays_thin() -> None:
    """Thin by structure, not by a line cap: the import contract `cli` (pyproject.toml) keeps
    the CLI from driving engines, images or stages itself, test_layers.py keeps the pipeline out
    of `import packager.cli`; here, no flag is declared twice and errors are handled once."""
    m = _measure(ROOT)
    assert m.repeated_flags == {} and m.repeated_parameters == 0
    assert m.handlers == 1


def test_the_measure_sees_a_long_function_and_a_big_module(tmp_path: Path) -> None:
    # A checkout with one 81-line function in an 801-line module is caught.
    package = tmp_path / "packager"
    (package / "cli").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    (package / "big.py").write_text(f"def long():\n{body}\n" + "\n" * 720)
    (package / "cli" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    m = _measure(tmp_path)
    assert m.long_functions == [(81, "packager/big.py:long")]
    assert m.big_modules == [(801, "packager/big.py")]


def test_the_measure_sees_every_way_a_flag_is_declared(tmp_path: Path) -> None:
    # `--executor` declared through the CLI's `opt(...)` in two groups and `--out` through
    # `typer.Option` in two signatures: both are repeats.
    cli = tmp_path / "packager" / "cli"
    cli.mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (cli / "a.py").write_text(
        "class A:\n    name: str = opt('--executor', metavar='local|ray')\n"
        "class B:\n    executor: str = options.opt('--executor')\n"
        "def f(out: Annotated[str, typer.Option('--out')]) -> None: ...\n"
        "def g(out: Annotated[str, typer.Option('--out')]) -> None: ...\n"
    )
    m = _measure(tmp_path)
    assert m.repeated_flags == {"--executor": 2, "--out": 2}
