"""Which image serves the Python a row asks for. Pure: what the engine has or can pull comes in
as a callable.

Order (docs/datasets.md, "Every Python a row asks for"):
1. `--base-image VER=IMAGE`, the user's own image for that version;
2. the official `python:VER-slim` image, where the engine has it or can pull it;
3. a Debian base for the versions Debian ships as its python3 (3.9 bullseye, 3.11 bookworm,
   3.13 trixie; seeded from Debian's archive when no registry is reachable);
4. otherwise the nearest of those at or above the version asked (below it only where none is
   above). A substitution is never silent: the choice says what was asked and what is used,
   and `--python-fallback never` makes step 4 an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from packager import assumptions as A
from packager.toolchains.base import version_key

Fallback = Literal["nearest", "never"]


class PythonUnavailable(ValueError):
    """No image serves the version asked, and substitution is not allowed."""


@dataclass(frozen=True)
class PythonChoice:
    """The interpreter an environment gets."""

    requested: str
    used: str
    image: str
    how: str
    """`--base-image`, `official image`, `Debian <suite>`."""

    @property
    def substituted(self) -> bool:
        """Whether the version used differs from the one asked for."""
        return self.used != self.requested


def minor(version: str) -> str:
    """`3.9.7` -> `3.9`; `3` -> Debian's default; anything else as given."""
    if version == "3":
        return A.DEBIAN_PYTHON
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else version


def choose_python(
    requested: str,
    *,
    base_images: Mapping[str, str],
    available: Callable[[str], bool],
    fallback: Fallback = "nearest",
) -> PythonChoice:
    """The image for `requested` (see the module docstring for the order)."""
    if requested in base_images:
        return PythonChoice(requested, requested, base_images[requested], "--base-image")
    version = minor(requested)
    if version in base_images:
        return PythonChoice(requested, version, base_images[version], "--base-image")
    official = A.official_python_image(version)
    if available(official):
        return PythonChoice(requested, version, official, "official image")
    suites = A.DEBIAN_PYTHON_SUITES
    if version in suites:
        return PythonChoice(
            requested, version, A.debian_base_image(suites[version]), f"Debian {suites[version]}"
        )
    shipped = sorted(suites, key=version_key)
    above = [v for v in shipped if version_key(v) >= version_key(version)]
    nearest = above[0] if above else shipped[-1]
    if fallback == "never":
        raise PythonUnavailable(
            f"Python {requested}: no image serves it (no --base-image {version}=IMAGE, "
            f"{official} not available, and Debian ships {', '.join(shipped)}); "
            f"--python-fallback never forbids using {nearest} instead"
        )
    suite = suites[nearest]
    return PythonChoice(requested, nearest, A.debian_base_image(suite), f"Debian {suite}")
