"""HUD target: one HUD v6 environment folder (`sources/<task>/`) per task.

The folder is the docker build context that `hud deploy` uploads: `env.py` (one `Environment`,
one `solve` template that yields the instruction and then grades with the packager grading
runtime as root), `tasks.py` (one `Task` row), `Dockerfile.hud` (FROM the agent image),
`pyproject.toml`, an allow-list `.dockerignore`, `instruction.md`, and the grader payload under
`grader/`. Rendering is pure and byte-deterministic; nothing here touches the filesystem.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import shlex
from typing import Any

import tomli_w

from packager.judge.image import JUDGE_VENV, judge_image_tag
from packager.models.spec import TaskSpec
from packager.render import FileTree, OutFile, render_template, text_file
from packager.render.harbor import GRADING_ARCHIVE, REFRESH_WHEELS
from packager.render.naming import make_hud_env_name

HUD_VERSION = "0.6.21"
"""The pinned HUD SDK (the v6 environment format this target emits)."""

TYPER_SPEC = "typer<0.29"
"""typer 0.29 breaks every `hud` 0.6.21 CLI command (TyperOption `type_descriptor`)."""

HUD_PORT = 8765
AGENT_UID = 1000

SENSITIVE_PATTERNS = (".git", ".env", ".env.*", "*.env")
"""Names `hud deploy` never uploads, at any depth (hud `cli/deploy.py::SENSITIVE_EXCLUDES`)."""

_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")
_WORKDIR_RE = re.compile(r"^(/[A-Za-z0-9._+-]+)+$")

BUILD_CA_NAME = "packager-build-ca.crt"
"""An optional CA bundle next to Dockerfile.hud at build time only (never rendered): the pip
stage of the image trusts it. The stage is thrown away, so the file stays out of the image."""

BUILD_WHEELS_NAME = "packager-hud-wheels"
"""An optional folder of wheels next to Dockerfile.hud at build time only (never rendered): the
pip stage installs hud from it without an index when it can (an air-gapped build, or one
machine building many tasks). The stage is thrown away, so the wheels stay out of the image."""

_DOCKERIGNORE = f"""\
# Allow-list: only what Dockerfile.hud copies is sent to the builder (and to `hud deploy`).
*
!.dockerignore
!Dockerfile.hud
!env.py
!tasks.py
!instruction.md
!pyproject.toml
!grader
!grader/**
!{BUILD_CA_NAME}
!{BUILD_WHEELS_NAME}
!{BUILD_WHEELS_NAME}/**
"""
_DOCKERIGNORE_FILE = OutFile(_DOCKERIGNORE.encode())
"""One bytes object for every task: staged once, then hard-linked (render/write.py)."""


def _optional(name: str) -> str:
    """`name` as a COPY source that may be absent: a glob with a one-character class (COPY
    accepts a glob that matches nothing, as long as another source exists).
    """
    return f"{name[:-1]}[{name[-1]}]"


def make_hud_files(
    spec: TaskSpec,
    *,
    dataset: str,
    agent_image: str,
    grader_payload: FileTree,
    grader_image: str | None = None,
) -> FileTree:
    """The files of the HUD v6 environment folder for `spec`, keyed by relative POSIX path.

    `grader_payload` is the grader's /tests payload (`plan.json`, `grading.pyz`,
    `payload/...`); it is embedded under `grader/` and baked into the image at /hud/grader.
    Raises ValueError for a payload path `hud deploy` would drop or that is not a plain
    relative path, for a payload module declaring another `Environment(...)`, and for an agent
    image or workdir that cannot be written safely into the Dockerfile. `grader_image`: where
    a task whose grading refreshes dependencies or serves stand-in services copies their files
    from (required for such a task).
    """
    slug = spec.provenance.slug
    env_name = make_hud_env_name(dataset, slug)
    if not env_name:
        raise ValueError(f"empty HUD environment name for dataset {dataset!r}, task {slug!r}")
    _check_agent_image(agent_image)
    workdir = _check_workdir(spec.repo.workdir)

    files: FileTree = {}
    for path, entry in grader_payload.items():
        _check_payload_path(path)
        _check_no_environment_decl(path, entry)
        files[f"grader/{path}"] = OutFile(entry.data, entry.mode)
    if "plan.json" not in grader_payload or GRADING_ARCHIVE not in grader_payload:
        raise ValueError(f"grader payload needs plan.json and {GRADING_ARCHIVE} at its root")

    lit = {
        "env_name": _pylit(env_name),
        "slug": _pylit(slug),
        "workdir": _pylit(workdir),
        "base_commit": _pylit(spec.repo.head),
        "agent_uid": _pylit(AGENT_UID),
        "grade_timeout_sec": _pylit(2 * spec.grading.timeout_sec + 600),
        "agent_timeout_sec": _pylit(spec.agent_timeout_sec),
        "grader_network": _pylit("public") if spec.grading.network else None,
        "resources": _resources(spec),
    }
    columns = [
        (_pylit(key), _pylit(value))
        for key, value in (
            ("dataset", dataset),
            ("schema", spec.provenance.schema_name),
            ("language", spec.provenance.language),
            ("instance_id", spec.provenance.instance_id),
        )
    ]
    files["env.py"] = OutFile(render_template("hud/env.py.jinja", lit=lit))
    files["tasks.py"] = OutFile(render_template("hud/tasks.py.jinja", lit=lit, columns=columns))
    files["Dockerfile.hud"] = OutFile(_dockerfile(spec, agent_image, workdir, grader_image))
    files["pyproject.toml"] = OutFile(tomli_w.dumps(_pyproject(env_name)).encode())
    files[".dockerignore"] = _DOCKERIGNORE_FILE
    files["instruction.md"] = text_file(spec.instruction)

    for path in files:
        _check_deployable(path)
    return dict(sorted(files.items()))


def _dockerfile(spec: TaskSpec, agent_image: str, workdir: str, grader_image: str | None) -> bytes:
    services = _from_grader(spec, grader_image)
    refresh = spec.grading.refresh_requirements
    return render_template(
        "hud/Dockerfile.hud.jinja",
        agent_image=agent_image,
        workdir=workdir,
        agent_uid=AGENT_UID,
        hud_requirement=f"hud=={HUD_VERSION}",
        typer_requirement=TYPER_SPEC,
        port=HUD_PORT,
        build_ca=BUILD_CA_NAME,
        build_ca_glob=_optional(BUILD_CA_NAME),
        wheels=BUILD_WHEELS_NAME,
        wheels_glob=_optional(BUILD_WHEELS_NAME),
        judge_image=judge_image_tag() if spec.grading.browser_judged else None,
        judge_venv=JUDGE_VENV,
        refresh_requirements=" ".join(shlex.quote(r) for r in refresh),
        refresh_wheels=REFRESH_WHEELS,
        services=services,
        grader_image=grader_image,
        grader_only=([REFRESH_WHEELS] if refresh else []) + services,
    )


def _pyproject(env_name: str) -> dict[str, Any]:
    return {
        "project": {
            "name": env_name,
            "version": "0.1.0",
            "requires-python": ">=3.11,<3.13",
            "dependencies": [f"hud=={HUD_VERSION}", TYPER_SPEC],
        }
    }


def _pylit(value: object) -> str:
    """A Python literal for `value` (str, int, dict/list of those), safe to paste into source."""
    text = repr(value)
    if isinstance(value, str) and text.startswith("'") and '"' not in value:
        text = f'"{text[1:-1]}"'  # no quote of either kind inside: swapping the outer ones is exact
    if type(value) in (str, int):
        return text  # repr of a str or int is an exact literal; parsing it per row is costly
    if ast.literal_eval(text) != value:
        raise ValueError(f"cannot write {value!r} as a Python literal")
    return text


def _from_grader(spec: TaskSpec, grader_image: str | None) -> list[str]:
    """The stand-in services' virtualenvs the HUD image copies from the grader image (with the
    refresh wheels); checks that there is a grader image to copy them from when it needs one.
    """
    slug = spec.provenance.slug
    services = [s.python.rsplit("/bin/", 1)[0] for s in spec.grading.services]
    for venv in services:
        if not _WORKDIR_RE.fullmatch(venv):
            raise ValueError(f"{slug}: stand-in service path {venv!r} is not a plain path")
    if spec.grading.refresh_requirements or services:
        if grader_image is None:
            raise ValueError(
                f"{slug}: its grading refreshes dependencies or serves stand-in services, "
                "which the HUD image copies from the grader image: no grader image given"
            )
        _check_agent_image(grader_image)
    return services


def _check_agent_image(image: str) -> None:
    if not _IMAGE_RE.fullmatch(image):
        raise ValueError(f"agent image {image!r} is not a plain image reference")


def _check_workdir(workdir: str) -> str:
    if not _WORKDIR_RE.fullmatch(workdir) or any(
        part in {".", ".."} for part in workdir.split("/")
    ):
        raise ValueError(f"workdir {workdir!r} must be a plain absolute path")
    if workdir == "/hud" or workdir.startswith("/hud/"):
        raise ValueError(f"workdir {workdir!r} is inside /hud, which is root-only")
    return workdir


@functools.lru_cache(maxsize=1024)
def _is_sensitive(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in SENSITIVE_PATTERNS)


def _check_deployable(path: str) -> None:
    for part in path.split("/"):
        if _is_sensitive(part):
            raise ValueError(
                f"{path!r}: `hud deploy` drops {part!r} (.git and *.env / .env* names); "
                "ship such content inside a bundle or tarball instead"
            )


def _check_payload_path(path: str) -> None:
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or any(part in {"", ".", ".."} for part in parts)
        or any(ord(char) < 0x20 for char in path)
    ):
        raise ValueError(f"grader payload path {path!r} is not a plain relative path")
    _check_deployable(path)


def _check_no_environment_decl(path: str, entry: OutFile) -> None:
    """Fail when a payload module would give `hud deploy` a second environment name.

    `hud deploy` AST-scans every `.py` file of the folder for `Environment("...")` /
    `Environment(name="...")` and refuses more than one name.
    """
    if not path.endswith(".py"):
        return
    declared = _declared_environment(entry.data)
    if declared is not None:
        raise ValueError(
            f"grader payload file {path!r} declares Environment({declared!r}); "
            "`hud deploy` would find more than one environment name in the folder"
        )


@functools.lru_cache(maxsize=64)
def _declared_environment(data: bytes) -> str | None:
    """The first literal `Environment(...)` name in a module (cached: rows of a dataset can
    ship the same grader modules; the grading runtime itself is a zipapp, not scanned).
    """
    try:
        tree = ast.parse(data.decode("utf-8"))
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return None  # deploy skips modules it cannot parse, too
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        callee = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else None
        )
        if callee != "Environment":
            continue
        name = (
            node.args[0]
            if node.args
            else next((kw.value for kw in node.keywords if kw.arg == "name"), None)
        )
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return name.value
    return None


def _resources(spec: TaskSpec) -> str | None:
    """The keyword arguments of HUD's `RuntimeResources` for a calibrated task (None: none):
    the CPUs, memory and storage its gold runs measured, as task.toml states them.
    """
    c = spec.calibration
    if c is None:
        return None
    return (
        f"cpu={float(c.cpus)!r}, memory_mb={c.memory_limit_mb!r}, storage_mb={c.storage_limit_mb!r}"
    )
