"""A generated SWE-bench dataset of N tasks of one repository, for scale tests and benchmarks.

`generate(folder, n)` writes, in `folder`:
- `rows.jsonl`: N rows in the SWE-bench card's shape;
- `repos/gen__calc.bundle`: the repository the rows name;
- `recipes.yaml`: one environment for all of them (Debian's python3-pytest, so no index is
  needed).

Task i has its own base commit: commit i adds `calc/mod_i.py` with a wrong constant. Its gold
patch corrects that constant, and its test patch adds `tests/test_mod_i.py`: one FAIL_TO_PASS
test and one PASS_TO_PASS test. All tasks share one environment, so their agent images
differ only in the repository snapshot.

    python -m packager.samples.generate DIR N
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = "gen/calc"
RECIPES = """\
gen/calc@1.0:
  python: "3.11"
  apt-pkgs:
    - python3-pytest
  test_cmd: python -m pytest -rA -p no:cacheprovider
  log_parser: parse_log_pytest
"""
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "gen",
    "GIT_AUTHOR_EMAIL": "gen@example.invalid",
    "GIT_COMMITTER_NAME": "gen",
    "GIT_COMMITTER_EMAIL": "gen@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True
    ).stdout


def _module(i: int, value: int) -> str:
    return f'"""Constant number {i}."""\n\n\ndef value_{i}() -> int:\n    return {value}\n'


def _test(i: int) -> str:
    return (
        f"from calc import mod_{i}\nfrom calc.mod_{i} import value_{i}\n\n\n"
        f"def test_value_{i}():\n    assert value_{i}() == {i * 7}\n\n\n"
        f"def test_documented_{i}():\n    assert mod_{i}.__doc__\n"
    )


def _diff(repo: Path, files: dict[str, str]) -> str:
    """The diff from HEAD to HEAD with `files` written (the worktree is restored)."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "HEAD")
    _git(repo, "reset", "-q", "--hard", "HEAD")
    _git(repo, "clean", "-fdq")
    return diff


def generate(folder: Path, n: int) -> Path:
    """Write the dataset (see the module docstring); returns the rows file."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gen-calc-") as tmp:
        repo = Path(tmp) / "calc"
        repo.mkdir()
        _git(repo, "init", "-q", "-b", "main")
        (repo / "calc").mkdir()
        (repo / "tests").mkdir()
        (repo / "calc" / "__init__.py").write_text('"""Generated constants."""\n')
        (repo / "tests" / "test_base.py").write_text(
            "import calc\n\n\ndef test_package_imports():\n    assert calc.__doc__\n"
        )
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "Initial commit")
        setup = _git(repo, "rev-parse", "HEAD").strip()
        for i in range(n):
            (repo / "calc" / f"mod_{i}.py").write_text(_module(i, i * 7 + 1))
            _git(repo, "add", "-A")
            _git(repo, "commit", "-q", "-m", f"Add constant {i}")
            base = _git(repo, "rev-parse", "HEAD").strip()
            rows.append(
                {
                    "repo": REPO,
                    "instance_id": f"gen__calc-{i}",
                    "base_commit": base,
                    "patch": _diff(repo, {f"calc/mod_{i}.py": _module(i, i * 7)}),
                    "test_patch": _diff(repo, {f"tests/test_mod_{i}.py": _test(i)}),
                    "problem_statement": f"`calc.mod_{i}.value_{i}()` returns {i * 7 + 1}, "
                    f"it should return {i * 7}.\n",
                    "hints_text": "",
                    "created_at": "2024-01-01T00:00:00Z",
                    "version": "1.0",
                    "FAIL_TO_PASS": json.dumps([f"tests/test_mod_{i}.py::test_value_{i}"]),
                    # SWE-bench runs only the test patch's files, so the PASS_TO_PASS test
                    # lives there too (it passes with or without the fix).
                    "PASS_TO_PASS": json.dumps([f"tests/test_mod_{i}.py::test_documented_{i}"]),
                    "environment_setup_commit": setup,
                }
            )
        (folder / "repos").mkdir(exist_ok=True)
        bundle = folder / "repos" / "gen__calc.bundle"
        bundle.unlink(missing_ok=True)
        _git(repo, "bundle", "create", "-q", str(bundle.resolve()), "--all")
    (folder / "recipes.yaml").write_text(RECIPES)
    data = folder / "rows.jsonl"
    data.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return data


if __name__ == "__main__":
    print(generate(Path(sys.argv[1]), int(sys.argv[2])))
