"""Go: Debian's golang-go. Modules come from the Go module proxy, which this machine cannot
reach: a `go.mod` with a `require` and no `vendor/modules.txt` (`go mod vendor`'s record) needs
it.
"""

from __future__ import annotations

from packager.toolchains.base import Profile, Reader, read_text


def needs_proxy(read: Reader) -> tuple[str, str] | None:
    text = read_text(read, "go.mod")
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


PROFILE = Profile(
    name="go",
    debian={"bookworm": "1.19", "trixie": "1.24"},
    packages=("golang-go",),
    parsers=("gotest",),
    parser_language="go",
    registry="the Go module proxy",
    needs_registry=needs_proxy,
)
