"""Write packager/datasets/harness_specs.json from the SWE-bench harness's own constants.

The harness's per-repository, per-version environment specs (`MAP_REPO_VERSION_TO_SPECS`) and
the per-repository tables beside them (requirement and environment.yml paths, install
overrides, log parsers, file extensions, branches of unreachable base commits) are facts of the
pinned `swebench` release, never typed in by hand. `swebench==4.1.0` is the last release that
carries them (5.x moved environments into each dataset row).

    pip install --no-deps --target .venv/swebench-4.1.0 swebench==4.1.0   # `make install` does it
    python scripts/harness_specs.py [--swebench DIR] [--out FILE]

Only the harness's constants are imported (its package `__init__` pulls in docker, datasets and
more): the two parent packages are stood in for by empty namespaces. The repository -> log
parser tables are read from the parser modules' source (`ast`), not imported (their imports
need the whole harness): each `MAP_REPO_TO_PARSER_*` dict literal, names as the harness wrote
them.
tests/unit/datasets/test_harness_specs.py asserts the shipped file equals what this script writes.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / ".venv" / "swebench-4.1.0"
DEFAULT_OUT = ROOT / "packager" / "datasets" / "harness_specs.json"
RELEASE = "swebench==4.1.0"


def load_tables(source: Path) -> dict[str, Any]:
    """The harness tables, read from a `swebench` install (or unpacked wheel) at `source`."""
    package = source / "swebench"
    if not (package / "harness" / "constants" / "__init__.py").is_file():
        raise SystemExit(
            f"{source}: no swebench harness constants there; install it with "
            f"`pip install --no-deps --target {source} {RELEASE}`"
        )
    for name, path in (("swebench", package), ("swebench.harness", package / "harness")):
        stand_in = types.ModuleType(name)
        stand_in.__path__ = [str(path)]
        sys.modules[name] = stand_in
    import swebench.harness.constants as constants  # type: ignore[import-not-found]

    return {
        "source": RELEASE,
        "specs": constants.MAP_REPO_VERSION_TO_SPECS,
        "reqs_paths": constants.MAP_REPO_TO_REQS_PATHS,
        "env_yml_paths": constants.MAP_REPO_TO_ENV_YML_PATHS,
        "install": constants.MAP_REPO_TO_INSTALL,
        "extensions": constants.MAP_REPO_TO_EXT,
        "parsers": read_parser_tables(package / "harness" / "log_parsers"),
        "base_commit_branches": constants.REPO_BASE_COMMIT_BRANCH,
        "non_test_exts": list(constants.NON_TEST_EXTS),
        "replace_req_packages": read_literal(
            package / "harness" / "test_spec" / "python.py", "REPLACE_REQ_PACKAGES"
        ),
    }


def read_parser_tables(folder: Path) -> dict[str, str]:
    """Repository -> parser name, from every `MAP_REPO_TO_PARSER_<LANG> = {...}` literal."""
    found: dict[str, str] = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("MAP_REPO_TO_PARSER_")
                and isinstance(node.value, ast.Dict)
            ):
                continue
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(value, ast.Name)):
                    raise SystemExit(f"{path}: unexpected entry in {node.targets[0].id}")
                found[str(key.value)] = value.id
    if not found:
        raise SystemExit(f"{folder}: no MAP_REPO_TO_PARSER_* tables found")
    return found


def read_literal(path: Path, name: str) -> Any:
    """The value of a module-level `NAME = <literal>` in a source file (tuples become lists)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            return json.loads(json.dumps(ast.literal_eval(node.value)))
    raise SystemExit(f"{path}: no {name} = <literal> found")


def render(tables: dict[str, Any]) -> str:
    """The file's text: sorted keys, one stable layout."""
    return json.dumps(tables, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swebench", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    text = render(load_tables(args.swebench))
    args.out.write_text(text, encoding="utf-8")
    tables = json.loads(text)
    versions = sum(len(v) for v in tables["specs"].values())
    sys.stdout.write(f"{args.out}: {len(tables['specs'])} repositories, {versions} versions\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
