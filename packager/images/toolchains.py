"""Which Debian release serves the toolchain a harness spec asks for (`docker_specs`:
`node_version`, `go_version`, `rust_version`, `java_version`, `php_version`, `ruby_version`).
Pure; the sibling of `packager.images.pythons`.

Order (docs/datasets.md, "Toolchains besides Python"):
1. the Debian release whose toolchain has the version asked (compared on the served version's
   parts: node `18.20.4` is served by bookworm's 18, go `1.19.13` by bookworm's 1.19);
2. otherwise the nearest served at or above it (below it only where none is above). A
   substitution is never silent: the choice says what was asked and what is used, and
   `--toolchain-fallback never` makes step 2 an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from packager import assumptions as A
from packager.images.pythons import version_key

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
    suites = A.DEBIAN_TOOLCHAINS[name]
    packages = A.TOOLCHAIN_PACKAGES[name]
    for suite, served in suites.items():
        if _served(requested, served):
            return ToolchainChoice(
                name, requested, served, A.debian_base_image(suite), packages, f"Debian {suite}"
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
        name, requested, nearest, A.debian_base_image(suite), packages, f"Debian {suite}"
    )


def c_toolchain() -> ToolchainChoice:
    """C/C++: Debian bookworm's compilers and build tools (the specs name no version)."""
    image = A.debian_base_image("bookworm")
    return ToolchainChoice("c", "", "", image, A.C_TOOLCHAIN_PACKAGES, "Debian bookworm")
