"""Staged, atomic writes of rendered trees (packager/render/write.py)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from packager.datasets.sources import SAMPLES_DIR
from packager.errors import PackagerError
from packager.render import FileTree, OutFile
from packager.render.write import Staging, write_tree

TREE: FileTree = {
    "task.toml": OutFile(b"[task]\n"),
    "solution/solve.sh": OutFile(b"#!/bin/bash\n", 0o755),
    "tests/payload/files/grader/grade.py": OutFile(b"print(1)\n"),
    "empty.txt": OutFile(b""),
}


def _listing(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    return {
        p.relative_to(folder).as_posix(): (
            stat.S_IMODE(p.stat().st_mode),
            p.read_bytes() if p.is_file() else None,
        )
        for p in sorted(folder.rglob("*"))
    }


EXPECTED = {
    "empty.txt": (0o644, b""),
    "solution": (0o755, None),
    "solution/solve.sh": (0o755, b"#!/bin/bash\n"),
    "task.toml": (0o644, b"[task]\n"),
    "tests": (0o755, None),
    "tests/payload": (0o755, None),
    "tests/payload/files": (0o755, None),
    "tests/payload/files/grader": (0o755, None),
    "tests/payload/files/grader/grade.py": (0o644, b"print(1)\n"),
}


@pytest.fixture(params=[0o022, 0o077, 0o002], ids=["umask-022", "umask-077", "umask-002"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_a_placed_folder_has_exactly_the_tree_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    root = tmp_path / "out" / "ds"
    with Staging(root) as staging:
        staging.write(root / "tasks" / "a", TREE)
        staging.write(root / "manifests" / "a", {"oracle.json": OutFile(b"{}\n")})
        assert not (root / "tasks").exists()  # nothing shows before it is placed
        staging.place(root / "tasks" / "a")
        staging.place(root / "manifests" / "a")
    assert _listing(root / "tasks" / "a") == EXPECTED
    assert _listing(root / "manifests" / "a") == {"oracle.json": (0o644, b"{}\n")}
    assert sorted(p.name for p in root.iterdir()) == ["manifests", "tasks"]  # staging gone
    assert stat.S_IMODE((root / "tasks").stat().st_mode) == 0o755


def test_placing_replaces_the_old_folder_whole(tmp_path: Path) -> None:
    dest = tmp_path / "tasks" / "a"
    write_tree(dest, {"stale.txt": OutFile(b"old\n"), "tests/x": OutFile(b"x")})
    write_tree(dest, TREE)
    assert _listing(dest) == EXPECTED
    assert sorted(p.name for p in dest.parent.iterdir()) == ["a"]


def test_a_failure_before_placing_leaves_no_trace(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), Staging(out / "ds") as staging:
        staging.write(out / "ds" / "tasks" / "a", TREE)
        raise RuntimeError("a bad row")
    assert not out.exists()


def test_a_failure_keeps_what_was_there(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_tree(root / "tasks" / "a", TREE)
    with pytest.raises(RuntimeError), Staging(root) as staging:
        staging.write(root / "tasks" / "a", {"new.txt": OutFile(b"new\n")})
        staging.write(root / "tasks" / "b", TREE)
        raise RuntimeError("a bad row")
    assert _listing(root / "tasks" / "a") == EXPECTED
    assert sorted(p.name for p in root.iterdir()) == ["tasks"]
    assert sorted(p.name for p in (root / "tasks").iterdir()) == ["a"]


def test_a_folder_is_staged_once(tmp_path: Path) -> None:
    with Staging(tmp_path) as staging:
        staging.write(tmp_path / "tasks" / "a", TREE)
        with pytest.raises(FileExistsError):
            staging.write(tmp_path / "tasks" / "a", TREE)


# ------------------------------------------------------------- render_selection's render workers


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """One row rendered in this process, then chunks of two in the forked workers (so a render
    of the five samples reaches the workers).
    """
    import packager.run.materialize as materialize

    monkeypatch.setattr(materialize, "RENDER_INLINE_ROWS", 1)
    monkeypatch.setattr(materialize, "RENDER_CHUNK", 2)


def _render(out: Path, workers: int) -> dict[str, tuple[int, bytes | None]]:
    from packager.datasets.sources import open_dataset
    from packager.run.materialize import render_selection
    from packager.run.select import Selection

    sel = Selection(dataset=open_dataset(None), all_tasks=True)
    written = render_selection(sel, out, workers=workers)
    assert len(written) == 5
    return _listing(out)


def test_render_workers_write_what_one_process_writes(tmp_path: Path, small_chunks: None) -> None:
    assert _render(tmp_path / "pool", workers=2) == _render(tmp_path / "inline", workers=1)
    assert not [p for p in (tmp_path / "pool" / "samples").iterdir() if p.name.startswith(".")]


def test_a_failing_render_worker_leaves_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    from packager.render import hud

    def refuse(image: str) -> None:
        if "todo-web" in image:  # the last sample row: rendered in a worker
            raise ValueError(f"agent image {image!r} refused")

    monkeypatch.setattr(hud, "_check_agent_image", refuse)  # inherited by the forked workers
    with pytest.raises(ValueError, match="todo-web"):
        _render(tmp_path / "out", workers=2)
    assert not (tmp_path / "out").exists()


def _sample_rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in (SAMPLES_DIR / "rows.jsonl").read_text().splitlines()]


def _dataset(folder: Path, rows: list[dict[str, object]]) -> Path:
    """`rows` as a dataset file beside the samples' repositories and recipes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "repos").symlink_to(SAMPLES_DIR / "repos")
    (folder / "recipes.yaml").symlink_to(SAMPLES_DIR / "recipes.yaml")
    data = folder / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def test_a_bad_row_in_a_render_worker_is_reported_whole_and_in_row_order(
    tmp_path: Path, small_chunks: None
) -> None:
    from packager.datasets.sources import open_dataset
    from packager.errors import RowError
    from packager.run.materialize import render_selection
    from packager.run.select import Selection

    rows = _sample_rows()
    bad = dict(rows[2], patch="not a diff")  # adapted in a worker
    # A duplicate id after it, found while this process reads ahead: the earlier row's error
    # is the one reported (as a render in one process reports it).
    data = _dataset(tmp_path / "ds", [rows[0], rows[1], bad, rows[3], rows[4], rows[0]])
    sel = Selection(dataset=open_dataset(str(data)), all_tasks=True)
    for workers in (2, 1):
        with pytest.raises(RowError) as caught:
            render_selection(sel, tmp_path / f"out{workers}", workers=workers)
        assert (caught.value.task, caught.value.field) == (bad["instance_id"], "patch")
        assert caught.value.exit_code == 2
        assert not (tmp_path / f"out{workers}").exists()


def test_render_workers_apply_the_repository_filter(tmp_path: Path, small_chunks: None) -> None:
    from packager.datasets.sources import open_dataset
    from packager.run.materialize import render_selection
    from packager.run.select import Selection

    rows = _sample_rows()
    data = _dataset(tmp_path / "ds", rows)
    wanted = str(rows[2]["repo"])  # a row rendered in a worker
    sel = Selection(dataset=open_dataset(str(data)), all_tasks=True, repo_globs=(wanted,))
    pooled = [s.task_id for s in render_selection(sel, tmp_path / "pool", workers=2)]
    inline = [s.task_id for s in render_selection(sel, tmp_path / "inline", workers=1)]
    assert pooled == inline == [rows[2]["instance_id"]]
    with pytest.raises(PackagerError, match="no row of"):
        render_selection(
            Selection(dataset=open_dataset(str(data)), all_tasks=True, repo_globs=("nope/*",)),
            tmp_path / "none",
            workers=2,
        )


def test_a_large_file_every_task_carries_is_written_once_and_linked(tmp_path: Path) -> None:
    from packager.render import write

    big = os.urandom(write.SHARE_MIN_BYTES)
    tree: FileTree = {
        "tests/grading.pyz": OutFile(big),
        "run.sh": OutFile(big, 0o755),  # same bytes, other mode: a file of its own
        "small.txt": OutFile(b"x" * 100),
    }
    with Staging(tmp_path) as staging:
        for name in ("a", "b", "c"):
            staging.write(tmp_path / "tasks" / name, tree)
        staging.place(tmp_path / "tasks" / "a")
        staging.write(tmp_path / "tasks" / "d", tree)  # a's copy has moved: written again
        for name in ("b", "c", "d"):
            staging.place(tmp_path / "tasks" / name)
    found = {
        name: {p: os.stat(tmp_path / "tasks" / name / p) for p in tree}
        for name in ("a", "b", "c", "d")
    }
    assert found["a"]["tests/grading.pyz"].st_ino == found["c"]["tests/grading.pyz"].st_ino
    assert found["a"]["run.sh"].st_ino == found["b"]["run.sh"].st_ino
    assert found["a"]["run.sh"].st_ino != found["a"]["tests/grading.pyz"].st_ino
    assert found["a"]["small.txt"].st_ino == found["c"]["small.txt"].st_ino  # one object
    assert found["a"]["small.txt"].st_nlink == 3
    for name, stats in found.items():
        for path, item in tree.items():
            assert (tmp_path / "tasks" / name / path).read_bytes() == item.data, (name, path)
            assert stat.S_IMODE(stats[path].st_mode) == item.mode, (name, path)
    assert found["d"]["tests/grading.pyz"].st_nlink == 1


def test_rendered_tasks_share_the_grading_runtime(tmp_path: Path) -> None:
    from packager.datasets.sources import open_dataset
    from packager.run.materialize import render_selection
    from packager.run.select import Selection

    render_selection(Selection(dataset=open_dataset(None), all_tasks=True), tmp_path, workers=1)
    copies = sorted(tmp_path.glob("samples/*/*/**/grading.pyz"))
    assert len(copies) == 10  # two per task: the Harbor task's tests/ and the HUD grader/
    assert len({os.stat(p).st_ino for p in copies}) == 1


def test_smaller_files_are_linked_only_to_the_same_bytes_object_in_another_folder(
    tmp_path: Path,
) -> None:
    shared = b"# the same object in every folder\n"
    with Staging(tmp_path) as staging:
        for name in ("a", "b"):
            staging.write(
                tmp_path / "tasks" / name,
                {
                    "one": OutFile(shared),
                    "two": OutFile(shared),  # same object, same folder: a file of its own
                    "equal": OutFile(bytes(bytearray(b"equal bytes\n"))),  # a new object
                    "exec": OutFile(shared, 0o755),  # same object, other mode
                },
            )
        staging.place(tmp_path / "tasks" / "a")
        staging.place(tmp_path / "tasks" / "b")
    a, b = tmp_path / "tasks" / "a", tmp_path / "tasks" / "b"
    ino = {(d.name, p): os.stat(d / p).st_ino for d in (a, b) for p in ("one", "two", "equal")}
    assert ino[("a", "one")] == ino[("b", "one")]
    assert os.stat(a / "one").st_nlink == 2
    for d in (a, b):
        assert len({ino[(d.name, "one")], ino[(d.name, "two")], os.stat(d / "exec").st_ino}) == 3
    assert ino[("a", "equal")] != ino[("b", "equal")]  # equal bytes are not looked for
    assert stat.S_IMODE(os.stat(b / "exec").st_mode) == 0o755
    for d in (a, b):
        assert [(d / p).read_bytes() for p in ("one", "two", "exec")] == [shared] * 3


def test_a_folder_of_folders_moves_whole_into_an_empty_output(tmp_path: Path) -> None:
    with Staging(tmp_path) as staging:
        staging.write(tmp_path / "tasks" / "a", TREE)
        staging.write(tmp_path / "tasks" / "b", TREE)
        assert staging.place_new(tmp_path / "tasks")
        assert not staging.place_new(tmp_path / "tasks")  # there now: placed one by one
        staging.write(tmp_path / "tasks" / "c", TREE)
        assert not staging.place_new(tmp_path / "tasks")
        assert not staging.place_new(tmp_path / "sources")  # nothing staged
        staging.place(tmp_path / "tasks" / "c")
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["a", "b", "c"]
    for name in ("a", "b", "c"):
        assert _listing(tmp_path / "tasks" / name) == EXPECTED
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
