"""Adapters: one per dataset schema, each a pure `to_spec(row, ctx) -> TaskSpec`.

Detection looks at the row's non-empty columns; the first schema whose marker columns are all
present wins (most specific first). `--schema` skips detection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packager.errors import DatasetError, RowError
from packager.model import Schema, TaskSpec


@dataclass(frozen=True)
class Context:
    """What an adapter knows besides the row."""

    dataset: str
    split: str


_MARKERS: tuple[tuple[Schema, tuple[str, ...]], ...] = (
    ("sweeper", ("workflows", "reference_commit")),
    ("pdl", ("files", "reward_formula")),
    ("ec-swe", ("grader", "grader_files")),
    ("swe-rebench", ("install_config", "docker_image")),
    ("swebench", ("FAIL_TO_PASS", "version", "environment_setup_commit")),
)
SCHEMAS: tuple[Schema, ...] = tuple(name for name, _ in _MARKERS)


def detect_schema(row: Mapping[str, Any]) -> Schema:
    """The schema whose marker columns the row has (present, even when null)."""
    keys = set(row)
    for name, markers in _MARKERS:
        if all(m in keys for m in markers):
            return name
    task = str(row.get("instance_id", "<no instance_id>"))
    raise RowError(
        task,
        "<columns>",
        f"unknown schema: columns {sorted(keys)} match none of "
        f"{', '.join(SCHEMAS)} (pass --schema)",
    )


def get_adapter(schema: str) -> Callable[[Mapping[str, Any], Context], TaskSpec]:
    """The `to_spec` function of a schema."""
    from packager.adapters import ecswe, pdl, rebench, swebench, sweeper

    table: dict[str, Callable[[Mapping[str, Any], Context], TaskSpec]] = {
        "swebench": swebench.to_spec,
        "swe-rebench": rebench.to_spec,
        "ec-swe": ecswe.to_spec,
        "pdl": pdl.to_spec,
        "sweeper": sweeper.to_spec,
    }
    if schema not in table:
        raise DatasetError(f"unknown schema {schema!r}; known: {', '.join(SCHEMAS)}")
    return table[schema]


def to_spec(row: Mapping[str, Any], ctx: Context, schema: str | None = None) -> TaskSpec:
    """Adapt one row, detecting its schema unless given; pydantic errors become RowErrors."""
    from pydantic import ValidationError

    name = schema or detect_schema(row)
    task = str(row.get("instance_id") or "<no instance_id>")
    try:
        return get_adapter(name)(row, ctx)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<row>"
        raise RowError(task, field, first["msg"]) from exc
