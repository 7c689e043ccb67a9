"""Leak audit of an agent image: nothing from grading and no later history, in any layer.

Every layer tar is read member by member (never extracted as a whole) into a layer index
(`index`): file digests, evidence-line hashes, whiteouts, git metadata and objects, kept on this
machine under the layer's diff id and the audit's code, so a layer shared by many images is read
once. A layer is read from the engine's overlay2 store when this host can read it (`local`:
checked against its diff id), else from `docker save` streamed through the Docker SDK. A task's
secrets are then matched against the indexes of its image's layers. Three things are looked for.

1. **Grading content in any file of any layer**, including files a later layer deletes (a
   whiteout hides a file from the container, not from anyone holding the image): a hidden test,
   a grader file, the test patch or the gold patch. Exact copies are found by sha256; pieces are
   found by lines (see `make_units`): a file leaks a hunk when it holds every *distinctive* added
   line of it, i.e. every stripped line of 8+ characters that is not already a line of the base
   tree. Lines present at base are no evidence, which keeps the legitimate repository, the
   system's libraries and look-alike code from being flagged.
2. **Git objects**: every object store in the image (the workdir repository and any other
   `objects/` folder, loose objects and packs, from every layer) is gathered into a scratch bare
   repository and read with host `git`. Any commit that is not `base_commit` or one of its
   ancestors is a leak (a future commit, reachable or dangling), an annotated tag object is a
   leak unless it is a *past tag* (it names `base_commit` or an ancestor and was made no later
   than `base_commit`: history, which the snapshot keeps for `git describe`), and every blob
   not reachable from `base_commit` is checked like a file (a dangling `git hash-object -w`
   of the fixed file is a leak).
3. **Repository metadata of the workdir repository, in every layer**: any ref other than a
   branch at `base_commit` or a past tag (other tags, other branches, remote-tracking refs,
   stash, ORIG_HEAD, FETCH_HEAD), any non-empty reflog, any configured remote, any alternates
   file.

`audit_image` returns an `AuditReport`; `audit_task` also writes
`<out>/<dataset>/results/<task>.audit.json`. The package: `report` (findings and the report),
`evidence` (secrets, evidence lines and units: pure), `index` (layer indexes and their cache),
`local` (layers from the engine's store), `layers` (the layer walk), `git` (object stores and
refs), `image` (the audit of an image, in phases), `task` (a task's audit and its cache).
"""

from packager.checks.audit.evidence import (
    MAX_UNIT_LINES,
    MIN_LINE,
    PatchFile,
    Secrets,
    Source,
    Unit,
    candidate_lines,
    informative,
    is_binary,
    is_strong,
    make_units,
    norm_lines,
    parse_patch,
    secrets_of,
)
from packager.checks.audit.git import ref_findings
from packager.checks.audit.image import CONFIG_LAYER, audit_image
from packager.checks.audit.index import MAX_LINE_SCAN
from packager.checks.audit.layers import Layer, visible
from packager.checks.audit.report import AuditError, AuditReport, Finding, FindingKind
from packager.checks.audit.task import audit_key, audit_path, audit_task, machine_audit_path

__all__ = [
    "CONFIG_LAYER",
    "MAX_LINE_SCAN",
    "MAX_UNIT_LINES",
    "MIN_LINE",
    "AuditError",
    "AuditReport",
    "Finding",
    "FindingKind",
    "Layer",
    "PatchFile",
    "Secrets",
    "Source",
    "Unit",
    "audit_image",
    "audit_key",
    "audit_path",
    "audit_task",
    "candidate_lines",
    "informative",
    "is_binary",
    "is_strong",
    "machine_audit_path",
    "make_units",
    "norm_lines",
    "parse_patch",
    "ref_findings",
    "secrets_of",
    "visible",
]
