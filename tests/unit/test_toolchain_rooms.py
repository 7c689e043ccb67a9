"""Every toolchain besides Python in one room: a profile module in packager/toolchains/ and one
line in `toolchains.MODULES`. Outside that room no packager module names a toolchain, except
where the word means something else or is the harness's own data (listed below, each with why).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from packager import toolchains
from packager.toolchains.base import Profile

PACKAGER = Path(toolchains.__file__).resolve().parent.parent

ELSEWHERE = {
    # The harness's own names: its file extensions -> languages, its parser names -> ours.
    "datasets/harness_specs.py": {"go", "rust", "java", "php", "ruby", "c"},
    "datasets/harness_parsers.py": {"go", "node"},
    # Other meanings: a Ray cluster node, the `node` executable a web app starts with, git's
    # one-letter object types, a sample grader's own source.
    "executors/ray.py": {"node"},
    "adapters/app_start.py": {"node"},
    "checks/audit/packs.py": {"c"},
    "samples/src/kvstore/grader/grade.py": {"node"},
}


def _named(path: Path, names: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    }


def test_toolchain_names_appear_only_in_their_room() -> None:
    names = set(toolchains.PROFILES)
    assert names == {"node", "go", "rust", "java", "php", "ruby", "c"}
    found = {}
    for path in sorted(PACKAGER.rglob("*.py")):
        relative = path.relative_to(PACKAGER).as_posix()
        if relative.startswith(("toolchains/", "grading/")):  # the rooms (grading: runners)
            continue
        named = _named(path, names) - ELSEWHERE.get(relative, set())
        if named:
            found[relative] = sorted(named)
    assert found == {}


def test_every_profile_comes_from_its_module_and_is_complete() -> None:
    for module in toolchains.MODULES:
        profile = toolchains.PROFILES[module]
        assert isinstance(profile, Profile) and profile.name == module and profile.packages
        # A registry it cannot reach comes with the check that reads the manifests for it.
        assert (profile.registry is None) == (profile.needs_registry is None)
    assert toolchains.VERSIONED == set(toolchains.PROFILES) - {"c"}
    assert toolchains.LANGUAGE_BY_PARSER == {"gotest": "go", "tap": "javascript"}
    assert toolchains.TOOL_KEYS == {"pnpm_version": "node"}


def test_a_new_profile_is_all_a_toolchain_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A profile for Zig: its versions, packages and registry check, and nothing else changed.
    zig = Profile(
        name="zig",
        debian={"trixie": "0.14"},
        packages=("zig",),
        registry="the Zig package index",
        needs_registry=lambda read: ("build.zig.zon", "ziglyph") if read("build.zig.zon") else None,
    )
    monkeypatch.setitem(toolchains.PROFILES, "zig", zig)
    choice = toolchains.choose_toolchain("zig", "0.13")
    assert (choice.used, choice.image, choice.packages) == ("0.14", "debian:trixie-slim", ("zig",))
    assert choice.describe() == "zig 0.13 -> 0.14"
    need = toolchains.first_need("zig", lambda path: b".{}" if path == "build.zig.zon" else None)
    assert need is not None and need.registry == "the Zig package index"
    assert toolchains.first_need("zig", lambda path: None) is None


def test_a_profile_drives_the_recipe() -> None:
    assert toolchains.tool_setup("pnpm_version", "8.15.4") == "npm install -g pnpm@8.15.4"
    assert toolchains.uses_npm_registry("node") and not toolchains.uses_npm_registry("go")
    assert not toolchains.uses_npm_registry(None)
    c = toolchains.for_language("c")
    assert c is not None and c.name == "c" and "cmake" in c.packages
    assert toolchains.for_language("go") is None  # versioned: its spec names the version
    assert toolchains.choose_toolchain("node", "18.20.4").env == {"CHROME_BIN": "/usr/bin/chromium"}
