"""Every language toolchain besides Python, one profile per module (node.py, go.py, rust.py,
java.py, php.py, ruby.py, c.py); `MODULES` below is the only list of them. A new toolchain is
one module with its `PROFILE` plus one line there. Pure: no I/O.

Also which Debian release serves the version a harness spec asks for (`docker_specs`:
`node_version`, `go_version`, ...), the sibling of `packager.images.pythons`
(docs/datasets.md, "Toolchains besides Python"):
1. the Debian release whose toolchain has the version asked (compared on the served version's
   parts: node `18.20.4` is served by bookworm's 18, go `1.19.13` by bookworm's 1.19);
2. otherwise the nearest served at or above it (below it only where none is above). A
   substitution is never silent: the choice says what was asked and what is used, and
   `--toolchain-fallback never` makes step 2 an error.

And whether a repository needs a package registry this machine cannot reach, read from its
manifests at the base commit (each profile's `needs_registry`): a build that downloads from an
unreachable registry fails after many minutes (cargo and Maven retry, Go walks its proxies);
reading the manifest first fails it at once, naming the registry and the first dependency.
Submodules are not a registry: they come from repository sources (`repos.submodules`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

from packager import assumptions as A
from packager.toolchains.base import Profile, Reader, version_key

MODULES = ("node", "go", "rust", "java", "php", "ruby", "c")
"""The toolchain modules of this package."""

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (importlib.import_module(f"{__name__}.{module}").PROFILE for module in MODULES)
}

VERSIONED = frozenset(name for name, profile in PROFILES.items() if profile.debian)
"""Toolchains a harness spec asks for by version (`<name>_version`)."""

LANGUAGE_BY_TOOLCHAIN = {n: p.language for n, p in PROFILES.items() if p.language}
"""A recipe's toolchain -> the task's language where the harness files none."""

LANGUAGE_BY_PARSER = {
    parser: p.parser_language
    for p in PROFILES.values()
    if p.parser_language
    for parser in p.parsers
}
"""A recipe's parser -> the task's language where neither the harness nor the toolchain
names one."""

UNREACHABLE_REGISTRIES = {n: p.registry for n, p in PROFILES.items() if p.registry}
"""Package registries this machine cannot reach (it reaches the Python index, Debian's archive
and the npm registry only), by toolchain."""

TOOL_KEYS = {key: name for name, p in PROFILES.items() for key in p.tools}
"""Extra `docker_specs` keys -> the toolchain that takes them (`pnpm_version` -> node)."""

Fallback = Literal["nearest", "never"]


class ToolchainUnavailable(ValueError):
    """No Debian release serves the version asked, and substitution is not allowed."""


@dataclass(frozen=True)
class ToolchainChoice:
    """The toolchain an environment gets."""

    name: str
    """`node`, `go`, `rust`, `java`, `php`, `ruby`, or `c` (no version)."""
    requested: str
    used: str
    image: str
    packages: tuple[str, ...]
    how: str
    """`Debian <suite>`."""

    @property
    def substituted(self) -> bool:
        """Whether the version used is another series than the one asked for (`18.20.4` served
        by Debian's 18 is not; `16` served by 18 is).
        """
        return not _served(self.requested, self.used)

    @property
    def env(self) -> dict[str, str]:
        """The environment of the toolchain's images (a recipe's `env_vars` win)."""
        return dict(PROFILES[self.name].env)

    def describe(self) -> str:
        """`node 16 -> 18` or `node 20`, as reports print it."""
        if not self.requested:
            return self.name
        if self.requested != self.used:
            return f"{self.name} {self.requested} -> {self.used}"
        return f"{self.name} {self.requested}"


def _served(requested: str, served: str) -> bool:
    """Whether `requested` is the served version, compared on the served version's parts."""
    want = version_key(requested)
    have = version_key(served)
    return want[: len(have)] == have


def choose_toolchain(name: str, requested: str, fallback: Fallback = "nearest") -> ToolchainChoice:
    """The Debian release serving `name` at `requested` (see the module docstring)."""
    profile = PROFILES[name]
    suites = profile.debian
    for suite, served in suites.items():
        if _served(requested, served):
            return ToolchainChoice(
                name,
                requested,
                served,
                A.debian_base_image(suite),
                profile.packages,
                f"Debian {suite}",
            )
    ordered = sorted(suites.items(), key=lambda item: version_key(item[1]))
    above = [item for item in ordered if version_key(item[1]) >= version_key(requested)]
    suite, nearest = above[0] if above else ordered[-1]
    if fallback == "never":
        shipped = ", ".join(f"{v} ({s})" for s, v in ordered)
        raise ToolchainUnavailable(
            f"{name} {requested}: Debian ships {shipped}; --toolchain-fallback never forbids "
            f"using {nearest} instead"
        )
    return ToolchainChoice(
        name, requested, nearest, A.debian_base_image(suite), profile.packages, f"Debian {suite}"
    )


def for_language(language: str | None) -> ToolchainChoice | None:
    """The toolchain of a language whose specs name no version (C/C++: Debian bookworm's
    compilers and build tools), None for any other language.
    """
    for name, profile in PROFILES.items():
        if profile.language == language and not profile.debian:
            image = A.debian_base_image("bookworm")
            return ToolchainChoice(name, "", "", image, profile.packages, "Debian bookworm")
    return None


def tool_setup(key: str, version: str) -> str:
    """The setup command installing an extra tool of a toolchain (`TOOL_KEYS`)."""
    return PROFILES[TOOL_KEYS[key]].tools[key].format(version=version)


def uses_npm_registry(name: str | None) -> bool:
    """Whether builds with this toolchain download from the npm registry."""
    profile = PROFILES.get(name or "")
    return profile is not None and profile.npm_registry


@dataclass(frozen=True)
class Need:
    """A registry the build would need, and the first dependency that needs it."""

    registry: str
    dependency: str
    manifest: str

    def sentence(self) -> str:
        """What the build failure says."""
        return (
            f"needs {self.registry}, which this machine cannot reach: {self.manifest} asks for "
            f"{self.dependency} (first of its dependencies)"
        )


def first_need(toolchain: str | None, read: Reader) -> Need | None:
    """The first unreachable registry the repository's manifests need, None when it needs
    none this machine lacks (or its toolchain has no check).
    """
    profile = PROFILES.get(toolchain or "")
    if profile is None or profile.needs_registry is None or profile.registry is None:
        return None
    hit = profile.needs_registry(read)
    if hit is None:
        return None
    manifest, dependency = hit
    return Need(profile.registry, dependency, manifest)
