"""Submodules through repository sources (packager.repos.submodules), with real git: a snapshot
carries a submodule a source holds, cut at the recorded commit, so `git submodule update
--init` fetches nothing; a submodule no source holds is left out, or named when the build
fetches submodules."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from packager.errors import RepoSourceError
from packager.repos.git import Git
from packager.repos.stored import write_snapshot
from packager.repos.submodules import absolute_url, submodules_at
from tests.unit.repos.test_repos import ENV, git

URL = "https://github.com/kkos/oniguruma.git"


def _repos(tmp: Path) -> tuple[Path, str, str, str]:
    """A library with two commits (the second after the one recorded) and a project whose
    base commit records the first at modules/lib. Returns (library, its first and later
    commit, the project's base)."""
    lib = tmp / "lib"
    lib.mkdir()
    git("-c", "init.defaultBranch=main", "init", "--quiet", cwd=lib)
    (lib / "lib.c").write_text("int lib(void) { return 1; }\n")
    git("add", "-A", cwd=lib)
    git("commit", "--quiet", "-m", "lib one", cwd=lib)
    recorded = git("rev-parse", "HEAD", cwd=lib)
    (lib / "lib.c").write_text("int lib(void) { return 2; } /* later */\n")
    git("commit", "--quiet", "-am", "lib two", cwd=lib)
    later = git("rev-parse", "HEAD", cwd=lib)
    project = tmp / "project"
    project.mkdir()
    git("-c", "init.defaultBranch=main", "init", "--quiet", cwd=project)
    (project / "main.c").write_text("int main(void) { return 0; }\n")
    (project / ".gitmodules").write_text(
        f'[submodule "modules/lib"]\n\tpath = modules/lib\n\turl = {URL}\n'
    )
    git("add", "-A", cwd=project)
    git("update-index", "--add", "--cacheinfo", f"160000,{recorded},modules/lib", cwd=project)
    git("commit", "--quiet", "-m", "base", cwd=project)
    return lib, recorded, later, git("rev-parse", "HEAD", cwd=project)


def test_relative_urls_are_read_against_the_superprojects() -> None:
    assert (
        absolute_url("../oniguruma.git", "jqlang/jq") == "https://github.com/jqlang/oniguruma.git"
    )
    assert absolute_url(URL, "jqlang/jq") == URL


def test_a_snapshot_carries_a_submodule_its_source_holds(tmp_path: Path) -> None:
    lib, recorded, later, base = _repos(tmp_path)
    project = tmp_path / "project" / ".git"
    (sub,) = submodules_at(Git("t"), project, base, "o/project")
    assert (sub.path, sub.commit, sub.url) == ("modules/lib", recorded, URL)
    asked: list[str] = []

    def resolve(url: str) -> Path | None:
        asked.append(url)
        return lib / ".git"

    tar = tmp_path / "repo.tar"
    cache = tmp_path / "cache"
    written = write_snapshot(
        tar, git_dir=project, base_commit=base, task="t", cache_dir=cache,
        repo="o/project", submodules=resolve, submodules_required=True,
    )  # fmt: skip
    assert written.head == base and asked == [URL]
    work = tmp_path / "work"
    with tarfile.open(tar) as archive:
        archive.extractall(work, filter="tar")
    assert git("rev-parse", "HEAD", cwd=work / "modules" / "lib") == recorded
    # Only the recorded commit's history: the later one is not in the submodule's store.
    probe = subprocess.run(
        ["git", "cat-file", "-e", later], cwd=work / "modules" / "lib", env=ENV, check=False
    )
    assert probe.returncode != 0
    assert git("tag", "--list", cwd=work / "modules" / "lib") == ""
    # The build's own command finds it checked out and fetches nothing (the URL is unreachable).
    offline = {**ENV, "GIT_ALLOW_PROTOCOL": "file", "GIT_TERMINAL_PROMPT": "0"}
    subprocess.run(["git", "submodule", "update", "--init"], cwd=work, env=offline, check=True)
    assert git("status", "--porcelain", cwd=work) == ""
    # Without the submodule, the same base is another snapshot (another cache key).
    other = write_snapshot(
        tmp_path / "plain.tar", git_dir=project, base_commit=base, task="t", cache_dir=cache,
        repo="o/project", submodules=lambda url: None,
    )  # fmt: skip
    assert not other.reused
    with tarfile.open(tmp_path / "plain.tar") as archive:
        assert not [n for n in archive.getnames() if n.startswith("modules/lib/")]


def test_a_build_that_fetches_a_submodule_no_source_holds_fails_naming_its_url(
    tmp_path: Path,
) -> None:
    _, _, _, base = _repos(tmp_path)
    with pytest.raises(RepoSourceError) as caught:
        write_snapshot(
            tmp_path / "repo.tar", git_dir=tmp_path / "project" / ".git", base_commit=base,
            task="t", cache_dir=tmp_path / "cache", repo="o/project",
            submodules=lambda url: None, submodules_required=True,
        )  # fmt: skip
    assert URL in caught.value.problem and "--repo-source kkos/oniguruma=" in caught.value.problem
    assert not (tmp_path / "repo.tar").exists()


def _store(root: Path, source: Path, where: str) -> Path:
    """An objects folder gathered as the audit gathers one from an image's layers."""
    import shutil

    shutil.copytree(source / "objects", root / "objects")
    (root / "where").write_text(where)
    return root


def test_the_audit_reads_a_submodule_store_against_its_gitlink(tmp_path: Path) -> None:
    """The submodule's store may hold the recorded commit and its history; a later commit of
    the submodule is a finding, as a later commit of the repository is."""
    from packager.checks.audit.evidence import Secrets
    from packager.checks.audit.git import gitlinks, open_store
    from packager.checks.audit.image import _object_findings, _Walk
    from packager.checks.audit.layers import Scan

    lib, recorded, later, base = _repos(tmp_path)
    project = tmp_path / "project" / ".git"
    top = open_store(_store(tmp_path / "s" / "a", project, "/testbed/.git/objects"))
    sub = open_store(
        _store(tmp_path / "s" / "b", lib / ".git", "/testbed/modules/lib/.git/objects")
    )
    scan = Scan(Secrets((), {}), frozenset())
    assert gitlinks(top, base) == {"modules/lib": recorded}

    def commits(links: dict[str, str]) -> set[str]:
        walk = _Walk(b"", "", stores=[top, sub], workdir=top, submodule_stores=links)
        findings, _ = _object_findings(walk, base, scan)
        return {f.object_id or "" for f in findings if f.kind == "commit"}

    linked = {"/testbed/modules/lib/.git/objects": recorded}
    assert commits(linked) == {later}
    # Read against the superproject's base (no gitlink), every submodule commit is a finding.
    assert commits({}) == {recorded, later}
