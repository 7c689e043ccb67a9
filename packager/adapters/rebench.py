"""SWE-rebench rows → TaskSpec: the SWE-bench adapter, with the row's own `install_config`
recipe and `docker_image` (see `packager.adapters.swebench`).
"""

from __future__ import annotations

from packager.adapters.swebench import to_spec_rebench as to_spec

__all__ = ["to_spec"]
