"""What an audit finds: the kinds of evidence, one `Finding`, and the `AuditReport` of an image
(its summary line and its JSON form).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from packager.errors import PackagerError

FindingKind = Literal[
    "hidden_test",
    "grader_file",
    "test_patch",
    "gold_patch",
    "commit",
    "tag",
    "ref",
    "reflog",
    "remote",
    "alternates",
    "repo",
]


class AuditError(PackagerError):
    """The image cannot be read (missing, or the engine failed while exporting it)."""


@dataclass(frozen=True)
class Finding:
    """One piece of evidence that the agent image holds something it must not."""

    kind: FindingKind
    layer: str
    """The layer's diff id (`sha256:…`, as `docker image inspect` lists them), or
    `<image config>`."""
    path: str
    """Absolute path of the file in that layer (for git objects: the object store)."""
    object_id: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain data for the JSON report."""
        return {
            "kind": self.kind,
            "layer": self.layer,
            "path": self.path,
            "object_id": self.object_id,
            "detail": self.detail,
        }


VENDOR_FOLDERS = ("/_vendor/", "/python-wheels/", "/ensurepip/_bundled/")
"""Where an installer keeps copies of other packages (pip/_vendor, setuptools/_vendor, the
wheels ensurepip installs from)."""


def vendored_copy(path: str) -> bool:
    """Whether a finding's path is inside an installer's copy of another package."""
    return any(folder in path for folder in VENDOR_FOLDERS)


@dataclass(frozen=True)
class AuditReport:
    """The audit of one image: `clean` when there are no findings."""

    image: str
    image_id: str
    clean: bool
    findings: list[Finding] = field(default_factory=list)
    stats: dict[str, float | int] = field(default_factory=dict)

    @property
    def status(self) -> Literal["clean", "leak"]:
        """`clean` or `leak`."""
        return "clean" if self.clean else "leak"

    @property
    def kinds(self) -> set[str]:
        """The finding kinds present."""
        return {f.kind for f in self.findings}

    def summary(self, limit: int = 3) -> str:
        """One line for a result's `reason`."""
        if self.clean:
            return "audit clean"
        parts = [
            f"{f.kind} at {f.path}" + (f" ({f.object_id[:12]})" if f.object_id else "")
            for f in self.findings[:limit]
        ]
        more = len(self.findings) - limit
        line = f"leak: {'; '.join(parts)}" + (f"; and {more} more" if more > 0 else "")
        if any(vendored_copy(f.path) for f in self.findings):
            line += (
                "; a later copy of the package under test kept by an installer (its _vendor "
                "folder, or the wheels ensurepip installs from): a package named in "
                "packager/datasets/vendored.yaml gets an agent image without those installers"
            )
        return line

    def to_json(self) -> dict[str, Any]:
        """Plain data for `<task>.audit.json`."""
        return {
            "image": self.image,
            "image_id": self.image_id,
            "status": self.status,
            "clean": self.clean,
            "findings": [f.to_json() for f in self.findings],
            "stats": dict(sorted(self.stats.items())),
        }
