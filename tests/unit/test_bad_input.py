"""Bad input: exit code 2, one line naming the task and the field, earlier output untouched."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, sample_rows

BUNDLES = ROOT / "packager" / "samples" / "repos"


def _row(schema_id: str) -> dict[str, Any]:
    return next(r for r in sample_rows() if r["instance_id"] == schema_id)


def _write(tmp: Path, rows: list[dict[str, Any]]) -> Path:
    data = tmp / "rows.jsonl"
    if not (tmp / "repos").exists():
        (tmp / "repos").symlink_to(BUNDLES)  # the samples' repo sources travel with the rows
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def _mutate(instance: str, **changes: Any) -> dict[str, Any]:
    row = _row(instance)
    for key, value in changes.items():
        if value is _DELETE:
            row.pop(key, None)
        else:
            row[key] = value
    return row


_DELETE = object()

TEXTKIT = "samples__textkit-1"
KV = "samples__kvstore-3"
INV = "samples__inventory-4"


def _grader_with_weights(weights: list[int]) -> dict[str, Any]:
    grader = dict(_row(KV)["grader"])
    grader["criteria"] = [
        {"name": f"c{i}", "weight": w, "description": ""} for i, w in enumerate(weights)
    ]
    return grader


CASES = {
    "missing field": (_mutate(TEXTKIT, problem_statement=_DELETE), TEXTKIT, "problem_statement"),
    "empty FAIL_TO_PASS": (_mutate(TEXTKIT, FAIL_TO_PASS="[]"), TEXTKIT, "FAIL_TO_PASS"),
    "patch not a diff": (_mutate(TEXTKIT, patch="just some text\n"), TEXTKIT, "patch"),
    "absolute path in files": (
        _mutate(INV, files={"/etc/passwd": "x", **_row(INV)["files"]}),
        INV,
        "files",
    ),
    "dotdot in files": (_mutate(INV, files={"../x.py": "x", **_row(INV)["files"]}), INV, "files"),
    "escaping grader file": (
        _mutate(
            KV, grader_files=[{"path": "a/../../evil.py", "content": "x", "encoding": "utf-8"}]
        ),
        KV,
        "grader_files",
    ),
    "invalid base64": (
        _mutate(
            KV,
            grader_files=[{"path": "grade.py", "content": "!!not base64!!", "encoding": "base64"}],
        ),
        KV,
        "grader_files",
    ),
    "weights not 100": (
        _mutate(KV, grader=_grader_with_weights([50, 30, 10])),
        KV,
        "grader.criteria",
    ),
    "unknown schema": ({"instance_id": "mystery-1", "repo": "a/b"}, "mystery-1", "<columns>"),
    "patch escaping tree": (
        _mutate(TEXTKIT, patch="--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n"),
        TEXTKIT,
        "patch",
    ),
}


@pytest.fixture()
def previous_output(tmp_path: Path) -> Path:
    """A good render of the samples, to prove a failed run leaves it untouched."""
    out = tmp_path / "out"
    result = run_cli(
        "render", "--all", "--dataset", str(_write(tmp_path, sample_rows())), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_row_exits_2_naming_task_and_field(
    case: str, tmp_path: Path, previous_output: Path
) -> None:
    row, task, field = CASES[case]
    rows = [r for r in sample_rows() if r["instance_id"] != row["instance_id"]] + [row]
    data = _write(tmp_path, rows)
    before = _snapshot(previous_output)
    result = run_cli("render", "--all", "--dataset", str(data), "--out", str(previous_output))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert task in lines[0] and f"'{field}'" in lines[0], lines[0]
    assert _snapshot(previous_output) == before


def test_duplicate_ids(tmp_path: Path, previous_output: Path) -> None:
    rows = sample_rows() + [_row(TEXTKIT)]
    before = _snapshot(previous_output)
    result = run_cli(
        "render", "--all", "--dataset", str(_write(tmp_path, rows)), "--out", str(previous_output)
    )
    assert result.returncode == 2
    assert (
        TEXTKIT in result.stderr
        and "'instance_id'" in result.stderr
        and "duplicate" in result.stderr
    )
    assert _snapshot(previous_output) == before


def test_unknown_task_ids_are_listed(tmp_path: Path) -> None:
    result = run_cli("render", "nope-2", "nope-1", TEXTKIT, "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert "nope-1, nope-2" in result.stderr
    assert not (tmp_path / "o").exists()


def test_base_commit_missing_from_repo_source(tmp_path: Path, previous_output: Path) -> None:
    row = _mutate(TEXTKIT, base_commit="0" * 40)
    rows = [r for r in sample_rows() if r["instance_id"] != TEXTKIT] + [row]
    data = _write(tmp_path, rows)
    before = _snapshot(previous_output)
    result = run_cli(
        "render",
        "--all",
        "--dataset",
        str(data),
        "--out",
        str(previous_output),
        "--repo-source",
        f"samples/textkit={BUNDLES / 'samples__textkit.bundle'}",
    )
    assert result.returncode == 2, result.stderr
    assert TEXTKIT in result.stderr and "'base_commit'" in result.stderr
    assert _snapshot(previous_output) == before


def test_base64_grader_file_is_decoded(tmp_path: Path) -> None:
    row = _row(KV)
    encoded = [f for f in row["grader_files"] if f.get("encoding") == "base64"]
    assert encoded, "the EC-SWE sample must ship a base64 grader file"
    out = tmp_path / "o"
    assert run_cli("render", KV, "--out", str(out)).returncode == 0
    shipped = out / "samples" / "tasks" / KV / "tests" / "payload" / "grader" / encoded[0]["path"]
    assert shipped.read_bytes() == base64.b64decode(encoded[0]["content"])
