"""Repo sources and snapshots: where a repository comes from, and the cut copy that goes into
the agent image.

A repo source is a bare repo, a working copy, a git bundle or a URL (default
`https://github.com/<owner>/<name>.git`). Sources are given per repository
(`OWNER/NAME=LOCATION`, the key may also be the repository's URL) or as folders of mirrors
(see `find_mirror`). Bundles and URLs are cloned once into a bare mirror cache shared by every
task of that repository. Nothing here ever runs inside `docker build`.

A snapshot is a fresh repository cut at `base_commit`: one branch, no tags, no remotes, no
reflog, no stray objects, so `git log --all` inside the agent image cannot show the fix. With
history `full` it holds the history up to `base_commit`; with `base-only` one commit whose tree
is `base_commit`'s tree. Every git failure becomes a `RepoSourceError` carrying git's own words,
and missing objects are named with their paths.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from packager.errors import RepoSourceError
from packager.repos.objects import (
    BASE_ONLY_MESSAGE,
    INLINE_IDENTITY,
    INLINE_MESSAGE,
    INLINE_TIMESTAMP,
    base_only_commit_sha,
)

History = Literal["full", "base-only"]
HISTORY_MODES: tuple[History, ...] = ("full", "base-only")

_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_NO_REPLACE_OBJECTS": "1",
    "LC_ALL": "C",
}
_TIMEOUT = 600
_STDERR_LINES = 12  # how much of git's stderr an error carries
_LIST_LIMIT = 20  # how many missing objects a message names


def _tail(data: bytes | str | None, lines: int = _STDERR_LINES) -> str:
    if data is None:
        return ""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    return "\n".join(text.rstrip().splitlines()[-lines:])


class _Git:
    """Runs git for one task: logs every command with its stderr, raises `RepoSourceError`."""

    def __init__(self, task: str = "<git>", log_path: Path | None = None) -> None:
        self.task = task
        self.log_path = log_path
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, **_GIT_ENV, **(extra or {})}

    def log(
        self, argv: Sequence[str], cwd: Path | None, stderr: bytes | str | None, end: str
    ) -> None:
        if self.log_path is None:
            return
        where = f"  [in {cwd}]" if cwd is not None else ""
        text = _tail(stderr, lines=200)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"$ {shlex.join(argv)}{where}\n")
            if text:
                fh.write(text + "\n")
            fh.write(f"[{end}]\n")

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        check: bool = True,
        field: str = "repo",
        problem: str | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = ["git", *args]
        try:
            proc = subprocess.run(
                argv,
                cwd=cwd,
                env=self.env(env),
                input=stdin,
                capture_output=True,
                check=False,
                timeout=_TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            self.log(argv, cwd, exc.stderr, f"timed out after {_TIMEOUT}s")
            raise RepoSourceError(
                self.task,
                field,
                f"{problem or 'git command'}: timed out after {_TIMEOUT}s",
                command=argv,
                stderr=_tail(exc.stderr),
            ) from None
        except OSError as exc:
            self.log(argv, cwd, str(exc), "could not start")
            raise RepoSourceError(
                self.task, field, f"{problem or 'git command'}: cannot run git: {exc}", command=argv
            ) from None
        self.log(argv, cwd, proc.stderr, f"exit {proc.returncode}")
        if check and proc.returncode != 0:
            raise RepoSourceError(
                self.task,
                field,
                f"{problem or 'git command failed'} (exit {proc.returncode})",
                command=argv,
                stderr=_tail(proc.stderr),
            )
        return proc


def _git(
    *args: str, cwd: Path | None = None, check: bool = True, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """One git command, unlogged; a failure (when `check`) is a `RepoSourceError`."""
    return _Git()(*args, cwd=cwd, check=check, env=env)


def default_cache_dir() -> Path:
    """Where bare mirrors live (under `paths.cache_root`)."""
    from packager.run.store import cache_root

    return cache_root() / "mirrors"


# ---------------------------------------------------------------------------------------------
# Repository names and sources

_URL_RE = re.compile(
    r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]+@)?(?P<host>[^/]+)/"
    r"|[^@/\s]+@(?P<scphost>[^:/\s]+):"
    r"|(?P<barehost>github\.com)/)"
    r"(?P<path>.*)$"
)
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")


def _is_url(text: str) -> bool:
    return _URL_RE.match(text.strip()) is not None


def canonical_repo_name(name_or_url: str) -> str:
    """`owner/name` for a repository given as `owner/name` or as a URL.

    Accepts `https://github.com/owner/name`, with or without `.git` or a trailing slash,
    `git@github.com:owner/name.git`, `ssh://…`, `github.com/owner/name`, and `owner/name(.git)`.
    On github.com extra path segments (`/tree/main`) are ignored; on other hosts the last two
    segments name the repository. Case is kept (GitHub names are case-insensitive: lookups
    compare case-folded). Raises `ValueError` when no `owner/name` can be read.
    """
    text = name_or_url.strip()
    match = _URL_RE.match(text)
    path = match.group("path") if match else text
    path = path.split("?", 1)[0].split("#", 1)[0]
    parts = [p for p in path.split("/") if p]
    if match:
        host = match.group("host") or match.group("scphost") or match.group("barehost") or ""
        host = host.rsplit("@", 1)[-1].split(":", 1)[0].lower()
        if len(parts) > 2:
            parts = parts[:2] if host in ("github.com", "www.github.com") else parts[-2:]
    elif path.startswith("/") or len(parts) != 2:
        raise ValueError(f"{name_or_url!r} is not OWNER/NAME or a repository URL")
    if len(parts) != 2:
        raise ValueError(f"{name_or_url!r}: the URL does not name OWNER/NAME")
    owner, name = parts
    if name.endswith(".git"):
        name = name[: -len(".git")]
    for part in (owner, name):
        if not _NAME_PART_RE.match(part) or part in (".", ".."):
            raise ValueError(f"{name_or_url!r}: {part!r} is not a valid owner or repository name")
    return f"{owner}/{name}"


def _looks_like_source(path: Path) -> bool:
    """A bundle file, a bare repository or a working copy."""
    if path.is_file():
        return path.name.endswith(".bundle")
    if path.is_dir():
        bare = (path / "HEAD").is_file() and (path / "objects").is_dir()
        return bare or (path / ".git").exists()
    return False


def _child(parent: Path, name: str) -> Path | None:
    """`parent/name`, else the one entry whose name matches case-insensitively."""
    exact = parent / name
    if exact.exists():
        return exact
    try:
        entries = sorted(os.listdir(parent))
    except OSError:
        return None
    wanted = name.casefold()
    for entry in entries:
        if entry.casefold() == wanted:
            return parent / entry
    return None


def _mirror_layouts(owner: str, name: str) -> list[tuple[str, ...]]:
    return [
        (owner, f"{name}.git"),
        (owner, name),
        (f"{owner}+{name}.git",),
        (f"{owner}+{name}",),
        (f"{owner}__{name}.git",),
        (f"{owner}__{name}.bundle",),
    ]


def find_mirror(folder: Path, name: str) -> Path | None:
    """Where a folder of mirrors keeps `owner/name`, or None.

    Layouts, first match wins: `<owner>/<name>.git`, `<owner>/<name>` (bare or working copy),
    `<owner>+<name>.git`, `<owner>+<name>`, `<owner>__<name>.git`, `<owner>__<name>.bundle`.
    Names match case-insensitively when the exact spelling is absent.
    """
    owner, repo = canonical_repo_name(name).split("/")
    for parts in _mirror_layouts(owner, repo):
        path: Path | None = folder
        for part in parts:
            path = _child(path, part) if path is not None else None
        if path is not None and _looks_like_source(path):
            return path
    return None


def scan_mirror_dir(folder: Path) -> dict[str, str]:
    """Every repository a folder of mirrors holds: `owner/name` → location (as `find_mirror`)."""
    names: set[str] = set()
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return {}
    for entry in entries:
        base = entry.name
        for suffix in (".bundle", ".git"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        for sep in ("+", "__"):
            if sep in base:
                names.add(base.replace(sep, "/", 1))
                break
        else:
            if entry.is_dir() and not _looks_like_source(entry):
                for sub in sorted(entry.iterdir()):
                    sub_name = sub.name[: -len(".git")] if sub.name.endswith(".git") else sub.name
                    names.add(f"{entry.name}/{sub_name}")
    found: dict[str, str] = {}
    for candidate in sorted(names):
        try:
            canon = canonical_repo_name(candidate)
        except ValueError:
            continue
        location = find_mirror(folder, canon)
        if location is not None:
            found.setdefault(canon, str(location))
    return found


@dataclass(frozen=True)
class RepoSources:
    """Repo sources from the command line: per-repository locations and folders of mirrors.

    `explicit` maps canonical `owner/name` to a location; `mirror_dirs` are searched in order
    after it.
    """

    explicit: dict[str, str] = field(default_factory=dict)
    mirror_dirs: tuple[str, ...] = ()

    def location_for(self, name: str) -> str | None:
        """The location for `name` (`owner/name` or a URL), or None (use the default URL)."""
        try:
            canon = canonical_repo_name(name)
        except ValueError:
            return None
        if canon in self.explicit:
            return self.explicit[canon]
        wanted = canon.casefold()
        for key, location in self.explicit.items():
            try:
                if canonical_repo_name(key).casefold() == wanted:
                    return location
            except ValueError:
                continue
        for folder in self.mirror_dirs:
            hit = find_mirror(Path(folder), canon)
            if hit is not None:
                return str(hit)
        return None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.location_for(name) is not None

    def with_defaults(self, defaults: Mapping[str, str]) -> RepoSources:
        """These sources, falling back to `defaults` (e.g. a dataset's own bundles)."""
        merged: dict[str, str] = {}
        for key, location in defaults.items():
            try:
                merged[canonical_repo_name(key)] = location
            except ValueError:
                merged[key] = location
        merged.update(self.explicit)
        return RepoSources(merged, self.mirror_dirs)

    def expanded(self) -> dict[str, str]:
        """One mapping: every repository of every mirror folder, overridden by `explicit`."""
        mapping: dict[str, str] = {}
        for folder in reversed(self.mirror_dirs):  # earlier folders win
            mapping.update(scan_mirror_dir(Path(folder)))
        mapping.update(self.explicit)
        return mapping


def parse_repo_sources(values: Iterable[str]) -> RepoSources:
    """`--repo-source` values → `RepoSources`.

    `OWNER/NAME=LOCATION` or `URL=LOCATION` names one repository's source (keys are
    normalised by `canonical_repo_name`; a later value wins); a value without `=` is a folder
    of mirrors (layouts in `find_mirror`).
    """
    explicit: dict[str, str] = {}
    folders: list[str] = []
    for value in values:
        key, sep, location = value.partition("=")
        if not sep:
            if not value.strip() or not Path(value).is_dir():
                raise RepoSourceError(
                    "<cli>",
                    "--repo-source",
                    f"{value!r} is neither OWNER/NAME=LOCATION nor an existing folder of mirrors",
                )
            folders.append(value)
            continue
        try:
            name = canonical_repo_name(key)
        except ValueError as exc:
            if Path(value).is_dir():  # a folder whose path holds '='
                folders.append(value)
                continue
            raise RepoSourceError(
                "<cli>", "--repo-source", f"expected OWNER/NAME=LOCATION or URL=LOCATION: {exc}"
            ) from None
        if not location:
            raise RepoSourceError(
                "<cli>", "--repo-source", f"expected OWNER/NAME=LOCATION, got {value!r}"
            )
        explicit[name] = location
    return RepoSources(explicit, tuple(folders))


def parse_repo_source_options(values: list[str]) -> dict[str, str]:
    """`--repo-source` values → one mapping (`parse_repo_sources(values).expanded()`).

    Kept for callers typed `dict[str, str]`: folders of mirrors are scanned at once.
    """
    return parse_repo_sources(values).expanded()


@dataclass(frozen=True)
class RepoSource:
    """Where one repository's objects come from."""

    name: str
    location: str

    @property
    def is_url(self) -> bool:
        return "://" in self.location or self.location.startswith("git@")


def source_for(
    name: str, overrides: Mapping[str, str] | RepoSources, mirror_dirs: Sequence[str] = ()
) -> RepoSource:
    """The source for `name` (`owner/name` or a URL): an override, a mirror, else its URL.

    `overrides` keys may be `owner/name` or URLs; `mirror_dirs` are searched after the
    overrides (and after `overrides.mirror_dirs` when it is a `RepoSources`). The returned
    source's name is canonical `owner/name`; without an override the location is the URL
    itself when `name` is one, else `https://github.com/<owner>/<name>.git`.
    """
    try:
        canon = canonical_repo_name(name)
    except ValueError as exc:
        raise RepoSourceError(name, "repo", str(exc)) from None
    if isinstance(overrides, RepoSources):
        sources = overrides
    else:
        sources = RepoSources(dict(overrides))
    if mirror_dirs:
        sources = RepoSources(sources.explicit, sources.mirror_dirs + tuple(mirror_dirs))
    location = sources.location_for(canon)
    if location is None:
        location = name.strip() if _is_url(name) else f"https://github.com/{canon}.git"
    return RepoSource(canon, location)


@lru_cache(maxsize=256)
def git_dir_for(source: RepoSource, cache_dir: Path | None = None) -> Path:
    """A local git directory holding the source's objects (cloned into the mirror cache once)."""
    location = source.location
    path = Path(location)
    if not source.is_url and path.is_dir():
        # Never let discovery climb out of the source into an enclosing repository.
        ceiling = {"GIT_CEILING_DIRECTORIES": str(path.resolve().parent)}
        probe = _git("rev-parse", "--git-dir", cwd=path, check=False, env=ceiling)
        if probe.returncode != 0:
            raise RepoSourceError(
                source.name,
                "repo",
                f"{location} is not a git repository",
                stderr=_tail(probe.stderr),
            )
        return (path / probe.stdout.decode().strip()).resolve()
    if not source.is_url and not path.is_file():
        raise RepoSourceError(source.name, "repo", f"repo source {location} does not exist")
    cache = cache_dir or default_cache_dir()
    key = hashlib.sha256(f"{location}\0{_stamp(path)}".encode()).hexdigest()[:12]
    mirror = cache / f"{source.name.replace('/', '__')}-{key}.git"
    if not (mirror / "HEAD").exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".clone-"))
        argv = ["clone", "--mirror", "--quiet", location, str(tmp / "m.git")]
        result = _git(*argv, check=False)
        if result.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RepoSourceError(
                source.name,
                "repo",
                f"cannot clone {location} (exit {result.returncode})",
                command=["git", *argv],
                stderr=_tail(result.stderr),
            )
        os.replace(tmp / "m.git", mirror)
        shutil.rmtree(tmp, ignore_errors=True)
    return mirror


def _stamp(path: Path) -> str:
    """A bundle's identity: its size and mtime, so a regenerated bundle gets a new mirror."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return f"{st.st_size}-{st.st_mtime_ns}"


@lru_cache(maxsize=4096)
def has_commit(git_dir: Path, sha: str) -> bool:
    """Whether the repository has the commit."""
    return _git("cat-file", "-e", f"{sha}^{{commit}}", cwd=git_dir, check=False).returncode == 0


@lru_cache(maxsize=1024)
def read_diff(git_dir: Path, base: str, head: str) -> str:
    """`git diff --binary base head` (the SWEeper gold change)."""
    return _git("diff", "--binary", "--full-index", base, head, cwd=git_dir).stdout.decode()


# ---------------------------------------------------------------------------------------------
# Inspecting a source: shallow cuts and missing objects


def _source_label(run: _Git, git_dir: Path) -> str:
    """The git directory, and what it mirrors when it is a mirror-cache clone."""
    mirror = run("config", "--get", "remote.origin.mirror", cwd=git_dir, check=False)
    url = run("config", "--get", "remote.origin.url", cwd=git_dir, check=False)
    origin = url.stdout.decode(errors="replace").strip()
    if mirror.stdout.strip() == b"true" and origin:
        return f"{git_dir} (mirror of {origin})"
    return str(git_dir)


def _shallow_commits(run: _Git, git_dir: Path) -> set[str] | None:
    """The commits a shallow source is cut at (possibly empty), or None when not shallow."""
    probe = run("rev-parse", "--is-shallow-repository", cwd=git_dir, check=False)
    shallow_file = git_dir / "shallow"
    if probe.stdout.strip() != b"true" and not shallow_file.exists():
        return None
    try:
        return set(shallow_file.read_text().split())
    except OSError:
        return set()


def _shallow_note(shallow: set[str] | None) -> str:
    if shallow is None:
        return ""
    return (
        f"; the source is a shallow clone (cut at {len(shallow)} commit(s)), "
        "so objects older than its cut are absent"
    )


def _listing(missing: Sequence[tuple[str, str]]) -> str:
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
    run: _Git, git_dir: Path, present: Sequence[tuple[str, str]], missing: Sequence[str]
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
    run: _Git, git_dir: Path, commit: str, missing: Sequence[str]
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


def _base_tree_objects(
    run: _Git, git_dir: Path, commit: str, base_commit: str
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


def _history_missing(run: _Git, git_dir: Path, commit: str) -> tuple[list[tuple[str, str]], str]:
    """Objects missing from the history up to `commit` (with paths), and rev-list's complaint."""
    walk = run("rev-list", "--objects", "--missing=print", commit, cwd=git_dir, check=False)
    missing = [raw[1:].decode().strip() for raw in walk.stdout.splitlines() if raw.startswith(b"?")]
    complaint = _tail(walk.stderr, lines=3) if walk.returncode != 0 else ""
    named = _paths_in_history(run, git_dir, commit, missing) if missing else {}
    return [(oid, named.get(oid, "")) for oid in missing], complaint


# ---------------------------------------------------------------------------------------------
# Snapshots


def write_snapshot_repo(
    dest: Path,
    *,
    git_dir: Path | None,
    base_commit: str,
    files: dict[str, bytes] | None = None,
    history: History = "full",
    log_path: Path | None = None,
    task: str = "<snapshot>",
) -> str:
    """Make `dest` a repository cut at `base_commit`, tree checked out; return its HEAD sha.

    `files` (inline rows) makes one commit of those files with a fixed identity and date.
    Otherwise objects come from `git_dir`, which is only read:

    * `history="full"`: the history up to `base_commit`, with the source's tags that are part
      of it (`past_tags`: on an ancestor, made no later than the base); the returned HEAD is
      `base_commit`.
    * `history="base-only"`: ONE commit whose tree is exactly `base_commit`'s tree (only that
      tree's objects are copied), made with a fixed identity and date, so the same base always
      gives the same commit. Its sha is NOT `base_commit` and `base_commit` does not resolve in
      the snapshot: use the returned sha as the diff base and the expected HEAD.

    Every git command and its stderr is appended to `log_path` when given. Any failure raises
    `RepoSourceError(task, field, …)` with git's command and stderr: a missing base commit names
    the sha and the source; missing objects of the base tree are named with their paths; a
    shallow source, or objects missing only from the history, fail at once under `full` and
    point at `--history base-only` when the base tree is complete.
    """
    if history not in HISTORY_MODES:
        raise RepoSourceError(task, "history", f"unknown history mode {history!r}")
    run = _Git(task, log_path)
    dest.mkdir(parents=True)
    run("-c", "init.defaultBranch=main", "init", "--quiet", str(dest), problem="git init")
    if files is not None:
        _commit_files(run, dest, files)
        expected: str | None = base_commit
    elif git_dir is None:
        raise RepoSourceError(task, "repo", "no repo source and no inline files")
    else:
        expected = _copy_from_source(run, dest, git_dir, base_commit, history)
    head = run("rev-parse", "HEAD", cwd=dest, field="base_commit").stdout.decode().strip()
    if expected is not None and head != expected:
        raise RepoSourceError(task, "base_commit", f"snapshot HEAD {head} != {expected}")
    # No reflog, no FETCH_HEAD, no hooks or sample files, every object packed and reachable.
    for leftover in ("FETCH_HEAD", "ORIG_HEAD", "logs", "hooks", "description", "info"):
        target = dest / ".git" / leftover
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    run(
        "-c",
        "gc.reflogExpire=now",
        "-c",
        "pack.threads=1",
        "gc",
        "--quiet",
        "--prune=now",
        cwd=dest,
        problem="packing the snapshot",
    )
    return head


def _identity_env(date: str) -> dict[str, str]:
    name, email = INLINE_IDENTITY.split(" <")
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email.rstrip(">"),
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email.rstrip(">"),
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }


def _commit_files(run: _Git, dest: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    run("add", "-A", cwd=dest, problem="staging the inline files")
    run(
        "-c",
        "commit.gpgsign=false",
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        INLINE_MESSAGE.rstrip("\n"),
        cwd=dest,
        env=_identity_env(INLINE_TIMESTAMP),
        problem="committing the inline files",
    )


def _copy_from_source(
    run: _Git, dest: Path, git_dir: Path, base_commit: str, history: History
) -> str | None:
    """Fill `dest` from the source; returns the HEAD the snapshot must have (None: unknown)."""
    task = run.task
    label = _source_label(run, git_dir)
    shallow = _shallow_commits(run, git_dir)
    resolved = run(
        "rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}", cwd=git_dir, check=False
    )
    if resolved.returncode != 0:
        raise RepoSourceError(
            task,
            "base_commit",
            f"commit {base_commit} not found in repo source {label}{_shallow_note(shallow)}",
        )
    commit = resolved.stdout.decode().strip()
    objects, missing = _base_tree_objects(run, git_dir, commit, base_commit)
    if missing:
        raise RepoSourceError(
            task,
            "repo",
            f"repo source {label} lacks {len(missing)} object(s) of the tree of {base_commit} "
            f"(mirrors may lack large blobs): {_listing(missing)}{_shallow_note(shallow)}",
            missing=missing,
        )
    if history == "base-only":
        return _copy_base_tree(run, dest, git_dir, commit, base_commit, objects)
    if shallow is not None:
        reach = run("rev-list", commit, cwd=git_dir, check=False)
        cut = sorted(set(reach.stdout.decode().split()) & shallow)
        if cut or reach.returncode != 0 or not shallow:
            where = f" at {len(cut)} commit(s) ({', '.join(cut[:5])})" if cut else ""
            raise RepoSourceError(
                task,
                "repo",
                f"repo source {label} is a shallow clone: the history of {base_commit} is cut"
                f"{where}, so --history full cannot copy it; the base tree is complete: "
                "pass --history base-only, or use a full clone",
            )
    # Fetch only what base_commit reaches (protocol v2 serves any reachable commit id);
    # the source repository is never modified.
    fetch = run(
        "fetch",
        "--quiet",
        "--no-tags",
        "--update-head-ok",
        str(git_dir),
        f"{commit}:refs/heads/main",
        cwd=dest,
        check=False,
    )
    if fetch.returncode != 0:
        lost, complaint = _history_missing(run, git_dir, commit)
        problem = f"cannot copy the history of {base_commit} from repo source {label}"
        if lost:
            problem += (
                f": history objects missing ({len(lost)}): {_listing(lost)}; "
                "the base tree is complete: pass --history base-only"
            )
        elif complaint:
            problem += (
                f": history objects missing (the walk stopped: {complaint.splitlines()[-1]}); "
                "the base tree is complete: pass --history base-only"
            )
        raise RepoSourceError(
            task,
            "repo",
            problem,
            command=[str(a) for a in fetch.args],
            stderr=_tail(fetch.stderr),
            missing=lost,
        )
    run("symbolic-ref", "HEAD", "refs/heads/main", cwd=dest)
    run("reset", "--quiet", "--hard", "refs/heads/main", cwd=dest, problem="checking out")
    _copy_past_tags(run, dest, git_dir, commit)
    return commit


def past_tags(run: _Git, git_dir: Path, repo: Path, commit: str) -> list[str]:
    """The tags of `git_dir` that are history, not future, as of `commit`: each names `commit`
    or one of its ancestors (held in `repo`) and was made no later than `commit` (tagger date,
    or the commit's date for a lightweight tag).

    Tools that version a checkout from `git describe` (setuptools_scm, versioneer) need them:
    without a tag, pytest installs as 0.1.devN and its own `minversion` refuses to run. The
    harness keeps the tags older than the base commit for the same reason.
    """
    listing = run(
        "for-each-ref",
        "--format=%(refname) %(objecttype) %(objectname) %(*objecttype) %(*objectname) "
        "%(creatordate:unix)",
        "refs/tags",
        cwd=git_dir,
    ).stdout.decode()
    if not listing.strip():
        return []
    ancestors = set(run("rev-list", commit, cwd=repo).stdout.decode().split())
    made = int(run("log", "-1", "--format=%ct", commit, cwd=repo).stdout.decode().strip())
    kept = []
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 6:  # annotated: its target one level down
            name, kind, _, target_kind, target, date = parts
        elif len(parts) == 4:  # lightweight
            name, kind, target, date = parts
            target_kind = kind
        else:
            continue
        if target_kind == "commit" and target in ancestors and int(date) <= made:
            kept.append(name)
    return kept


def _copy_past_tags(run: _Git, dest: Path, git_dir: Path, commit: str) -> None:
    """Fetch `past_tags` (with their tag objects) into the snapshot; nothing else comes."""
    names = past_tags(run, git_dir, dest, commit)
    if not names:
        return
    refspecs = "".join(f"{name}:{name}\n" for name in names).encode()
    run(
        "fetch",
        "--quiet",
        "--no-tags",
        "--stdin",
        str(git_dir),
        cwd=dest,
        stdin=refspecs,
        problem="copying the tags older than the base commit",
    )


def _copy_base_tree(
    run: _Git, dest: Path, git_dir: Path, commit: str, base_commit: str, objects: bytes
) -> str:
    """One commit holding exactly `commit`'s tree; returns its sha."""
    tree = run("rev-parse", f"{commit}^{{tree}}", cwd=git_dir).stdout.decode().strip()
    pack_dir = dest / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    run(
        "pack-objects",
        "--quiet",
        str(pack_dir / "pack"),
        cwd=git_dir,
        stdin=objects,
        problem=f"copying the tree of {base_commit}",
    )
    made = run(
        "-c",
        "commit.gpgsign=false",
        "commit-tree",
        tree,
        "-m",
        BASE_ONLY_MESSAGE.format(base=base_commit).rstrip("\n"),
        cwd=dest,
        env=_identity_env(INLINE_TIMESTAMP),
        problem="committing the base tree",
    )
    head = made.stdout.decode().strip()
    run("update-ref", "refs/heads/main", head, cwd=dest)
    run("symbolic-ref", "HEAD", "refs/heads/main", cwd=dest)
    run("reset", "--quiet", "--hard", "refs/heads/main", cwd=dest, problem="checking out")
    got = run("rev-parse", "HEAD^{tree}", cwd=dest).stdout.decode().strip()
    if got != tree:
        raise RepoSourceError(
            run.task, "base_commit", f"snapshot tree {got} != tree {tree} of {base_commit}"
        )
    if head != base_only_commit_sha(tree, base_commit):
        raise RepoSourceError(
            run.task, "base_commit", f"base-only commit {head} differs from the computed id"
        )
    return head


SNAPSHOT_MTIME = 946684800
"""2000-01-01T00:00:00Z, the one modification time of every file of a snapshot: fixed, so the
tar is deterministic, and after 1980, which is the earliest a ZIP (so a wheel, e.g. flit's
editable wheel of the repository) can record."""


def write_snapshot_tar(repo: Path, tar_path: Path) -> None:
    """A deterministic tar of the snapshot (sorted, uid 0, every mtime SNAPSHOT_MTIME)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(repo.rglob("*")):
            rel = path.relative_to(repo).as_posix()
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = SNAPSHOT_MTIME
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    tmp = tar_path.with_suffix(".tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, tar_path)
