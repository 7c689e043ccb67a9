"""The Jinja environment and the in-memory file tree that targets produce.

Rendering is pure: templates in, bytes out. StrictUndefined turns a misspelt variable into an
error instead of an empty string, and every value that lands in shell goes through `shquote`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"


@dataclass(frozen=True)
class OutFile:
    """One file of a rendered tree: its bytes and its mode (0o644 or 0o755)."""

    data: bytes
    mode: int = 0o644


FileTree = dict[str, OutFile]
"""Relative POSIX path → file. Targets build these; only `write` puts them on disk."""


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,  # templates ship with the package: no stat per render
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env


@lru_cache(maxsize=64)
def _template(name: str) -> Any:
    """A compiled template, looked up once per process (not once per task)."""
    return _environment().get_template(name)


def render_template(name: str, **context: Any) -> bytes:
    """Render `templates/<name>` with `context`; an undefined variable raises."""
    text: str = _template(name).render(**context)
    return text.encode()


def text_file(text: str, mode: int = 0o644) -> OutFile:
    """A file from text, with a guaranteed final newline."""
    if text and not text.endswith("\n"):
        text += "\n"
    return OutFile(text.encode(), mode)
