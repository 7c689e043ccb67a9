"""The architecture's size measures (issue 19), read from the source with Python's `ast`.

    python benchmarks/architecture.py [ROOT]

Prints: modules over 800 lines, functions over 80 lines (end_lineno - lineno + 1, docstring
included), the CLI package's lines, its option flags declared more than once and its
`except PackagerError` handlers, and the number of test functions. Exit 0 always: this measures,
the closing note and docs/architecture.md compare.
"""

from __future__ import annotations

import ast
import collections
import sys
from dataclasses import dataclass
from pathlib import Path

MODULE_LIMIT = 800
FUNCTION_LIMIT = 80


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "samples" not in p.parts)


OPTION_CALLS = frozenset({"Option", "opt"})
"""The calls that declare a flag: `typer.Option("--flag", ...)` and the CLI's own
`opt("--flag", ...)` (a group field), bare or through a module."""


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _option_flags(tree: ast.AST) -> list[str]:
    """The first flag of every flag declaration (`OPTION_CALLS`) under `tree`."""
    flags = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node.func) not in OPTION_CALLS:
            continue
        if not node.args:
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            flags.append(first.value)
    return flags


def _repeated_parameters(tree: ast.AST) -> int:
    """Command parameters that repeat an option another function already declares: the same
    annotation alias (`DatasetOpt`, ...) or the same `typer.Option` flag in two signatures.
    """
    seen = collections.Counter[str]()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for arg in node.args.args + node.args.kwonlyargs:
            if arg.annotation is None:
                continue
            flags = _option_flags(arg.annotation)
            if flags:
                seen[flags[0]] += 1
            elif isinstance(arg.annotation, ast.Name) and arg.annotation.id.endswith(
                ("Opt", "Arg")
            ):
                seen[arg.annotation.id] += 1
    return sum(n - 1 for n in seen.values() if n > 1)


def _handlers(tree: ast.AST, name: str) -> int:
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            count += any(isinstance(n, ast.Name) and n.id == name for n in names)
    return count


@dataclass
class Measures:
    """The architecture's size measures of one checkout."""

    big_modules: list[tuple[int, str]]
    long_functions: list[tuple[int, str]]
    cli_lines: int
    cli_files: int
    repeated_flags: dict[str, int]
    repeated_parameters: int
    handlers: int
    tests: int


def measure(root: Path) -> Measures:
    """Read the measures of the checkout at `root`."""
    package = root / "packager"
    big, long_functions = [], []
    for path in _python_files(package):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(root))
        if len(text.splitlines()) > MODULE_LIMIT:
            big.append((len(text.splitlines()), where))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LIMIT:
                    long_functions.append((length, f"{where}:{node.name}"))
    cli = package / "cli"
    cli_files = _python_files(cli) if cli.is_dir() else [package / "cli.py"]
    cli_lines, flags, handlers, repeats = 0, collections.Counter[str](), 0, 0
    for path in cli_files:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        cli_lines += len(text.splitlines())
        flags.update(_option_flags(tree))
        handlers += _handlers(tree, "PackagerError")
        repeats += _repeated_parameters(tree)
    tests = sum(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        for path in _python_files(root / "tests")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )
    repeated = {flag: n for flag, n in flags.items() if n > 1}
    return Measures(
        sorted(big, reverse=True), sorted(long_functions, reverse=True), cli_lines,
        len(cli_files), repeated, repeats, handlers, tests,
    )  # fmt: skip


def main(root: Path) -> None:
    """Print the measures for the checkout at `root`."""
    m = measure(root)
    print(f"modules over {MODULE_LIMIT} lines: {len(m.big_modules)}")
    for lines, where in m.big_modules:
        print(f"  {lines:5d}  {where}")
    print(f"functions over {FUNCTION_LIMIT} lines: {len(m.long_functions)}")
    for length, where in m.long_functions:
        print(f"  {length:5d}  {where}")
    print(f"cli: {m.cli_lines} lines in {m.cli_files} file(s)")
    print(f"cli: option flags declared more than once: {len(m.repeated_flags)}")
    print(f"cli: command parameters repeating another command's option: {m.repeated_parameters}")
    print(f"cli: `except PackagerError` handlers: {m.handlers}")
    print(f"test functions: {m.tests}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
