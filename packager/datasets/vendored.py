"""Installers that carry a copy of the package under test (`vendored.yaml`, data).

pip vendors requests, urllib3, packaging, rich, pygments …; setuptools vendors packaging,
more_itertools, zipp …. Those copies are releases later than a row's base commit, so a row
fixing one of these packages would find its answer inside the installer. Such a row's agent image
holds none of those installers (docs/security.md); its grader image gets them back.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

import yaml

VENDORED_FILE = "vendored.yaml"


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files("packager.datasets").joinpath(VENDORED_FILE).read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def package_name(repo: str) -> str:
    """The import name of the package a repository (`owner/name`) holds: the table's entry,
    else its name in lower case with `-` read as `_`, without a `python-`/`py-` prefix or
    a `-python`/`.py` suffix.
    """
    named = _table().get("packages", {}).get(repo)
    if named:
        return str(named)
    name = repo.rsplit("/", 1)[-1].lower()
    name = re.sub(r"^(python-|py-)", "", name)
    name = re.sub(r"(-python|\.py)$", "", name)
    return name.replace("-", "_").replace(".", "_")


def vendoring_installers(repo: str) -> tuple[tuple[str, ...], str | None]:
    """The installers that carry a copy of `repo`'s package (in the table's order) and that
    package's import name; `((), None)` for a repository no installer copies.
    """
    package = package_name(repo)
    installers = tuple(
        name
        for name, vendored in (_table().get("installers") or {}).items()
        if package in (vendored or [])
    )
    return (installers, package) if installers else ((), None)
