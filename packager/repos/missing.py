"""Inspecting a source before a snapshot is cut from it: what it is a mirror of, where a
shallow clone is cut, and which objects of the base tree or of the history it lacks (named with
their paths, so an error can say which files are absent).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from packager.repos.git import Git, tail

_LIST_LIMIT = 20  # how many missing objects a message names


def source_label(run: Git, git_dir: Path) -> str:
    """The git directory, and what it mirrors when it is a mirror-cache clone."""
    mirror = run("config", "--get", "remote.origin.mirror", cwd=git_dir, check=False)
    url = run("config", "--get", "remote.origin.url", cwd=git_dir, check=False)
    origin = url.stdout.decode(errors="replace").strip()
    if mirror.stdout.strip() == b"true" and origin:
        return f"{git_dir} (mirror of {origin})"
    return str(git_dir)


def shallow_commits(run: Git, git_dir: Path) -> set[str] | None:
    """The commits a shallow source is cut at (possibly empty), or None when not shallow."""
    probe = run("rev-parse", "--is-shallow-repository", cwd=git_dir, check=False)
    shallow_file = git_dir / "shallow"
    if probe.stdout.strip() != b"true" and not shallow_file.exists():
        return None
    try:
        return set(shallow_file.read_text().split())
    except OSError:
        return set()


def shallow_note(shallow: set[str] | None) -> str:
    if shallow is None:
        return ""
    return (
        f"; the source is a shallow clone (cut at {len(shallow)} commit(s)), "
        "so objects older than its cut are absent"
    )


def listing(missing: Sequence[tuple[str, str]]) -> str:
    shown = [f"{path or '(path unknown)'} ({oid})" for oid, path in missing[:_LIST_LIMIT]]
    more = len(missing) - len(shown)
    return ", ".join(shown) + (f", … and {more} more" if more > 0 else "")


def _tree_entries(body: bytes, oid_len: int) -> Iterable[tuple[str, str]]:
    """(name, object id) of each entry of a raw tree object."""
    pos = 0
    while pos < len(body):
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        name = body[space + 1 : nul].decode(errors="replace")
        yield name, body[nul + 1 : nul + 1 + oid_len].hex()
        pos = nul + 1 + oid_len


def _paths_in_tree(
    run: Git, git_dir: Path, present: Sequence[tuple[str, str]], missing: Sequence[str]
) -> dict[str, str]:
    """Path of each missing object, read from the present trees that point at it."""
    wanted = set(missing)
    found: dict[str, str] = {}
    if not wanted or not present:
        return found
    paths = dict(present)
    check = run(
        "cat-file",
        "--batch-check=%(objectname) %(objecttype)",
        cwd=git_dir,
        check=False,
        stdin="".join(f"{oid}\n" for oid in paths).encode(),
    )
    trees = [
        oid
        for line in check.stdout.decode().splitlines()
        for oid, _, kind in [line.partition(" ")]
        if kind == "tree"
    ]
    if not trees:
        return found
    batch = run(
        "cat-file",
        "--batch",
        cwd=git_dir,
        check=False,
        stdin="".join(f"{oid}\n" for oid in trees).encode(),
    )
    data, pos = batch.stdout, 0
    for tree in trees:
        newline = data.find(b"\n", pos)
        if newline < 0:
            break
        header = data[pos:newline].split()
        if len(header) != 3:  # "<oid> missing"
            pos = newline + 1
            continue
        size = int(header[2])
        body = data[newline + 1 : newline + 1 + size]
        pos = newline + 1 + size + 1
        prefix = paths.get(tree, "")
        for name, oid in _tree_entries(body, len(tree) // 2):
            if oid in wanted and oid not in found:
                found[oid] = f"{prefix}/{name}" if prefix else name
    return found


def _paths_in_history(
    run: Git, git_dir: Path, commit: str, missing: Sequence[str]
) -> dict[str, str]:
    """Path of each missing object of the history, from `git log --raw` (trees only)."""
    wanted = set(missing)
    found: dict[str, str] = {}
    argv = ["git", "log", "--raw", "-t", "-m", "--root", "--no-renames", "--no-abbrev"]
    argv += ["--format=", commit]
    deadline = time.monotonic() + 120
    with tempfile.TemporaryFile() as err:
        with subprocess.Popen(  # streamed: stops as soon as every object is named
            argv, cwd=git_dir, env=run.env(), stdout=subprocess.PIPE, stderr=err
        ) as proc:
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    meta, tab, path = line.rstrip(b"\n").partition(b"\t")
                    fields = meta.split()
                    if not tab or len(fields) < 4:
                        continue
                    for oid in (fields[3].decode(), fields[2].decode()):
                        if oid in wanted and oid not in found:
                            found[oid] = path.decode(errors="replace")
                    if len(found) == len(wanted) or time.monotonic() > deadline:
                        break
            finally:
                proc.kill()
        err.seek(0)
        run.log(argv, git_dir, err.read(), "stopped once the missing objects were named")
    return found


def base_tree_objects(
    run: Git, git_dir: Path, commit: str, base_commit: str
) -> tuple[bytes, list[tuple[str, str]]]:
    """The objects of the commit's tree as `oid path` lines, and the missing ones with paths."""
    listing = run(
        "rev-list",
        "--objects",
        "--missing=print",
        "--no-walk",
        commit,
        cwd=git_dir,
        field="base_commit",
        problem=f"cannot list the tree of {base_commit}",
    )
    present: list[tuple[str, str]] = []
    missing: list[str] = []
    lines: list[bytes] = []
    for raw in listing.stdout.splitlines():
        if raw.startswith(b"?"):
            missing.append(raw[1:].decode().strip())
            continue
        oid, _, path = raw.partition(b" ")
        if oid.decode() == commit:
            continue
        lines.append(raw)
        present.append((oid.decode(), path.decode(errors="replace")))
    if not missing:
        return b"".join(line + b"\n" for line in lines), []
    root = run("rev-parse", f"{commit}^{{tree}}", cwd=git_dir, check=False)
    named = _paths_in_tree(run, git_dir, present, missing)
    if root.returncode == 0:
        named.setdefault(root.stdout.decode().strip(), "(root tree)")
    return b"", [(oid, named.get(oid, "")) for oid in missing]


def history_missing(run: Git, git_dir: Path, commit: str) -> tuple[list[tuple[str, str]], str]:
    """Objects missing from the history up to `commit` (with paths), and rev-list's complaint."""
    walk = run("rev-list", "--objects", "--missing=print", commit, cwd=git_dir, check=False)
    missing = [raw[1:].decode().strip() for raw in walk.stdout.splitlines() if raw.startswith(b"?")]
    complaint = tail(walk.stderr, lines=3) if walk.returncode != 0 else ""
    named = _paths_in_history(run, git_dir, commit, missing) if missing else {}
    return [(oid, named.get(oid, "")) for oid in missing], complaint
