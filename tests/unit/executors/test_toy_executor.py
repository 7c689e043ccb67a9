"""A new executor is one module and one registry entry: a toy one, written here as a module of
its own and added to `registry.EXECUTORS` only, runs a whole `package` through the driver
(nothing else in the packager names it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from packager import registry
from packager.config import RunConfig
from packager.run import driver

TOY = '''
from packager.models.spec import TaskResult


class ToyExecutor:
    """Says every task was built, without building anything."""

    name = "toy"

    def __init__(self, log):
        self.log = log

    @classmethod
    def from_config(cls, config, *, client, log):
        assert client is None  # its entry does not ask for the local engine
        return cls(log)

    def run(self, specs, job, events):
        for spec in specs:
            self.log(f"toy ran {spec.task_id}")
            events.built()
            events.result(TaskResult(
                task=spec.provenance.slug, instance_id=spec.task_id,
                dataset=spec.provenance.dataset, status="built", engine="toy",
            ))
'''


class Quiet:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def test_a_toy_executor_needs_its_module_and_a_registry_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "toy_executor.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.EXECUTORS, "toy", registry.Entry("toy_executor:ToyExecutor"))  # type: ignore[index]
    config = RunConfig.load(
        None,
        {
            "selection": {"tasks": ("samples__textkit-1",)},
            "executor": {"name": "toy"},
            "out": tmp_path / "out",
        },
    )
    display = Quiet()
    outcome = driver.package(config, display, verify=False)  # type: ignore[arg-type]
    assert display.notes == ["toy ran samples__textkit-1"]
    saved = json.loads(
        (tmp_path / "out" / "samples" / "results" / "samples__textkit-1.json").read_text()
    )
    assert saved["status"] == "built" and saved["engine"] == "toy"
    assert outcome.exit_code(strict_quality=False) == 0
