"""Submodules of a snapshot, taken from repository sources like any repository.

A repository whose build runs `git submodule update --init` (jq's `modules/oniguruma`) needs the
submodule's objects, and builds here cannot reach its git host. When a repository source
(`--repo-source`, a folder of mirrors) holds the submodule's repository, the snapshot carries it
at its path as a repository of its own, cut at the commit the base tree records for it (its
history up to that commit, no tags, no remote): `git submodule update --init` then finds it
checked out at that commit and fetches nothing. One level only: a submodule's own submodules
are not followed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packager.errors import RepoSourceError
from packager.repos.git import Git
from packager.repos.names import canonical_repo_name
from packager.repos.snapshot import write_snapshot_repo


@dataclass(frozen=True)
class Submodule:
    """One submodule of a commit: its path, the commit its gitlink records, its URL."""

    path: str
    commit: str
    url: str


def absolute_url(url: str, repo: str) -> str:
    """A `.gitmodules` URL made absolute: a relative one (`../other.git`) is read against the
    superproject's GitHub URL, as git reads it against the superproject's remote.
    """
    if not url.startswith(("./", "../")):
        return url
    base = f"https://github.com/{repo}"
    host, _, path = base.partition("://")
    joined = posixpath.normpath(posixpath.join(path, url))
    return f"{host}://{joined}"


def submodules_at(run: Git, git_dir: Path, commit: str, repo: str) -> list[Submodule]:
    """The submodules `commit` records: each `.gitmodules` entry whose path is a gitlink of its
    tree (an entry without one, or a gitlink without an entry, is no submodule git can update).
    """
    blob = f"{commit}:.gitmodules"
    if run("cat-file", "-e", blob, cwd=git_dir, check=False).returncode != 0:
        return []
    listed = run(
        "config", "--blob", blob, "--get-regexp", r"^submodule\..*\.(path|url)$",
        cwd=git_dir, check=False,
    )  # fmt: skip
    entries: dict[str, dict[str, str]] = {}
    for line in listed.stdout.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        name, _, field = key[len("submodule.") :].rpartition(".")
        entries.setdefault(name, {})[field] = value.strip()
    paths = {e["path"]: e["url"] for e in entries.values() if e.get("path") and e.get("url")}
    if not paths:
        return []
    tree = run("ls-tree", "-z", commit, "--", *sorted(paths), cwd=git_dir, check=False)
    found = []
    for record in tree.stdout.decode("utf-8", "replace").split("\0"):
        meta, _, path = record.partition("\t")
        words = meta.split()
        if len(words) == 3 and words[0] == "160000" and path in paths:
            found.append(Submodule(path, words[2], absolute_url(paths[path], repo)))
    return sorted(found, key=lambda s: s.path)


Resolver = Callable[[str], Path | None]
"""A submodule's URL -> the git directory of a repository source holding it, or None."""


def resolve_submodules(
    run: Git, git_dir: Path, commit: str, repo: str, resolve: Resolver, *, required: bool
) -> list[tuple[Submodule, Path]]:
    """The submodules of `commit` that a repository source holds, with that source. A
    submodule no source holds is left out, unless `required` (the build fetches submodules):
    then the error names its URL and how to give it.
    """
    chosen = []
    for sub in submodules_at(run, git_dir, commit, repo):
        source = resolve(sub.url)
        if source is None:
            if required:
                raise RepoSourceError(
                    run.task,
                    "repo",
                    f"submodule {sub.path} ({sub.url} at {sub.commit[:12]}): no repository "
                    "source holds it and builds here cannot reach its host; give it with "
                    f"--repo-source {_name_or_url(sub.url)}=<git dir> or a folder of mirrors",
                )
            continue
        chosen.append((sub, source))
    return chosen


def _name_or_url(url: str) -> str:
    try:
        return canonical_repo_name(url)
    except ValueError:
        return url


def write_submodules(
    run: Git, dest: Path, chosen: list[tuple[Submodule, Path]], log_path: Path | None
) -> None:
    """Put each chosen submodule at its path in the snapshot work tree `dest`: a repository
    cut at the recorded commit (`write_snapshot_repo`, full history, no tags).
    """
    for sub, source in chosen:
        target = dest / sub.path
        if target.is_dir() and not any(target.iterdir()):
            target.rmdir()  # git leaves a gitlink's folder empty
        if target.exists():
            raise RepoSourceError(
                run.task, "repo", f"submodule {sub.path}: the work tree has files there already"
            )
        write_snapshot_repo(
            target,
            git_dir=source,
            base_commit=sub.commit,
            history="full",
            log_path=log_path,
            task=run.task,
            tags=False,
        )
