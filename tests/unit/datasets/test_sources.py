"""Row loading from every kind of source, streaming, and the cheap import."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from packager.adapters import Context, detect_schema, row_id, to_spec
from packager.datasets.sources import iter_rows, open_dataset
from packager.errors import DatasetError
from tests.conftest import run_cli, sample_rows


def test_samples_are_the_default() -> None:
    ds = open_dataset(None)
    assert ds.name == "samples"
    rows = list(iter_rows(ds))
    ids = [row_id(r) for r in rows]
    assert len(ids) == 5 and len(set(ids)) == 5 and None not in ids
    # SWEeper rows are identified by case_id, every other card by instance_id.
    by_schema = {detect_schema(r): r for r in rows}
    assert "instance_id" not in by_schema["sweeper"]
    assert row_id(by_schema["sweeper"]) == by_schema["sweeper"]["case_id"]
    # SWE-rebench's install_config arrives as the card's JSON string, not an object.
    install_config = by_schema["swe-rebench"]["install_config"]
    assert isinstance(install_config, str) and isinstance(json.loads(install_config), dict)
    assert set(ds.repo_sources) == {
        "samples/textkit",
        "samples/intset",
        "samples/kvstore",
        "samples/todo-web",
    }
    # The SWE-bench sample carries no environment: the shipped recipes.yaml gives it one.
    assert set(ds.recipes.entries) == {"samples/textkit@1.0"}


def test_list_prints_id_schema_language() -> None:
    proc = run_cli("list")
    assert proc.returncode == 0, proc.stderr
    lines = [line.split("\t") for line in proc.stdout.splitlines()]
    assert {line[0] for line in lines} == {row_id(r) for r in sample_rows()}
    schemas = {line[1] for line in lines}
    assert schemas == {"swebench", "swe-rebench", "ec-swe", "pdl", "sweeper"}


def test_jsonl_json_parquet_and_folder_give_the_same_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [r for r in sample_rows() if row_id(r) in ("samples__textkit-1", "samples__intset-2")]
    # Both cards' columns are all strings (FAIL_TO_PASS, install_config, meta: JSON text), so
    # one Parquet table holds both; a column one row lacks is null in it.
    assert all(isinstance(v, str) for r in rows for v in r.values())
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "b.json").write_text(json.dumps(rows))
    keys = sorted({k for r in rows for k in r})
    table = pa.table({k: [r.get(k) for r in rows] for k in keys})
    folder = tmp_path / "hub" / "data"
    folder.mkdir(parents=True)
    pq.write_table(table, tmp_path / "c.parquet")
    pq.write_table(table, folder / "test-00000-of-00001.parquet")
    for source in ("a.jsonl", "b.json"):
        assert list(iter_rows(open_dataset(str(tmp_path / source)))) == rows, source
    for source in ("c.parquet", "hub"):
        got = list(iter_rows(open_dataset(str(tmp_path / source))))
        assert [{k: v for k, v in r.items() if v is not None} for r in got] == rows, source
    # Each row still adapts from Parquet (the JSON-string columns parse as they do from JSONL).
    got = list(iter_rows(open_dataset(str(tmp_path / "c.parquet"))))
    ctx = Context("x", "test", recipes=open_dataset(None).recipes)
    specs = [to_spec(r, ctx) for r in got]
    assert [s.task_id for s in specs] == [row_id(r) for r in rows]
    assert specs[1].environment.env["GOFLAGS"] == "-mod=mod"  # from install_config's JSON text


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
        "import sys, packager, packager.models.spec, packager.adapters, packager.render.harbor; "
        "print(sorted(m for m in ('docker', 'datasets', 'typer', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
