"""The only place task slugs, folder names and image tags are minted."""

from __future__ import annotations

import hashlib
import re

_SLUG_BAD = re.compile(r"[^a-z0-9._-]+")


def make_slug(instance_id: str) -> str:
    """A folder- and tag-safe name for an instance id (lowercase, stable, readable)."""
    slug = _SLUG_BAD.sub("-", instance_id.lower()).strip("-.")
    if slug != instance_id:
        # Two ids that differ only in case or punctuation must not share a folder.
        slug = f"{slug}-{hashlib.sha256(instance_id.encode()).hexdigest()[:6]}"
    return slug[:120]


def make_dataset_name(source: str) -> str:
    """The output folder name for a dataset source (hub id, file path or `samples`)."""
    base = source.rstrip("/").split("/")[-1]
    base = re.sub(r"\.(jsonl|json|parquet)$", "", base)
    return _SLUG_BAD.sub("-", base.lower()).strip("-.") or "dataset"


def make_image_repo(dataset: str, slug: str) -> str:
    """Docker repository name shared by a task's agent and grader images."""
    return f"packager/{dataset}.{slug}"


def make_image_tag(dataset: str, slug: str, role: str, digest: str) -> str:
    """`packager/<dataset>.<slug>:<role>-<digest12>`; the digest is of the build context."""
    return f"{make_image_repo(dataset, slug)}:{role}-{digest[:12]}"


def make_hud_env_name(dataset: str, slug: str) -> str:
    """HUD environment names are normalised to [a-z0-9-]."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{dataset}-{slug}".lower()).strip("-")[:63]


LABEL_TOOL = "packager.tool"
LABEL_TASK = "packager.task"
LABEL_ROLE = "packager.role"
LABEL_RUN = "packager.run"
