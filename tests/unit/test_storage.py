"""One owner of paths: the machine cache's folders and a dataset's output paths."""

from __future__ import annotations

import re
from pathlib import Path

from packager import storage

PACKAGE = Path(storage.__file__).parent


def test_cache_folders_are_unique_and_under_the_cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path))
    names = [folder.name for folder in storage.CACHE_FOLDERS]
    assert len(names) == len(set(names))
    assert all(folder.path() == tmp_path / folder.name for folder in storage.CACHE_FOLDERS)
    derived = {folder.name for folder in storage.CACHE_FOLDERS if folder.derived}
    assert "mirrors" not in derived and "locks" not in derived and "snapshots" in derived


def test_no_other_module_builds_a_cache_path():
    """A folder of the cache is named in storage.py only: nobody joins `cache_root()` with a
    name of their own, and no module imports `cache_root` but the one that cleans the cache.
    """
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "storage.py":
            continue
        text = path.read_text()
        if re.search(r"cache_root\(\)\s*/", text):
            offenders.append(f"{path.relative_to(PACKAGE)}: joins cache_root()")
        for folder in storage.CACHE_FOLDERS:
            if re.search(rf"""/\s*["']{re.escape(folder.name)}["']""", text):
                offenders.append(f"{path.relative_to(PACKAGE)}: names {folder.name!r}")
    assert offenders == []


def test_output_paths():
    paths = storage.OutputPaths(Path("/out"), "ds")
    assert paths.result_file("t") == Path("/out/ds/results/t.json")
    assert paths.error_file("t") == Path("/out/ds/results/t.error.json")
    assert paths.task_dir("t") == Path("/out/ds/tasks/t")
    assert paths.log_dir("t") == Path("/out/ds/logs/t")
    assert paths.report_file == Path("/out/ds/report.md")


def test_result_file_names_are_made_in_storage_only():
    """results/, <task>.audit.json, .quality.json and .error.json: named in storage.py alone."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "storage.py" or "grading" in path.parts:
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(
                r"""/\s*["']results["']|f?["'][^"'\n]*\.(audit|quality|error)\.json["']""", code
            ):
                if not code.strip().startswith(('"""', "`")):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{lineno}")
    assert offenders == []
    paths = storage.OutputPaths(Path("/out"), "ds")
    assert paths.audit_file("t") == Path("/out/ds/results/t.audit.json")
    assert paths.quality_file("t") == Path("/out/ds/results/t.quality.json")
    assert paths.relative(paths.audit_file("t")) == "results/t.audit.json"
