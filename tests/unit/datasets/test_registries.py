"""Fail-fast detection of package registries this machine cannot reach, from a repository's
manifests at its base commit (packager.datasets.registries). Pure: files from a dict.
"""

from __future__ import annotations

import pytest

from packager.datasets.registries import first_need

GO_MOD = b"""module github.com/gin-gonic/gin

go 1.20

require (
\tgithub.com/bytedance/sonic v1.9.1 // indirect comment
\tgithub.com/gin-contrib/sse v0.1.0
)
"""
GO_MOD_ONE = b"module example.com/x\n\ngo 1.21\n\nrequire golang.org/x/text v0.14.0\n"
CARGO = b"""[package]
name = "bat"

[dependencies]
local = { path = "crates/local" }
ansi_colours = "^1.2"

[dev-dependencies]
assert_cmd = "2"
"""
POM = b"""<project><dependencies>
  <dependency>
    <groupId>junit</groupId>
    <artifactId>junit</artifactId>
  </dependency>
</dependencies></project>"""
GRADLE = b'dependencies {\n    testImplementation "org.junit.jupiter:junit-jupiter:5.9.2"\n}\n'
COMPOSER = b'{"require": {"php": "^8.1", "ext-json": "*", "symfony/console": "^6.0"}}'
GEMFILE = b'source "https://rubygems.invalid"\n\ngemspec\ngem "rake"\n'


def reader(files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    return files.get


@pytest.mark.parametrize(
    ("toolchain", "files", "registry", "dependency", "manifest"),
    [
        ("go", {"go.mod": GO_MOD}, "Go module proxy", "github.com/bytedance/sonic", "go.mod"),
        ("go", {"go.mod": GO_MOD_ONE}, "Go module proxy", "golang.org/x/text", "go.mod"),
        ("rust", {"Cargo.toml": CARGO}, "crates", "ansi_colours", "Cargo.toml"),
        ("java", {"pom.xml": POM}, "Maven Central", "junit:junit", "pom.xml"),
        (
            "java",
            {"build.gradle": GRADLE},
            "Maven Central",
            "org.junit.jupiter:junit-jupiter:5.9.2",
            "build.gradle",
        ),
        ("php", {"composer.json": COMPOSER}, "Composer", "symfony/console", "composer.json"),
        ("ruby", {"Gemfile": GEMFILE}, "RubyGems", "the gems of its gemspec", "Gemfile"),
    ],
)
def test_needs_are_named(
    toolchain: str, files: dict[str, bytes], registry: str, dependency: str, manifest: str
) -> None:
    need = first_need(toolchain, reader(files))
    assert need is not None
    assert registry in need.registry
    assert (need.dependency, need.manifest) == (dependency, manifest)
    assert f"asks for {dependency}" in need.sentence()


@pytest.mark.parametrize(
    ("toolchain", "files"),
    [
        # vendored Go modules build offline
        ("go", {"go.mod": GO_MOD, "vendor/modules.txt": b"# github.com/x v1\n"}),
        ("go", {"go.mod": b"module example.com/x\n\ngo 1.21\n"}),
        ("rust", {"Cargo.toml": b'[package]\nname = "x"\n\n[dependencies]\n'}),
        ("php", {"composer.json": b'{"require": {"php": ">=8", "ext-mbstring": "*"}}'}),
        # npm is reachable; C needs no registry
        ("node", {"package.json": b'{"dependencies": {"mocha": "10"}}'}),
        ("c", {"Makefile": b"all:\n"}),
        (None, {"go.mod": GO_MOD}),
    ],
)
def test_no_need(toolchain: str | None, files: dict[str, bytes]) -> None:
    assert first_need(toolchain, reader(files)) is None


def test_submodules_fetched_by_the_recipe() -> None:
    files = {".gitmodules": b'[submodule "modules/oniguruma"]\n\tpath = modules/oniguruma\n'}
    need = first_need("c", reader(files), ("git submodule update --init", "make"))
    assert need is not None and need.dependency == "modules/oniguruma"
    # the same repository built without fetching its submodules needs nothing
    assert first_need("c", reader(files), ("make",)) is None
