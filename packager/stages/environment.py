"""Environment images: the agent Dockerfile's steps before the repository snapshot, built on
their own once per machine under a lock on their key (`ensure_environment`), so tasks sharing an
environment build it once and their agent builds take those layers from the engine's cache.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from packager.context import RunContext
from packager.errors import BuildError
from packager.images import build, wheelhouse
from packager.images.failures import requirements_step
from packager.images.locks import machine_lock
from packager.images.tar import make_tar
from packager.images.wheelhouse import DROPPED
from packager.render.write import write_json
from packager.storage import ENVIRONMENTS, LOCKS

if TYPE_CHECKING:
    from packager.images import build as build_module
    from packager.images.build import DockerClient


ENVIRONMENT_REPOSITORY = "packager/environment"
"""Tags of environment images: an agent Dockerfile's steps before the snapshot, built alone
once per machine (`ensure_environment`); the agent builds then take those layers from cache."""


def _names(snapshot_files: str | tuple[str, ...]) -> tuple[str, ...]:
    return (snapshot_files,) if isinstance(snapshot_files, str) else snapshot_files


def _environment_dockerfile(dockerfile: str, snapshot_files: str | tuple[str, ...]) -> str | None:
    """The Dockerfile's instructions before the one that adds the snapshot, without comments
    (a task's own header comment would make every environment differ; the engine's build
    cache ignores comments too) but with parser directives (None: no snapshot line).
    """
    head: list[str] = []
    preamble = True
    for line in dockerfile.splitlines():
        comment = line.lstrip().startswith("#")
        if comment and preamble and re.match(r"#\s*(syntax|escape|check)\s*=", line.lstrip()):
            head.append(line)
            continue
        preamble = False
        if comment or not line.strip():
            continue
        if any(name in line for name in _names(snapshot_files)):
            return "\n".join(head) + "\n"
        head.append(line)
    return None


def _environment_files(
    context: Path, snapshot_files: str | tuple[str, ...], head: str
) -> dict[str, bytes]:
    """The context's files the environment steps (`head`) copy: those their COPY and ADD
    lines name (a folder: the files under it), or every file but the snapshot when one names
    a pattern or the whole context. The Harbor compose file names the task: were it part of
    the key, every row would have an environment image of its own (the harness recipes copy
    a `requirements/` folder), built again and never shared by the rows of a repository.
    """
    import shlex

    everything = {
        p.relative_to(context).as_posix(): p
        for p in sorted(context.rglob("*"))
        if p.is_file()
        and p.relative_to(context).as_posix() not in (*_names(snapshot_files), "Dockerfile")
    }
    named: set[str] = set()
    for line in head.splitlines():
        words = line.split(None, 1)
        if len(words) < 2 or words[0].upper() not in ("COPY", "ADD"):
            continue
        try:
            args = [a for a in shlex.split(words[1]) if not a.startswith("--")]
        except ValueError:
            args = ["*"]
        for source in args[:-1]:
            source = posixpath.normpath(source.strip("/")) if source.strip("/") else "."
            under = [rel for rel in everything if rel.startswith(f"{source}/")]
            if (
                any(c in source for c in "*?[")
                or source == "."
                or not (source in everything or under)
            ):
                named = set(everything)  # a pattern, the whole context, a missing path: all
                break
            named.update([source, *under] if source in everything else under)
    return {rel: path.read_bytes() for rel, path in everything.items() if rel in named}


def environment_key(
    dockerfile: str, files: Mapping[str, bytes], buildargs: Mapping[str, str], bases: str
) -> str:
    """What environment layers are made of: the steps before the snapshot, the context files
    they may copy, the build arguments and the base images' ids.
    """
    import hashlib

    digest = hashlib.sha256(dockerfile.encode())
    for rel, data in sorted(files.items()):
        digest.update(f"\0{rel}\0{len(data)}\0".encode() + data)
    for key, value in sorted(buildargs.items()):
        digest.update(f"\0{key}={value}".encode())
    digest.update(f"\0{bases}".encode())
    return digest.hexdigest()[:24]


def ensure_environment(
    client: DockerClient,
    context: Path,
    snapshot_files: str | tuple[str, ...],
    buildargs: Mapping[str, str],
    bases: str,
    *,
    task: str,
    log_path: Path,
    timeout_sec: float,
    run: RunContext,
) -> build_module.BuildOutcome | None:
    """Build the agent Dockerfile's steps before the snapshot on their own, once per machine
    (their tag says they exist): two workers or runs whose tasks share a cold environment
    build it once, the second waiting for the first. None when the Dockerfile adds no
    snapshot; else the environment image's build (`built` False when it was there).
    """
    head = _environment_dockerfile((context / "Dockerfile").read_text(), snapshot_files)
    if head is None:
        return None
    files = _environment_files(context, snapshot_files, head)
    tag = f"{ENVIRONMENT_REPOSITORY}:{environment_key(head, files, buildargs, bases)}"
    if build.image_exists(client, tag):
        return build.BuildOutcome(tag, False, 0.0, None)
    key = tag.rsplit(":", 1)[1]
    with machine_lock(f"env-{key}", run.check):
        failed = _failed_this_run(key, task, tag, run)
        if failed is not None:
            raise failed
        try:
            outcome = build.build_image(  # returns at once when the holder before us built it
                client,
                task=task,
                role="environment",
                context=context,
                tag=tag,
                log_path=log_path,
                timeout_sec=timeout_sec,
                buildargs=dict(buildargs),
                context_tar=make_tar({**files, "Dockerfile": head.encode()}),
                extra_hosts=wheelhouse.build_hosts(client, run),  # pip steps: the machine's wheels
                run=run,
            )
        except BuildError as exc:
            _record_failure(key, exc, run)
            raise
        if outcome.built and outcome.log_path is not None:
            record_dropped(tag, outcome.log_path)
        return outcome


def _dropped_file(tag: str) -> Path:
    return ENVIRONMENTS.path() / f"{tag.rsplit(':', 1)[1]}.dropped.json"


def dropped_in_log(text: str) -> list[str]:
    """What a build log says the pip helper dropped: `requirement (spec key)` each, in order."""
    found = []
    for line in text.splitlines():
        at = line.find(DROPPED)
        if at < 0:
            continue
        requirement, _, rest = line[at + len(DROPPED) :].partition(" from ")
        name = rest.split(":", 1)[0].strip()
        entry = f"{requirement.strip()} ({requirements_step(name)})"
        if requirement.strip() and entry not in found:
            found.append(entry)
    return found


def record_dropped(tag: str, log_path: Path) -> list[str]:
    """Keep, beside the machine's environment images, what the build of `tag` dropped (read
    from its log): every task later built on that image reports it, not only the one that
    built it.
    """
    dropped = dropped_in_log(log_path.read_text(encoding="utf-8", errors="replace"))
    write_json(_dropped_file(tag), dropped)
    return dropped


def dropped_packages(tag: str | None) -> list[str]:
    """What the build of environment image `tag` dropped (empty when nothing, or unknown)."""
    import json

    if tag is None:
        return []
    try:
        found = json.loads(_dropped_file(tag).read_text())
    except (OSError, ValueError):
        return []
    return [str(x) for x in found] if isinstance(found, list) else []


def _failure_file(key: str) -> Path:
    return LOCKS.path() / f"env-{key}.failed.json"


def _record_failure(key: str, exc: BuildError, run: RunContext) -> None:
    """Remember, beside the environment's lock, that its build failed in `run`:
    the run's other rows sharing it then fail at once with this row's log and reason.
    """
    log = str(exc.log_path) if exc.log_path else None
    write_json(
        _failure_file(key),
        {"run": run.run_id, "task": exc.task, "reason": exc.reason, "log": log},
    )


def _failed_this_run(key: str, task: str, tag: str, run: RunContext) -> BuildError | None:
    """The build error to report when this environment already failed in this run (held
    under its lock); None when it did not, or failed in another run (a rerun tries again).
    """
    import json

    try:
        record = json.loads(_failure_file(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("run") != run.run_id:
        return None
    log = Path(record["log"]) if record.get("log") else None
    reason = (
        f"{record.get('reason')} (built once in this run, for {record.get('task')}; "
        "a rerun tries again)"
    )
    return BuildError(task, tag, reason, log)
