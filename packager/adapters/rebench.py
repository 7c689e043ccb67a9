"""SWE-rebench rows → TaskSpec: SWE-bench plus `install_config` (JSON string or dict) and
`docker_image`, a prebuilt image used as the agent image's base when given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packager.adapters import Context
from packager.adapters.swebench import to_spec_with
from packager.model import TaskSpec


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWE-rebench row."""
    image = row.get("docker_image")
    return to_spec_with(row, ctx, schema="swe-rebench", prebuilt=str(image) if image else None)
