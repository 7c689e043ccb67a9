"""Build a rendered HUD environment folder (`sources/<task>/`) into a local image.

The folder is the build context, exactly as `hud deploy` would upload it. Two things are added
for the local build only, never written into the folder: the host CA bundle (as
`packager-build-ca.crt`, which the throw-away pip stage of Dockerfile.hud trusts) and the pip
index URL of the host's pip configuration (the `PIP_INDEX_URL` build argument). Both stay in
that stage: the final image has neither the file nor the argument in its layers or history.
The image is labelled like every other image of this tool (`build.labels_for`, role `hud`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packager import naming
from packager.build import BuildOutcome, DockerClient, build_image, first_from, image_exists
from packager.errors import BuildError
from packager.targets.hud import BUILD_CA_NAME

DOCKERFILE = "Dockerfile.hud"
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HUD_BUILD_TIMEOUT_SEC = 1800.0
ROLE = "hud"


def hud_image_tag(source_dir: Path, dataset: str) -> str:
    """`packager/<dataset>.<task>:hud-<digest12>`: the digest is of every file of the folder."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(source_dir).as_posix()
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return naming.make_image_tag(dataset, source_dir.name, ROLE, digest.hexdigest())


def pip_config() -> dict[str, str]:
    """The host's effective pip settings (`pip config list`: env vars, then user, then site).

    Empty when pip is not runnable. Keys are as pip prints them, e.g. `global.index-url`.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    settings: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            settings[key.strip()] = value[1:-1]
    return settings


def host_index_url(settings: dict[str, str] | None = None) -> str | None:
    """The index URL pip uses on this host: PIP_INDEX_URL, else `install.`/`global.index-url`.

    None means pip's default index. Only http(s) URLs count (a file:// index is not in a build).
    """
    if settings is None:
        settings = pip_config()
    candidates = [
        os.environ.get("PIP_INDEX_URL", ""),
        settings.get(":env:.index-url", ""),
        settings.get("install.index-url", ""),
        settings.get("global.index-url", ""),
    ]
    for url in candidates:
        url = url.strip()
        if url.startswith(("http://", "https://")):
            return url
    return None


def host_ca_bundle(settings: dict[str, str] | None = None) -> Path | None:
    """The CA bundle pip trusts on this host (PIP_CERT / pip `cert`), else the system bundle."""
    if settings is None:
        settings = pip_config()
    for value in (
        os.environ.get("PIP_CERT", ""),
        settings.get(":env:.cert", ""),
        settings.get("install.cert", ""),
        settings.get("global.cert", ""),
    ):
        if value and Path(value).is_file():
            return Path(value)
    return DEFAULT_CA_BUNDLE if DEFAULT_CA_BUNDLE.is_file() else None


def build_hud_image(
    client: DockerClient,
    source_dir: Path,
    agent_image: str,
    tag: str,
    log_path: Path,
    *,
    ca_bundle: Path | None = None,
    index_url: str | None = None,
    timeout_sec: float = HUD_BUILD_TIMEOUT_SEC,
) -> BuildOutcome:
    """Build `source_dir/Dockerfile.hud` into `tag` unless that image exists.

    `agent_image` must be the image the Dockerfile starts FROM and must exist locally (nothing
    can be pulled). `ca_bundle` and `index_url` default to the host's pip settings
    (`host_ca_bundle`, `host_index_url`). Raises BuildError with the log path on failure.
    """
    task = source_dir.name
    dockerfile = source_dir / DOCKERFILE
    if not dockerfile.is_file():
        raise BuildError(task, tag, f"{dockerfile} is missing: render the task first", None)
    named = first_from(dockerfile.read_text(encoding="utf-8"))
    if named != agent_image:
        raise BuildError(
            task, tag, f"{DOCKERFILE} is FROM {named!r}, expected agent image {agent_image!r}", None
        )
    if image_exists(client, tag):
        return BuildOutcome(tag, False, 0.0, None)
    if not image_exists(client, agent_image):
        raise BuildError(
            task, tag, f"agent image {agent_image!r} is missing: run `packager package` first", None
        )
    from packager.judge.image import ensure_judge_image, judge_image_tag

    if f"--from={judge_image_tag()} " in dockerfile.read_text(encoding="utf-8"):
        ensure_judge_image(client, log_path.parent)  # a browser-judged task copies its venv
    settings = pip_config() if ca_bundle is None or index_url is None else {}
    ca = ca_bundle if ca_bundle is not None else host_ca_bundle(settings)
    url = index_url if index_url is not None else host_index_url(settings)
    buildargs = {"PIP_INDEX_URL": url} if url else {}
    with tempfile.TemporaryDirectory(prefix="packager-hud-") as tmp:
        context = Path(tmp) / task
        shutil.copytree(source_dir, context, symlinks=True)
        if ca is not None:
            shutil.copyfile(ca, context / BUILD_CA_NAME)
        # docker-py's `dockerfile` argument is relative to the context; rename to the default.
        shutil.copyfile(context / DOCKERFILE, context / "Dockerfile")
        with (context / ".dockerignore").open("a", encoding="utf-8") as ignore:
            ignore.write("!Dockerfile\n")
        return build_image(
            client,
            task=task,
            role=ROLE,
            context=context,
            tag=tag,
            log_path=log_path,
            timeout_sec=timeout_sec,
            buildargs=buildargs,
        )
