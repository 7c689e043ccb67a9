"""PHP: Debian's php-cli, its common extensions and Composer. Packages come from Packagist,
which this machine cannot reach: a `composer.json` `require`/`require-dev` other than `php`
and `ext-*` needs it.
"""

from __future__ import annotations

import json

from packager.toolchains.base import Profile, Reader, read_text


def needs_packagist(read: Reader) -> tuple[str, str] | None:
    text = read_text(read, "composer.json")
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


PROFILE = Profile(
    name="php",
    debian={"bookworm": "8.2", "trixie": "8.4"},
    packages=("php-cli", "php-xml", "php-mbstring", "php-curl", "composer"),
    registry="Packagist (Composer)",
    needs_registry=needs_packagist,
)
