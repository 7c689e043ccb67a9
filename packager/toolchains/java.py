"""Java: Debian's JDK and Maven. Dependencies and plugins come from Maven Central, which this
machine cannot reach: a `pom.xml` with a `<dependency>` (or plugins, or a parent) or any
`build.gradle(.kts)` (Gradle and its plugins come from Maven Central and the plugin portal)
needs it.
"""

from __future__ import annotations

import re

from packager.toolchains.base import Profile, Reader, read_text


def needs_central(read: Reader) -> tuple[str, str] | None:
    pom = read_text(read, "pom.xml")
    if pom is not None:
        match = re.search(
            r"<dependency>\s*<groupId>([^<]+)</groupId>\s*<artifactId>([^<]+)</artifactId>", pom
        )
        if match:
            return "pom.xml", f"{match.group(1).strip()}:{match.group(2).strip()}"
        if "<plugin>" in pom or "<parent>" in pom:
            return "pom.xml", "its Maven plugins"
    for name in ("build.gradle", "build.gradle.kts"):
        text = read_text(read, name)
        if text is not None:
            match = re.search(
                r"""(?:implementation|api|testImplementation)\s*\(?\s*["']([^"']+)""", text
            )
            return name, match.group(1) if match else "Gradle and its plugins"
    return None


PROFILE = Profile(
    name="java",
    debian={"bookworm": "17", "trixie": "21"},
    packages=("default-jdk-headless", "maven"),
    registry="Maven Central",
    needs_registry=needs_central,
)
