"""URL slugs."""

import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str, sep: str = "-") -> str:
    """Return a lowercase ASCII slug of ``text``, words joined by ``sep``."""
    text = text.lower()
    return _SEPARATORS.sub(sep, text).strip(sep)
