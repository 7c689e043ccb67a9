"""The checks' one verdict store (`checks.store`): one file per task and check, one key scheme,
reuse only on the same key, the machine folder only for verdicts the check may reuse.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from packager.checks.store import AUDIT, CHECKS, QUALITY, Check, VerdictStore, verdict_key
from packager.storage import CHECK_NAMES, REPORT_SUFFIXES, CacheFolder, OutputPaths

PACKAGER = Path(__file__).resolve().parents[3] / "packager"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_key_depends_on_the_check_every_part_and_where_parts_end() -> None:
    key = verdict_key(AUDIT, "image", b"gold")
    assert key == verdict_key(AUDIT, b"image", "gold")  # str and bytes hash alike
    assert key != verdict_key(QUALITY, "image", "gold")
    assert key != verdict_key(AUDIT, "gold", "image")
    assert key != verdict_key(AUDIT, "imag", "egold")
    assert key != verdict_key(AUDIT, "image", "gold", "")


def test_a_verdict_is_reused_only_for_its_key(tmp_path: Path, machine: Path) -> None:
    store = VerdictStore(OutputPaths(tmp_path / "out", "ds"))
    key = verdict_key(QUALITY, "a")
    target = store.save(QUALITY, "t-1", {"task": "t-1", "flagged": False}, key)
    assert target == tmp_path / "out/ds/results/t-1.quality.json"
    assert json.loads(target.read_text())["cache_key"] == key
    assert store.reuse(QUALITY, "t-1", key) == {"task": "t-1", "flagged": False, "cache_key": key}
    assert store.reuse(QUALITY, "t-1", verdict_key(QUALITY, "b")) is None
    assert store.reuse(QUALITY, "t-2", key) is None  # no machine folder: another task has none
    assert not machine.exists()


def test_a_verdict_without_a_key_is_kept_but_never_reused(tmp_path: Path, machine: Path) -> None:
    store = VerdictStore(OutputPaths(tmp_path, "ds"))
    store.save(AUDIT, "t-1", {"clean": True}, None)
    assert store.read(AUDIT, "t-1") == {"clean": True}
    assert store.reuse(AUDIT, "t-1", verdict_key(AUDIT, "")) is None


def test_the_machine_folder_serves_another_output_folder(tmp_path: Path, machine: Path) -> None:
    key = verdict_key(AUDIT, "image")
    VerdictStore(OutputPaths(tmp_path / "one", "ds")).save(
        AUDIT, "t-1", {"task": "t-1", "instance_id": "T-1", "clean": True}, key
    )
    other = VerdictStore(OutputPaths(tmp_path / "two", "ds2"))
    owner = {"task": "u-1", "instance_id": "U-1"}
    assert (machine / "audits" / key[:2] / f"{key}.json").is_file()
    reused = other.reuse(AUDIT, "u-1", key, owner)
    assert reused is not None and reused["clean"] is True
    copied = json.loads((tmp_path / "two/ds2/results/u-1.audit.json").read_text())
    assert copied | owner == copied and copied["cache_key"] == key


def test_only_reusable_verdicts_reach_the_machine_folder_or_are_reused(
    tmp_path: Path, machine: Path
) -> None:
    store = VerdictStore(OutputPaths(tmp_path, "ds"))
    key = verdict_key(AUDIT, "leaky image")
    store.save(AUDIT, "t-1", {"clean": False, "findings": ["gold patch in layer 3"]}, key)
    assert not any(machine.rglob("*.json"))
    assert store.reuse(AUDIT, "t-1", key) is None  # a leak is audited again
    assert store.read(AUDIT, "t-1") is not None  # ... but its verdict is on file


def test_an_unreadable_verdict_is_not_reused(tmp_path: Path, machine: Path) -> None:
    store = VerdictStore(OutputPaths(tmp_path, "ds"))
    target = store.file(QUALITY, "t-1")
    target.parent.mkdir(parents=True)
    target.write_text("{not json")
    assert store.read(QUALITY, "t-1") is None
    assert store.reuse(QUALITY, "t-1", verdict_key(QUALITY)) is None


def test_a_toy_check_is_one_entry(tmp_path: Path, machine: Path) -> None:
    toy = Check("toy", machine=CacheFolder("toys", "toy verdicts", derived=True))
    key = verdict_key(toy, "x")
    with pytest.raises(AssertionError):  # storage names every check's file
        VerdictStore(OutputPaths(tmp_path, "ds")).save(toy, "t-1", {}, key)


def test_storage_and_the_store_name_the_same_checks() -> None:
    assert tuple(c.name for c in CHECKS) == CHECK_NAMES
    assert {f".{c}.json" for c in CHECK_NAMES} <= set(REPORT_SUFFIXES)


def test_no_check_writes_its_verdict_file_but_through_the_store() -> None:
    """The audit and the quality checks once each wrote and matched their own JSON; now only
    `checks/store.py` calls `write_json` under packager/checks.
    """
    writers = []
    for path in (PACKAGER / "checks").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "write_json":
                writers.append(path.relative_to(PACKAGER).as_posix())
    assert set(writers) == {"checks/store.py"}
