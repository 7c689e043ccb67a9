"""Repository names: `owner/name` read from a name or any spelling of a repository URL."""

from __future__ import annotations

import re

_URL_RE = re.compile(
    r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]+@)?(?P<host>[^/]+)/"
    r"|[^@/\s]+@(?P<scphost>[^:/\s]+):"
    r"|(?P<barehost>github\.com)/)"
    r"(?P<path>.*)$"
)
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")


def is_url(text: str) -> bool:
    """Whether `text` is a repository URL (scheme, scp-like `user@host:` or `github.com/`)."""
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
