"""Git object ids computed in Python, so an inline repository's commit is known without git.

The snapshot stage makes the same commit with the git CLI and checks the ids agree.
"""

from __future__ import annotations

import hashlib

INLINE_IDENTITY = "packager <packager@example.invalid>"
INLINE_TIMESTAMP = "946684800 +0000"  # 2000-01-01T00:00:00Z: fixed so the id never changes
INLINE_MESSAGE = "Inline repository snapshot\n"


def _object_id(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()  # noqa: S324


def _tree_id(files: dict[str, bytes]) -> bytes:
    entries: dict[str, tuple[bytes, bytes]] = {}
    subtrees: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        head, _, rest = path.partition("/")
        if rest:
            subtrees.setdefault(head, {})[rest] = data
        else:
            entries[head] = (b"100644", _object_id("blob", data))
    for name, sub in subtrees.items():
        entries[name] = (b"40000", _tree_id(sub))

    # Git sorts tree entries by name, with directories compared as if they ended in "/".
    def key(name: str) -> bytes:
        return (name + ("/" if entries[name][0] == b"40000" else "")).encode()

    body = b"".join(
        mode + b" " + name.encode() + b"\0" + oid
        for name in sorted(entries, key=key)
        for mode, oid in [entries[name]]
    )
    return _object_id("tree", body)


def inline_commit_sha(files: dict[str, bytes]) -> str:
    """The id of the single root commit holding `files` (all mode 100644)."""
    tree = _tree_id(files).hex()
    body = (
        f"tree {tree}\n"
        f"author {INLINE_IDENTITY} {INLINE_TIMESTAMP}\n"
        f"committer {INLINE_IDENTITY} {INLINE_TIMESTAMP}\n\n{INLINE_MESSAGE}"
    ).encode()
    return _object_id("commit", body).hex()


BASE_ONLY_MESSAGE = "Repository snapshot at {base}\n"


def base_only_commit_sha(tree_sha: str, base_commit: str) -> str:
    """The id of the single root commit holding `tree_sha` (history `base-only`), made with the
    fixed identity and date of inline repositories, so it is known before the snapshot exists.
    """
    body = (
        f"tree {tree_sha}\n"
        f"author {INLINE_IDENTITY} {INLINE_TIMESTAMP}\n"
        f"committer {INLINE_IDENTITY} {INLINE_TIMESTAMP}\n\n"
        f"{BASE_ONLY_MESSAGE.format(base=base_commit)}"
    ).encode()
    return _object_id("commit", body).hex()
