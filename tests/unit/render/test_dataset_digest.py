"""The Harbor task digest computed from a render's in-memory tree equals the one read from disk."""

from __future__ import annotations

from pathlib import Path

from packager.datasets.sources import open_dataset
from packager.render.harbor import make_harbor_task
from packager.render.harbor_dataset import content_digest, task_digest
from packager.run.resolve import resolve_spec
from packager.run.select import Selection, iter_specs
from tests.conftest import run_cli


def test_memory_and_disk_digests_agree(tmp_path: Path) -> None:
    assert run_cli("render", "--all", "--out", str(tmp_path)).returncode == 0
    sel = Selection(dataset=open_dataset(None), all_tasks=True)
    checked = 0
    for spec in iter_specs(sel):
        task = make_harbor_task(resolve_spec(spec, sel.merged_repo_sources))
        folder = tmp_path / "samples" / "tasks" / spec.provenance.slug
        assert content_digest(task.files, spec.provenance.slug) == task_digest(folder)
        # A build adds environment/repo.tar; the task's .gitignore keeps it out of the digest.
        (folder / "environment" / "repo.tar").write_bytes(b"snapshot")
        assert task_digest(folder) == content_digest(task.files, spec.provenance.slug)
        checked += 1
    assert checked == 5
    manifest = (tmp_path / "samples" / "dataset.toml").read_text()
    assert manifest.count("[[tasks]]") == 5
