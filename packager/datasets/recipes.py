"""Recipe files (`--recipes FILE`): environments for rows that carry none.

A recipe file is YAML or JSON: a mapping from a key to a recipe. The key is an `instance_id`
(or a SWEeper `case_id` / `slug`), `owner/name@version`, or `owner/name`; the most specific
key that matches a row wins. A recipe holds SWE-rebench `install_config` keys (python,
packages, pip_packages, reqs_path, env_yml_path, pre_install, install, test_cmd, log_parser,
env_vars, ...) or, for web apps, `start_command` and `port`. Pure apart from `read_recipes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packager.errors import InputError


class RecipeError(InputError):
    """A recipe file cannot be read or one of its entries is malformed."""


@dataclass(frozen=True)
class Recipes:
    """Recipes by key; `find` picks the most specific match."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    origin: str = "<none>"

    def find(self, keys: Iterable[str | None]) -> tuple[str, dict[str, Any]] | None:
        """The first of `keys` (most specific first) that has a recipe, with that recipe."""
        for key in keys:
            if key and key in self.entries:
                return key, self.entries[key]
        return None

    def merged(self, other: Recipes) -> Recipes:
        """These recipes with `other`'s entries taking precedence."""
        return Recipes({**self.entries, **other.entries}, f"{self.origin}+{other.origin}")


def recipe_keys(instance_id: str, repo: str | None, version: str | None) -> list[str | None]:
    """Lookup order for a SWE-bench-style row: instance, `repo@version`, repo."""
    return [
        instance_id,
        f"{repo}@{version}" if repo and version else None,
        repo,
    ]


def parse_recipes(text: str, origin: str) -> Recipes:
    """Parse a recipe file's text (JSON, or YAML, which JSON is a subset of)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise RecipeError(f"{origin}: neither JSON nor YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise RecipeError(f"{origin}: expected a mapping of key -> recipe")
    entries: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key:
            raise RecipeError(f"{origin}: recipe keys must be non-empty strings, got {key!r}")
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise RecipeError(f"{origin}: recipe {key!r}: not a JSON object") from exc
        if not isinstance(value, Mapping):
            raise RecipeError(f"{origin}: recipe {key!r} must be a mapping of install keys")
        entries[key] = dict(value)
    return Recipes(entries, origin)


def read_recipes(path: Path) -> Recipes:
    """Load a recipe file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"--recipes {path}: {exc.strerror or exc}") from exc
    return parse_recipes(text, str(path))


def parse_base_image_options(values: Iterable[str]) -> dict[str, str]:
    """`--base-image VERSION=IMAGE` options -> mapping (Python version -> image)."""
    mapping: dict[str, str] = {}
    for value in values:
        version, sep, image = value.partition("=")
        if not sep or not version.strip() or not image.strip():
            raise RecipeError(
                f"--base-image: expected VERSION=IMAGE (e.g. 3.9=python:3.9), got {value!r}"
            )
        mapping[version.strip()] = image.strip()
    return mapping
