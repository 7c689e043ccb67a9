"""Bad input: exit code 2, one message naming the task and the field, nothing written.

Each case takes a sample row (the card's exact columns), breaks one field, and renders that task
from a dataset file holding every sample row. Most cases call `render_selection` directly (what
`packager render` runs); a few go through the real command to prove the exit code, the single
stderr line and that earlier output stays untouched.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import pytest
import yaml

from packager.adapters import row_id
from packager.datasets.recipes import parse_base_image_options
from packager.datasets.sources import open_dataset
from packager.errors import InputError
from packager.run.materialize import render_selection
from packager.run.select import Selection
from tests.conftest import ROOT, run_cli, sample_rows

SAMPLES = ROOT / "packager" / "samples"
BUNDLES = SAMPLES / "repos"
SHIPPED_RECIPES = (SAMPLES / "recipes.yaml").read_text()

TEXTKIT = "samples__textkit-1"  # swebench
INTSET = "samples__intset-2"  # swe-rebench
KV = "samples__kvstore-3"  # ec-swe
INV = "samples__inventory-4"  # pdl
TODO = "samples__todo-web-5"  # sweeper
RECIPE_KEY = "samples/textkit@1.0"

Row = dict[str, Any]


def _row(task: str) -> Row:
    return copy.deepcopy(next(r for r in sample_rows() if row_id(r) == task))


def _write(tmp: Path, rows: list[Row], recipes: str | None = SHIPPED_RECIPES) -> Path:
    """rows.jsonl in `tmp`, with the samples' repo bundles and (unless None) a recipes.yaml
    beside it, as a user's dataset folder would hold them.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    if not (tmp / "repos").exists():
        (tmp / "repos").symlink_to(BUNDLES)
    if recipes is not None:
        (tmp / "recipes.yaml").write_text(recipes)
    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def _with(task: str, row: Row) -> list[Row]:
    """Every sample row, with `task`'s replaced by `row` (in place)."""
    return [row if row_id(r) == task else r for r in sample_rows()]


# ------------------------------------------------------------------------------- mutations


def _set(**changes: Any) -> Callable[[Row], None]:
    def mutate(row: Row) -> None:
        row.update(changes)

    return mutate


def _drop(column: str) -> Callable[[Row], None]:
    def mutate(row: Row) -> None:
        del row[column]

    return mutate


def _weights(*weights: float) -> Callable[[Row], None]:
    return _set(grader=[{"criterion": f"c{i}", "weight": w} for i, w in enumerate(weights)])


def _add_grader_file(
    path: str, content: str = "x\n", encoding: str = "utf-8"
) -> Callable[[Row], None]:
    def mutate(row: Row) -> None:
        row["grader_files"].append({"path": path, "encoding": encoding, "content": content})

    return mutate


def _rename_grader_file(old: str, new: str) -> Callable[[Row], None]:
    def mutate(row: Row) -> None:
        (item,) = [f for f in row["grader_files"] if f["path"] == old]
        item["path"] = new

    return mutate


def _add_file(path: str) -> Callable[[Row], None]:
    def mutate(row: Row) -> None:
        row["files"].append({"path": path, "content": "x\n"})

    return mutate


def _workflows(edit: Callable[[dict[str, Any]], None]) -> Callable[[Row], None]:
    def mutate(row: Row) -> None:
        doc = yaml.safe_load(row["workflows"])
        edit(doc)
        row["workflows"] = yaml.safe_dump(doc, sort_keys=False)

    return mutate


def _drop_preservation(doc: dict[str, Any]) -> None:
    doc["tests"] = [t for t in doc["tests"] if t["category"] != "preservation"]


def _regression_category(doc: dict[str, Any]) -> None:
    doc["tests"][1]["category"] = "regression"


def _recipe(**recipe: Any) -> str:
    return yaml.safe_dump({RECIPE_KEY: recipe})


MODIFIES_HIDDEN = (
    "diff --git a/tests/hidden/test_hidden.py b/tests/hidden/test_hidden.py\n"
    "--- a/tests/hidden/test_hidden.py\n+++ b/tests/hidden/test_hidden.py\n"
    "@@ -1 +1 @@\n-import pytest\n+import os\n"
)
MODIFIES_PUBLIC = MODIFIES_HIDDEN.replace("hidden/test_hidden", "public/test_public")
ADDS_OUTSIDE = (
    "diff --git a/tests/test_extra.py b/tests/test_extra.py\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/tests/test_extra.py\n@@ -0,0 +1 @@\n+x = 1\n"
)


@dataclass(frozen=True)
class Case:
    task: str
    mutate: Callable[[Row], None] | None
    field: str
    says: tuple[str, ...] = ()
    """Further words the message must hold (what to do about it)."""
    recipes: str | None = SHIPPED_RECIPES
    options: dict[str, Any] = dataclass_field(default_factory=dict)
    """Selection options, spelled as the CLI's (grader_entry, base_image)."""


CASES: dict[str, Case] = {
    # ---- every schema: fields shared by the adapters
    "missing problem_statement": Case(TEXTKIT, _drop("problem_statement"), "problem_statement"),
    "patch not a diff": Case(TEXTKIT, _set(patch="just some text\n"), "patch", ("unified diff",)),
    "patch escaping the tree": Case(
        TEXTKIT, _set(patch="--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n"), "patch", ("..",)
    ),
    "base_commit not a sha": Case(INTSET, _set(base_commit="main"), "base_commit", ("40-hex",)),
    "FAIL_TO_PASS not JSON": Case(TEXTKIT, _set(FAIL_TO_PASS="[oops"), "FAIL_TO_PASS", ("JSON",)),
    # ---- SWE-bench: the card carries no environment
    "swebench without a recipe": Case(
        TEXTKIT,
        None,
        "install_config",
        ("--recipes", "--prebuilt", RECIPE_KEY),
        recipes=None,
    ),
    "recipe with an unknown log_parser": Case(
        TEXTKIT,
        None,
        f"recipes[{RECIPE_KEY}].log_parser",
        ("parse_log_nope", "supported", "parse_log_pytest", "parse_log_django", "gotest"),
        recipes=_recipe(log_parser="parse_log_nope"),
    ),
    "recipe with an unknown key": Case(
        TEXTKIT,
        None,
        f"recipes[{RECIPE_KEY}].pythn",
        ("unknown recipe key", "python", "test_cmd"),
        recipes=_recipe(pythn="3.11"),
    ),
    "python 3.7 with --python-fallback never": Case(
        TEXTKIT,
        None,
        f"recipes[{RECIPE_KEY}].python",
        ("Python 3.7", "3.9, 3.11, 3.13", "--python-fallback never", "--base-image 3.7=IMAGE"),
        recipes=_recipe(python="3.7"),
        options={"python_fallback": "never"},
    ),
    "recipe timeout not a number": Case(
        TEXTKIT, None, f"recipes[{RECIPE_KEY}].timeout", (), recipes=_recipe(timeout="soon")
    ),
    # ---- SWE-rebench: the row's own install_config
    "install_config not JSON": Case(INTSET, _set(install_config="{python: 3"), "install_config"),
    "install_config with an unknown log_parser": Case(
        INTSET,
        _set(install_config=json.dumps({"log_parser": "parse_log_nope"})),
        "install_config.log_parser",
        ("supported",),
    ),
    # ---- EC-SWE
    "weights add up to 90": Case(KV, _weights(50.0, 40.0), "grader", ("90", "100")),
    "weights add up to 100.5": Case(KV, _weights(33.5, 33.5, 33.5), "grader", ("100.5",)),
    "negative weight": Case(KV, _weights(120.0, -20.0), "grader[1].weight"),
    "criterion without text": Case(KV, _set(grader=[{"weight": 100.0}]), "grader[0].criterion"),
    "grader file outside the grader folders": Case(
        KV,
        _add_grader_file("tests/hidden.test.js"),
        "grader_files",
        ("tests/hidden.test.js", "grader, grading, protected"),
    ),
    "grader file escaping the tree": Case(
        KV, _add_grader_file("grader/../../evil.py"), "grader_files", ("..",)
    ),
    "grader file with an absolute path": Case(
        KV, _add_grader_file("/grader/evil.py"), "grader_files", ("absolute",)
    ),
    "grader file invalid base64": Case(
        KV, _add_grader_file("grader/data.bin", "!!not base64!!", "base64"), "grader_files"
    ),
    "grader file unknown encoding": Case(
        KV, _add_grader_file("grader/data.bin", "x", "latin-1"), "grader_files", ("latin-1",)
    ),
    "no scoring script": Case(
        KV,
        _rename_grader_file("grader/grade.py", "grader/run_checks.py"),
        "grader_files",
        ("none", "--grader-entry"),
    ),
    "two scoring scripts": Case(
        KV,
        _add_grader_file("grading/score.sh", "echo 1\n"),
        "grader_files",
        ("grader/grade.py", "grading/score.sh", "--grader-entry"),
    ),
    "--grader-entry naming a missing file": Case(
        KV,
        None,
        "grader_files",
        ("--grader-entry grader/nope.py", "no such"),
        options={"grader_entry": "grader/nope.py"},
    ),
    "base_reward of 1": Case(KV, _set(base_reward=1.0), "base_reward"),
    "dockerfile without FROM": Case(KV, _set(dockerfile="RUN echo hi\n"), "dockerfile", ("FROM",)),
    # ---- PDL
    "test_patch modifies an existing hidden file": Case(
        INV, _set(test_patch=MODIFIES_HIDDEN), "test_patch", ("only add",)
    ),
    "test_patch modifies a public test": Case(
        INV, _set(test_patch=MODIFIES_PUBLIC), "test_patch", ("tests/hidden/",)
    ),
    "test_patch adds outside tests/hidden": Case(
        INV, _set(test_patch=ADDS_OUTSIDE), "test_patch", ("tests/test_extra.py", "tests/hidden/")
    ),
    "unknown formula name": Case(
        INV,
        _set(reward_formula="0.8*hidden + 0.2*public"),
        "reward_formula",
        ("'hidden'", "hidden_pass_fraction", "public_regression", "build_health"),
    ),
    "formula calling a function": Case(
        INV, _set(reward_formula="max(hidden_pass_fraction, 1)"), "reward_formula"
    ),
    "empty FAIL_TO_PASS": Case(INV, _set(FAIL_TO_PASS=[]), "FAIL_TO_PASS", ("empty",)),
    "absolute path in files": Case(INV, _add_file("/etc/passwd"), "files", ("absolute",)),
    "dotdot in files": Case(INV, _add_file("../x.py"), "files", ("..",)),
    "path inside .git in files": Case(INV, _add_file(".git/hooks/post-checkout"), "files"),
    "duplicate path in files": Case(INV, _add_file("src/stock.py"), "files", ("duplicate",)),
    # ---- SWEeper
    "workflows without a preservation test": Case(
        TODO, _workflows(_drop_preservation), "workflows", ("preservation",)
    ),
    "workflow category not target/preservation": Case(
        TODO,
        _workflows(_regression_category),
        "workflows.tests[1].category",
        ("target", "preservation"),
    ),
    "workflows not YAML": Case(TODO, _set(workflows="tests: [\n"), "workflows", ("YAML",)),
    "repo not a URL or owner/name": Case(TODO, _set(repo="todo-web"), "repo", ("'todo-web'",)),
    "reference_commit equals base_commit": Case(
        TODO,
        lambda row: row.update(reference_commit=row["base_commit"]),
        "reference_commit",
        ("base_commit",),
    ),
    "pr not an integer": Case(TODO, _set(pr="7"), "pr"),
}


def _broken_rows(case: Case) -> list[Row]:
    row = _row(case.task)
    if case.mutate is not None:
        case.mutate(row)
    return _with(case.task, row)


def _selection(data: Path, tasks: tuple[str, ...], **options: Any) -> Selection:
    return Selection(
        dataset=open_dataset(str(data)),
        task_ids=tasks,
        grader_entry=options.get("grader_entry"),
        base_images=parse_base_image_options(options.get("base_image", [])),
        python_fallback=options.get("python_fallback", "nearest"),
    )


def _render_error(data: Path, out: Path, tasks: tuple[str, ...], **options: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        render_selection(_selection(data, tasks, **options), out)
    return caught.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_row_is_refused_naming_task_and_field(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    data = _write(tmp_path / "ds", _broken_rows(case), case.recipes)
    out = tmp_path / "out"
    error = _render_error(data, out, (case.task,), **case.options)
    message = str(error)
    assert error.exit_code == 2
    assert message.startswith(f"{case.task}: field '{case.field}': "), message
    for word in case.says:
        assert word in message, (word, message)
    assert not out.exists()


@pytest.mark.parametrize("task", [TEXTKIT, INTSET, KV, INV, TODO])
def test_the_unbroken_rows_render(task: str, tmp_path: Path) -> None:
    """The cases' setup without a break renders: each case fails for the reason it names."""
    data = _write(tmp_path / "ds", sample_rows())
    written = render_selection(_selection(data, (task,)), tmp_path / "out")
    assert [s.task_id for s in written] == [task]
    assert (tmp_path / "out" / "rows" / "tasks" / task / "task.toml").is_file()


# ----------------------------------------------------------- weights, entry and image: accepted


@pytest.mark.parametrize(
    "weights", [(33.3, 33.3, 33.4), (100.0,), (0.1,) * 1000, (20.0, 50.0, 30.0 + 1e-9)]
)
def test_weights_adding_up_to_100_within_tolerance_are_accepted(
    weights: tuple[float, ...], tmp_path: Path
) -> None:
    row = _row(KV)
    _weights(*weights)(row)
    data = _write(tmp_path / "ds", _with(KV, row))
    (spec,) = render_selection(_selection(data, (KV,)), tmp_path / "out")
    assert [c.weight for c in spec.grading.criteria] == list(weights)


def test_grader_entry_resolves_two_scoring_scripts(tmp_path: Path) -> None:
    row = _row(KV)
    _add_grader_file("grading/score.sh", "echo 1\n")(row)
    data = _write(tmp_path / "ds", _with(KV, row))
    sel = _selection(data, (KV,), grader_entry="grader/grade.py")
    (spec,) = render_selection(sel, tmp_path / "out")
    assert spec.provenance.metadata["grader_entry"] == "grader/grade.py"
    assert spec.grading.grader_command == "python3 grade.py"


def test_base_image_option_accepts_python_39(tmp_path: Path) -> None:
    data = _write(tmp_path / "ds", sample_rows(), _recipe(python="3.9"))
    sel = _selection(data, (TEXTKIT,), base_image=["3.9=python:3.9-slim"])
    (spec,) = render_selection(sel, tmp_path / "out")
    assert spec.environment.base_image == "python:3.9-slim"


# -------------------------------------------------------------------------- dataset-level errors


def test_missing_id_column(tmp_path: Path) -> None:
    rows = sample_rows()
    del rows[1]["instance_id"]
    data = _write(tmp_path / "ds", rows)
    out = tmp_path / "out"
    error = _render_error(data, out, (TEXTKIT,))
    assert error.exit_code == 2
    assert str(error).startswith("row 2: field 'instance_id': missing or empty"), str(error)
    assert not out.exists()


def test_empty_id(tmp_path: Path) -> None:
    rows = sample_rows()
    rows[3]["instance_id"] = ""
    error = _render_error(_write(tmp_path / "ds", rows), tmp_path / "out", (TEXTKIT,))
    assert str(error).startswith("row 4: field 'instance_id'"), str(error)


def test_sweeper_id_errors_name_case_id(tmp_path: Path) -> None:
    rows = sample_rows() + [_row(TODO)]
    error = _render_error(_write(tmp_path / "a", rows), tmp_path / "out", (TODO,))
    assert f"{TODO}: field 'case_id'" in str(error) and "duplicate" in str(error)
    row = _row(TODO)
    del row["case_id"]
    data = _write(tmp_path / "b", [row])
    sel = Selection(dataset=open_dataset(str(data)), all_tasks=True, schema="sweeper")
    with pytest.raises(InputError, match="case_id"):
        render_selection(sel, tmp_path / "out")


def test_duplicate_ids(tmp_path: Path) -> None:
    rows = sample_rows() + [_row(TEXTKIT)]
    out = tmp_path / "out"
    error = _render_error(_write(tmp_path / "ds", rows), out, (INV,))
    assert str(error) == f"{TEXTKIT}: field 'instance_id': duplicate id in the dataset"
    assert not out.exists()


def test_unknown_schema(tmp_path: Path) -> None:
    rows = sample_rows() + [{"instance_id": "mystery-1", "repo": "a/b"}]
    error = _render_error(_write(tmp_path / "ds", rows), tmp_path / "out", ("mystery-1",))
    assert str(error).startswith("mystery-1: field '<columns>': unknown schema"), str(error)
    assert "--schema" in str(error)


def test_unknown_task_ids_are_listed(tmp_path: Path) -> None:
    result = run_cli("render", "nope-2", "nope-1", TEXTKIT, "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert "nope-1, nope-2" in result.stderr
    assert not (tmp_path / "o").exists()


def test_bad_json_line(tmp_path: Path) -> None:
    data = _write(tmp_path / "ds", sample_rows())
    lines = data.read_text().splitlines()
    data.write_text("\n".join([*lines[:2], "{not json", *lines[2:]]) + "\n")
    result = run_cli("render", "--all", "--dataset", str(data), "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert f"{data}:3" in result.stderr and "not JSON" in result.stderr, result.stderr
    assert not (tmp_path / "o").exists()


def test_base_commit_missing_from_repo_source(tmp_path: Path) -> None:
    row = _row(TEXTKIT)
    row["base_commit"] = "0" * 40
    out = tmp_path / "out"
    error = _render_error(_write(tmp_path / "ds", _with(TEXTKIT, row)), out, (TEXTKIT,))
    assert str(error).startswith(f"{TEXTKIT}: field 'base_commit': commit {'0' * 40} not found")
    assert not out.exists()


@pytest.mark.parametrize(
    "repo", ["https://github.com/samples", "https://github.com", "http://example.com/", "a b/c"]
)
def test_repo_url_without_owner_and_name_is_refused(repo: str, tmp_path: Path) -> None:
    # (The adapter reads 'https://github.com' as 'https:/github.com', which the repo source
    # lookup then refuses: see test_adapters_cards.py.)
    row = _row(TODO)
    row["repo"] = repo
    error = _render_error(_write(tmp_path / "ds", _with(TODO, row)), tmp_path / "out", (TODO,))
    assert str(error).startswith(f"{TODO}: field 'repo'"), str(error)


def test_pdl_test_patch_adding_a_file_the_repository_has(tmp_path: Path) -> None:
    row = _row(INV)
    row["files"].append({"path": "tests/hidden/test_hidden.py", "content": "x = 1\n"})
    error = _render_error(_write(tmp_path / "ds", _with(INV, row)), tmp_path / "out", (INV,))
    assert str(error).startswith(f"{INV}: field 'test_patch'"), str(error)


# ---------------------------------------------------------------------------- the real command

CLI_CASES = [
    "weights add up to 90",
    "--grader-entry naming a missing file",
    "test_patch adds outside tests/hidden",
    "swebench without a recipe",
    "python 3.7 with --python-fallback never",
    "workflows without a preservation test",
]


@pytest.fixture(scope="module")
def previous_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good render of the samples, to prove a failed run leaves it untouched."""
    tmp = tmp_path_factory.mktemp("previous")
    out = tmp / "out"
    data = _write(tmp / "ds", sample_rows())
    result = run_cli("render", "--all", "--dataset", str(data), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _cli_options(options: dict[str, Any]) -> list[str]:
    args: list[str] = []
    if "grader_entry" in options:
        args += ["--grader-entry", options["grader_entry"]]
    for value in options.get("base_image", []):
        args += ["--base-image", value]
    if "python_fallback" in options:
        args += ["--python-fallback", options["python_fallback"]]
    return args


@pytest.mark.parametrize("name", CLI_CASES)
def test_render_command_exits_2_and_leaves_output_untouched(
    name: str, tmp_path: Path, previous_output: Path
) -> None:
    case = CASES[name]
    data = _write(tmp_path / "ds", _broken_rows(case), case.recipes)
    # The dataset's name is its file's; the previous render went to the same dataset folder.
    out = tmp_path / "out"
    shutil.copytree(previous_output, out, symlinks=True)
    before = _snapshot(out)
    result = run_cli(
        "render", case.task, "--dataset", str(data), "--out", str(out), *_cli_options(case.options)
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {case.task}: field '{case.field}': "), lines[0]
    for word in case.says:
        assert word in lines[0], (word, lines[0])
    assert _snapshot(out) == before
    assert not result.stdout


def test_base64_grader_file_is_decoded(tmp_path: Path) -> None:
    row = _row(KV)
    encoded = [f for f in row["grader_files"] if f.get("encoding") == "base64"]
    assert encoded, "the EC-SWE sample must ship a base64 grader file"
    out = tmp_path / "o"
    result = run_cli("render", KV, "--out", str(out))
    assert result.returncode == 0, result.stderr
    payload = out / "samples" / "tasks" / KV / "tests" / "payload" / "files"
    for item in encoded:
        assert (payload / item["path"]).read_bytes() == base64.b64decode(item["content"])
