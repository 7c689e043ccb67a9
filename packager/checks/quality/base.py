"""Whether a text is in a task's base tree (`in_base`), the question every leak check asks:
a path or a file name of the tree, or a text one of its files holds. Over a repository source
at its base commit (`git grep`) or over a PDL row's inline files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from packager import repos
from packager.checks.quality.leaks import _IDENT
from packager.errors import PackagerError
from packager.repos.git import run_git
from packager.repos.read import list_files

if TYPE_CHECKING:
    from packager.models.spec import TaskSpec


def _path_known(paths: Sequence[str], name: str) -> bool:
    """`name` is a file, a folder, or the file name of a file of the tree."""
    name = name.strip("/")
    if not name:
        return False
    for path in paths:
        if path == name or path.startswith(name + "/") or path.rsplit("/", 1)[-1] == name:
            return True
    return False


def base_tree_names(git_dir: Path, commit: str) -> Callable[[str], bool]:
    """`in_base(text)` for a commit of a repository source: whether `text` is a path (file,
    folder or file name) of the commit's tree, or occurs in one of its files (`git grep`, as a
    whole word when it is a name). Answers are cached per text.
    """
    paths = list_files(git_dir, commit)

    @lru_cache(maxsize=1024)
    def in_base(text: str) -> bool:
        if _path_known(paths, text):
            return True
        word = ["-w"] if _IDENT.fullmatch(text) else []
        done = run_git(
            f"--git-dir={git_dir}", "grep", "-q", "-I", "-F", *word, "-e", text, commit, timeout=300
        )
        if done.returncode not in (0, 1):
            raise PackagerError(
                f"git grep in {git_dir} at {commit[:12]} failed: "
                + done.stderr.decode(errors="replace").strip()
            )
        return done.returncode == 0

    return in_base


def files_names(files: Mapping[str, bytes]) -> Callable[[str], bool]:
    """`in_base(text)` for an inline repository (PDL `files`): the same answers as
    `base_tree_names` gives for a commit of those files.
    """
    paths = sorted(files)
    texts = [data.decode("utf-8", "replace") for data in files.values() if b"\0" not in data]

    @lru_cache(maxsize=1024)
    def in_base(text: str) -> bool:
        if _path_known(paths, text):
            return True
        if _IDENT.fullmatch(text):
            pattern = re.compile(rf"(?<!\w){re.escape(text)}(?!\w)")
            return any(pattern.search(t) for t in texts)
        return any(text in t for t in texts)

    return in_base


def base_lookup(
    spec: TaskSpec, repo_sources: Mapping[str, str], mirror_dirs: Sequence[str] = ()
) -> Callable[[str], bool]:
    """`in_base` for a task's base tree: its inline files, or its repository source at
    `base_commit` (the mirror the build used).
    """
    if spec.repo.files is not None:
        return files_names(spec.repo.files)

    source = repos.source_for(spec.repo.name, dict(repo_sources), mirror_dirs=tuple(mirror_dirs))
    return base_tree_names(repos.git_dir_for(source), spec.repo.base_commit)
