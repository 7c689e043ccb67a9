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


class _Images:
    """inspect_image over a tree of images: id -> (parent, size)."""

    def __init__(self, tree: dict[str, tuple[str, int]]) -> None:
        self.tree = tree
        self.calls = 0

    def inspect_image(self, ref: str) -> dict[str, object]:
        self.calls += 1
        if ref not in self.tree:
            raise LookupError(ref)
        parent, size = self.tree[ref]
        return {"Id": ref, "Parent": parent, "Size": size}


def test_a_datasets_disk_counts_every_layer_once() -> None:
    from types import SimpleNamespace

    from packager.release.clean import dataset_disk

    api = _Images(
        {
            "base": ("", 100),
            "env": ("base", 300),
            "agent-a": ("env", 350),
            "grader-a": ("agent-a", 360),
            "agent-b": ("env", 320),
            "grader-b": ("agent-b", 330),
        }
    )
    client = SimpleNamespace(api=api)
    found = dataset_disk(
        client, {"a": ["agent-a", "grader-a"], "b": ["agent-b", "grader-b", "gone"]}
    )  # type: ignore[arg-type]
    # base 100 + env 200 + a's 50 + 10 + b's 20 + 10, each once; a holds 60 alone, b 30.
    assert found == {"dataset_bytes": 390, "task_unique_median": 60, "task_unique_max": 60}
    assert api.calls <= 7  # each image inspected once (and the missing one tried once)
