"""The audit of one agent image, in phases: walk the layers (every file checked against the
secrets), gather the git object stores (the workdir repository defines the base content),
find the objects base_commit does not reach, find the refs of every layer's workdir repository,
then match the candidates against the evidence units and exact copies.
"""

from __future__ import annotations

import json
import os
import shutil
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
    gitlinks,
    has_commit,
    open_store,
    past_tag_values,
    patched_files,
    reachable_from,
    ref_findings,
)
from packager.checks.audit.index import (
    IndexBuilder,
    LayerIndex,
    clean_name,
    index_dir,
    index_root,
    line_hash,
    load_index,
    publish,
    scratch_dir,
    sweep_scratch,
)
from packager.checks.audit.layers import (
    Candidate,
    Layer,
    Scan,
    describe,
    export_layers,
    index_chunks,
    layer_order,
    make_layer,
    visible,
)
from packager.checks.audit.local import chain_ids, layer_chunks, open_local_store, read_config
from packager.checks.audit.packs import store_view
from packager.checks.audit.report import AuditError, AuditReport, Finding, FindingKind

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import TaskSpec

CONFIG_LAYER = "<image config>"


@dataclass
class _Walk:
    """What the layer walk and the store gathering leave for the later phases."""

    config: bytes
    config_name: str
    layers: list[Layer] = field(default_factory=list)
    indexes: dict[str, LayerIndex] = field(default_factory=dict)
    """layer key → its index."""
    described: dict[str, str] = field(default_factory=dict)
    """layer key → diff id and build step (`diff_id\\0step`)."""
    scratch: list[Path] = field(default_factory=list)
    read: int = 0
    """Layers read (and indexed) by this audit."""
    reused: int = 0
    """Layers whose index this machine already had."""
    stores: list[Store] = field(default_factory=list)
    workdir: Store | None = None
    base_lines: set[bytes] = field(default_factory=set)
    base_digests: set[str] = field(default_factory=set)
    n_objects: int = 0
    stray: int = 0
    submodule_stores: dict[str, str] = field(default_factory=dict)
    """Objects folder of a submodule checked out in the work tree -> the commit the base
    tree's gitlink records for it (what that store may hold: the commit and its history)."""

    def add(self, key: str, index: LayerIndex, described: str, git_prefix: str) -> None:
        """Append the layer `key` (next one up) with its index."""
        self.layers.append(make_layer(key, index, git_prefix))
        self.indexes[key] = index
        self.described[key] = described

    def builder(self, root: Path) -> IndexBuilder:
        """A builder in a fresh scratch folder under `root` (removed after the audit)."""
        self.scratch.append(scratch_dir(root))
        return IndexBuilder(self.scratch[-1])


def _index_root(tmp: Path) -> Path:
    """The machine's layer indexes, or a folder of this audit's own when those are not writable."""
    root = index_root()
    try:
        (root / ".scratch").mkdir(parents=True, exist_ok=True)
        if os.access(root / ".scratch", os.W_OK):
            sweep_scratch(root)
            return root
    except OSError:
        pass
    return tmp / "layer-indexes"


def _keep(index: LayerIndex, root: Path, git_prefix: str) -> LayerIndex:
    """Publish a new index to `root`, unless the layer holds the workdir repository's objects:
    that is a task's own snapshot, which no other image shares.
    """
    own = "/" + git_prefix + "objects"
    if any((p / "where").read_text() == own for p in index.object_stores()):
        return index
    return publish(index, root)


def _walk_local(client: Any, image: Any, root: Path, git_prefix: str) -> _Walk | None:
    """Phase 1 from the engine's store on this host (`local`): each layer's index from this
    machine's cache, else its tar rebuilt from the store, checked against its diff id and
    indexed. None when the store cannot give the config or a layer (then `docker save`).
    """
    store = open_local_store(client)
    config_bytes = read_config(store, str(image.id)) if store is not None else None
    if store is None or config_bytes is None:
        return None
    config = json.loads(config_bytes)
    diff_ids = [str(d) for d in config.get("rootfs", {}).get("diff_ids", [])]
    steps = describe(config, len(diff_ids))
    walk = _Walk(config_bytes, str(image.id).removeprefix("sha256:") + ".json")
    for n, (diff_id, chain) in enumerate(zip(diff_ids, chain_ids(diff_ids), strict=True)):
        index = load_index(index_dir(root, diff_id))
        if index is not None and index.diff_id == diff_id:
            walk.reused += 1
        else:
            try:
                index = index_chunks(layer_chunks(store, chain), walk.builder(root))
            except (OSError, ValueError, EOFError, tarfile.TarError):
                index = None
            if index is None or index.diff_id != diff_id:
                _drop(walk.scratch)
                return None
            index = _keep(index, root, git_prefix)
            walk.read += 1
        walk.add(f"{n + 1}:{diff_id}", index, f"{diff_id}\0{steps[n]}", git_prefix)
    return walk


def _walk_saved(image: Any, image_tag: str, spec: TaskSpec, root: Path, git_prefix: str) -> _Walk:
    """Phase 1 from `docker save`: every layer of the saved image read and indexed, then its
    manifest and config.
    """
    import docker.errors

    walk = _Walk(b"{}", "")
    try:
        seen, small = export_layers(iter(image.save(named=False)), lambda: walk.builder(root))
    except (docker.errors.APIError, tarfile.TarError, OSError) as exc:
        _drop(walk.scratch)
        raise AuditError(f"{spec.task_id}: cannot export {image_tag}: {exc}") from exc
    manifest = json.loads(small.get("manifest.json", b"[]"))
    walk.config_name = clean_name(manifest[0].get("Config", "") if manifest else "")
    walk.config = small.get(walk.config_name, b"{}")
    for key, described in layer_order(manifest, json.loads(walk.config), seen):
        walk.add(key, _keep(seen[key], root, git_prefix), described, git_prefix)
        walk.read += 1
    return walk


def _drop(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _link_objects(walk: _Walk, tmp: Path) -> None:
    """Gather every layer's git objects into one scratch store per objects folder, bottom-up,
    the first copy of a path winning; each object remembers its layer.
    """
    for key, index in walk.indexes.items():
        for src in index.object_stores():
            dst = tmp / src.name
            (dst / "origin").mkdir(parents=True, exist_ok=True)
            (dst / "where").write_text((src / "where").read_text())
            for folder, _, names in os.walk(src / "objects"):
                for name in names:
                    rel = (Path(folder) / name).relative_to(src / "objects").as_posix()
                    target = dst / "objects" / rel
                    if target.exists():
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(Path(folder) / name, target)
                    except OSError:
                        shutil.copyfile(Path(folder) / name, target)
                    (dst / "origin" / rel.replace("/", "_")).write_text(key)


def _gather_stores(
    walk: _Walk, tmp: Path, spec: TaskSpec, secrets: Secrets, git_prefix: str, root: Path
) -> list[Finding]:
    """Phase 2: open every object store found (the workdir repository's first), take the base
    tree's content from it, and add the patched files to the exact secrets.
    """
    base = spec.repo.head
    workdir_git = spec.repo.workdir.rstrip("/") + "/.git"
    _link_objects(walk, tmp / "stores")
    found = sorted((tmp / "stores").iterdir()) if (tmp / "stores").is_dir() else []
    workdir_objects = f"/{git_prefix}objects"
    walk.stores = [
        open_store(p, root, base) if (p / "where").read_text() == workdir_objects else open_store(p)
        for p in found
        if (p / "where").exists()
    ]
    walk.stores.sort(key=lambda s: s.where != workdir_objects)
    first = walk.stores[0] if walk.stores else None
    walk.workdir = first if first is not None and first.where == workdir_objects else None
    findings: list[Finding] = []
    if walk.workdir is None:
        detail = "no git objects at the workdir repository"
        findings.append(Finding("repo", "", workdir_git, None, detail))
    elif not has_commit(walk.workdir, base):
        detail = "base_commit is not in the workdir repository"
        findings.append(Finding("repo", "", workdir_git, base, detail))
    else:
        walk.base_lines, walk.base_digests = base_content(walk.workdir, base)
        top = spec.repo.workdir.rstrip("/")
        walk.submodule_stores = {
            f"{top}/{path}/.git/objects": commit
            for path, commit in gitlinks(walk.workdir, base).items()
        }
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
    A store with a closed history pack (`packs`) is read through it; any other in full.
    """
    findings: list[Finding] = []
    past_tags: set[str] = set()
    for store in walk.stores:
        view = None
        if store is walk.workdir:
            view = store_view(store.git_dir, base, store.closed, store.origin)
        if view is not None:
            objects, reachable = view.objects, view.reachable
        else:
            objects = all_objects(store)
            start = walk.submodule_stores.get(store.where, base)
            reachable = reachable_from(store, start) or set()
        walk.n_objects += len(objects)
        if store is walk.workdir:
            times = view.ancestor_times if view is not None else None
            past_tags = past_tag_values(store, base, reachable, objects, times)
        loose_blobs: list[str] = []
        for oid in sorted(set(objects).difference(reachable)):
            kind = objects[oid]
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


def _index_candidates(walk: _Walk, scan: Scan) -> list[Candidate]:
    """Phase 4: the files of every layer index that hold some anchor lines."""
    anchors = [(line_hash(line), line) for line in sorted(scan.anchors)]
    out: list[Candidate] = []
    for key, layer_index in walk.indexes.items():
        for fid, lines in sorted(layer_index.hits(anchors).items()):
            fpath, digest, _ = layer_index.files[fid]
            out.append(Candidate(key, fpath, None, digest, frozenset(lines)))
    return out


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
    found.update({(c.layer, c.path, c.object_id): c for c in _index_candidates(walk, scan)})
    for digest in exact:
        for layer_key, fpath, obj_id in scan.digests.get(digest, []):
            empty = Candidate(layer_key, fpath, obj_id, digest, frozenset())
            found.setdefault((layer_key, fpath, obj_id), empty)
        for key, layer_index in walk.indexes.items():
            for fid in layer_index.with_digest(digest):
                fpath = layer_index.files[fid][0]
                empty = Candidate(key, fpath, None, digest, frozenset())
                found.setdefault((key, fpath, None), empty)
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


def _stats(walk: _Walk, scan: Scan) -> dict[str, float | int]:
    """What the audit read: layers, files (in the layers' indexes and outside), objects."""
    indexes = list(walk.indexes.values())
    return {
        "layers": len(walk.layers),
        "layers_read": walk.read,
        "layers_indexed_before": walk.reused,
        "files_scanned": scan.files + sum(i.n_scanned for i in indexes),
        "bytes_scanned": scan.n_bytes + sum(i.n_bytes for i in indexes),
        "files_not_line_scanned": scan.not_line_scanned + sum(i.not_line_scanned for i in indexes),
        "git_objects": walk.n_objects,
        "stray_trees": walk.stray,
    }


def audit_image(client: DockerClient, image_tag: str, spec: TaskSpec) -> AuditReport:
    """Audit every layer and every git object of `image_tag` for `spec`'s secrets and history.

    Layers are matched through their indexes (`index`): this machine's when it has the layer's,
    else made now, from the engine's store when this host can read it (`local`), else from
    `docker save`. Git objects, refs and reachability are read from this image's layers every
    time; only the reading of each layer's files is shared between audits.
    """
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
        root = _index_root(Path(tmp))
        walk = _walk_local(client, image, root, git_prefix)
        walk = walk or _walk_saved(image, image_tag, spec, root, git_prefix)
        try:
            scan.check(walk.config, CONFIG_LAYER, "/" + walk.config_name)
            findings = _gather_stores(walk, Path(tmp), spec, secrets, git_prefix, root)
            object_findings, past_tags = _object_findings(walk, base, scan)
            findings += object_findings
            for layer in walk.layers:
                findings += ref_findings(layer, workdir_git, base, past_tags)
            units, dropped = make_units(secrets.sources, walk.base_lines)
            findings += _content_findings(walk, scan, secrets, units)
        finally:
            _drop(walk.scratch)
    named = _named(findings, walk.described)
    stats: dict[str, float | int] = {
        "seconds": round(time.monotonic() - started, 3),
        **_stats(walk, scan),
        "evidence_units": len(units),
        "weak_sources_dropped": dropped,
    }
    return AuditReport(image_tag, str(image.id), not named, named, stats)
