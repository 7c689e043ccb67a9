"""C/C++: what the harness's C/C++ images give their specs' `build` commands, from Debian
bookworm (the specs name no version): compilers and make, cmake, the autotools and pkg-config
(jq's autoreconf), bison/flex (jq regenerates its parser), tcl (redis' and valkey's `runtest`
is a Tcl script).
"""

from packager.toolchains.base import Profile

PROFILE = Profile(
    name="c",
    packages=(
        "build-essential",
        "cmake",
        "autoconf",
        "automake",
        "libtool",
        "pkg-config",
        "bison",
        "flex",
        "tcl",
    ),
    language="c",
)
