"""Closed history packs: a pack proved, once per machine, to hold exactly what one commit
reaches, so an image holding it needs no walk of that history again.

Rows of one repository share a pack of the history up to a tag (`repos.snapshot`); its
objects are most of what the audit's reachability walk (`rev-list --objects base`) reads on
every image. Here a pack is judged from its own bytes alone: indexed by host git
(`index-pack`, which checks every object), its objects listed, its single tip commit found and
`rev-list --objects <tip>` run in a repository holding nothing but that pack. When the walk
gives exactly the pack's objects, the pack is *closed* under its tip. The verdict, the listing,
the commit times and the index git wrote are kept under the sha256 of the pack's bytes (and the
audit's code, through `index_root`), so an image whose pack has other bytes is never judged by it.

In a store whose closed packs' tips are all ancestors of base_commit, what base_commit reaches
is the packs' objects plus `rev-list --objects base --not <tips>`: the same set the full walk
gives (everything a tip reaches is in its pack, and base reaches every tip). Anything else
(no closed pack, a tip base does not reach) leaves the audit on its full walk.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packager.repos.git import run_git

MIN_PACK_BYTES = 1 << 20
"""Smaller packs are walked as they are: proving them would cost more than it saves."""
_TYPES = {"commit": "c", "tree": "t", "blob": "b", "tag": "g"}
_NAMES = {v: k for k, v in _TYPES.items()}


@dataclass(frozen=True)
class ClosedPack:
    """A pack holding exactly the objects `tip` reaches."""

    tip: str
    objects: dict[str, str]
    """object id → type."""
    times: dict[str, int]
    """commit id → committer time (every commit of the pack)."""
    idx: Path
    """The pack index host git wrote for these bytes."""


def _git(git_dir: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    return run_git(f"--git-dir={git_dir}", *args, stdin=stdin, check=check, timeout=1800).stdout


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _bare(root: Path) -> Path:
    for sub in ("refs/heads", "refs/tags", "objects/pack", "objects/info"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    return root


def _prove(pack: Path, work: Path) -> tuple[str, dict[str, str], dict[str, int]] | None:
    """(tip, objects, commit times) when `pack` alone is closed under one tip, else None.
    Leaves the index host git wrote at `work/objects/pack/p.idx`.
    """
    git_dir = _bare(work)
    target = git_dir / "objects" / "pack" / "p.pack"
    try:
        os.link(pack, target)
    except OSError:
        shutil.copyfile(pack, target)
    if run_git(f"--git-dir={git_dir}", "index-pack", str(target), timeout=1800).returncode:
        return None
    listing = _git(
        git_dir,
        "cat-file",
        "--batch-all-objects",
        "--unordered",
        "--batch-check=%(objectname) %(objecttype)",
    )
    objects = dict(line.split(" ", 1) for line in listing.decode().splitlines())
    commits = [oid for oid, kind in objects.items() if kind == "commit"]
    if not commits or any(kind == "tag" for kind in objects.values()):
        return None
    stdin = ("\n".join(commits) + "\n").encode()
    rows = _git(git_dir, "log", "--no-walk=unsorted", "--stdin", "--format=%H %ct %P", stdin=stdin)
    times: dict[str, int] = {}
    parents: set[str] = set()
    for row in rows.decode().splitlines():
        sha, when, *rest = row.split()
        times[sha] = int(when)
        parents.update(rest)
    tips = [c for c in commits if c not in parents]
    if len(tips) != 1 or set(times) != set(commits):
        return None
    walked = run_git(f"--git-dir={git_dir}", "rev-list", "--objects", tips[0], timeout=1800)
    if walked.returncode:
        return None  # the pack lacks something its tip reaches
    reached = {line.split(b" ", 1)[0].decode() for line in walked.stdout.splitlines() if line}
    if reached != set(objects):
        return None
    return tips[0], objects, times


def _write(
    place: Path, tip: str, objects: dict[str, str], times: dict[str, int], idx: Path
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=".pack-", dir=place.parent))
    lines = [f"tip {tip}"]
    for kind, mark in _TYPES.items():
        lines.append(" ".join([mark, *(oid for oid, k in objects.items() if k == kind)]))
    lines.append(" ".join(["@", *(f"{sha}:{when}" for sha, when in times.items())]))
    (tmp / "listing").write_text("\n".join(lines) + "\n")
    shutil.copyfile(idx, tmp / "pack.idx")
    try:
        os.rename(tmp, place)
    except OSError:  # another audit wrote it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)


def _read(place: Path) -> ClosedPack | None:
    listing = place / "listing"
    if not listing.is_file():
        return None  # proved not closed (or never)
    tip = ""
    objects: dict[str, str] = {}
    times: dict[str, int] = {}
    for line in listing.read_text().splitlines():
        mark, *words = line.split(" ")
        if mark == "@":
            times = {sha: int(when) for sha, _, when in (w.partition(":") for w in words)}
        elif mark == "tip":
            tip = words[0]
        else:
            objects.update(dict.fromkeys(words, _NAMES[mark]))
    return ClosedPack(tip, objects, times, place / "pack.idx")


def _holds(git_dir: Path, idx: Path, oid: str) -> bool:
    """Whether the image's index of a pack lists `oid` (a cheap look before proving)."""
    if not idx.is_file():
        return False
    listing = _git(git_dir, "show-index", stdin=idx.read_bytes(), check=False)
    return f" {oid} ".encode() in listing


def closed_pack(pack: Path, root: Path, base: str | None = None) -> ClosedPack | None:
    """The pack's verdict from this machine's cache under `root`, proved now when absent and
    the pack does not hold `base` (a pack holding it is a row's own, proved in vain).
    """
    digest = file_sha256(pack)
    place = root / "packs" / digest[:2] / digest
    if place.is_dir():
        return _read(place)
    if base is not None and _holds(pack.parent.parent.parent, pack.with_suffix(".idx"), base):
        return None
    place.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="packager-pack-") as tmp:
        proved = _prove(pack, Path(tmp) / "repo")
        if proved is None:
            tmp_place = Path(tempfile.mkdtemp(prefix=".pack-", dir=place.parent))
            try:
                os.rename(tmp_place, place)  # an empty folder: not closed
            except OSError:
                shutil.rmtree(tmp_place, ignore_errors=True)
            return None
        tip, objects, times = proved
        _write(place, tip, objects, times, Path(tmp) / "repo" / "objects" / "pack" / "p.idx")
    return _read(place)


@dataclass(frozen=True)
class StoreView:
    """What the audit needs of a store, through its closed packs."""

    objects: dict[str, str]
    reachable: set[str]
    ancestor_times: dict[str, int]
    """Commit times of every commit base reaches."""


def store_view(
    git_dir: Path, base: str, closed: list[ClosedPack], others: Iterable[str]
) -> StoreView | None:
    """Objects, what `base` reaches and its ancestors' commit times of the store at `git_dir`,
    through its `closed` packs; None when it has none or base does not reach a tip (then walk
    it all). `others` lists every object id the store may hold (its origin map); the types of
    those outside the closed packs are read here.
    """
    if not closed:
        return None
    tips = [c.tip for c in closed]
    for tip in tips:
        probe = run_git(f"--git-dir={git_dir}", "merge-base", "--is-ancestor", tip, base)
        if probe.returncode:
            return None
    objects: dict[str, str] = {}
    times: dict[str, int] = {}
    for c in closed:
        objects.update(c.objects)
        times.update(c.times)
    reachable = set(objects)
    rest = _git(git_dir, "rev-list", "--objects", base, "--not", *tips)
    reachable.update(line.split(b" ", 1)[0].decode() for line in rest.splitlines() if line)
    rows = _git(git_dir, "log", "--format=%H %ct", base, "--not", *tips)
    for row in rows.decode().splitlines():
        sha, _, when = row.partition(" ")
        times[sha] = int(when)
    unknown = sorted(set(others).difference(objects))
    if unknown:
        stdin = ("\n".join(unknown) + "\n").encode()
        out = _git(git_dir, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=stdin)
        for line in out.decode().splitlines():
            parts = line.split()
            if len(parts) == 2:
                objects[parts[0]] = parts[1]
    return StoreView(objects, reachable, times)
