"""Node.js: Debian's node and npm (npm and pnpm themselves come from the npm registry, which
this machine reaches: `pnpm_version` is `npm install -g pnpm@VER`).

Its images also carry what the harness's JavaScript images give every spec: compilers for
native modules (node-gyp), jq (immutable-js' test command pipes jest's JSON through it) and a
browser (Debian's Chromium for the harness's Chrome: karma's Chrome launchers, preact), found
by karma-chrome-launcher through CHROME_BIN (it looks for Google Chrome's names on PATH).
"""

from packager.toolchains.base import Profile

PROFILE = Profile(
    name="node",
    debian={"bookworm": "18", "trixie": "20"},
    packages=("nodejs", "npm", "build-essential", "jq", "chromium"),
    env={"CHROME_BIN": "/usr/bin/chromium"},
    language="javascript",
    parsers=("tap",),
    parser_language="javascript",
    npm_registry=True,
    tools={"pnpm_version": "npm install -g pnpm@{version}"},
)
