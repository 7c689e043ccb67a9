"""Field checks shared by the adapters: JSON-or-list fields, diffs, row paths, base64.

Every check raises RowError naming the task and the upstream field, so a user can find the
bad cell. Nothing here knows a particular dataset.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from packager.diffs import FileDiff, parse_diff
from packager.errors import RowError

_SHA = re.compile(r"^[0-9a-f]{40}$")


def get(row: Mapping[str, Any], task: str, field: str) -> Any:
    """A required, non-empty field."""
    value = row.get(field)
    if value is None or (isinstance(value, str | list | dict) and len(value) == 0):
        raise RowError(task, field, "missing or empty")
    return value


def get_str(row: Mapping[str, Any], task: str, field: str, default: str | None = None) -> str:
    """A string field; required unless a default is given."""
    value = row.get(field)
    if value is None or value == "":
        if default is not None:
            return default
        raise RowError(task, field, "missing or empty")
    if not isinstance(value, str):
        raise RowError(task, field, f"expected a string, got {type(value).__name__}")
    return value


def get_sha(row: Mapping[str, Any], task: str, field: str) -> str:
    """A 40-hex commit id."""
    value = get_str(row, task, field).strip().lower()
    if not _SHA.match(value):
        raise RowError(task, field, f"not a 40-hex commit id: {value[:50]!r}")
    return value


def parse_list(value: Any, task: str, field: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    """A list of strings that may arrive as a JSON string (SWE-bench) or as a list."""
    if value is None:
        value = []
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise RowError(task, field, f"not a JSON list: {exc.msg}") from exc
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise RowError(task, field, "expected a list of strings")
    if not allow_empty and not value:
        raise RowError(task, field, "must not be empty (nothing would grade this task)")
    return tuple(value)


def parse_mapping(value: Any, task: str, field: str) -> dict[str, Any]:
    """A dict that may arrive as a JSON string."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(task, field, f"not a JSON object: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise RowError(task, field, "expected an object")
    return value


def check_path(path: str, task: str, field: str) -> str:
    """A relative POSIX path that stays inside the tree."""
    if not path or "\x00" in path or "\\" in path:
        raise RowError(task, field, f"invalid path {path!r}")
    if path.startswith("/"):
        raise RowError(task, field, f"absolute path not allowed: {path}")
    parts = path.split("/")
    if ".." in parts:
        raise RowError(task, field, f"path contains '..': {path}")
    norm = posixpath.normpath(path)
    if norm.startswith("../") or norm == ".." or norm == ".":
        raise RowError(task, field, f"path escapes the tree: {path}")
    if parts[0] == ".git" or "/.git/" in f"/{norm}/":
        raise RowError(task, field, f"path inside .git not allowed: {path}")
    return norm


def _applicable(file: FileDiff) -> bool:
    """A section git can apply: hunks under `---`/`+++` lines, or a git section that adds a
    file, renames one or carries binary data.
    """
    if file.hunks and "\n+++ " in "\n" + file.header:
        return True
    return file.git and (file.binary_data or file.status in ("added", "renamed"))


def check_patch(text: Any, task: str, field: str) -> str:
    """A unified diff (git or plain); every path it touches must stay inside the tree."""
    if not isinstance(text, str) or not text.strip():
        raise RowError(task, field, "missing or empty patch")
    files = parse_diff(text).files
    if not any(_applicable(f) for f in files):
        raise RowError(task, field, "not a unified diff (no '---'/'+++' file headers with hunks)")
    for file in files:
        for path in dict.fromkeys(file.paths + file.git_names):
            check_path(path, task, field)
    return text if text.endswith("\n") else text + "\n"


def decode_content(content: Any, encoding: str, task: str, field: str) -> bytes:
    """File content given as utf-8 text or base64."""
    if not isinstance(content, str):
        raise RowError(task, field, "file content must be a string")
    if encoding in ("utf-8", "utf8", "text", ""):
        return content.encode()
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RowError(task, field, f"invalid base64: {exc}") from exc
    raise RowError(task, field, f"unknown encoding {encoding!r} (utf-8 or base64)")


def parse_files(value: Any, task: str, field: str) -> dict[str, bytes]:
    """Inline files: dict path → text, or a list of {path, content, encoding}."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(task, field, f"not JSON: {exc.msg}") from exc
    files: dict[str, bytes] = {}
    if isinstance(value, dict):
        items = [{"path": k, "content": v} for k, v in value.items()]
    elif isinstance(value, list):
        items = value
    else:
        raise RowError(task, field, "expected a mapping path → content or a list of files")
    for item in items:
        if not isinstance(item, dict) or "path" not in item or "content" not in item:
            raise RowError(task, field, "each file needs 'path' and 'content'")
        path = check_path(str(item["path"]), task, field)
        if path in files:
            raise RowError(task, field, f"duplicate path {path}")
        files[path] = decode_content(
            item["content"], str(item.get("encoding") or "utf-8"), task, field
        )
    if not files:
        raise RowError(task, field, "no files")
    return dict(sorted(files.items()))


_REPO_URL = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://(?:[^/@]+@)?[^/]+/|git@[^:]+:)(?P<path>[^?#]+?)(?:\.git)?/?$",
    re.IGNORECASE,
)


def repo_name(value: Any, task: str, field: str) -> str:
    """`owner/name` from `owner/name` or a repository URL (`https://host/owner/name[.git]`)."""
    if not isinstance(value, str) or not value.strip():
        raise RowError(task, field, "missing or empty")
    text = value.strip()
    match = _REPO_URL.match(text)
    if match is None and ("://" in text or text.startswith("git@")):
        raise RowError(task, field, f"not a repository URL (no owner/name in it): {text!r}")
    path = match.group("path") if match else text
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2 or any(p in (".", "..") or ":" in p for p in parts):
        raise RowError(task, field, f"not a repository (owner/name or URL): {text!r}")
    return "/".join(parts[-2:])
