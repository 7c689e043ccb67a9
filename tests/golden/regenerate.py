"""`make golden`: rewrite the checked-in render of the samples. CI never runs this."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE / "tree"


def render_samples(out: Path) -> Path:
    """Render every sample row into `out`; returns the dataset folder. Published harness images
    are never used (`--prebuilt never`), which is what `auto` renders when the engine lacks
    them: the tree must not depend on what images the engine has (a test that made one).
    """
    subprocess.run(
        [
            sys.executable,
            "-m",
            "packager",
            "render",
            "--all",
            "--prebuilt",
            "never",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return out / "samples"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rendered = render_samples(Path(tmp))
        if TREE.exists():
            shutil.rmtree(TREE)
        shutil.copytree(rendered, TREE, copy_function=shutil.copy2)
    print(f"golden tree rewritten: {TREE}")


if __name__ == "__main__":
    main()
