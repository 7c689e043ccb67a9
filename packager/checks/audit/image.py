"""The audit of one agent image, in phases: walk the layers (every file checked against the
secrets), gather the git object stores (the workdir repository defines the base content),
find the objects base_commit does not reach, find the refs of every layer's workdir repository,
then match the candidates against the evidence units and exact copies.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packager.checks.audit.evidence import (
    Secrets,
    Unit,
    informative,
    is_binary,
    make_units,
    norm_lines,
    secrets_of,
    sha256_hex,
)
from packager.checks.audit.git import (
    Store,
    all_objects,
    base_content,
    cat_batch,
    open_store,
    past_tag_values,
    patched_files,
    reachable_from,
    ref_findings,
)
from packager.checks.audit.layers import (
    Candidate,
    Layer,
    Scan,
    clean_name,
    export_layers,
    layer_order,
    visible,
)
from packager.checks.audit.report import AuditError, AuditReport, Finding, FindingKind

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import TaskSpec

CONFIG_LAYER = "<image config>"


@dataclass
class _Walk:
    """What the layer walk and the store gathering leave for the later phases."""

    layers: list[Layer]
    described: dict[str, str]
    """layer key → diff id and build step (`diff_id\\0step`)."""
    stores: list[Store] = field(default_factory=list)
    workdir: Store | None = None
    base_lines: set[bytes] = field(default_factory=set)
    base_digests: set[str] = field(default_factory=set)
    n_objects: int = 0
    stray: int = 0


def _walk_layers(
    image: Any, image_tag: str, spec: TaskSpec, scan: Scan, git_prefix: str, tmp: Path
) -> _Walk:
    """Phase 1: read every layer of the saved image, then its manifest and config."""
    import docker.errors

    try:
        seen, small = export_layers(iter(image.save(named=False)), scan, git_prefix, tmp)
    except (docker.errors.APIError, tarfile.TarError, OSError) as exc:
        raise AuditError(f"{spec.task_id}: cannot export {image_tag}: {exc}") from exc
    manifest = json.loads(small.get("manifest.json", b"[]"))
    config_name = manifest[0].get("Config", "") if manifest else ""
    config_bytes = small.get(clean_name(config_name), b"{}")
    layers, described = layer_order(manifest, json.loads(config_bytes), seen)
    scan.check(config_bytes, CONFIG_LAYER, "/" + clean_name(config_name))
    return _Walk(layers, described)


def _gather_stores(
    walk: _Walk, tmp: Path, spec: TaskSpec, secrets: Secrets, git_prefix: str
) -> list[Finding]:
    """Phase 2: open every object store found (the workdir repository's first), take the base
    tree's content from it, and add the patched files to the exact secrets.
    """
    base = spec.repo.head
    workdir_git = spec.repo.workdir.rstrip("/") + "/.git"
    walk.stores = [open_store(p) for p in sorted(tmp.iterdir()) if (p / "where").exists()]
    workdir_objects = f"/{git_prefix}objects"
    walk.stores.sort(key=lambda s: s.where != workdir_objects)
    first = walk.stores[0] if walk.stores else None
    walk.workdir = first if first is not None and first.where == workdir_objects else None
    findings: list[Finding] = []
    if walk.workdir is None:
        detail = "no git objects at the workdir repository"
        findings.append(Finding("repo", "", workdir_git, None, detail))
    elif reachable_from(walk.workdir, base) is None:
        detail = "base_commit is not in the workdir repository"
        findings.append(Finding("repo", "", workdir_git, base, detail))
    else:
        walk.base_lines, walk.base_digests = base_content(walk.workdir, base)
        patches: tuple[tuple[FindingKind, str | None], ...] = (
            ("test_patch", spec.grading.test_patch),
            ("gold_patch", spec.gold_patch),
        )
        for patch_kind, text in patches:
            for fpath, data in sorted(patched_files(walk.workdir, base, text).items()):
                label = f"{patch_kind.replace('_', ' ')}: {fpath} after the patch"
                secrets.exact.setdefault(sha256_hex(data), (patch_kind, label, data))
    for data in (spec.repo.files or {}).values():
        walk.base_digests.add(sha256_hex(data))
        if not is_binary(data):
            walk.base_lines |= norm_lines(data)
    return findings


def _object_findings(walk: _Walk, base: str, scan: Scan) -> tuple[list[Finding], set[str]]:
    """Phase 3: in every store, the commits and tag objects base_commit does not reach, and
    the blobs it does not reach checked like files. Returns the findings and the past tags.
    """
    findings: list[Finding] = []
    past_tags: set[str] = set()
    for store in walk.stores:
        objects = all_objects(store)
        walk.n_objects += len(objects)
        reachable = reachable_from(store, base) or set()
        if store is walk.workdir:
            past_tags = past_tag_values(store, base, reachable)
        loose_blobs: list[str] = []
        for oid, kind in sorted(objects.items()):
            if oid in reachable:
                continue
            layer_key = store.origin.get(oid, "")
            if kind == "commit":
                detail = "commit that is not base_commit or an ancestor"
                findings.append(Finding("commit", layer_key, store.where, oid, detail))
            elif kind == "tag" and not (store is walk.workdir and oid in past_tags):
                findings.append(Finding("tag", layer_key, store.where, oid, "annotated tag object"))
            elif kind == "blob":
                loose_blobs.append(oid)
            elif kind != "tag":
                walk.stray += 1
        for oid, _, data in cat_batch(store.git_dir, loose_blobs):
            scan.check(data, store.origin.get(oid, ""), store.where, oid)
    return findings, past_tags


def _content_findings(
    walk: _Walk, scan: Scan, secrets: Secrets, units: list[Unit]
) -> list[Finding]:
    """Phase 5: every candidate holding a whole evidence unit, and every exact copy of an
    informative secret, once per kind; noting when a later layer deletes the file.
    """
    exact = {
        d: v
        for d, v in secrets.exact.items()
        if informative(v[2], walk.base_lines, walk.base_digests)
    }
    index = {layer.key: n for n, layer in enumerate(walk.layers)}
    found = {(c.layer, c.path, c.object_id): c for c in scan.candidates}
    for digest in exact:
        for layer_key, fpath, obj_id in scan.digests.get(digest, []):
            empty = Candidate(layer_key, fpath, obj_id, digest, frozenset())
            found.setdefault((layer_key, fpath, obj_id), empty)
    findings: list[Finding] = []
    for cand in found.values():
        hits: list[tuple[FindingKind, str]] = []
        if cand.digest in exact:
            kind, label, _ = exact[cand.digest]
            hits.append((kind, f"exact copy of {label}"))
        for unit in units:
            if unit.lines <= cand.hits:
                hits.append((unit.kind, f"holds every distinctive line of {unit.label}"))
        done: set[FindingKind] = set()
        for kind, detail in hits:
            if kind in done:
                continue
            done.add(kind)
            if cand.object_id is None and cand.layer in index:
                if not visible(walk.layers, index[cand.layer], cand.path):
                    detail += "; deleted by a later layer (still in the image)"
            findings.append(Finding(kind, cand.layer, cand.path, cand.object_id, detail))
    return findings


def _named(findings: list[Finding], described: dict[str, str]) -> list[Finding]:
    """The findings with their layer's diff id and its build step, sorted."""
    named: list[Finding] = []
    for f in findings:
        diff_id, _, step = described.get(f.layer, f"{f.layer}\0").partition("\0")
        detail = f"{f.detail} [{step}]" if step else f.detail
        named.append(Finding(f.kind, diff_id, f.path, f.object_id, detail))
    named.sort(key=lambda f: (f.kind, f.layer, f.path, f.object_id or ""))
    return named


def audit_image(client: DockerClient, image_tag: str, spec: TaskSpec) -> AuditReport:
    """Audit every layer and every git object of `image_tag` for `spec`'s secrets and history."""
    import docker.errors

    started = time.monotonic()
    try:
        image = client.images.get(image_tag)
    except docker.errors.ImageNotFound as exc:
        raise AuditError(f"{spec.task_id}: image {image_tag} not found; build it first") from exc
    # The snapshot's HEAD: base_commit, or with `--history base-only` the one commit holding its
    # tree (then no other commit is allowed at all).
    base = spec.repo.head
    workdir_git = spec.repo.workdir.rstrip("/") + "/.git"
    git_prefix = workdir_git.strip("/") + "/"
    secrets = secrets_of(spec)
    scan = Scan(secrets, secrets.anchors)
    with tempfile.TemporaryDirectory(prefix="packager-audit-") as tmp:
        walk = _walk_layers(image, image_tag, spec, scan, git_prefix, Path(tmp))
        findings = _gather_stores(walk, Path(tmp), spec, secrets, git_prefix)
        object_findings, past_tags = _object_findings(walk, base, scan)
        findings += object_findings
        for layer in walk.layers:
            findings += ref_findings(layer, workdir_git, base, past_tags)
    units, dropped = make_units(secrets.sources, walk.base_lines)
    named = _named(findings + _content_findings(walk, scan, secrets, units), walk.described)
    stats: dict[str, float | int] = {
        "seconds": round(time.monotonic() - started, 3),
        "layers": len(walk.layers),
        "files_scanned": scan.files,
        "bytes_scanned": scan.n_bytes,
        "files_not_line_scanned": scan.not_line_scanned,
        "git_objects": walk.n_objects,
        "stray_trees": walk.stray,
        "evidence_units": len(units),
        "weak_sources_dropped": dropped,
    }
    return AuditReport(image_tag, str(image.id), not named, named, stats)
