"""Rust: Debian's rustc and cargo. Crates come from the Rust package registry, which this
machine cannot reach: a `Cargo.toml` dependency table entry needs it (a `path =` or workspace
dependency is local).
"""

from __future__ import annotations

import tomllib

from packager.toolchains.base import Profile, Reader, read_text


def needs_crates(read: Reader) -> tuple[str, str] | None:
    text = read_text(read, "Cargo.toml")
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


PROFILE = Profile(
    name="rust",
    debian={"bookworm": "1.63", "trixie": "1.85"},
    packages=("rustc", "cargo"),
    registry="crates (the Rust package registry)",
    needs_registry=needs_crates,
)
