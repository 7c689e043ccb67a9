"""What every toolchain profile holds, and what its manifest check reads. Pure.

A profile is everything the packager knows about one language toolchain besides Python (whose
environments have their own machinery, packager.images.pythons): the versions Debian's releases
serve, the Debian packages and environment of its images, the task language it stands for, and
the package registry its builds download from when this machine cannot reach it, with the check
that reads a repository's manifests for a dependency on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Reader = Callable[[str], bytes | None]
"""A file of the repository at the base commit, None when absent."""

ManifestCheck = Callable[[Reader], tuple[str, str] | None]
"""(manifest, first dependency) of a repository needing the profile's registry, else None."""


def version_key(version: str) -> tuple[int, ...]:
    """`"3.10"` -> (3, 10): versions compare numerically, not as text."""
    parts = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def read_text(read: Reader, path: str) -> str | None:
    """A manifest's text (undecodable bytes replaced), None when the file is absent."""
    data = read(path)
    return None if data is None else data.decode("utf-8", "replace")


@dataclass(frozen=True)
class Profile:
    """One toolchain (see the module docstring)."""

    name: str
    """`node`, `go`, ...: the stem of the harness's `docker_specs` key (`node_version`)."""
    packages: tuple[str, ...]
    """Debian packages serving it, installed after the common non-Python packages."""
    debian: Mapping[str, str] = field(default_factory=dict)
    """The version each Debian release ships (suite -> version); empty: no version is asked
    (C/C++ is served by bookworm's compilers whatever the spec says)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment of its images (a recipe's `env_vars` win)."""
    language: str | None = None
    """The task language a recipe with this toolchain gets where the harness names none."""
    parsers: tuple[str, ...] = ()
    """Test-log parsers whose rows are in this profile's language (`parser_language`)."""
    parser_language: str | None = None
    registry: str | None = None
    """The package registry its builds need that this machine cannot reach."""
    npm_registry: bool = False
    """Its builds download from the npm registry (the host's npm registry setting is passed on
    to the agent image's build)."""
    tools: Mapping[str, str] = field(default_factory=dict)
    """Extra `docker_specs` keys it takes (`pnpm_version`) -> the setup command installing that
    version, `{version}` standing for it."""
    needs_registry: ManifestCheck | None = None
    """Reads the manifests at the base commit for a dependency on `registry`."""
