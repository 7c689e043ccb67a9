"""Build the embedded sample dataset: five tiny repositories, one row per dataset schema.

The inputs live in ``src/<name>/`` (the repository tree at its base commit, the gold and test
patches, the problem statement and schema-specific pieces). This script rebuilds every git
repository from them in a temporary directory with a fixed identity and fixed dates, so the
commit SHAs never change, then writes:

* ``repos/<owner>__<name>.bundle`` (``git bundle create --all``) for each repository-backed row;
* ``rows.jsonl``: the five rows, one JSON object per line, keys sorted.

Only the standard library and the git CLI are used. Run it from anywhere::

    python3 packager/samples/make_samples.py
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
REPOS = HERE / "repos"
ROWS = HERE / "rows.jsonl"

AUTHOR = ("Sample Author", "samples@example.invalid")
FIRST_DATE = datetime(2024, 1, 1, tzinfo=UTC)
SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}

# `-c` settings on every git call: nothing in the user's or system's config may change a SHA.
GIT_CONFIG = {
    "init.defaultBranch": "main",
    "commit.gpgsign": "false",
    "tag.gpgsign": "false",
    "core.autocrlf": "false",
    "core.fileMode": "true",
    "core.hooksPath": os.devnull,
    "gc.auto": "0",
    "pack.threads": "1",
}

# The SWE-bench card's rows carry no environment: the samples ship recipes.yaml (see RECIPES).
RECIPES = """\
# Environments for the sample rows that carry none (SWE-bench rows): `--recipes` format,
# keyed by instance id, owner/name@version or owner/name. Written by make_samples.py.
samples/textkit@1.0:
  python: "3.11"
  apt-pkgs:
    - python3-pytest
  test_cmd: python -m pytest -rA -p no:cacheprovider
  log_parser: parse_log_pytest
"""
INTSET_INSTALL = {
    "python": None,
    "packages": None,
    "pip_packages": None,
    "reqs_path": None,
    "env_yml_path": None,
    "pre_install": None,
    "apt-pkgs": ["golang-go", "ca-certificates"],
    "install": None,
    "test_cmd": "go test -v ./...",
    "log_parser": "parse_log_gotest",
    "env_vars": {"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"},
    "no_use_env": None,
}


def kvstore_dockerfile(base: str) -> str:
    """The environment as an EC-SWE author writes it: it clones the repository."""
    return (
        "FROM debian:bookworm-slim\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends nodejs git"
        " ca-certificates python3 && rm -rf /var/lib/apt/lists/*\n"
        "RUN git clone https://github.com/samples/kvstore /workspace/repo"
        f" && cd /workspace/repo && git checkout {base}\n"
        "WORKDIR /workspace/repo\n"
    )


def iso(when: datetime) -> str:
    """Format a UTC datetime the way SWE-bench's ``created_at`` does."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def tree_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """Yield ``(posix path, content)`` for every file under ``root``, sorted by path."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not SKIPPED_PARTS.intersection(rel.parts):
            yield rel.as_posix(), path.read_bytes()


def text(name: str, file: str) -> str:
    """Read ``src/<name>/<file>`` as UTF-8 text."""
    return (SRC / name / file).read_text(encoding="utf-8")


class Repo:
    """A git repository built commit by commit with a fixed identity and fixed dates."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commits = 0
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(path.parent),
            "LANG": "C",
            "TZ": "UTC",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": AUTHOR[0],
            "GIT_AUTHOR_EMAIL": AUTHOR[1],
            "GIT_COMMITTER_NAME": AUTHOR[0],
            "GIT_COMMITTER_EMAIL": AUTHOR[1],
        }
        path.mkdir(parents=True)
        self.git("init", "-q", "--template=")

    @property
    def date(self) -> datetime:
        """The date of the next commit: one day after the previous one."""
        return FIRST_DATE + timedelta(days=self.commits)

    def git(self, *args: str, date: datetime | None = None) -> str:
        """Run git in the repository (dated ``date`` or the next commit's date)."""
        options = [arg for key, value in GIT_CONFIG.items() for arg in ("-c", f"{key}={value}")]
        env = dict(self.env)
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = (date or self.date).isoformat()
        done = subprocess.run(
            ["git", *options, *args],
            cwd=self.path,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.path}:\n{done.stderr}")
        return done.stdout.strip()

    def write(self, files: dict[str, bytes]) -> None:
        """Write files into the work tree."""
        for rel, content in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)

    def apply(self, patch: Path) -> None:
        """Apply a patch file to the work tree (fails loudly if it does not apply)."""
        self.git("apply", "--whitespace=nowarn", str(patch))

    def commit(self, message: str) -> str:
        """Commit everything in the work tree and return the new commit's SHA."""
        self.git("add", "-A")
        self.git("commit", "-q", "--no-verify", "-m", message)
        self.commits += 1
        return self.git("rev-parse", "HEAD")

    def tag(self, name: str, message: str) -> None:
        """Create an annotated tag on HEAD, dated like the last commit."""
        last = self.date - timedelta(days=1)
        self.git("tag", "-a", name, "-m", message, date=last)

    def bundle(self, repo: str) -> None:
        """Write ``repos/<owner>__<name>.bundle`` with every ref."""
        REPOS.mkdir(exist_ok=True)
        out = REPOS / (repo.replace("/", "__") + ".bundle")
        self.git("bundle", "create", "-q", str(out), "--all")


def build_history(repo: Repo, name: str, steps: list[tuple[str, list[str] | None]]) -> str:
    """Commit ``src/<name>/base`` in steps (paths added per step; None = the rest)."""
    base = dict(tree_files(SRC / name / "base"))
    for message, paths in steps:
        chosen = base if paths is None else {path: base[path] for path in paths}
        repo.write(chosen)
        sha = repo.commit(message)
    return sha


def textkit(work: Path) -> dict[str, Any]:
    """SWE-bench row: Python + pytest, with a later fix commit and tag past the base."""
    name, slug = "textkit", "samples/textkit"
    repo = Repo(work / name)
    steps: list[tuple[str, list[str] | None]] = [
        (
            "Add slugify",
            [
                ".gitignore",
                "README.md",
                "textkit/__init__.py",
                "textkit/slug.py",
                "tests/test_slug.py",
            ],
        ),
        ("Add title_case", None),
    ]
    base = build_history(repo, name, steps)
    repo.apply(SRC / name / "fix.patch")
    repo.apply(SRC / name / "test.patch")
    created = repo.date
    repo.commit("Transliterate non-ASCII letters in slugify")
    repo.tag("v1.1", "textkit 1.1")
    repo.bundle(slug)
    problem = text(name, "problem.md")
    oracle_text = (
        "You will be provided with a partial code base and an issue statement explaining a "
        "problem to resolve.\n<issue>\n"
        + problem
        + "</issue>\n<code>\n[start of textkit/slug.py]\n"
        + (SRC / name / "base" / "textkit" / "slug.py").read_text(encoding="utf-8")
        + "[end of textkit/slug.py]\n</code>\n"
        "I need you to solve this issue by generating a single patch file that I can apply "
        "directly to this repository using git apply.\n"
    )
    return {
        "instance_id": "samples__textkit-1",
        "text": oracle_text,
        "repo": slug,
        "base_commit": base,
        "patch": text(name, "fix.patch"),
        "test_patch": text(name, "test.patch"),
        "problem_statement": problem,
        "hints_text": "",
        "created_at": iso(created),
        "version": "1.0",
        "FAIL_TO_PASS": json.dumps(
            [
                "tests/test_slug.py::test_accented_letters",
                "tests/test_slug.py::test_compatibility_characters",
            ]
        ),
        # The harness runs the test files the test patch touches: every listed test is there.
        "PASS_TO_PASS": json.dumps(
            [
                "tests/test_slug.py::test_basic",
                "tests/test_slug.py::test_collapses_separators",
                "tests/test_slug.py::test_custom_separator",
            ]
        ),
        "environment_setup_commit": base,
    }


def intset(work: Path) -> dict[str, Any]:
    """SWE-rebench row: Go (Debian's Go 1.19), `go test -v` names incl. subtests."""
    name, slug = "intset", "samples/intset"
    repo = Repo(work / name)
    steps: list[tuple[str, list[str] | None]] = [
        ("Initial commit", ["README.md", "go.mod"]),
        ("Add Set with Union, Intersect and Sorted", None),
    ]
    base = build_history(repo, name, steps)
    created = repo.date
    repo.bundle(slug)
    return {
        "instance_id": "samples__intset-2",
        "repo": slug,
        "base_commit": base,
        "patch": text(name, "fix.patch"),
        "test_patch": text(name, "test.patch"),
        "problem_statement": text(name, "problem.md"),
        "hints_text": "",
        "created_at": iso(created),
        "version": "1.0",
        "FAIL_TO_PASS": json.dumps(
            ["TestIntersect", "TestIntersect/partial_overlap", "TestIntersect/disjoint_sets"]
        ),
        "PASS_TO_PASS": json.dumps(
            [
                "TestSet",
                "TestSet/contains_present",
                "TestSet/contains_missing",
                "TestUnion",
                "TestSorted",
            ]
        ),
        "environment_setup_commit": base,
        "meta": json.dumps(
            {"is_lite": True, "has_test_patch": True, "num_modified_files": 1, "llm_score": {}}
        ),
        "license_name": "MIT",
        "install_config": json.dumps(INTSET_INSTALL),
        # A published image under the harness's naming; offline it is absent, so the row is built
        # from install_config (`--prebuilt auto`).
        "docker_image": "swerebench/sweb.eval.x86_64.samples_1776_intset-2",
    }


def kvstore(work: Path) -> dict[str, Any]:
    """EC-SWE row: Node's test runner, scored by a weighted-criteria grader script."""
    name, slug = "kvstore", "samples/kvstore"
    repo = Repo(work / name)
    steps: list[tuple[str, list[str] | None]] = [
        ("Initial commit", ["README.md", "package.json"]),
        ("Add parse and serialize", None),
    ]
    base = build_history(repo, name, steps)
    repo.bundle(slug)
    grader_dir = SRC / name / "grader"
    criteria = json.loads((grader_dir / "criteria.json").read_text(encoding="utf-8"))
    rewards = [0.2, 0.2, 0.7, 0.2, 1.0]
    return {
        "instance_id": "samples__kvstore-3",
        "repo": slug,
        "base_commit": base,
        "setup_patch": text(name, "setup.patch"),
        "problem_statement": text(name, "problem.md"),
        "patch": text(name, "fix.patch"),
        "test_patch": text(name, "test.patch"),
        "patch_files": ["kv.js"],
        "grader": [{"criterion": c["description"], "weight": float(c["weight"])} for c in criteria],
        "grader_files": [
            {
                "path": "grader/grade.py",
                "encoding": "base64",
                "content": base64.b64encode((grader_dir / "grade.py").read_bytes()).decode(),
            },
            {
                "path": "grader/criteria.json",
                "encoding": "utf-8",
                "content": (grader_dir / "criteria.json").read_text(encoding="utf-8"),
            },
        ],
        "dockerfile": kvstore_dockerfile(base),
        "language": "JavaScript",
        "repo_license": "MIT",
        "hud_task": "kvstore_equals_in_values",
        "difficulty": "medium",
        "agent_runs": len(rewards),
        "agent_rewards": rewards,
        "agent_mean_reward": round(sum(rewards) / len(rewards), 6),
        "agent_solve_rate": round(sum(r == 1.0 for r in rewards) / len(rewards), 6),
        "agent_models": ["sample-model-a", "sample-model-b"],
        "gold_reward": 1.0,
        "base_reward": 0.2,
    }


def inventory(work: Path) -> dict[str, Any]:
    """PDL row: the repository inline, hidden tests added by test_patch, a reward formula that
    lost a `*`, and a patch policy.
    """
    name = "inventory"
    files = [
        {"content": content.decode("utf-8"), "path": path}
        for path, content in tree_files(SRC / name / "files")
    ]
    hidden = dict(tree_files(SRC / name / "hidden"))
    test_patch = "".join(new_file_diff(path, data.decode("utf-8")) for path, data in hidden.items())
    hidden_ids = [
        "tests/hidden/test_hidden.py::test_remove_more_than_on_hand_raises",
        "tests/hidden/test_hidden.py::test_failed_remove_leaves_stock_unchanged",
        "tests/hidden/test_hidden.py::test_remove_unknown_sku_raises",
    ]
    public_ids = [
        "tests/public/test_public.py::test_add_and_count",
        "tests/public/test_public.py::test_remove_part_of_the_stock",
        "tests/public/test_public.py::test_rejects_non_positive_quantities",
    ]
    return {
        "instance_id": "samples__inventory-4",
        "task_id": "samples_inventory_004",
        "task_version": 1,
        "tier": "T1",
        "domain": "stock ledger",
        "problem_statement": text(name, "problem.md"),
        "patch": text(name, "fix.patch"),
        "test_patch": test_patch,
        "FAIL_TO_PASS": hidden_ids,
        "PASS_TO_PASS": public_ids,
        "files": files,
        "patch_policy_allowed": ["src/**"],
        "patch_policy_forbidden": ["tests/**", "requirements.lock", "pyproject.toml"],
        "token_budget": 250000,
        "hidden_test_count": len(hidden_ids),
        "public_test_count": len(public_ids),
        "graded_ladder_rungs": ["cheat.diff"],
        # Written as the card's rows are: the `*` after each number is lost but the last.
        "reward_formula": "0.80hidden_pass_fraction + 0.15public_regression + 0.05*build_health",
    }


def new_file_diff(path: str, content: str) -> str:
    """A git diff adding one text file."""
    lines = content.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def todo_web(work: Path) -> dict[str, Any]:
    """SWEeper row: a Node web app judged by browser workflows against a reference commit."""
    name, slug = "todo-web", "samples/todo-web"
    repo = Repo(work / name)
    steps: list[tuple[str, list[str] | None]] = [
        ("Initial commit", ["README.md", "package.json"]),
        ("Add todo page and JSON API", None),
    ]
    base = build_history(repo, name, steps)
    repo.apply(SRC / name / "fix.patch")
    reference = repo.commit("Reject blank todo titles")
    repo.bundle(slug)
    return {
        "case_id": "samples__todo-web-5",
        "slug": "todo-web",
        "repo": f"https://github.com/{slug}",
        "base_commit": base,
        "reference_commit": reference,
        "task_scoped": "Find and fix issues in the todo list's item entry.",
        "task_specified": text(name, "problem.md"),
        "pr": 7,
        "issue": None,
        "workflows": text(name, "workflows.yaml"),
    }


def main() -> None:
    """Rebuild every sample repository, bundle and row."""
    for old in REPOS.glob("*.bundle"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="samples-") as tmp:
        work = Path(tmp)
        rows = [builder(work) for builder in (textkit, intset, kvstore, inventory, todo_web)]
    lines = [json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows]
    ROWS.write_text("".join(lines), encoding="utf-8")
    (HERE / "recipes.yaml").write_text(RECIPES, encoding="utf-8")
    for row in rows:
        print(row.get("instance_id") or row["case_id"], row.get("base_commit", "(inline files)"))


if __name__ == "__main__":
    main()
