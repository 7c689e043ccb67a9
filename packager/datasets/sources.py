"""Row loading (embedded samples, local files, local dataset folders, hub ids) and repo sources.

Rows are streamed: a generator yields one dict at a time, so a large dataset is never held in
memory. `datasets` and `pyarrow` are imported only when a source needs them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packager.datasets.recipes import Recipes, read_recipes
from packager.errors import DatasetError
from packager.render.naming import make_dataset_name

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"
SAMPLES = "samples"


@dataclass(frozen=True)
class DatasetSource:
    """A named source of rows plus the repo sources it ships (e.g. the samples' bundles)."""

    name: str
    location: str
    split: str
    repo_sources: dict[str, str] = field(default_factory=dict)
    recipes: Recipes = field(default_factory=Recipes)
    """`recipes.yaml` (or `.json`) shipped next to the dataset: environments for its rows."""


def open_dataset(source: str | None, split: str = "test") -> DatasetSource:
    """Resolve `--dataset`: None/`samples` → the embedded samples; else a path or a hub id."""
    if source in (None, "", SAMPLES):
        return DatasetSource(
            SAMPLES,
            str(SAMPLES_DIR / "rows.jsonl"),
            split,
            _bundles(SAMPLES_DIR),
            _shipped_recipes(SAMPLES_DIR),
        )
    assert source is not None
    path = Path(source)
    if path.exists():
        folder = path if path.is_dir() else path.parent
        return DatasetSource(
            make_dataset_name(str(path)),
            str(path),
            split,
            _bundles(folder),
            _shipped_recipes(folder),
        )
    if source.count("/") == 1 and not source.startswith((".", "/")):
        return DatasetSource(make_dataset_name(source), source, split)
    raise DatasetError(
        f"dataset {source!r}: no such file or directory, and not a hub id (owner/name)"
    )


def _shipped_recipes(folder: Path) -> Recipes:
    """`recipes.yaml`/`recipes.yml`/`recipes.json` next to a dataset (the samples ship one)."""
    for name in ("recipes.yaml", "recipes.yml", "recipes.json"):
        if (folder / name).is_file():
            return read_recipes(folder / name)
    return Recipes()


def _bundles(folder: Path) -> dict[str, str]:
    """`repos/<owner>__<name>.bundle` next to a dataset acts as that repository's source."""
    repos = folder / "repos"
    if not repos.is_dir():
        return {}
    return {
        p.name[: -len(".bundle")].replace("__", "/", 1): str(p)
        for p in sorted(repos.glob("*.bundle"))
    }


def iter_rows(ds: DatasetSource) -> Iterator[dict[str, Any]]:
    """Stream the rows of a dataset source."""
    path = Path(ds.location)
    if path.is_file():
        yield from _iter_file(path)
    elif path.is_dir():
        yield from _iter_dir(path, ds.split)
    else:
        yield from _iter_hub(ds.location, ds.split)


def _iter_file(path: Path) -> Iterator[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    yield _json_row(line, path, number)
    elif suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data if isinstance(data, list) else data.get("rows", data.get("data"))
        if not isinstance(rows, list):
            raise DatasetError(f"{path}: expected a JSON list of rows")
        yield from (dict(r) for r in rows)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=256):
                yield from batch.to_pylist()
    else:
        raise DatasetError(f"{path}: unsupported file type (use .jsonl, .json or .parquet)")


def _json_row(line: str, path: Path, number: int) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{number}: not JSON: {exc.msg}") from exc
    if not isinstance(row, dict):
        raise DatasetError(f"{path}:{number}: a row must be a JSON object")
    return row


def _iter_dir(path: Path, split: str) -> Iterator[dict[str, Any]]:
    """A folder in the hub download layout: data files whose name starts with the split."""
    candidates = sorted(
        p
        for p in path.rglob("*")
        if p.suffix in (".parquet", ".jsonl", ".json")
        and p.is_file()
        and (p.name.startswith(split) or p.parent.name == split)
    )
    if not candidates:
        raise DatasetError(f"{path}: no .parquet/.jsonl/.json files for split {split!r}")
    for candidate in candidates:
        yield from _iter_file(candidate)


def _iter_hub(name: str, split: str) -> Iterator[dict[str, Any]]:
    # Offline mode makes an unreachable hub fail in about a second instead of retrying for ~24 s.
    if not _hub_reachable():
        # Both libraries read the flag when first imported; huggingface_hub already is.
        os.environ["HF_HUB_OFFLINE"] = "1"
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = True
    try:
        import datasets

        stream = datasets.load_dataset(name, split=split, streaming=True)
        for row in stream:
            yield dict(row)
    except Exception as exc:  # datasets raises many unrelated types for "cannot reach"
        raise DatasetError(
            f"dataset {name!r} cannot be loaded from the hub ({type(exc).__name__}); "
            "pass a local .jsonl/.json/.parquet file or a downloaded folder instead"
        ) from exc


def _hub_reachable() -> bool:
    """Whether the hub endpoint the `huggingface_hub` library is configured for answers."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname or "", url.port or 443), timeout=2).close()
    except OSError:
        return False
    return True
