"""Ruby: Debian's ruby-full and Bundler. Gems come from RubyGems, which this machine cannot
reach: a `Gemfile` with a `gem` line (or `gemspec`, naming the gems of the repository's own
gemspec) needs it.
"""

from __future__ import annotations

import re

from packager.toolchains.base import Profile, Reader, read_text


def needs_rubygems(read: Reader) -> tuple[str, str] | None:
    text = read_text(read, "Gemfile")
    if text is None:
        return None
    for line in text.splitlines():
        match = re.match(r"""\s*gem\s+["']([^"']+)""", line)
        if match:
            return "Gemfile", match.group(1)
        if re.match(r"\s*gemspec\b", line):
            return "Gemfile", "the gems of its gemspec"
    return None


PROFILE = Profile(
    name="ruby",
    debian={"bookworm": "3.1", "trixie": "3.3"},
    packages=("ruby-full", "bundler"),
    registry="RubyGems",
    needs_registry=needs_rubygems,
)
