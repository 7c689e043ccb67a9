"""Everything the runtime does to the repository under test with git and patches.

Resetting to the base commit, applying the candidate patch with fallbacks, listing the paths a
diff touches (renames, copies, ``/dev/null`` sides, quoted names), checking a patch policy made
of globs (``**`` crosses directories), and restoring protected paths to the base commit.

Standard library only, Python >= 3.9 (this module is copied into grader images).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Pattern, Sequence, Tuple, Union

GIT_TIMEOUT_SEC = 600
LOG_LIMIT = 20000

# Every git call: trust the repository whoever owns it (the grader runs as another user than the
# one that built /testbed), never run hooks or external diff/textconv programs a repository
# could configure, never prompt, and keep paths unquoted in machine-read output.
_GIT_PREFIX = [
    "git",
    "-c",
    "safe.directory=*",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.quotePath=false",
    "-c",
    "advice.detachedHead=false",
    "--literal-pathspecs",
]
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


class GitError(RuntimeError):
    """A git command needed for grading failed (the repository is not in a usable state)."""


def git(
    repo: Union[str, Path],
    *args: str,
    check: bool = True,
    timeout: float = GIT_TIMEOUT_SEC,
) -> subprocess.CompletedProcess[str]:
    """Run git in ``repo`` and capture its output as text."""
    env = dict(os.environ)
    env.update(_GIT_ENV)
    proc = subprocess.run(
        [*_GIT_PREFIX, *args],
        cwd=str(repo),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=timeout,
        check=False,
        encoding="utf-8",
        errors="surrogateescape",
    )
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def reset_repo(repo: Union[str, Path], base_commit: str, extra: Iterable[str] = ()) -> None:
    """Bring ``repo`` back to ``base_commit``: hard reset and clean (ignored files stay).

    ``extra`` lists paths a failed patch attempt may have created in ignored locations, where
    ``git clean -fd`` does not look; those not in the base commit are removed.
    """
    git(repo, "reset", "-q", "--hard", base_commit)
    git(repo, "clean", "-fdq")
    leftovers = [p for p in extra if is_safe_path(p)]
    if leftovers:
        in_base = set(paths_in_commit(repo, base_commit, leftovers))
        for path in leftovers:
            if path not in in_base:
                _remove(Path(repo) / path)


# ------------------------------------------------------------------------------- touched paths

_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(name: str) -> str:
    r"""Decode a git C-style quoted path (``"a/t\303\251st.py"``); plain names pass through."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    body = name[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
        out.extend(ch.encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _strip_prefix(name: str) -> Optional[str]:
    """Turn a diff header path into a repository path (``-p1``); ``/dev/null`` is no path."""
    name = _unquote(name.strip())
    if name == "/dev/null" or not name:
        return None
    parts = name.split("/", 1)
    return parts[1] if len(parts) == 2 else parts[0]


def _header_path(rest: str) -> Optional[str]:
    """The path of a ``---``/``+++`` line; a tab separates an optional timestamp from it."""
    rest = rest.rstrip("\r\n")
    if not rest.startswith('"') and "\t" in rest:
        rest = rest.split("\t", 1)[0]
    return _strip_prefix(rest)


def _git_header_paths(rest: str) -> List[str]:
    """Both paths of ``diff --git a/X b/Y`` (used when no ---/+++ lines follow, e.g. renames)."""
    rest = rest.rstrip("\r\n")
    if rest.startswith('"'):
        m = re.match(r'("(?:[^"\\]|\\.)*")\s+(.*)$', rest)
        if m:
            return [p for p in (_strip_prefix(m.group(1)), _strip_prefix(m.group(2))) if p]
    # Unquoted names may contain spaces; when both sides name the same file the line is
    # "a/X b/X", which splits unambiguously in the middle.
    n = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[n : n + 3] == " b/" and rest[2:n] == rest[n + 3 :]:
        return [rest[2:n]]
    if " b/" in rest:
        left, right = rest.split(" b/", 1)
        return [p for p in (_strip_prefix(left), right) if p]
    return []


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def touched_paths(diff: str) -> List[str]:
    """Every repository path a unified/git diff creates, modifies, deletes, renames or copies.

    Hunk bodies are skipped by their line counts, so a removed line that reads ``-- x`` (shown
    as ``--- x``) is not mistaken for a file header.
    """
    paths: Dict[str, None] = {}
    git_header: List[str] = []
    named = False  # whether the current "diff --git" section named its paths in other lines
    old_left = new_left = 0

    def flush() -> None:
        # Pure renames, mode changes, binary patches and empty-file deletions have no ---/+++
        # lines: the "diff --git" line is then the only place naming the file.
        if not named:
            for p in git_header:
                paths.setdefault(p)

    # split("\n"), not splitlines(): form feeds and other separators may occur inside lines.
    for line in diff.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):  # context (some tools strip the space of blank lines)
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if tag == "-":
                old_left -= 1
                continue
            if tag == "+":
                new_left -= 1
                continue
            if tag == "\\":  # "\ No newline at end of file"
                continue
            old_left = new_left = 0  # malformed hunk: resume header parsing on this line
        m = _HUNK.match(line)
        if m:
            old_left = int(m.group(1)) if m.group(1) is not None else 1
            new_left = int(m.group(2)) if m.group(2) is not None else 1
            continue
        if line.startswith("diff --git "):
            flush()
            git_header = _git_header_paths(line[len("diff --git ") :])
            named = False
        elif line.startswith("--- ") or line.startswith("+++ "):
            named = True
            path = _header_path(line[4:])
            if path:
                paths.setdefault(path)
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            # These name repository paths directly, without the a/ b/ prefix.
            named = True
            paths.setdefault(_unquote(line.split(" ", 2)[2].strip()))
    flush()
    return [p for p in paths if p]


def is_safe_path(path: str) -> bool:
    """A relative path that stays inside the repository and out of ``.git``."""
    if not path or path.startswith("/") or "\\" in path:
        return False
    parts = path.split("/")
    return ".." not in parts and parts[0] != ".git"


# --------------------------------------------------------------------------------------- apply


class ApplyResult:
    """Outcome of applying the candidate patch. A plain class: importing ``dataclasses``
    (``inspect`` and its imports) cost the runtime's start-up 5 ms on every run.
    """

    __slots__ = ("ok", "method", "log")

    def __init__(self, ok: bool, method: Optional[str], log: str) -> None:
        self.ok = ok
        self.method = method
        self.log = log

    def __repr__(self) -> str:
        return f"ApplyResult(ok={self.ok!r}, method={self.method!r}, log={self.log!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApplyResult):
            return NotImplemented
        return (self.ok, self.method, self.log) == (other.ok, other.method, other.log)


def _truncate(text: str, limit: int = LOG_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n... [truncated] ...\n" + text[-limit // 2 :]


def apply_patch(repo: Union[str, Path], base_commit: str, patch_file: Path) -> ApplyResult:
    """Apply ``patch_file`` to a pristine ``repo``, trying progressively looser methods.

    ``git apply``, then ``git apply --3way``, then GNU ``patch --fuzz=3`` (only if installed,
    and only when every touched path is inside the repository: ``patch`` is not as strict as
    git about where it writes). The repository is reset between tries.
    """
    text = patch_file.read_text(encoding="utf-8", errors="surrogateescape")
    if not text.strip():
        return ApplyResult(True, "empty", "empty patch: nothing to apply")
    touched = touched_paths(text)
    patch_path = str(patch_file.resolve())
    attempts: List[tuple[str, List[str]]] = [
        ("git apply", [*_GIT_PREFIX, "apply", "--whitespace=nowarn", patch_path]),
        ("git apply --3way", [*_GIT_PREFIX, "apply", "--3way", "--whitespace=nowarn", patch_path]),
    ]
    patch_bin = shutil.which("patch")
    if patch_bin and all(is_safe_path(p) for p in touched):
        attempts.append(
            (
                "patch",
                [
                    patch_bin,
                    "--batch",
                    "--forward",
                    "--fuzz=3",
                    "-p1",
                    "--no-backup-if-mismatch",
                    "-i",
                    patch_path,
                ],
            )
        )
    log: List[str] = []
    env = dict(os.environ)
    env.update(_GIT_ENV)
    for method, argv in attempts:
        reset_repo(repo, base_commit, touched)
        try:
            proc = subprocess.run(
                argv,
                cwd=str(repo),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=GIT_TIMEOUT_SEC,
                check=False,
                encoding="utf-8",
                errors="replace",
            )
            output, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired:
            output, code = "timed out", -1
        log.append(f"$ {method}\n{output.strip()}\n(exit {code})")
        if code == 0:
            return ApplyResult(True, method, _truncate("\n".join(log)))
    if not patch_bin:
        log.append("patch: not installed, fallback skipped")
    elif len(attempts) < 3:
        log.append("patch: skipped, the diff names paths outside the repository")
    reset_repo(repo, base_commit, touched)
    return ApplyResult(False, None, _truncate("\n".join(log)))


# -------------------------------------------------------------------------------------- policy


def glob_to_regex(pattern: str) -> Pattern[str]:
    """Compile a path glob: ``**`` spans directories, ``*``/``?`` stay within one segment.

    ``dir/**`` matches everything below ``dir``; ``**/x`` matches ``x`` at any depth. The
    pattern is anchored at the repository root (``*.lock`` is only top-level lock files).
    """
    pat = pattern.strip().lstrip("/")
    if pat.startswith("./"):
        pat = pat[2:]
    out: List[str] = []
    i = 0
    while i < len(pat):
        ch = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("/**", i) and i + 3 == len(pat):
            out.append("(?:/.*)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pat.find("]", i + 2)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pat[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    if pat.endswith("/"):
        out.append(".*")  # "docs/" means the directory and everything in it
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def matches_any(path: str, globs: Sequence[str]) -> bool:
    """Whether ``path`` matches one of ``globs``."""
    return any(glob_to_regex(g).match(path) for g in globs if g and g.strip())


def policy_violations(
    paths: Sequence[str], allowed: Sequence[str], forbidden: Sequence[str]
) -> List[str]:
    """Paths that break the policy: outside every allowed glob (when any), or forbidden.

    A path that could escape the repository is always a violation.
    """
    allowed = [g for g in allowed if g and g.strip()]
    bad: List[str] = []
    for path in paths:
        if not is_safe_path(path):
            bad.append(path)
        elif allowed and not matches_any(path, allowed):
            bad.append(path)
        elif matches_any(path, forbidden):
            bad.append(path)
    return bad


# ------------------------------------------------------------------------------------ protected

# Restored to the base commit whatever the plan says (docs/security.md, "Adversarial patches"):
# a candidate has no business changing how the tests are found, configured or run. Test files
# and test directories (their helpers and fixtures included), pytest's conftest.py and config
# files, interpreter start-up hooks, Go test files (a TestMain can exit 0 early), and JS test
# files. Only paths the candidate changed are restored; a dataset whose gold patch needs one of
# them shows up as gold_failed at verification, never as a silent pass.
DEFAULT_PROTECTED = (
    "**/test/**",
    "**/tests/**",
    "**/testdata/**",
    "**/__tests__/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/tox.ini",
    "**/setup.cfg",
    "**/pyproject.toml",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "**/*_test.go",
    "**/*.test.js",
    "**/*.test.cjs",
    "**/*.test.mjs",
    "**/*.test.ts",
    "**/*.spec.js",
    "**/*.spec.ts",
)


# A task whose gold patch declares dependencies (plan ``refresh``) lets a candidate declare them
# too: a change to setup.cfg or pyproject.toml is kept when it leaves the sections that configure
# the test run or register plugins as they were (names and text), and no changed line of the
# file names an entry point; any other change to them is restored as above.
TEST_CONFIG_SECTIONS = {
    "setup.cfg": re.compile(r"^(tool:pytest|pytest|options\.entry_points)$"),
    "pyproject.toml": re.compile(
        r"^(tool\.pytest(\..*)?|project\.entry-points(\..*)?|project\.(gui-)?scripts"
        r"|tool\.poetry\.(plugins|scripts)(\..*)?|tool\.setuptools\.entry-points(\..*)?)$"
    ),
}
_SECTION = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ENTRY_POINT_WORDS = re.compile(r"entry[-_]points|pytest11|scripts", re.IGNORECASE)


def _blocks(text: str) -> List[Tuple[Optional[str], List[str]]]:
    """A config file as (section name, its lines with the header) blocks; the lines before the
    first header are a block named None.
    """
    blocks: List[Tuple[Optional[str], List[str]]] = [(None, [])]
    for line in text.splitlines(keepends=True):
        header = _SECTION.match(line)
        if header:
            blocks.append((header.group(1).strip().strip("\"'"), []))
        blocks[-1][1].append(line)
    return blocks


def _meaningful(lines: List[str], strip_end: bool = False) -> List[str]:
    """With ``strip_end``, ``lines`` up to their trailing blank or comment lines; otherwise the
    lines that change a setting (blank lines and comments left out).
    """
    if strip_end:
        end = len(lines)
        while end and (not lines[end - 1].strip() or lines[end - 1].lstrip()[:1] in "#;"):
            end -= 1
        return lines[:end]
    return [line.rstrip() for line in lines if line.strip() and line.lstrip()[:1] not in "#;"]


def merge_declaration(repo: Union[str, Path], base_commit: str, path: str) -> Optional[str]:
    """The candidate's setup.cfg or pyproject.toml with its test-run and plugin sections
    (``TEST_CONFIG_SECTIONS``) as the base commit has them and every other change kept; None
    when that cannot be had safely (not such a file, not in the base commit, or a changed line
    outside those sections names an entry point).
    """
    pattern = TEST_CONFIG_SECTIONS.get(os.path.basename(path))
    target = Path(repo) / path
    if pattern is None or target.is_symlink() or not target.is_file():
        return None
    before = git(repo, "show", f"{base_commit}:{path}", check=False)
    if before.returncode != 0:
        return None
    after = target.read_text(encoding="utf-8", errors="surrogateescape")
    base_blocks = _blocks(before.stdout)
    guarded = {name: lines for name, lines in base_blocks if name and pattern.match(name)}
    merged: List[str] = []
    for name, lines in _blocks(after):
        if name is None or not pattern.match(name):
            merged += lines
            continue
        kept = guarded.pop(name, [])
        if _meaningful(kept) == _meaningful(lines):
            merged += lines  # as in the base, up to blank lines and comments
        else:  # the base's section, then the candidate's blank lines before the next header
            merged += _meaningful(kept, strip_end=True) + lines[len(_meaningful(lines, True)) :]
    for lines in guarded.values():  # the candidate deleted them: back at the end
        if merged and not merged[-1].endswith("\n"):
            merged[-1] += "\n"
        merged += lines
    text = "".join(merged)
    old, new = set(before.stdout.splitlines()), set(text.splitlines())
    if any(_ENTRY_POINT_WORDS.search(line) for line in old ^ new):
        return None
    return text


def keep_declaration_change(repo: Union[str, Path], base_commit: str, path: str) -> str:
    """Keep the candidate's change to ``path`` (setup.cfg or pyproject.toml) minus any change to
    its test-run and plugin sections, which go back to the base commit's (``merge_declaration``,
    written in place): ``kept`` (those sections were as in the base), ``merged`` (they were put
    back), or empty when the file is to be restored whole.
    """
    merged = merge_declaration(repo, base_commit, path)
    if merged is None:
        return ""
    target = Path(repo) / path
    if merged == target.read_text(encoding="utf-8", errors="surrogateescape"):
        return "kept"
    target.write_text(merged, encoding="utf-8", errors="surrogateescape")
    return "merged"


def paths_in_commit(repo: Union[str, Path], commit: str, paths: Sequence[str]) -> List[str]:
    """Which of ``paths`` are files in ``commit``."""
    found: List[str] = []
    for start in range(0, len(paths), 200):
        chunk = list(paths[start : start + 200])
        proc = git(repo, "ls-tree", "-r", "-z", "--name-only", commit, "--", *chunk)
        found.extend(p for p in proc.stdout.split("\0") if p)
    wanted = set(paths)
    return [p for p in found if p in wanted]


def changed_paths(repo: Union[str, Path], base_commit: str, extra: Iterable[str] = ()) -> List[str]:
    """Paths whose working-tree state differs from ``base_commit``.

    Tracked changes and untracked files come from git; ``extra`` (the paths the candidate patch
    names) covers files created where ``.gitignore`` hides them from git.
    """
    diff = git(repo, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", base_commit)
    untracked = git(repo, "ls-files", "-z", "--others", "--exclude-standard")
    names: Dict[str, None] = {}
    for p in diff.stdout.split("\0") + untracked.stdout.split("\0"):
        if p:
            names.setdefault(p)
    root = Path(repo)
    hidden = [p for p in extra if p not in names and is_safe_path(p) and os.path.lexists(root / p)]
    in_base = set(paths_in_commit(repo, base_commit, hidden))
    for p in hidden:
        if p not in in_base:
            names.setdefault(p)
    return list(names)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def restore_paths(repo: Union[str, Path], base_commit: str, paths: Sequence[str]) -> None:
    """Put ``paths`` back as they are in ``base_commit``; delete those it does not contain."""
    safe = [p for p in paths if is_safe_path(p)]
    in_base = paths_in_commit(repo, base_commit, safe)
    root = Path(repo)
    for path in safe:
        if path not in in_base:
            _remove(root / path)
    for start in range(0, len(in_base), 200):
        chunk = in_base[start : start + 200]
        for path in chunk:
            # A directory or symlink squatting on the path would make checkout fail or write
            # through the link.
            target = root / path
            if target.is_symlink() or target.is_dir():
                _remove(target)
        git(repo, "checkout", "-q", base_commit, "--", *chunk)


def restore_protected(
    repo: Union[str, Path],
    base_commit: str,
    protected_globs: Sequence[str],
    extra_paths: Sequence[str] = (),
    candidate_paths: Sequence[str] = (),
    keep: Sequence[str] = (),
) -> List[str]:
    """Restore every changed path matching ``protected_globs`` or listed in ``extra_paths``,
    except those in ``keep``.

    Returns the restored paths, i.e. the protected ones the candidate had changed.
    """
    extra = set(extra_paths)
    restored = [
        p
        for p in changed_paths(repo, base_commit, candidate_paths)
        if (p in extra or matches_any(p, protected_globs)) and p not in keep
    ]
    if restored:
        restore_paths(repo, base_commit, restored)
    return restored
