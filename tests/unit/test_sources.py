"""Row loading from every kind of source, streaming, and the cheap import."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from packager.errors import DatasetError
from packager.sources import iter_rows, open_dataset
from tests.conftest import run_cli, sample_rows


def test_samples_are_the_default() -> None:
    ds = open_dataset(None)
    assert ds.name == "samples"
    ids = [r["instance_id"] for r in iter_rows(ds)]
    assert len(ids) == 5 and len(set(ids)) == 5
    assert set(ds.repo_sources) == {
        "samples/textkit",
        "samples/intset",
        "samples/kvstore",
        "samples/todo-web",
    }


def test_list_prints_id_schema_language() -> None:
    proc = run_cli("list")
    assert proc.returncode == 0
    lines = [line.split("\t") for line in proc.stdout.splitlines()]
    schemas = {line[1] for line in lines}
    assert schemas == {"swebench", "swe-rebench", "ec-swe", "pdl", "sweeper"}


def test_jsonl_json_parquet_and_folder_give_the_same_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        r for r in sample_rows() if r["instance_id"] in ("samples__textkit-1", "samples__intset-2")
    ]
    # Parquet columns are uniform; keep the columns the two rows share, as strings.
    for r in rows:
        r["install_config"] = (
            json.dumps(r["install_config"])
            if isinstance(r["install_config"], dict)
            else r["install_config"]
        )
        r.setdefault("docker_image", None)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "b.json").write_text(json.dumps(rows))
    keys = sorted({k for r in rows for k in r})
    table = pa.table(
        {
            k: [r.get(k) if not isinstance(r.get(k), list) else json.dumps(r[k]) for r in rows]
            for k in keys
        }
    )
    folder = tmp_path / "hub" / "data"
    folder.mkdir(parents=True)
    pq.write_table(table, tmp_path / "c.parquet")
    pq.write_table(table, folder / "test-00000-of-00001.parquet")
    expect = [r["instance_id"] for r in rows]
    for source in ("a.jsonl", "b.json", "c.parquet", "hub"):
        got = [r["instance_id"] for r in iter_rows(open_dataset(str(tmp_path / source)))]
        assert got == expect, source


def test_rows_are_streamed(tmp_path: Path) -> None:
    data = tmp_path / "big.jsonl"
    data.write_text('{"instance_id": "a"}\n' + "not json\n")
    rows = iter_rows(open_dataset(str(data)))
    assert next(rows)["instance_id"] == "a"  # the first row arrives before the bad line is read
    with pytest.raises(DatasetError, match="big.jsonl:2"):
        next(rows)


def test_hub_id_without_network_fails_fast() -> None:
    started = time.monotonic()
    proc = run_cli("list", "--dataset", "nobody/no-such-dataset", timeout=60)
    assert proc.returncode == 2
    assert "local" in proc.stderr and "nobody/no-such-dataset" in proc.stderr
    assert time.monotonic() - started < 20


def test_import_is_cheap() -> None:
    code = (
        "import sys, packager, packager.model, packager.adapters, packager.targets.harbor; "
        "print(sorted(m for m in ('docker', 'datasets', 'typer', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
