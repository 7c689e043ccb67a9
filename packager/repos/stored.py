"""Snapshot tars kept in the machine cache: a row's snapshot is written once per repository
state and reused by every later row, run or dataset with the same base commit; rows of one
repository share the pack of its history up to a tag (`packs/`, see `write_snapshot_repo`).

A snapshot tar is a function of the base commit, the history mode, the tags of the source
that are part of that history and the code that writes it (`SNAPSHOT_FORMAT`); the cache is
keyed by all four, so a changed source (a tag added or moved) or changed code writes a new one.
Inline repositories (rows carrying their files) are cheap to write and are not kept. This
module never changes what a snapshot holds: `write_snapshot_repo` decides that.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packager.repos.git import Git
from packager.repos.layers import anchor_of, history_layer, history_name, row_layer
from packager.repos.snapshot import History, write_snapshot_repo, write_snapshot_tar
from packager.repos.submodules import Resolver, Submodule, resolve_submodules, write_submodules
from packager.storage import SNAPSHOTS

SNAPSHOT_FORMAT = "1"
"""Bump when what `write_snapshot_repo` or `write_snapshot_tar` writes changes: older cached
tars are then never read again."""


@dataclass(frozen=True)
class SnapshotWrite:
    """What `write_snapshot` did: the snapshot's HEAD and whether it came from the cache."""

    head: str
    reused: bool
    history: str | None = None
    """Layered: the commit the history layer holds (None: the empty history layer, or the
    snapshot is one tar)."""


def snapshot_cache_dir() -> Path:
    """Where snapshot tars are kept (`storage.SNAPSHOTS`)."""
    return SNAPSHOTS.path()


def snapshot_cache_key(run: Git, git_dir: Path, base_commit: str, history: History) -> str:
    """The cache key of a snapshot cut from `git_dir` at `base_commit` (a full commit id).

    With history `full` the tags of the source go in (the snapshot keeps those older than the
    base): any change to them makes a new key. The commit id fixes every object.
    """
    digest = hashlib.sha256(f"{SNAPSHOT_FORMAT}\0{base_commit}\0{history}".encode())
    if history == "full":
        tags = run(
            "for-each-ref",
            "--format=%(refname) %(objectname) %(creatordate:unix)",
            "refs/tags",
            cwd=git_dir,
        )
        digest.update(b"\0" + tags.stdout)
    return digest.hexdigest()[:32]


def _place(cached: Path, target: Path) -> None:
    """Put the cached tar at `target`: a hard link (no bytes copied) or, across file
    systems, a copy; atomically either way. Nothing writes a snapshot tar in place (writers
    replace it), so the link never changes the cached bytes.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(cached, tmp)
    except OSError:
        shutil.copyfile(cached, tmp)
    os.replace(tmp, target)


def write_snapshot(
    tar_path: Path,
    *,
    git_dir: Path | None,
    base_commit: str,
    files: dict[str, bytes] | None = None,
    history: History = "full",
    log_path: Path | None = None,
    task: str = "<snapshot>",
    cache_dir: Path | None = None,
    repo: str = "",
    submodules: Resolver | None = None,
    submodules_required: bool = False,
    history_path: Path | None = None,
) -> SnapshotWrite:
    """The snapshot tar of the repository at `base_commit` at `tar_path` (see
    `write_snapshot_repo`): taken from the cache when this repository state was written
    before, else written and kept there.

    With `submodules` (a URL -> repository source resolver), the base commit's submodules a
    source holds go in at their paths (`repos.submodules`; `repo` reads relative URLs); with
    `submodules_required`, one no source holds fails, naming its URL.

    With `history_path`, the snapshot is laid out as two image layers (`repos.layers`): the
    history layer's tar at `history_path` (kept once per machine for every row sharing it),
    the row layer's at `tar_path`.
    """
    run = Git(task, log_path)
    key = None
    chosen: list[tuple[Submodule, Path]] = []
    if files is None and git_dir is not None:
        resolved = run("rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}",
                       cwd=git_dir, check=False)  # fmt: skip
        if resolved.returncode == 0:
            commit = resolved.stdout.decode().strip()
            key = snapshot_cache_key(run, git_dir, commit, history)
            if submodules is not None:
                chosen = resolve_submodules(
                    run, git_dir, commit, repo, submodules, required=submodules_required
                )
            if chosen:  # which submodules went in: each fixed by its commit id
                listed = "".join(f"\0{sub.path}@{sub.commit}" for sub, _ in chosen)
                key = hashlib.sha256(f"{key}{listed}".encode()).hexdigest()[:32]
    folder = cache_dir or snapshot_cache_dir()
    if key is not None and history_path is not None:
        key = hashlib.sha256(f"{key}\0layered".encode()).hexdigest()[:32]
    reused = _from_cache(folder, key, tar_path, history_path) if key is not None else None
    if reused is not None:
        return reused
    with tempfile.TemporaryDirectory(prefix="packager-snap-") as tmp:
        snap = Path(tmp) / "repo"
        head = write_snapshot_repo(
            snap,
            git_dir=git_dir,
            base_commit=base_commit,
            files=files,
            history=history,
            log_path=log_path,
            task=task,
            shared_packs=folder / "packs",
        )
        write_submodules(run, snap, chosen, log_path)
        tar_path.parent.mkdir(parents=True, exist_ok=True)
        anchor: str | None = None
        if history_path is None:
            write_snapshot_tar(snap, tar_path)
        else:
            if git_dir is not None and key is not None:
                anchor = anchor_of(snap, folder / "packs")
            history_tar, manifest = history_layer(
                run, git_dir or snap, anchor, folder / "packs", folder / HISTORY_FOLDER
            )
            row_layer(snap, manifest, tar_path)
            _place(history_tar, history_path)
    if key is not None:
        _keep(folder, key, head, tar_path, anchor if history_path else None, history_path)
    return SnapshotWrite(head, reused=False, history=anchor if history_path else None)


HISTORY_FOLDER = "history"
"""Under the snapshot cache: the history layers' tars (`repos.layers.history_layer`)."""


def _from_cache(
    folder: Path, key: str, tar_path: Path, history_path: Path | None
) -> SnapshotWrite | None:
    """The cached snapshot of `key` placed at `tar_path` (and its history layer at
    `history_path`), when the cache holds all of it.
    """
    cached, head_file = folder / f"{key}.tar", folder / f"{key}.head"
    layer_file = folder / f"{key}.history"
    history_tar = _cached_history(folder, layer_file) if history_path else None
    if not (cached.is_file() and head_file.is_file()):
        return None
    if history_path is not None and history_tar is None:
        return None
    _place(cached, tar_path)
    if history_path is not None and history_tar is not None:
        _place(history_tar, history_path)
    kept = layer_file.read_text().strip() if history_path else ""
    return SnapshotWrite(head_file.read_text().strip(), True, kept or None)


def _keep(
    folder: Path,
    key: str,
    head: str,
    tar_path: Path,
    anchor: str | None,
    history_path: Path | None,
) -> None:
    """Keep a written snapshot under `key`: the history layer it was written over (layered),
    then its head, then its tar (a tar is only read with its head).
    """
    folder.mkdir(parents=True, exist_ok=True)
    if history_path is not None:
        layer_tmp = folder / f".{key}.history.{os.getpid()}.tmp"
        layer_tmp.write_text(f"{anchor or ''}\n")
        os.replace(layer_tmp, folder / f"{key}.history")
    head_tmp = folder / f".{key}.head.{os.getpid()}.tmp"
    head_tmp.write_text(head + "\n")
    os.replace(head_tmp, folder / f"{key}.head")
    _place(tar_path, folder / f"{key}.tar")


def _cached_history(folder: Path, layer_file: Path) -> Path | None:
    """The history layer a cached row layer was written over, when it is still kept."""
    if not layer_file.is_file():
        return None
    tar = folder / HISTORY_FOLDER / f"{history_name(layer_file.read_text().strip() or None)}.tar"
    return tar if tar.is_file() else None
