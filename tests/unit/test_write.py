"""Staged, atomic writes of rendered trees (packager/write.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from packager.render import FileTree, OutFile
from packager.write import Staging, write_tree

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


def _render(out: Path, workers: int) -> dict[str, tuple[int, bytes | None]]:
    from packager.pipeline import Selection, render_selection
    from packager.sources import open_dataset

    sel = Selection(dataset=open_dataset(None), all_tasks=True)
    written = render_selection(sel, out, workers=workers)
    assert len(written) == 5
    return _listing(out)


def test_render_workers_write_what_one_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import packager.pipeline as pipeline

    # One row here, then chunks of two in two forked workers (a render of the samples).
    monkeypatch.setattr(pipeline, "RENDER_INLINE_ROWS", 1)
    monkeypatch.setattr(pipeline, "RENDER_CHUNK", 2)
    assert _render(tmp_path / "pool", workers=2) == _render(tmp_path / "inline", workers=1)
    assert not [p for p in (tmp_path / "pool" / "samples").iterdir() if p.name.startswith(".")]


def test_a_failing_render_worker_leaves_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import packager.pipeline as pipeline
    from packager.targets import hud

    monkeypatch.setattr(pipeline, "RENDER_INLINE_ROWS", 1)
    monkeypatch.setattr(pipeline, "RENDER_CHUNK", 2)

    def refuse(image: str) -> None:
        if "todo-web" in image:  # the last sample row: rendered in a worker
            raise ValueError(f"agent image {image!r} refused")

    monkeypatch.setattr(hud, "_check_agent_image", refuse)  # inherited by the forked workers
    with pytest.raises(ValueError, match="todo-web"):
        _render(tmp_path / "out", workers=2)
    assert not (tmp_path / "out").exists()
