"""Every sample row renders to the checked-in tree, byte for byte with file modes."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.golden.regenerate import TREE, render_samples


def _tree(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {
        p.relative_to(folder).as_posix(): (stat.S_IMODE(p.stat().st_mode), p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_samples_render_to_the_golden_tree(tmp_path: Path) -> None:
    rendered = _tree(render_samples(tmp_path))
    golden = _tree(TREE)
    assert sorted(rendered) == sorted(golden), "file lists differ; `make golden` after review"
    for path, (mode, data) in golden.items():
        assert rendered[path][0] == mode, f"{path}: mode {rendered[path][0]:o} != {mode:o}"
        assert rendered[path][1] == data, f"{path}: content differs; `make golden` after review"


def test_rendering_twice_is_identical(tmp_path: Path) -> None:
    first = _tree(render_samples(tmp_path / "a"))
    second = _tree(render_samples(tmp_path / "b"))
    assert first == second
    # Re-rendering into the same folder replaces it whole, leaving nothing stale behind.
    again = _tree(render_samples(tmp_path / "a"))
    assert again == first
