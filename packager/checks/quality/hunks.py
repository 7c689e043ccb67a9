"""The gold patch cut into file sections and hunks, read with the one host diff parser
(`packager.diffs`): the sections an ablation can leave hunks out of, and why the others have
nothing to leave out (binary sections, pure renames, copies and mode changes).
"""

from __future__ import annotations

from packager.diffs import FileDiff, parse_diff


def split_hunks(patch: str) -> list[FileDiff]:
    """The file sections of a unified diff (git or plain, `--- a/` first lines included) with
    their hunks. New, deleted, renamed and copied files are sections like others; binary
    sections and pure renames or mode changes have no hunks (`skipped` says why).
    """
    return list(parse_diff(patch).files)


def skipped(section: FileDiff) -> str | None:
    """Why a section has nothing to ablate (None when it has hunks)."""
    if section.binary:
        return "binary"
    if not section.hunks:
        renamed = section.status in ("renamed", "copied")
        return "rename or mode change only" if renamed else "no hunks"
    return None
