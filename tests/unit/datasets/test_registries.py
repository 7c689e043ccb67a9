"""Fail-fast detection of package registries this machine cannot reach, from a repository's
manifests at its base commit (packager.toolchains). Pure: files from a dict.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from packager.toolchains import first_need

ROWS = Path(__file__).parents[3] / "benchmarks" / "data" / "swe-bench-multilingual-real.jsonl"
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


def test_build_stage_fails_before_building(tmp_path: Path) -> None:
    """The real Multilingual row's Go spec on a repository whose go.mod requires modules: the
    build stage raises BuildError (build_failed) reading the mirror, before any Docker call."""
    from packager.adapters import Context, to_spec
    from packager.errors import BuildError
    from packager.stages.build import BuildOptions, _check_registries

    rows = ROWS.read_text().splitlines()
    row = next(json.loads(line) for line in rows if '"gin-gonic__gin-1805"' in line)
    repo = tmp_path / "gin"
    repo.mkdir()
    (repo / "go.mod").write_bytes(GO_MOD)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    spec = to_spec({**row, "base_commit": head}, Context(dataset="d", split="test"))
    assert spec.environment.toolchain == "go"
    assert spec.provenance.metadata["toolchain_used"] == "go 1.24"
    with pytest.raises(BuildError) as info:
        _check_registries(spec, {"gin-gonic/gin": str(repo)}, BuildOptions())
    assert "needs the Go module proxy" in str(info.value)
    assert "github.com/bytedance/sonic" in str(info.value)
    assert info.value.log_path is None
