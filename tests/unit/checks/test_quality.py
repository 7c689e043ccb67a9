"""Quality checks (packager/checks/quality/): hunks, ablations applied with real git,
instruction leaks, base-tree lookups, and the report and its cache with a stand-in for the engine's
runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from packager.checks import quality
from packager.checks.quality import (
    ablated_patch,
    ablation_plan,
    base_tree_names,
    cached_quality,
    files_names,
    instruction_leaks,
    is_trivial_line,
    quality_path,
    run_quality,
    skipped,
    split_hunks,
    write_quality,
)
from packager.errors import InputError
from packager.models.spec import (
    Expectations,
    Grading,
    Provenance,
    Repo,
    RunResult,
    TaskResult,
    TaskSpec,
)
from packager.settings import VerifyConfig
from packager.storage import OutputPaths

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, input=data, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode("utf-8", "surrogateescape")


def numbered(prefix: str, n: int) -> str:
    return "".join(f"{prefix}_line_{i} = {i}\n" for i in range(1, n + 1))


BASE: dict[str, bytes] = {
    "data.bin": bytes(range(256)) * 4,
    "pkg/a.py": numbered("a", 40).encode(),
    "pkg/b.py": numbered("b", 20).encode(),
    "pkg/moved.py": numbered("moved", 20).encode(),
    "pkg/old.py": numbered("old", 5).encode(),
    "q.sql": b"select 1;\n-- old comment\nselect 2;\n",
    "tail.txt": b"one\ntwo\nthree",
}


def _replace(old: str, new: str) -> Callable[[bytes | None], bytes | None]:
    def edit(data: bytes | None) -> bytes | None:
        assert data is not None and old.encode() in data
        return data.replace(old.encode(), new.encode(), 1)

    return edit


@dataclass(frozen=True)
class Edit:
    """One change of the gold patch; `hunk` ones make exactly one hunk."""

    path: str
    change: Callable[[bytes | None], bytes | None]
    hunk: bool = True


EDITS = [
    Edit("data.bin", lambda d: (d or b"") + b"\0\1\2", hunk=False),
    Edit("pkg/a.py", _replace("a_line_3 = 3\n", "a_line_3 = 'three'\nextra_a = 1\n")),
    Edit("pkg/a.py", _replace("a_line_30 = 30\n", "a_line_30 = 'thirty'\n")),
    Edit("pkg/b.py", _replace("b_line_10 = 10\n", "")),
    Edit("pkg/new.py", lambda _d: numbered("new", 3).encode()),
    Edit("pkg/old.py", lambda _d: None),
    Edit("pkg/renamed.py", _replace("moved_line_5 = 5\n", "moved_line_5 = 'five'\n")),
    Edit("q.sql", _replace("-- old comment\n", "++ new comment\n")),
    Edit("tail.txt", _replace("three", "THREE")),
]
"""`pkg/moved.py` becomes `pkg/renamed.py` (a rename with an edit): see `tree_with`."""


def tree_with(edits: list[Edit]) -> dict[str, bytes]:
    tree = dict(BASE)
    tree["pkg/renamed.py"] = tree.pop("pkg/moved.py")
    for edit in edits:
        result = edit.change(tree.get(edit.path))
        if result is None:
            tree.pop(edit.path, None)
        else:
            tree[edit.path] = result
    return tree


def write_tree(repo: Path, tree: dict[str, bytes]) -> None:
    for path in git(repo, "ls-files", "-z").split("\0"):
        if path:
            (repo / path).unlink()
    for path, data in tree.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)


def read_tree(repo: Path) -> dict[str, bytes]:
    return {
        p.relative_to(repo).as_posix(): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A repository at its base commit, its commit id, and the gold patch of every edit."""
    root = tmp_path_factory.mktemp("repo")
    git(root, "init", "-q")
    write_tree(root, BASE)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    write_tree(root, tree_with(EDITS))
    git(root, "add", "-A")
    patch = git(root, "diff", "--cached", "--binary", "-M", base)
    git(root, "reset", "-q", "--hard", base)
    return root, base, patch


def apply(repo: Path, base: str, patch: str) -> dict[str, bytes]:
    """`git apply --check`, then the real apply; the resulting tree (the repo is reset)."""
    git(repo, "reset", "-q", "--hard", base)
    git(repo, "clean", "-fdq")
    data = patch.encode("utf-8", "surrogateescape")
    git(repo, "apply", "--check", "-", data=data)
    git(repo, "apply", "-", data=data)
    tree = read_tree(repo)
    git(repo, "reset", "-q", "--hard", base)
    git(repo, "clean", "-fdq")
    return tree


# --------------------------------------------------------------------------- split_hunks


def test_split_hunks_reads_every_kind_of_file_section(repo: tuple[Path, str, str]) -> None:
    _, _, patch = repo
    files = {f.path: f for f in split_hunks(patch)}
    assert set(files) == {
        "data.bin",
        "pkg/a.py",
        "pkg/b.py",
        "pkg/new.py",
        "pkg/old.py",
        "pkg/renamed.py",
        "q.sql",
        "tail.txt",
    }
    assert files["data.bin"].binary and skipped(files["data.bin"]) == "binary"
    assert [(h.old_start, h.old_len, h.new_start, h.new_len) for h in files["pkg/a.py"].hunks] == [
        (1, 6, 1, 7),
        (27, 7, 28, 7),
    ]
    assert files["pkg/new.py"].status == "added" and files["pkg/new.py"].old_path is None
    assert files["pkg/old.py"].status == "deleted"
    renamed = files["pkg/renamed.py"]
    assert renamed.status == "renamed" and renamed.old_path == "pkg/moved.py"
    assert len(renamed.hunks) == 1
    # A removed `-- ` line and an added `++ ` line read as `--- `/`+++ ` inside the hunk.
    sql = files["q.sql"]
    assert len(sql.hunks) == 1 and sql.hunks[0].added == ((2, "++ new comment"),)
    assert files["tail.txt"].hunks[0].text.endswith("\\ No newline at end of file\n")
    # Every section together is the patch, byte for byte.
    assert "".join(f.text for f in split_hunks(patch)) == patch
    assert sum(len(f.hunks) for f in files.values()) == 8


def test_hunk_line_numbers_and_ranges(repo: tuple[Path, str, str]) -> None:
    files = {f.path: f for f in split_hunks(repo[2])}
    first = files["pkg/a.py"].hunks[0]
    assert first.added == ((3, "a_line_3 = 'three'"), (4, "extra_a = 1"))
    assert first.where == "pkg/a.py: new lines 1-7, old lines 1-6"
    deletion = files["pkg/old.py"].hunks[0]
    assert deletion.where == "pkg/old.py: new none (after line 0), old lines 1-5"


def test_split_hunks_reads_pdl_style_patches_without_git_headers() -> None:
    patch = (
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/src/extra.py\n"
        "@@ -0,0 +1,2 @@\n"
        "+def helper():\n"
        "+    return 1\n"
        "--- a/src/stock.py\n"
        "+++ b/src/stock.py\n"
        "@@ -17,3 +17,3 @@ class Inventory:\n"
        "         if qty <= 0:\n"
        "-            x = 1\n"
        "+            x = 2\n"
        "         pass\n"
    )
    files = split_hunks(patch)
    assert [(f.path, f.status, len(f.hunks)) for f in files] == [
        ("src/extra.py", "added", 1),
        ("src/stock.py", "modified", 1),
    ]
    assert "".join(f.text for f in files) == patch


def test_text_outside_sections_is_kept() -> None:
    patch = (
        "Subject: a fix\n\n"
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
        "-- \n2.39.5\n"
    )
    files = split_hunks(patch)
    assert [f.path for f in files] == ["x.py"]
    plan = ablation_plan(patch)
    assert ablated_patch(patch, plan[0]) == "Subject: a fix\n\n-- \n2.39.5\n"


# --------------------------------------------------------------------------- ablation_plan


def _units(patch: str) -> set[tuple[int, int]]:
    return {(f.index, h) for f in split_hunks(patch) if not skipped(f) for h in range(len(f.hunks))}


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 7, 8, 12])
def test_ablation_plan_covers_every_hunk_once_within_budget(
    repo: tuple[Path, str, str], budget: int
) -> None:
    patch = repo[2]
    plan = ablation_plan(patch, budget)
    assert 1 <= len(plan) <= budget
    removed = [u for a in plan for u in a.removes]
    assert sorted(removed) == sorted(_units(patch))  # every hunk, each exactly once
    files_with_hunks = {f.path for f in split_hunks(patch) if f.hunks and not f.binary}
    assert {p for a in plan for p in a.files} == files_with_hunks
    assert [a.index for a in plan] == list(range(1, len(plan) + 1))
    if budget >= 8:
        assert all(len(a.removes) == 1 for a in plan)  # one hunk each
    elif budget >= 7:
        assert all(len(a.files) == 1 for a in plan)  # grouped per file, files never mixed


def test_ablation_plan_splits_one_big_file_to_use_the_budget() -> None:
    body = "".join(f"@@ -{10 * i + 1} +{10 * i + 1} @@\n-x{i}\n+y{i}\n" for i in range(10))
    patch = "--- a/f.py\n+++ b/f.py\n" + body + "--- a/g.py\n+++ b/g.py\n@@ -1 +1 @@\n-a\n+b\n"
    plan = ablation_plan(patch, 4)
    assert len(plan) == 4
    assert sorted(u for a in plan for u in a.removes) == sorted(_units(patch))
    # Halves of the biggest group until the budget is used: 10 -> 5 + 5 -> (3 + 2) + 5.
    assert [len(a.removes) for a in plan] == [3, 2, 5, 1]
    assert [a.files for a in plan] == [("f.py",)] * 3 + [("g.py",)]
    with pytest.raises(ValueError, match="at least 1"):
        ablation_plan(patch, 0)


# --------------------------------------------------------------------------- ablated_patch


@pytest.mark.parametrize("budget", [12, 3])
def test_every_ablated_patch_applies_and_leaves_out_exactly_its_hunks(
    repo: tuple[Path, str, str], budget: int
) -> None:
    root, base, patch = repo
    files = split_hunks(patch)
    hunk_edits = {}  # (file index, hunk index) -> the edit that made it
    for f in files:
        mine = [e for e in EDITS if e.path == f.path and e.hunk]
        for h in range(len(f.hunks)):
            hunk_edits[(f.index, h)] = mine[h]
    assert apply(root, base, patch) == tree_with(EDITS)
    for ablation in ablation_plan(patch, budget):
        left_out = {id(hunk_edits[u]) for u in ablation.removes}
        expected = tree_with([e for e in EDITS if id(e) not in left_out])
        assert apply(root, base, ablated_patch(patch, ablation)) == expected, ablation


def test_later_hunks_keep_working_numbers(repo: tuple[Path, str, str]) -> None:
    patch = repo[2]
    a_py = next(f for f in split_hunks(patch) if f.path == "pkg/a.py")
    first = next(a for a in ablation_plan(patch) if a.removes == ((a_py.index, 0),))
    without = {f.path: f for f in split_hunks(ablated_patch(patch, first))}["pkg/a.py"]
    # The first hunk added a line; without it the second starts one line earlier (exact).
    assert [(h.old_start, h.new_start) for h in without.hunks] == [(27, 27)]


def test_a_rename_whose_edit_is_left_out_stays_a_rename(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    renamed = next(f for f in split_hunks(patch) if f.path == "pkg/renamed.py")
    ablation = next(a for a in ablation_plan(patch) if a.files == ("pkg/renamed.py",))
    tree = apply(root, base, ablated_patch(patch, ablation))
    assert "pkg/moved.py" not in tree and tree["pkg/renamed.py"] == BASE["pkg/moved.py"]
    assert renamed.header.startswith("diff --git a/pkg/moved.py b/pkg/renamed.py")


def test_original_numbers_are_also_accepted_by_git_apply(repo: tuple[Path, str, str]) -> None:
    """What the issue asked to check: dropping a hunk without renumbering the next one still
    applies (git apply takes it as an offset); the module renumbers anyway, so `patch` and
    `--3way` see an exact diff too."""
    root, base, patch = repo
    a_py = next(f for f in split_hunks(patch) if f.path == "pkg/a.py")
    crude = patch.replace(a_py.hunks[0].text, "", 1)
    tree = apply(root, base, crude)
    assert tree["pkg/a.py"] == tree_with([e for e in EDITS if e is not EDITS[1]])["pkg/a.py"]


def test_setup_patch_then_gold_on_the_same_file_applies(repo: tuple[Path, str, str]) -> None:
    """An EC-SWE setup patch and a gold patch touching the same file, one after the other in a
    candidate (what `candidate_bytes` makes), apply in one `git apply`."""
    root, base, _ = repo
    b_py = root / "pkg" / "b.py"
    b_py.write_bytes(BASE["pkg/b.py"].replace(b"b_line_1 = 1\n", b"b_line_1 = 'one'\n"))
    setup = git(root, "diff")
    git(root, "commit", "-qam", "setup")
    b_py.write_bytes(b_py.read_bytes().replace(b"b_line_10 = 10\n", b""))
    gold = git(root, "diff")
    expected = b_py.read_bytes()
    git(root, "reset", "-q", "--hard", base)
    candidate = quality.candidate_bytes(_spec(setup_patch=setup, gold=gold), gold).decode()
    assert candidate == setup + gold
    assert apply(root, base, candidate)["pkg/b.py"] == expected


# --------------------------------------------------------------------------- leaks

GOLD = (
    "diff --git a/textkit/slug.py b/textkit/slug.py\n"
    "--- a/textkit/slug.py\n"
    "+++ b/textkit/slug.py\n"
    "@@ -1,5 +1,7 @@\n"
    ' """URL slugs."""\n'
    " \n"
    " import re\n"
    "+import unicodedata\n"
    "+# fold compatibility characters first\n"
    " \n"
    ' _SEPARATORS = re.compile(r"[^a-z0-9]+")\n'
    '@@ -10,2 +12,3 @@ def slugify(text: str, sep: str = "-") -> str:\n'
    "-    text = text.lower()\n"
    '+    text = unicodedata.normalize("NFKD", text)\n'
    "+    return text\n"
    "     pass\n"
)
TEST_PATCH = (
    "diff --git a/tests/test_slug.py b/tests/test_slug.py\n"
    "--- a/tests/test_slug.py\n"
    "+++ b/tests/test_slug.py\n"
    "@@ -11,3 +11,6 @@ def test_collapses_separators() -> None:\n"
    " def test_custom_separator() -> None:\n"
    '     assert slugify("x") == "x"\n'
    " \n"
    "+def test_accented_letters() -> None:\n"
    '+    assert slugify("Crème") == "creme"\n'
    "+\n"
    "diff --git a/tests/test_fold.py b/tests/test_fold.py\n"
    "new file mode 100644\n"
    "--- /dev/null\n"
    "+++ b/tests/test_fold.py\n"
    "@@ -0,0 +1,2 @@\n"
    "+def test_folds_ligatures() -> None:\n"
    "+    pass\n"
)
F2P = ("tests/test_slug.py::test_accented_letters", "tests/test_fold.py::test_folds_ligatures")
BASE_FILES = {
    "textkit/slug.py": b'"""URL slugs."""\n\nimport re\n\ndef slugify(text, sep="-"):\n'
    b"    text = text.lower()\n",
    "tests/test_slug.py": b"def test_custom_separator() -> None:\n    pass\n",
}


def _spec(
    instruction: str = "Fix slugify.",
    *,
    gold: str = GOLD,
    setup_patch: str | None = None,
    rule: str = "all_pass",
    schema: str = "swebench",
    metadata: dict[str, Any] | None = None,
    nop_reward: float | None = None,
) -> TaskSpec:
    grading: dict[str, Any] = {"rule": rule, "test_patch": TEST_PATCH, "fail_to_pass": F2P}
    if rule == "formula":
        grading.update(formula="hidden_pass_fraction", hidden_tests=F2P, fail_to_pass=())
    return TaskSpec(
        provenance=Provenance(
            dataset="ds",
            split="test",
            schema_name=schema,  # type: ignore[arg-type]
            instance_id="x__y-1",
            slug="x__y-1",
            metadata=metadata or {},
        ),
        instruction=instruction,
        repo=Repo(name="x/y", base_commit="0" * 40, setup_patch=setup_patch),
        gold_patch=gold,
        grading=Grading(**grading),
        expectations=Expectations(nop_reward=nop_reward),
    )


IN_BASE = files_names(BASE_FILES)


@pytest.mark.parametrize(
    ("line", "trivial"),
    [
        ("return text", True),
        ("pass", True),
        ("else:", True),
        ("});", True),
        ("import unicodedata", True),
        ("from collections import OrderedDict", True),
        ("const fs = require('fs');", True),
        ("# fold compatibility characters first", True),
        ('"""Return the slug."""', True),
        ('text = unicodedata.normalize("NFKD", text)', False),
        ("from textkit.fold import fold_ascii", False),
        ("if qty > have:", False),
        ("if x > y:", True),
        ('raise ValueError(f"cannot remove {qty}")', False),
    ],
)
def test_trivial_lines(line: str, trivial: bool) -> None:
    assert is_trivial_line(line) is trivial


def test_an_instruction_quoting_an_added_line_leaks() -> None:
    spec = _spec(
        "slugify drops accents. Use\n\n```python\n"
        '    text = unicodedata.normalize("NFKD",  text)\n```'
    )
    leaks = instruction_leaks(spec, IN_BASE)
    assert [(leak.kind, leak.text, leak.where) for leak in leaks] == [
        (
            "added_line",
            'text = unicodedata.normalize("NFKD", text)',
            "gold patch textkit/slug.py:12",
        )
    ]


def test_an_instruction_naming_a_hidden_test_function_or_file_leaks() -> None:
    spec = _spec("Make test_accented_letters pass; see also tests/test_fold.py.")
    leaks = {(leak.kind, leak.text) for leak in instruction_leaks(spec, IN_BASE)}
    assert leaks == {("test_name", "test_accented_letters"), ("hidden_file", "tests/test_fold.py")}


def test_an_instruction_naming_a_fail_to_pass_id_leaks_once() -> None:
    spec = _spec("Run tests/test_fold.py::test_folds_ligatures to check.")
    leaks = instruction_leaks(spec, IN_BASE)
    kinds = sorted((leak.kind, leak.text) for leak in leaks)
    assert ("test_id", "tests/test_fold.py::test_folds_ligatures") in kinds
    assert not any(kind == "test_name" for kind, _ in kinds)  # the id already says it


def test_names_and_lines_of_the_base_tree_are_not_leaks() -> None:
    spec = _spec(
        "`slugify` in textkit/slug.py lowercases with `text = text.lower()`; "
        "test_custom_separator in tests/test_slug.py still passes. Also `import unicodedata`, "
        "`return text` and `pass`."
    )
    assert instruction_leaks(spec, IN_BASE) == []


def test_a_plain_problem_statement_has_no_leak() -> None:
    spec = _spec("`slugify` drops accented letters: `slugify('Crème Brûlée')` gives 'cr-me'.")
    assert instruction_leaks(spec, IN_BASE) == []


def test_an_added_line_already_in_the_base_tree_is_public() -> None:
    spec = _spec('Call text = unicodedata.normalize("NFKD", text) like the module does.')
    public = files_names(
        {**BASE_FILES, "other.py": b'text = unicodedata.normalize("NFKD", text)\n'}
    )
    assert instruction_leaks(spec, public) == []


# --------------------------------------------------------------------------- base tree lookup


def test_base_tree_names_reads_paths_names_and_lines(repo: tuple[Path, str, str]) -> None:
    root, base, _ = repo
    in_base = base_tree_names(root / ".git", base)
    assert in_base("pkg/a.py") and in_base("a.py") and in_base("pkg")
    assert in_base("a_line_3") and in_base("a_line_3 = 3")
    assert not in_base("a_line_")  # names match whole words only
    assert not in_base("pkg/new.py") and not in_base("extra_a")
    assert not in_base("a_line_3 = 'three'")


def test_files_names_answers_as_git_would() -> None:
    assert IN_BASE("tests/test_slug.py") and IN_BASE("test_slug.py") and IN_BASE("tests")
    assert IN_BASE("slugify") and not IN_BASE("slug")
    assert IN_BASE("text = text.lower()") and not IN_BASE("test_accented_letters")


# --------------------------------------------------------------------------- run_quality


class FakeImage:
    id = "sha256:" + "1" * 64


class FakeImages:
    def get(self, tag: str) -> FakeImage:
        return FakeImage()


class FakeClient:
    images = FakeImages()
    containers = None
    api = None

    def ping(self) -> bool:
        return True


def fake_runs(monkeypatch: pytest.MonkeyPatch, needed: set[str], calls: list[bytes]) -> None:
    """Grade a candidate 1.0 when it holds every `needed` added line, else 0.25."""

    def run_once(
        client: Any, plan: Any, kind: str, log_dir: Path, patch: bytes | None = None
    ) -> RunResult:
        assert kind == "patch" and patch is not None
        calls.append(patch)
        log_dir.mkdir(parents=True, exist_ok=True)
        added = {line[1:].strip() for line in patch.decode().splitlines() if line[:1] == "+"}
        reward = 1.0 if needed <= added else 0.25
        return RunResult(
            kind="patch",
            reward=reward,
            subscores={"hidden_pass_fraction": reward},
            grade_status="graded",
            duration_sec=0.5,
            log_dir=str(log_dir),
        )

    monkeypatch.setattr("packager.engines.containers.run_once", run_once)


def _verified(status: str = "verified") -> TaskResult:
    return TaskResult(
        task="x__y-1",
        instance_id="x__y-1",
        dataset="ds",
        status=status,
        engine="local",  # type: ignore[arg-type]
    )


IMAGES = {"agent": "packager/ds.x__y-1:agent-1", "grader": "packager/ds.x__y-1:grader-1"}
MB768 = VerifyConfig(memory_mb=768)


def test_run_quality_flags_an_untested_hunk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[bytes] = []
    fake_runs(
        monkeypatch, {'text = unicodedata.normalize("NFKD", text)', "import unicodedata"}, calls
    )
    paths = OutputPaths(tmp_path, "ds")
    spec = _spec()
    report = run_quality(
        FakeClient(),
        spec,
        paths,
        IMAGES,
        result=_verified(),
        in_base=IN_BASE,  # type: ignore[arg-type]
    )
    assert report.ablation_status == "done" and len(calls) == 3  # the control and two hunks
    assert report.control is not None and report.control.reward == 1.0
    # Both hunks hold a needed line: both covered.
    assert (report.covered, report.total) == (2, 2) and not report.flagged
    needs_one = {'text = unicodedata.normalize("NFKD", text)'}
    calls.clear()
    fake_runs(monkeypatch, needs_one, calls)
    report = run_quality(FakeClient(), spec, paths, IMAGES, in_base=IN_BASE)  # type: ignore[arg-type]
    assert (report.covered, report.total) == (1, 2) and report.flagged
    [uncovered] = [h for h in report.hunks if h.covered is False]
    assert (uncovered.file, uncovered.old_start, uncovered.new_start) == ("textkit/slug.py", 1, 1)
    assert uncovered.where == "textkit/slug.py: new lines 1-7, old lines 1-5"
    assert uncovered.reward == 1.0 and uncovered.ablation == 1
    assert "1 of 2 gold hunks not covered" in report.reasons[0]
    data = json.loads(quality.to_json(report))
    assert data["hunks"][0]["covered"] is False and data["flagged"] is True
    assert data["image_ids"] == {"agent": FakeImage.id, "grader": FakeImage.id}
    assert data["ladder"] is None
    assert (tmp_path / "ds" / "logs" / "x__y-1" / "quality" / "ablation-2").is_dir()


def test_every_run_goes_through_grade_patch_with_the_tasks_plan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The control and each ablation: one `grade_patch` each, the task's own run plan (its
    verified images, the memory limit) and their own log folders under `quality/`.
    """
    from packager.engines.local import make_run_plan

    seen: list[tuple[Any, str, Path]] = []

    def run_once(
        client: Any, plan: Any, kind: str, log_dir: Path, patch: bytes | None = None
    ) -> RunResult:
        seen.append((plan, kind, log_dir))
        return RunResult(
            kind="patch", reward=1.0, grade_status="graded", duration_sec=0.1, log_dir=str(log_dir)
        )

    monkeypatch.setattr("packager.engines.containers.run_once", run_once)
    paths = OutputPaths(tmp_path, "ds")
    spec = _spec()
    run_quality(FakeClient(), spec, paths, IMAGES, settings=MB768, in_base=IN_BASE)  # type: ignore[arg-type]
    qdir = paths.log_dir("x__y-1") / "quality"
    assert [where for _, _, where in seen] == [
        qdir / "control",
        qdir / "ablation-1",
        qdir / "ablation-2",
    ]
    want = make_run_plan(spec, paths, IMAGES, config=MB768)
    assert all(plan == want and kind == "patch" for plan, kind, _ in seen)


def test_run_quality_refuses_an_unverified_task(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="need a verified task; its status is gold_failed"):
        run_quality(
            FakeClient(),  # type: ignore[arg-type]
            _spec(),
            OutputPaths(tmp_path, "ds"),
            IMAGES,
            result=_verified("gold_failed"),
            in_base=IN_BASE,
        )


def test_a_failed_control_stops_the_ablations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[bytes] = []
    fake_runs(monkeypatch, {"a line no patch adds"}, calls)
    report = run_quality(
        FakeClient(),
        _spec(),
        OutputPaths(tmp_path, "ds"),
        IMAGES,
        in_base=IN_BASE,  # type: ignore[arg-type]
    )
    assert report.ablation_status == "control_failed" and len(calls) == 1
    assert report.covered is None and all(h.covered is None for h in report.hunks)
    assert not report.flagged


def test_browser_judged_tasks_only_get_the_leak_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[bytes] = []
    fake_runs(monkeypatch, set(), calls)
    spec = _spec("Add test_accented_letters.").model_copy(
        update={"grading": Grading(rule="judge", workflows="[]")}
    )
    report = run_quality(FakeClient(), spec, OutputPaths(tmp_path, "ds"), IMAGES, in_base=IN_BASE)  # type: ignore[arg-type]
    assert calls == [] and report.ablation_status == "skipped"
    assert report.covered is None and report.total == 2 and report.leaks == ()


def test_setup_patch_comes_first_in_every_candidate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[bytes] = []
    fake_runs(monkeypatch, set(), calls)
    setup = (
        "diff --git a/.nvmrc b/.nvmrc\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/.nvmrc\n@@ -0,0 +1 @@\n+18\n"
    )
    spec = _spec(setup_patch=setup)
    run_quality(FakeClient(), spec, OutputPaths(tmp_path, "ds"), IMAGES, in_base=IN_BASE)  # type: ignore[arg-type]
    assert len(calls) == 3 and all(c.startswith(setup.encode()) for c in calls)


def test_pdl_ladder_shows_rungs_beside_ablation_rewards(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[bytes] = []
    fake_runs(monkeypatch, {"import unicodedata"}, calls)
    spec = _spec(
        rule="formula",
        schema="pdl",
        metadata={"graded_ladder_rungs": ["cheat.diff"]},
        nop_reward=0.2,
    )
    report = run_quality(FakeClient(), spec, OutputPaths(tmp_path, "ds"), IMAGES, in_base=IN_BASE)  # type: ignore[arg-type]
    assert report.ladder is not None and report.ladder.available
    assert report.ladder.rungs == ("cheat.diff",)
    assert report.ladder.rewards == (0.25, 1.0) and report.ladder.floor == 0.2
    bare = _spec(rule="formula", schema="pdl")
    report = run_quality(FakeClient(), bare, OutputPaths(tmp_path, "ds"), IMAGES, in_base=IN_BASE)  # type: ignore[arg-type]
    assert report.ladder is not None and not report.ladder.available
    assert "graded_ladder_rungs" in report.ladder.note


def test_cached_quality_needs_the_same_images_gold_and_instruction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_runs(monkeypatch, set(), [])
    paths = OutputPaths(tmp_path, "ds")
    spec = _spec()
    report = run_quality(FakeClient(), spec, paths, IMAGES, in_base=IN_BASE)  # type: ignore[arg-type]
    target = write_quality(paths, report)
    assert target == quality_path(paths, "x__y-1") == tmp_path / "ds/results/x__y-1.quality.json"
    ids = report.image_ids
    assert cached_quality(paths, spec, ids) == report
    assert cached_quality(paths, spec, {**ids, "grader": "sha256:other"}) is None
    assert cached_quality(paths, spec, ids, max_ablations=3) is None
    assert cached_quality(paths, _spec("Another statement."), ids) is None
    other_gold = GOLD.replace("return text", "return text  # done")
    assert cached_quality(paths, _spec(gold=other_gold), ids) is None
    target.write_text("{not json")
    assert cached_quality(paths, spec, ids) is None


def test_import_stays_cheap() -> None:
    """The pure part of the module loads neither docker nor the engines."""
    code = (
        "import sys, packager.checks.quality; "
        "print(any(m.split('.')[0] == 'docker' for m in sys.modules), "
        "'packager.engines.containers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
