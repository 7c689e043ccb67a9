"""Pins that follow the Python used: a harness spec pins binary packages for the Python it asks
for (`numpy==1.23.0` for 3.10); when no image here serves that Python and a nearer one is used
(3.11), a pinned release that ships wheels, none of them for the Python used, is moved to the
newest release of the same series (`1.23.*`) that has one (`numpy==1.23.5`), as of the row's
cut-off when one is set. Read from the index's PEP 691 pages (the machine cache's
`index-pages/`, as the time machine reads them); recorded as `pins_moved_for_python`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from packager.images.timemachine import cached_page, file_version, released
from packager.stamps import parse_stamp

LOG = logging.getLogger(__name__)

_FINAL = re.compile(r"^\d+(\.\d+)*$")


def wheel_fits(filename: str, python: str) -> bool:
    """Whether a wheel installs on CPython `python` ("3.11") on Linux x86_64."""
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    if len(parts) < 5:
        return False
    pytags, abis, platforms = (p.split(".") for p in parts[-3:])
    if not any(p == "any" or ("linux" in p and p.endswith("_x86_64")) for p in platforms):
        return False
    major, minor = (int(x) for x in python.split(".")[:2])
    for tag in pytags:
        if tag in (f"py{major}", f"py{major}{minor}"):
            return True
        found = re.fullmatch(rf"cp{major}(\d+)", tag)
        if found is None:
            continue
        built_for = int(found.group(1))
        if built_for == minor and any(a in (tag, "none", "abi3") for a in abis):
            return True
        if built_for <= minor and "abi3" in abis:
            return True
    return False


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _names(page: dict[str, Any]) -> list[str]:
    files = page.get("files") or []
    return [str(f.get("filename", "")) for f in files if isinstance(f, dict)]


def _wheels(page: dict[str, Any], version: str) -> list[str]:
    return [n for n in _names(page) if n.endswith(".whl") and file_version(n) == version]


@functools.lru_cache(maxsize=8192)
def moved_pin(name: str, version: str, python: str, as_of: str | None) -> str | None:
    """The release `name==version` moves to for `python` (None: it stays, because it has a wheel
    for it, ships no wheels at all, or no release of its series has one). Releases made before
    the cut-off `as_of` come first; a later one only when none before it fits.
    """
    if not _FINAL.match(version):
        return None
    page = cached_page(name)
    if page is None:
        return None
    own = _wheels(page, version)
    if not own or any(wheel_fits(w, python) for w in own):
        return None
    series = _key(version)[:2]
    versions = {file_version(n) for n in _names(page)}
    fitting = sorted(
        (
            v
            for v in versions
            if v
            and _FINAL.match(v)
            and _key(v)[:2] == series
            and _key(v) > _key(version)
            and any(wheel_fits(w, python) for w in _wheels(page, v))
        ),
        key=_key,
    )
    if not fitting:
        return None
    if as_of is not None:
        cutoff = parse_stamp(as_of)
        before = [v for v in fitting if _before(page, v, cutoff)]
        if before:
            return before[-1]
    return fitting[-1] if as_of is None else fitting[0]


def _before(page: dict[str, Any], version: str, cutoff: datetime) -> bool:
    when = released(page, version)
    return when is not None and when < cutoff


def moved_pins(
    pins: Iterable[tuple[str, str]], python: str, as_of: str | None
) -> dict[tuple[str, str], str]:
    """`moved_pin` for each pin that moves; a pin whose page cannot be read stays (logged)."""
    moved = {}
    for name, version in pins:
        try:
            new = moved_pin(name, version, python, as_of)
        except (OSError, ValueError) as exc:
            LOG.info("pins for python %s: %s==%s stays (%s)", python, name, version, exc)
            continue
        if new is not None:
            moved[(name, version)] = new
    return moved
