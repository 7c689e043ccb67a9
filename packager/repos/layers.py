"""A snapshot as two image layers: the history rows of a repository share, and the row's own.

A whole snapshot in one layer (`ADD repo.tar`) stores a repository's history once per row,
although rows of one repository share almost all of it. Laid out in two tars, the agent image
takes its history in two steps:

* `history.tar`, the **history layer**: every object the row's anchor reaches (the commit
  where its line meets the newest release made before it, `snapshot._anchor`, whose shared
  pack `write_snapshot_repo` already links in) and the anchor's tree, checked out. Nothing
  else: no ref, no index, no HEAD. It is a function of the anchor alone, written once per
  machine (`history_layer`), so every row with that anchor adds the very same file on the same
  environment and the engine keeps the layer once. Everything in it is history of each such
  row's base commit: the anchor is one of its ancestors.
* `repo.tar`, the **row layer**: what the row's snapshot holds beyond the history layer (its
  own pack, refs, index, config, the files that differ from the anchor's tree) and the list of
  the history layer's paths the snapshot does not hold (`REMOVED_LIST`), which the next step
  deletes.

History layer, then row layer, then the deletions give exactly the row's snapshot
(`row_layer` compares the two trees file by file, so whatever checkout differences there are
end up in the row layer). A row with no anchor (or an inline repository, a base-only
history) gets an empty history layer (the `.git` folder alone) and its whole snapshot in the
row layer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from packager.repos.git import Git
from packager.repos.snapshot import SHARED_PACK_FORMAT, write_snapshot_tar

HISTORY_LAYER_FORMAT = "1"
"""Bump when what a history layer holds changes: older ones are then never read again."""

REMOVED_LIST = ".git/packager-removed"
"""In the row layer: the history layer's paths the snapshot does not hold, NUL-separated; the
agent Dockerfile's step after the row layer deletes them, then this file."""

EMPTY = "empty"
"""The history layer of a row with no shared history: the `.git` folder alone (an archive with
no member is not unpacked by the engine's ADD, it is copied as a file)."""

_PACKS = ".git/objects/pack/"

Manifest = dict[str, list[str | int]]
"""A tree's paths: [kind ("f", "d" or "l"), mode, size, sha256 or link target]."""


def anchor_of(snapshot: Path, packs: Path) -> str | None:
    """The commit whose shared pack (`packs/<commit>-<format>/`) `snapshot` holds, if any."""
    pack_dir = snapshot / ".git" / "objects" / "pack"
    if not pack_dir.is_dir() or not packs.is_dir():
        return None
    held = {p.name for p in pack_dir.iterdir()}
    suffix = f"-{SHARED_PACK_FORMAT}"
    for shared in sorted(packs.iterdir()):
        if not shared.is_dir() or not shared.name.endswith(suffix):
            continue
        names = {p.name for p in shared.iterdir() if p.name.endswith(".pack")}
        if names and names <= held:
            return shared.name[: -len(suffix)]
    return None


def manifest_of(root: Path) -> Manifest:
    """Every path under `root` with what makes it what it is (`Manifest`)."""
    found: Manifest = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            found[rel] = ["l", mode, 0, os.readlink(path)]
        elif stat.S_ISDIR(info.st_mode):
            found[rel] = ["d", mode, 0, ""]
        elif rel.startswith(_PACKS) and path.name.startswith("pack-"):
            # A pack's name is its checksum (its index and reverse index share it): the
            # shared pack is hundreds of MB and in every snapshot of its repository.
            found[rel] = ["f", mode, info.st_size, path.name]
        else:
            found[rel] = ["f", mode, info.st_size, _file_digest(path)]
    return found


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def history_name(anchor: str | None) -> str:
    """The history layer's file name, without `.tar`, for `anchor` (None: the empty one)."""
    return f"{anchor or EMPTY}-{SHARED_PACK_FORMAT}.{HISTORY_LAYER_FORMAT}"


def history_layer(
    run: Git, git_dir: Path, anchor: str | None, packs: Path, folder: Path
) -> tuple[Path, Manifest]:
    """The history layer's tar for `anchor` (None: the empty one) and its manifest, written
    into `folder` once per machine (atomically: a second writer's copy is dropped).
    """
    name = history_name(anchor)
    tar_path, manifest_path = folder / f"{name}.tar", folder / f"{name}.json"
    if tar_path.is_file() and manifest_path.is_file():
        manifest: Manifest = json.loads(manifest_path.read_text())
        if anchor is None or _same_packs(manifest, packs / f"{anchor}-{SHARED_PACK_FORMAT}"):
            return tar_path, manifest
        # The shared pack was written again (a trimmed cache): a history layer holding the
        # pack snapshots now link in, so rows do not carry it in their own layer. A row layer
        # written over the old one still completes this one: the same objects, the same tree.
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="packager-history-", dir=folder) as tmp:
        root = Path(tmp) / "layer"
        (root / ".git").mkdir(parents=True)
        if anchor is not None:
            _fill_history(run, git_dir, anchor, packs, root, Path(tmp) / "index")
        manifest = manifest_of(root)
        tmp_tar, tmp_manifest = Path(tmp) / "layer.tar", Path(tmp) / "layer.json"
        write_snapshot_tar(root, tmp_tar)
        tmp_manifest.write_text(json.dumps(manifest, sort_keys=True))
        os.replace(tmp_manifest, manifest_path)  # the manifest first: a tar is read with it
        os.replace(tmp_tar, tar_path)
    return tar_path, manifest


def _same_packs(manifest: Manifest, shared: Path) -> bool:
    """Whether a history layer holds the very pack files of the shared pack folder."""
    held = {rel.rsplit("/", 1)[-1] for rel in manifest if rel.startswith(_PACKS)}
    return shared.is_dir() and held == {p.name for p in shared.iterdir()}


def _fill_history(
    run: Git, git_dir: Path, anchor: str, packs: Path, root: Path, index: Path
) -> None:
    """`root`: the shared pack of `anchor` and `anchor`'s tree checked out (through an index of
    its own, so the source is only read).
    """
    pack_dir = root / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True)
    for part in sorted((packs / f"{anchor}-{SHARED_PACK_FORMAT}").iterdir()):
        shutil.copyfile(part, pack_dir / part.name)
        shutil.copymode(part, pack_dir / part.name)  # as the snapshot links it: read-only
    env = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(root)}
    run("read-tree", f"{anchor}^{{tree}}", cwd=git_dir, env=env, problem="reading the tag's tree")
    run("checkout-index", "--all", "--force", cwd=git_dir, env=env,
        problem="checking out the tag's tree")  # fmt: skip


def row_layer(snapshot: Path, history: Manifest, tar_path: Path) -> int:
    """Write the row layer of `snapshot` over a history layer of manifest `history`: the
    paths whose kind, mode or content differ (with the folders they need that the history
    lacks) and `REMOVED_LIST`. Returns how many paths go to the deletion list.
    """
    mine = manifest_of(snapshot)
    keep = sorted(rel for rel, entry in mine.items() if history.get(rel) != entry)
    removed = _removed(mine, history)
    listing = b"".join(rel.encode() + b"\0" for rel in removed)
    list_path = snapshot / REMOVED_LIST
    list_path.write_bytes(listing)
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    write_snapshot_tar(snapshot, tar_path, [*keep, REMOVED_LIST])
    list_path.unlink()
    return len(removed)


def _removed(mine: Manifest, history: Manifest) -> list[str]:
    """The history's topmost paths the snapshot lacks, but none under a path the snapshot
    holds as a non-folder (the row layer's file replaced that folder already).
    """
    out: list[str] = []
    for rel in sorted(history):
        if rel in mine:
            continue
        parents = [rel.rsplit("/", n)[0] for n in range(1, rel.count("/") + 1)]
        if any(p in mine and mine[p][0] != "d" for p in parents):
            continue
        if out and rel.startswith(out[-1] + "/"):
            continue
        out.append(rel)
    return out
