"""The packager's layers (pyproject.toml `[tool.importlinter]`, docs/architecture.md) hold: no
package imports from a layer above its own, at module level or inside a function."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.is_file(), f"{lint} is missing. Fix: `make install` (the dev extra has it)"
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout
