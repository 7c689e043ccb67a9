"""Which hunks each ablation leaves out (`ablation_plan`) and the gold patch without them
(`ablated_patch`), as a diff git apply accepts (pure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packager.checks.quality.hunks import skipped, split_hunks
from packager.defaults import MAX_ABLATIONS
from packager.diffs import HUNK_HEADER, FileDiff, Hunk, Junk, parse_diff, split_lines

MAX_ABLATIONS_DEFAULT: int = MAX_ABLATIONS
"""`--max-ablations`' default, written once on its config field."""


@dataclass(frozen=True)
class Ablation:
    """One regrade: the gold patch without some hunks."""

    index: int
    """1-based; its logs go to `logs/<task>/quality/ablation-<index>/`."""
    removes: tuple[tuple[int, int], ...]
    """(file section index, hunk index within that file) of every hunk left out."""
    files: tuple[str, ...]

    def describe(self, files: Sequence[FileDiff]) -> str:
        """What it leaves out, e.g. `src/a.py: new lines 3-5, old lines 3-4`."""
        return "; ".join(files[f].hunks[h].where for f, h in self.removes)


def ablation_plan(patch: str, max_ablations: int = MAX_ABLATIONS_DEFAULT) -> list[Ablation]:
    """Which hunks each ablation leaves out: one hunk each when there are at most
    `max_ablations`; else the hunks of one file each, a file's hunks split in halves while the
    budget allows; with more files than ablations, runs of neighbouring files together. Every
    file with hunks is in exactly one ablation, so every file is covered.
    """
    if max_ablations < 1:
        raise ValueError("max_ablations must be at least 1")
    files = [f for f in split_hunks(patch) if skipped(f) is None]
    units = [(f.index, h) for f in files for h in range(len(f.hunks))]
    groups: list[list[tuple[int, int]]]
    if len(units) <= max_ablations:
        groups = [[u] for u in units]
    else:
        per_file = [[(f.index, h) for h in range(len(f.hunks))] for f in files]
        if len(per_file) > max_ablations:
            groups = []
            size, extra = divmod(len(per_file), max_ablations)
            at = 0
            for n in range(max_ablations):
                take = size + (1 if n < extra else 0)
                groups.append([u for group in per_file[at : at + take] for u in group])
                at += take
        else:
            groups = per_file
            while len(groups) < max_ablations:
                biggest = max(range(len(groups)), key=lambda k: (len(groups[k]), -k))
                group = groups[biggest]
                if len(group) < 2:
                    break
                half = (len(group) + 1) // 2
                groups[biggest : biggest + 1] = [group[:half], group[half:]]
    by_index = {f.index: f for f in files}
    return [
        Ablation(
            index=n,
            removes=tuple(group),
            files=tuple(dict.fromkeys(by_index[f].path for f, _ in group)),
        )
        for n, group in enumerate(groups, 1)
    ]


def _renumbered(hunk: Hunk, shift: int) -> str:
    """The hunk with its new-side start moved by `shift` (hunks before it were left out)."""
    if shift == 0:
        return hunk.text
    first, _, rest = hunk.text.partition("\n")
    match = HUNK_HEADER.match(first)
    assert match is not None
    old = match.group(1) + (f",{match.group(2)}" if match.group(2) is not None else "")
    new = str(hunk.new_start + shift) + (f",{match.group(4)}" if match.group(4) is not None else "")
    return f"@@ -{old} +{new} @@{match.group(5)}\n{rest}"


def _without_hunks(section: FileDiff, drop: set[int]) -> str:
    """A file section without the hunks in `drop` (indices), as a diff git apply accepts."""
    if not drop:
        return section.text
    if len(drop) == len(section.hunks):
        if section.status in ("renamed", "copied") or section.mode_change:
            # Keep the rename or mode change itself: its git header without the content lines.
            keep = [
                line
                for line in split_lines(section.header)
                if not line.startswith(("--- ", "+++ ", "index "))
            ]
            return "".join(keep)
        return ""  # a new, deleted or edited file whose every change is left out: no section
    parts = [section.header]
    shift = 0
    for k, hunk in enumerate(section.hunks):
        if k in drop:
            shift -= hunk.delta
            continue
        parts.append(_renumbered(hunk, shift))
    return "".join(parts)


def ablated_patch(patch: str, ablation: Ablation) -> str:
    """The patch without the hunks `ablation` leaves out. Later hunks of the same file get
    their new-side start moved by what the left-out hunks added, so the diff is exact (git
    apply would also accept the original numbers, as an offset).
    """
    drop: dict[int, set[int]] = {}
    for f, h in ablation.removes:
        drop.setdefault(f, set()).add(h)
    out: list[str] = []
    for section in parse_diff(patch).sections:
        if isinstance(section, Junk):
            out.append(section.text)
        else:
            out.append(_without_hunks(section, drop.get(section.index, set())))
    return "".join(out)
