"""`packager clean --caches`: the derived folders of the machine cache go, mirrors stay."""

from __future__ import annotations

from pathlib import Path

from packager.release.clean import DERIVED_CACHES, clean_caches


def _fill(root: Path) -> None:
    for name in (*DERIVED_CACHES, "mirrors", "locks"):
        (root / name / "sub").mkdir(parents=True)
        (root / name / "sub" / "blob").write_bytes(b"x" * 1000)


def test_dry_run_says_and_keeps(tmp_path: Path) -> None:
    _fill(tmp_path)
    said: list[str] = []
    freed = clean_caches(tmp_path, dry_run=True, log=said.append)
    assert freed == 1000 * len(DERIVED_CACHES)
    assert len(said) == len(DERIVED_CACHES) and all(s.startswith("would empty") for s in said)
    assert all((tmp_path / name / "sub" / "blob").is_file() for name in DERIVED_CACHES)


def test_derived_caches_go_and_mirrors_and_locks_stay(tmp_path: Path) -> None:
    _fill(tmp_path)
    freed = clean_caches(tmp_path)
    assert freed == 1000 * len(DERIVED_CACHES)
    assert not any((tmp_path / name).exists() for name in DERIVED_CACHES)
    assert (tmp_path / "mirrors" / "sub" / "blob").is_file()
    assert (tmp_path / "locks" / "sub" / "blob").is_file()
    assert clean_caches(tmp_path) == 0  # nothing left to empty
