"""How a web app of a task starts (`AppStart`), and reading one from a recipe entry: values that
adapters make and the app check (`packager.checks.app`) uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AppStart:
    """How to start an app: a shell command run in the repository with `PORT` set to `port`."""

    command: str
    port: int
    how: str
    """What it was detected from, e.g. "package.json scripts.start" or "recipe"."""


def start_from_recipe(entry: Mapping[str, Any]) -> AppStart:
    """An AppStart from a recipe entry's `start_command` and `port` (ValueError names the key)."""
    command = entry.get("start_command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError(
            f"recipe key 'start_command': expected a non-empty shell command, got {command!r}"
        )
    port = entry.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"recipe key 'port': expected an integer 1..65535, got {port!r}")
    return AppStart(command.strip(), port, "recipe")
