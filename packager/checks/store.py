"""The checks' one verdict store and one cache scheme.

Every check that keeps a verdict (`CHECKS`: the leak audit, the quality checks) writes it to
`results/<task>.<check>.json` with a `cache_key`: the sha256 of the check's name and of every
input its verdict depends on (`verdict_key`). A later run reuses a saved verdict only when the
key it computes for the task now is the saved one, and only when the check says the verdict is
one to keep (`Check.reusable`: the audit keeps clean verdicts only, so a leak is always audited
again by the current code). A check with a machine folder (`Check.machine`) also keeps its
reusable verdicts there, under the key, so another output folder on this machine reuses them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packager.render.write import write_json
from packager.storage import AUDITS, CHECK_NAMES, CacheFolder

if TYPE_CHECKING:
    from packager.storage import OutputPaths


def _always(data: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """A check whose verdicts the store keeps."""

    name: str
    machine: CacheFolder | None = None
    """This machine's folder for its reusable verdicts (None: the task's file only)."""
    reusable: Callable[[Mapping[str, Any]], bool] = _always
    """Whether a saved verdict may stand for a new run with the same key."""


AUDIT = Check("audit", machine=AUDITS, reusable=lambda data: data.get("clean") is True)
QUALITY = Check("quality")
CHECKS: tuple[Check, ...] = (AUDIT, QUALITY)
assert tuple(c.name for c in CHECKS) == CHECK_NAMES  # storage names their files


def verdict_key(check: Check, *parts: bytes | str) -> str:
    """The cache key of a verdict: the check's name and each input, hashed in order (each part
    hashed on its own first, so no two part lists share a key by concatenation).
    """
    h = hashlib.sha256(hashlib.sha256(check.name.encode()).digest())
    for part in parts:
        raw = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        h.update(hashlib.sha256(raw).digest())
    return h.hexdigest()


def machine_path(check: Check, key: str) -> Path | None:
    """Where this machine keeps the reusable verdict with `key` (None: the check keeps none)."""
    return None if check.machine is None else check.machine.path() / key[:2] / f"{key}.json"


def read_verdict(path: Path) -> dict[str, Any] | None:
    """A saved verdict (None when there is none or it cannot be read)."""
    try:
        data = json.loads(path.read_text()) if path.is_file() else None
    except (ValueError, OSError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class VerdictStore:
    """The verdicts of one output folder's tasks."""

    paths: OutputPaths

    def file(self, check: Check, slug: str) -> Path:
        return self.paths.check_file(slug, check.name)

    def read(self, check: Check, slug: str) -> dict[str, Any] | None:
        return read_verdict(self.file(check, slug))

    def reuse(
        self, check: Check, slug: str, key: str, owner: Mapping[str, str] | None = None
    ) -> dict[str, Any] | None:
        """The saved verdict for `key` that `check` may reuse: the task's own, else this
        machine's (then copied to the task's file with the task's `owner` fields, e.g. its
        slug and instance id). None: run the check.
        """
        saved = self._match(check, self.file(check, slug), key)
        if saved is not None:
            return saved
        machine = machine_path(check, key)
        saved = None if machine is None else self._match(check, machine, key)
        if saved is not None:
            write_json(self.file(check, slug), {**saved, **(owner or {})})
        return saved

    def save(self, check: Check, slug: str, data: Mapping[str, Any], key: str | None) -> Path:
        """Write the verdict (with its key) to the task's file and, when the check keeps
        machine verdicts and this one is reusable, to this machine's folder too.
        """
        record = dict(data) if key is None else {**data, "cache_key": key}
        target = self.file(check, slug)
        write_json(target, record)
        machine = None if key is None else machine_path(check, key)
        if machine is not None and check.reusable(record):
            try:
                write_json(machine, record)
            except OSError:  # a read-only or full cache: the verdict is in the task's file
                pass
        return target

    @staticmethod
    def _match(check: Check, path: Path, key: str) -> dict[str, Any] | None:
        saved = read_verdict(path)
        if saved is None or saved.get("cache_key") != key or not check.reusable(saved):
            return None
        return saved
