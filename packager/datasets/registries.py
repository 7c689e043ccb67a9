"""Whether a repository needs a package registry this machine cannot reach, read from its
manifest files at the base commit. Pure: files come in through a reader.

A build that downloads its dependencies from an unreachable registry fails after many minutes
(cargo and Maven retry, Go walks its proxies); reading the manifest first fails it at once,
naming the registry and the first dependency. Which registries are unreachable is
`assumptions.UNREACHABLE_REGISTRIES`. Per toolchain:

- go: `go.mod` with a `require`, and no `vendor/modules.txt` (`go mod vendor`'s record);
- rust: `Cargo.toml` with a dependency table entry (crates; a `path =` dependency is local);
- java: `pom.xml` with a `<dependency>` or a `build.gradle(.kts)` (Gradle and its plugins come
  from Maven Central and the plugin portal);
- php: `composer.json` with a `require`/`require-dev` other than `php` and `ext-*`;
- ruby: a `Gemfile` with a `gem` line (or `gemspec`, naming the gems of the repository's
  own gemspec).

Submodules are not a registry: they come from repository sources (`repos.submodules`).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass

from packager import assumptions as A

Reader = Callable[[str], bytes | None]
"""A file of the repository at the base commit, None when absent."""


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


def _text(read: Reader, path: str) -> str | None:
    data = read(path)
    return None if data is None else data.decode("utf-8", "replace")


def _go(read: Reader) -> tuple[str, str] | None:
    text = _text(read, "go.mod")
    if text is None or read("vendor/modules.txt") is not None:
        return None
    in_block = False
    for raw in text.splitlines():
        line = raw.split("//")[0].strip()
        if line.startswith("require ("):
            in_block = True
        elif in_block and line == ")":
            in_block = False
        elif in_block and line:
            return "go.mod", line.split()[0]
        elif line.startswith("require ") and len(line.split()) >= 2:
            return "go.mod", line.split()[1]
    return None


def _rust(read: Reader) -> tuple[str, str] | None:
    text = _text(read, "Cargo.toml")
    if text is None:
        return None
    try:
        manifest = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    tables = [manifest.get(k, {}) for k in ("dependencies", "dev-dependencies")]
    tables.append(manifest.get("workspace", {}).get("dependencies", {}))
    for table in tables:
        for name, spec in table.items() if isinstance(table, dict) else ():
            if isinstance(spec, dict) and ("path" in spec or spec.get("workspace")):
                continue
            return "Cargo.toml", str(name)
    return None


def _java(read: Reader) -> tuple[str, str] | None:
    pom = _text(read, "pom.xml")
    if pom is not None:
        match = re.search(
            r"<dependency>\s*<groupId>([^<]+)</groupId>\s*<artifactId>([^<]+)</artifactId>", pom
        )
        if match:
            return "pom.xml", f"{match.group(1).strip()}:{match.group(2).strip()}"
        if "<plugin>" in pom or "<parent>" in pom:
            return "pom.xml", "its Maven plugins"
    for name in ("build.gradle", "build.gradle.kts"):
        text = _text(read, name)
        if text is not None:
            match = re.search(
                r"""(?:implementation|api|testImplementation)\s*\(?\s*["']([^"']+)""", text
            )
            return name, match.group(1) if match else "Gradle and its plugins"
    return None


def _php(read: Reader) -> tuple[str, str] | None:
    text = _text(read, "composer.json")
    if text is None:
        return None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError:
        return None
    for key in ("require", "require-dev"):
        for name in manifest.get(key, {}) if isinstance(manifest, dict) else ():
            if name != "php" and not str(name).startswith("ext-"):
                return "composer.json", str(name)
    return None


def _ruby(read: Reader) -> tuple[str, str] | None:
    text = _text(read, "Gemfile")
    if text is None:
        return None
    for line in text.splitlines():
        match = re.match(r"""\s*gem\s+["']([^"']+)""", line)
        if match:
            return "Gemfile", match.group(1)
        if re.match(r"\s*gemspec\b", line):
            return "Gemfile", "the gems of its gemspec"
    return None


_CHECKS: dict[str, Callable[[Reader], tuple[str, str] | None]] = {
    "go": _go,
    "rust": _rust,
    "java": _java,
    "php": _php,
    "ruby": _ruby,
}


def first_need(toolchain: str | None, read: Reader) -> Need | None:
    """The first unreachable registry the repository's manifests need, None when it needs
    none this machine lacks (or its toolchain has no check).
    """
    check = _CHECKS.get(toolchain or "")
    if check is None:
        return None
    hit = check(read)
    if hit is None:
        return None
    manifest, dependency = hit
    return Need(A.UNREACHABLE_REGISTRIES[toolchain or ""], dependency, manifest)
