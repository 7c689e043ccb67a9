"""The audit of a task: its agent image audited (`audit_image`), the verdict written to
`<out>/<dataset>/results/<task>.audit.json`, and a clean verdict kept on this machine under a
key of everything it depends on, so the very same audit is not repeated.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packager.checks.audit.image import audit_image
from packager.checks.audit.index import code_digest
from packager.checks.audit.report import AuditReport
from packager.checks.store import AUDIT, VerdictStore, machine_path, verdict_key
from packager.render.harbor import make_harbor_task

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import TaskSpec
    from packager.storage import OutputPaths


def audit_path(paths: OutputPaths, slug: str) -> Path:
    """`<out>/<dataset>/results/<task>.audit.json`."""
    return paths.audit_file(slug)


def audit_key(spec: TaskSpec, image_id: str) -> str:
    """What a clean audit depends on: the image (by id), the task's secrets and history rule,
    and the audit package's code. The same key means the same verdict.
    """
    g = spec.grading
    return verdict_key(
        AUDIT,
        code_digest(),
        image_id.encode(),
        spec.repo.head.encode(),
        spec.repo.workdir.encode(),
        (g.workflows or "").encode(),
        (g.test_patch or "").encode(),
        (spec.gold_patch or "").encode(),
        *(k.encode() + b"\0" + v for k, v in sorted(g.hidden_files.items())),
        *(k.encode() + b"\0" + v for k, v in sorted(g.grader_files.items())),
    )


def machine_audit_path(key: str) -> Path:
    """Where this machine keeps the clean verdict of the audit with `key` (any output folder)."""
    path = machine_path(AUDIT, key)
    assert path is not None
    return path


def audit_task(
    client: DockerClient, spec: TaskSpec, paths: OutputPaths, tag: str | None = None
) -> AuditReport:
    """Audit the task's agent image (`tag`, else the rendered task's) and write its audit JSON.

    A clean audit of the very same image for the same secrets (`audit_key`) is not repeated:
    its saved verdict is returned (stats `cached` = 1, 0 seconds), from the task's audit JSON
    or, for another output folder, from this machine's cache (`machine_audit_path`), which is
    then copied to the task's audit JSON. Only clean verdicts are kept there: a leak is
    audited again, so its findings are always those of this audit code.
    """
    import docker.errors

    tag = tag or make_harbor_task(spec).agent_image
    store, slug = VerdictStore(paths), spec.provenance.slug
    key = None
    try:
        image_id = str(client.images.get(tag).id)
        key = audit_key(spec, image_id)
    except (docker.errors.ImageNotFound, ValueError, OSError):
        pass  # audit_image says what is missing
    owner = {"task": slug, "instance_id": spec.task_id}
    if key is not None and store.reuse(AUDIT, slug, key, owner) is not None:
        return AuditReport(tag, image_id, True, [], {"seconds": 0.0, "cached": 1})
    report = audit_image(client, tag, spec)
    store.save(AUDIT, slug, {**owner, **report.to_json()}, key)
    return report
