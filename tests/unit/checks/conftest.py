"""The audit unit tests keep their layer indexes in a folder of their own, not the machine cache."""

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path_factory.getbasetemp() / "packager-cache"
    monkeypatch.setenv("PACKAGER_CACHE", str(cache))
    return cache
