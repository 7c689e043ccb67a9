"""Repo sources from the command line (`--repo-source`) and the source each repository uses:
a location given for it, a folder of mirrors holding it, else its URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packager.errors import RepoSourceError
from packager.repos.mirrors import find_mirror, scan_mirror_dir
from packager.repos.names import canonical_repo_name, is_url


@dataclass(frozen=True)
class RepoSources:
    """Repo sources from the command line: per-repository locations and folders of mirrors.

    `explicit` maps canonical `owner/name` to a location; `mirror_dirs` are searched in order
    after it.
    """

    explicit: dict[str, str] = field(default_factory=dict)
    mirror_dirs: tuple[str, ...] = ()

    def location_for(self, name: str) -> str | None:
        """The location for `name` (`owner/name` or a URL), or None (use the default URL)."""
        try:
            canon = canonical_repo_name(name)
        except ValueError:
            return None
        if canon in self.explicit:
            return self.explicit[canon]
        wanted = canon.casefold()
        for key, location in self.explicit.items():
            try:
                if canonical_repo_name(key).casefold() == wanted:
                    return location
            except ValueError:
                continue
        for folder in self.mirror_dirs:
            hit = find_mirror(Path(folder), canon)
            if hit is not None:
                return str(hit)
        return None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.location_for(name) is not None

    def with_defaults(self, defaults: Mapping[str, str]) -> RepoSources:
        """These sources, falling back to `defaults` (e.g. a dataset's own bundles)."""
        merged: dict[str, str] = {}
        for key, location in defaults.items():
            try:
                merged[canonical_repo_name(key)] = location
            except ValueError:
                merged[key] = location
        merged.update(self.explicit)
        return RepoSources(merged, self.mirror_dirs)

    def expanded(self) -> dict[str, str]:
        """One mapping: every repository of every mirror folder, overridden by `explicit`."""
        mapping: dict[str, str] = {}
        for folder in reversed(self.mirror_dirs):  # earlier folders win
            mapping.update(scan_mirror_dir(Path(folder)))
        mapping.update(self.explicit)
        return mapping


def parse_repo_sources(values: Iterable[str]) -> RepoSources:
    """`--repo-source` values → `RepoSources`.

    `OWNER/NAME=LOCATION` or `URL=LOCATION` names one repository's source (keys are
    normalised by `canonical_repo_name`; a later value wins); a value without `=` is a folder
    of mirrors (layouts in `find_mirror`).
    """
    explicit: dict[str, str] = {}
    folders: list[str] = []
    for value in values:
        key, sep, location = value.partition("=")
        if not sep:
            if not value.strip() or not Path(value).is_dir():
                raise RepoSourceError(
                    "<cli>",
                    "--repo-source",
                    f"{value!r} is neither OWNER/NAME=LOCATION nor an existing folder of mirrors",
                )
            folders.append(value)
            continue
        try:
            name = canonical_repo_name(key)
        except ValueError as exc:
            if Path(value).is_dir():  # a folder whose path holds '='
                folders.append(value)
                continue
            raise RepoSourceError(
                "<cli>", "--repo-source", f"expected OWNER/NAME=LOCATION or URL=LOCATION: {exc}"
            ) from None
        if not location:
            raise RepoSourceError(
                "<cli>", "--repo-source", f"expected OWNER/NAME=LOCATION, got {value!r}"
            )
        explicit[name] = location
    return RepoSources(explicit, tuple(folders))


def parse_repo_source_options(values: list[str]) -> dict[str, str]:
    """`--repo-source` values → one mapping (`parse_repo_sources(values).expanded()`).

    Kept for callers typed `dict[str, str]`: folders of mirrors are scanned at once.
    """
    return parse_repo_sources(values).expanded()


@dataclass(frozen=True)
class RepoSource:
    """Where one repository's objects come from."""

    name: str
    location: str

    @property
    def is_url(self) -> bool:
        return "://" in self.location or self.location.startswith("git@")


def source_for(
    name: str, overrides: Mapping[str, str] | RepoSources, mirror_dirs: Sequence[str] = ()
) -> RepoSource:
    """The source for `name` (`owner/name` or a URL): an override, a mirror, else its URL.

    `overrides` keys may be `owner/name` or URLs; `mirror_dirs` are searched after the
    overrides (and after `overrides.mirror_dirs` when it is a `RepoSources`). The returned
    source's name is canonical `owner/name`; without an override the location is the URL
    itself when `name` is one, else `https://github.com/<owner>/<name>.git`.
    """
    try:
        canon = canonical_repo_name(name)
    except ValueError as exc:
        raise RepoSourceError(name, "repo", str(exc)) from None
    if isinstance(overrides, RepoSources):
        sources = overrides
    else:
        sources = RepoSources(dict(overrides))
    if mirror_dirs:
        sources = RepoSources(sources.explicit, sources.mirror_dirs + tuple(mirror_dirs))
    location = sources.location_for(canon)
    if location is None:
        location = name.strip() if is_url(name) else f"https://github.com/{canon}.git"
    return RepoSource(canon, location)
