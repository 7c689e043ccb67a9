"""A fresh clone anywhere runs its tests and examples: nothing the project ships names a folder
beside the clone or a path of one development machine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import REALROWS_BUNDLE, REALROWS_ROWS, ROOT

SCANNED = ("tests", "benchmarks", "scripts", "docs", "Makefile", "README.md", ".ci")
# Built from pieces so this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        (
            re.escape("..") + r"/shared\b",  # a folder beside the clone
            r"(?<![\w.~-])/" + "work" + r"/",  # the development machines' checkout root
            r"(?<![\w.~-])/" + "home" + r"/[\w.-]+/",
            r"(?<![\w.~-])/" + "Users" + r"/[\w.-]+/",
        )
    )
)


def _tracked(paths: tuple[str, ...]) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *paths], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def _published(path: Path) -> bool:
    """Rows and logs as their authors published them (issue texts quote their own machines'
    paths): data the project ships, not paths it names."""
    return "data" in path.parts and path.suffix in (".jsonl", ".json", ".txt")


def _offences(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary (a bundle, a zipapp) or deleted in the work tree
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{name}:{n}: {line.strip()}")
    return found


def test_nothing_names_a_path_outside_the_repository() -> None:
    files = [p for p in _tracked(SCANNED) if not _published(p)]
    assert len(files) > 100, "git ls-files found too little: is this a clone?"
    assert _offences(files) == []


def test_the_scan_catches_each_kind_of_outside_path(tmp_path: Path) -> None:
    bad = [
        "rows = ROOT.parent" + ' / "shared" ../' + "shared/realrows/x.jsonl",
        'REALROWS = Path("/' + 'work/shared/realrows")',
        "MIRRORS = '/" + "work/.mirror'",
        "see /" + "home/dev/data",
    ]
    good = ['workdir = "/workspace/repo"', "COPY h.py /root/h.py", "tests/data/realrows/x"]
    for n, line in enumerate(bad + good):
        (tmp_path / f"{n}.txt").write_text(line + "\n")
    found = _offences(sorted(tmp_path.iterdir(), key=lambda p: int(p.stem)))
    assert len(found) == len(bad)


def test_the_real_rows_ship_inside_the_repository() -> None:
    tracked = {p.relative_to(ROOT) for p in _tracked(("tests/data/realrows",))}
    assert REALROWS_ROWS.relative_to(ROOT) in tracked
    assert REALROWS_BUNDLE.relative_to(ROOT) in tracked
    readme = (ROOT / "README.md").read_text()
    assert str(REALROWS_ROWS.relative_to(ROOT)) in readme
    assert str(REALROWS_BUNDLE.relative_to(ROOT)) in readme
