"""Repo sources and snapshots: where a repository comes from, and the cut copy that goes into
the agent image.

A repo source is a bare repo, a working copy, a git bundle or a URL (default
`https://github.com/<owner>/<name>.git`). Sources are given per repository
(`OWNER/NAME=LOCATION`, the key may also be the repository's URL) or as folders of mirrors
(see `find_mirror`). Bundles and URLs are cloned once into a bare mirror cache shared by every
task of that repository. Nothing here ever runs inside `docker build`.

A snapshot is a fresh repository cut at `base_commit`: one branch, no tags, no remotes, no
reflog, no stray objects, so `git log --all` inside the agent image cannot show the fix. With
history `full` it holds the history up to `base_commit`; with `base-only` one commit whose tree
is `base_commit`'s tree. Every git failure becomes a `RepoSourceError` carrying git's own words,
and missing objects are named with their paths.

Modules: `git` (the host git environment and runner), `names`, `mirrors`, `sources` (where a
repository comes from), `fetch` (its local git directory), `missing` (what a source lacks),
`snapshot`, `stored` (snapshot tars kept in the machine cache, once per repository state),
`read` (files at a commit, without a checkout) and `objects` (ids computed without git).
"""

from packager.repos.fetch import default_cache_dir, git_dir_for, has_commit, read_diff
from packager.repos.mirrors import find_mirror, scan_mirror_dir
from packager.repos.names import canonical_repo_name
from packager.repos.snapshot import (
    HISTORY_MODES,
    SNAPSHOT_MTIME,
    History,
    past_tags,
    write_snapshot_repo,
    write_snapshot_tar,
)
from packager.repos.sources import (
    RepoSource,
    RepoSources,
    parse_repo_source_options,
    parse_repo_sources,
    source_for,
)

__all__ = [
    "HISTORY_MODES",
    "SNAPSHOT_MTIME",
    "History",
    "RepoSource",
    "RepoSources",
    "canonical_repo_name",
    "default_cache_dir",
    "find_mirror",
    "git_dir_for",
    "has_commit",
    "parse_repo_source_options",
    "parse_repo_sources",
    "past_tags",
    "read_diff",
    "scan_mirror_dir",
    "source_for",
    "write_snapshot_repo",
    "write_snapshot_tar",
]
