"""Defaults that the run's configuration shows and lower layers use when not told otherwise:
kept here, a leaf, so that no lower module imports the configuration to learn them.
"""

from __future__ import annotations

BUILD_TIMEOUT_SEC = 1800.0
"""Seconds an image build may take unless told: also Harbor's `build_timeout_sec` in task.toml."""

MAX_ABLATIONS = 12
"""Quality: at most this many ablated variants of the gold patch per task."""

DEFAULT_ENVIRONMENT = "docker"
"""The environment type trials run in unless told (Harbor's `--env`; the local engine's only)."""
