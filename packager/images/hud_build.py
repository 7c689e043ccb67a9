"""Build a rendered HUD environment folder (`sources/<task>/`) into a local image.

The folder is the build context, exactly as `hud deploy` would upload it. Three things are
added for the local build only, never written into the folder: the host CA bundle (as
`packager-build-ca.crt`, which the throw-away pip stage of Dockerfile.hud trusts), the pip
index URL of the host's pip configuration (the `PIP_INDEX_URL` build argument), and a
wheelhouse of hud and its dependencies (`packager-hud-wheels/`), downloaded once per machine by
the host's pip, from which that stage installs without an index (it falls back to the index
when a wheel is missing, e.g. for an image whose Python is not 3.11). All three stay in that
stage: the final image has none of them in its layers or history.
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

from packager.errors import BuildError
from packager.images.build import BuildOutcome, DockerClient, build_image, first_from, image_exists
from packager.images.judge_build import ensure_judge_image
from packager.judge.image import judge_image_tag
from packager.render import naming
from packager.render.hud import BUILD_CA_NAME, BUILD_WHEELS_NAME, HUD_VERSION, TYPER_SPEC
from packager.storage import HUD_WHEELS

DOCKERFILE = "Dockerfile.hud"
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HUD_BUILD_TIMEOUT_SEC = 1800.0
ROLE = "hud"
WHEELS_PYTHON = "3.11"
"""The Python the wheelhouse is for: Debian bookworm's, which most agent images here have."""
WHEELS_TIMEOUT_SEC = 600.0


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


def hud_requirements() -> tuple[str, str]:
    """What the pip stage of Dockerfile.hud installs."""
    return f"hud=={HUD_VERSION}", TYPER_SPEC


def wheelhouse_dir() -> Path:
    """Where this machine keeps its HUD wheelhouse (one folder per requirement set and Python)."""
    key = hashlib.sha256("\0".join((*hud_requirements(), WHEELS_PYTHON)).encode()).hexdigest()
    return HUD_WHEELS.path() / key[:12]


def download_hud_wheels(log_path: Path, dest: Path | None = None) -> Path | None:
    """A wheelhouse of hud and its dependencies for Python `WHEELS_PYTHON`, downloaded by the
    host's pip once (a `.complete` marker); None when pip cannot download it (the build then
    installs from the index, as without a wheelhouse). The download is logged to `log_path`.
    It is made in a temporary sibling and renamed into place, so concurrent builds never see
    half a wheelhouse.
    """
    dest = dest if dest is not None else wheelhouse_dir()
    if (dest / ".complete").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as tmp:
        command = [
            sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
            "--only-binary=:all:", "--python-version", WHEELS_PYTHON, "--implementation", "cp",
            "-d", tmp, *hud_requirements(),
        ]  # fmt: skip
        with log_path.open("w", encoding="utf-8") as log:
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            try:
                proc = subprocess.run(
                    command, stdout=log, stderr=subprocess.STDOUT, timeout=WHEELS_TIMEOUT_SEC
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.write(f"{type(exc).__name__}: {exc}\n")
                return None
        if proc.returncode != 0 or not any(Path(tmp).glob("*.whl")):
            return None
        (Path(tmp) / ".complete").write_text("")
        try:
            os.rename(tmp, dest)
        except OSError:  # another build finished first: use its wheelhouse
            if not (dest / ".complete").is_file():
                return None
    return dest


def build_hud_image(
    client: DockerClient,
    source_dir: Path,
    agent_image: str,
    tag: str,
    log_path: Path,
    *,
    ca_bundle: Path | None = None,
    index_url: str | None = None,
    wheels: Path | None = None,
    download_wheels: bool = True,
    timeout_sec: float = HUD_BUILD_TIMEOUT_SEC,
) -> BuildOutcome:
    """Build `source_dir/Dockerfile.hud` into `tag` unless that image exists.

    `agent_image` must be the image the Dockerfile starts FROM and must exist locally (nothing
    can be pulled). `ca_bundle` and `index_url` default to the host's pip settings
    (`host_ca_bundle`, `host_index_url`); `wheels` to this machine's HUD wheelhouse, downloaded
    on first use unless `download_wheels` is false (then the build installs from the index).
    Raises BuildError with the log path on failure.
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
    if f"--from={judge_image_tag()} " in dockerfile.read_text(encoding="utf-8"):
        ensure_judge_image(client, log_path.parent)  # a browser-judged task copies its venv
    settings = pip_config() if ca_bundle is None or index_url is None else {}
    ca = ca_bundle if ca_bundle is not None else host_ca_bundle(settings)
    url = index_url if index_url is not None else host_index_url(settings)
    buildargs = {"PIP_INDEX_URL": url} if url else {}
    if wheels is None and download_wheels:
        wheels = download_hud_wheels(log_path.with_name(log_path.stem + "-wheels.log"))
    with tempfile.TemporaryDirectory(prefix="packager-hud-") as tmp:
        context = Path(tmp) / task
        shutil.copytree(source_dir, context, symlinks=True)
        if ca is not None:
            shutil.copyfile(ca, context / BUILD_CA_NAME)
        if wheels is not None:
            (context / BUILD_WHEELS_NAME).mkdir()
            for wheel in sorted(wheels.glob("*.whl")):
                shutil.copyfile(wheel, context / BUILD_WHEELS_NAME / wheel.name)
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
