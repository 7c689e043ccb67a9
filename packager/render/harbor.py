"""Harbor target: TaskSpec → the files of a Harbor 0.25 task folder, plus manifests. Pure.

The agent build context (`environment/`) holds only the recipe; the repository snapshot
(`repo.tar`) is added by the build stage. Grading lives in `tests/`, a separate build context
whose Dockerfile starts FROM the agent image, so nothing of it can reach the agent image.

Under Harbor (docs/harbor.md) both images are prebuilt: `[environment].docker_image` is the
agent image and `[verifier.environment].docker_image` the grader image with /tests baked in, so
Harbor builds nothing, uploads no tests and keeps both images after a trial. The compose files
next to them label Harbor's containers and take the network away (`network_mode: none`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
import posixpath
import shlex
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
import yaml

from packager.assumptions import SNAPSHOT_MARK, VENV, VENV_TOOLS, conda_derived
from packager.defaults import BUILD_TIMEOUT_SEC
from packager.judge.endpoint import HOST_ALIAS, JUDGE_ENV
from packager.judge.image import JUDGE_VENV, judge_image_tag
from packager.models.spec import Environment, TaskSpec
from packager.render import TEMPLATES_DIR, FileTree, OutFile, naming, render_template, text_file
from packager.repos.layers import REMOVED_LIST
from packager.toolchains import uses_npm_registry

JUDGE_START_TIMEOUT = 120
"""Seconds a web app gets to answer HTTP after its start command (a judge task)."""
JUDGE_MAX_STEPS = 25
"""The browser agent's step budget per workflow."""

GRADING_DIR = Path(__file__).resolve().parent.parent / "grading"
GRADING_MODULES = tuple(sorted(p.name for p in GRADING_DIR.glob("*.py") if p.name != "__init__.py"))
"""The runtime's modules, packed into GRADING_ARCHIVE at its root: every module of its folder
(a new one ships by being there), by name, so the archive's bytes follow the folder's; its
`__init__.py` only serves the package import of the unit tests."""
GRADING_ARCHIVE = "grading.pyz"
"""The grading runtime as one zipapp: `python3 -I -S /tests/grading.pyz /tests/plan.json` runs
grade.py's main; the judge's Python runs `-m browser_agent` with the archive on PYTHONPATH."""
_ARCHIVE_MAIN = b"""\
# `python3 grading.pyz PLAN [--out DIR] [--patch FILE]` runs grade.py's main (made by packager).
import sys

import grade

sys.exit(grade.main())
"""
_ARCHIVE_TIME = (1980, 1, 1, 0, 0, 0)
"""The earliest time a zip entry can carry: the archive's bytes never depend on the clock."""
SNAPSHOT_FILE = "repo.tar"
HISTORY_FILE = "history.tar"
"""The snapshot's two tars in the agent context (`repos.layers`): the row's own layer and the
history layer it shares with the rows after the same tag."""
SNAPSHOT_FILES = (HISTORY_FILE, SNAPSHOT_FILE)
TASK_ORG = "packager"

RUN_ID_VARIABLE = "PACKAGER_RUN_ID"
"""Set by the harbor engine: Harbor's containers carry this process's run label too."""


def grader_has_network(spec: TaskSpec) -> bool:
    """Whether the grader container gets a network: `--grader-network public`, or a browser
    judge (it reaches its model endpoint).
    """
    return spec.grading.network or spec.grading.browser_judged


def compose_override(spec: TaskSpec, role: str, *, network: bool) -> str:
    """environment/ or tests/docker-compose.yaml: Harbor merges it over its own compose files
    for service `main`. It labels the container like the local engine's, and blocks the network
    with `network_mode: none` (Harbor's own `no-network` mode needs registry sidecar images).
    """
    labels = {
        naming.LABEL_TOOL: "packager",
        naming.LABEL_TASK: f"{spec.provenance.dataset}/{spec.provenance.slug}",
        naming.LABEL_ROLE: role,
        naming.LABEL_RUN: f"${{{RUN_ID_VARIABLE}:-harbor}}",
    }
    lines = [
        f"# {role}: Harbor merges this over its own compose files (service main).",
        "services:",
        "  main:",
        "    labels:",
        *(f"      {key}: {json.dumps(value)}" for key, value in sorted(labels.items())),
    ]
    if not network:
        lines.append("    network_mode: none")
        if role == "harbor-grader" and spec.grading.unroutable:
            # The runtime routes the task's unroutable addresses into loopback, in the
            # container's own network namespace (which has no network).
            lines += ["    cap_add:", "      - NET_ADMIN"]
    elif role == "harbor-grader":
        # A browser judge reaches a model endpoint on the host by this name (docs/sweeper.md).
        lines += ["    extra_hosts:", f'      - "{HOST_ALIAS}:host-gateway"']
    return "\n".join(lines) + "\n"


TASK_GITIGNORE = f"""\
# Harbor's publish and digest filter (`harbor dataset add`, `harbor publish`). A .gitignore
# replaces Harbor's default ignores, repeated here. The repository snapshot is written by
# `packager build` and is baked into the agent image named in task.toml: not task content.
__pycache__/
*.pyc
.DS_Store
*.swp
*.swo
*~
/environment/{SNAPSHOT_FILE}
/environment/{HISTORY_FILE}
"""
_TASK_GITIGNORE_FILE = text_file(TASK_GITIGNORE)
"""One bytes object for every task: staged once, then hard-linked (render/write.py)."""


@dataclass(frozen=True)
class HarborTask:
    """One rendered task: its folder's files, its manifests and its image tags."""

    files: FileTree
    manifests: FileTree
    agent_image: str
    grader_image: str
    grader_payload: FileTree
    """The grader's /tests payload without its Dockerfile and test.sh (reused by HUD)."""


def image_digest(tree: FileTree, extra: str = "") -> str:
    """sha256 over sorted paths, modes and bytes: equal trees give equal image tags."""
    h = hashlib.sha256(extra.encode())
    for path in sorted(tree):
        f = tree[path]
        h.update(f"{path}\0{f.mode:o}\0{len(f.data)}\0".encode())
        h.update(f.data)
    return h.hexdigest()


def snapshot_key(spec: TaskSpec) -> str:
    """What the repository snapshot is a function of (its bytes are not reproducible)."""
    key = f"{spec.repo.name}@{spec.repo.base_commit}"
    return key if spec.repo.history == "full" else f"{key}#{spec.repo.history}"


def collect_command(spec: TaskSpec) -> str:
    """Harbor's collect hook: the candidate change as a binary diff against the snapshot's HEAD
    (the base commit, or the one commit holding its tree with `--history base-only`).
    """
    workdir = spec.repo.workdir
    return (
        f"mkdir -p /logs/artifacts && cd {workdir} && git add -A && "
        f"git diff --cached --binary {spec.repo.head} > /logs/artifacts/model.patch"
    )


def _last_user(dockerfile: str) -> str | None:
    """The user the row's Dockerfile ends with (its later steps run as root, then switch back)."""
    user = None
    for line in dockerfile.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "USER":
            user = words[1]
    return user if user not in (None, "root", "0") else None


def _agent_context(spec: TaskSpec) -> FileTree:
    env = spec.environment
    dockerfile = (env.dockerfile or "").rstrip("\n")
    pip_helper = PIP_HELPER if env.python and _installs_with_pip(env) else None
    files: FileTree = {
        "Dockerfile": OutFile(
            render_template(
                "harbor/environment/Dockerfile.jinja",
                instance_id=spec.task_id,
                base_commit=spec.repo.base_commit,
                dockerfile=dockerfile,
                user=_last_user(dockerfile),
                snapshot_in_dockerfile=SNAPSHOT_MARK in dockerfile,
                removed_list=REMOVED_LIST,
                base_image=env.base_image,
                prebuilt=env.prebuilt,
                packages=list(env.packages),
                npm_registry_arg=uses_npm_registry(env.toolchain),
                python=env.python,
                venv=VENV,
                venv_tools=list(VENV_TOOLS) if pip_helper else [],
                installers_out=list(env.installers_out) if pip_helper else [],
                installer_tools=installer_tools(env.installers_out),
                vendored_package=env.vendored_package,
                pip_helper=pip_helper,
                pre_install=list(env.pre_install),
                as_of=env.as_of if pip_helper else None,
                requirements=list(env.requirements),
                droppable=[
                    name
                    for name in env.requirements
                    if pip_helper and env.drop_unavailable and conda_derived(name)
                ],
                pip_packages=list(env.pip_packages),
                install=list(env.install),
                env=sorted(env.env.items()),
                workdir=spec.repo.workdir,
                setup_patch=bool(spec.repo.setup_patch),
                head=spec.repo.head,
                environment_patch=ENVIRONMENT_PATCH if records_environment(spec) else None,
            )
        )
    }
    if spec.repo.setup_patch:
        files["setup.patch"] = OutFile(spec.repo.setup_patch.encode())
    if env.python:
        as_of = bool(env.as_of and pip_helper)
        files["packager-venv.pth"] = OutFile(venv_pth(VENV, env.python, as_of).encode())
    if pip_helper:
        files[pip_helper] = OutFile(pip_helper_source())
    for name, data in env.requirements.items():
        files[f"requirements/{name}"] = OutFile(data)
    return files


def installer_tools(names: tuple[str, ...]) -> list[str]:
    """The venv tools' requirements (`pip>=21.3,<25`) of the installers `names`, for the steps
    of an image that holds none of them to get them back.
    """
    import re

    return [t for t in VENV_TOOLS if re.split(r"[<>=!~ ]", t, maxsplit=1)[0] in names]


PIP_HELPER = "packager-pip.py"
"""The agent context's pip helper (templates/harbor/environment/packager-pip.py, copied byte for
byte): the pip steps of a Python recipe install through it, from the machine's wheelhouse when a
packager build offers one (packager.images.wheelhouse), else as plain `pip install`."""


@functools.cache
def pip_helper_source() -> bytes:
    """The pip helper's bytes (read once per process)."""
    return (TEMPLATES_DIR / "harbor" / "environment" / PIP_HELPER).read_bytes()


ENVIRONMENT_PATCH = "/var/lib/packager/environment.patch"
"""Where an agent image records what building it changed in tracked files of the repository
(a recipe's pre_install/install editing tox.ini or setup.py): graders measure from that state
(grading/grade.py `_environment_base`). Root-owned, readable: nothing in it is secret."""


def records_environment(spec: TaskSpec) -> bool:
    """Whether the agent image runs commands in the repository that may change tracked files."""
    env = spec.environment
    return bool(env.pre_install or env.install)


def _installs_with_pip(env: Environment) -> bool:
    """Whether a Python recipe's image installs with pip (then its venv gets VENV_TOOLS first;
    a recipe using Debian's packages alone builds without the package index).
    """
    return bool(
        env.requirements
        or env.requirements_paths
        or env.conda_env_paths
        or env.pip_packages
        or any("pip" in command for command in (*env.pre_install, *env.install))
    )


AS_OF_HOOK = (
    "def _packager_as_of():\n"
    "    import os\n"
    "    stamp = os.environ.get('PACKAGER_AS_OF')\n"
    "    if not stamp:\n"
    "        return\n"
    "    try:\n"
    "        lines = open('/etc/hosts').read().splitlines()\n"
    "    except OSError:\n"
    "        return\n"
    "    for line in lines:\n"
    "        words = line.split('#', 1)[0].split()\n"
    "        for name in words[1:]:\n"
    "            if name.startswith('p') and name.endswith('.packager-wheelhouse.invalid'):\n"
    "                port, _, token = name[1:-len('.packager-wheelhouse.invalid')].partition('-')\n"
    "                os.environ['PIP_INDEX_URL'] = 'http://%s:%s/%s/asof/%s/simple/' % (\n"
    "                    words[0], port, token, stamp)\n"
    "                os.environ['PIP_TRUSTED_HOST'] = words[0]\n"
    "                os.environ.pop('PIP_EXTRA_INDEX_URL', None)\n"
    "                return\n"
    "_packager_as_of()\n"
)
"""In a packager build (the wheelhouse's host entry is in /etc/hosts) of an environment with a
cut-off (PACKAGER_AS_OF), every interpreter start points pip at the machine's index as of that
date (packager.images.timemachine): the helper's pip runs, a recipe's own `pip install` and the
isolated build environments pip makes alike. Without the entry (elsewhere, a built image) it
does nothing."""


def venv_pth(venv: str, python: str, as_of: bool = False) -> str:
    """A .pth for the base interpreter: when it runs through a symlink chain that passes the
    venv's bin (tox-current-env links `.tox/<env>/bin/python` to the venv's python), it adds the
    venv's site-packages first, as running the venv's python would. Invoked any other way
    (`/usr/bin/python3` by Debian's own tools) it does nothing. `as_of`: with AS_OF_HOOK.
    """
    body = (
        "def _packager_venv():\n"
        "    import os, site\n"
        "    path, seen = sys.executable, set()\n"
        "    while os.path.islink(path) and path not in seen:\n"
        "        seen.add(path)\n"
        f"        if os.path.dirname(path) == {venv + '/bin'!r}:\n"
        "            break\n"
        "        path = os.path.join(os.path.dirname(path), os.readlink(path))\n"
        f"    if sys.prefix == sys.base_prefix and os.path.dirname(path) == {venv + '/bin'!r}:\n"
        "        n = len(sys.path)\n"
        f"        site.addsitedir({f'{venv}/lib/python{python}/site-packages'!r})\n"
        "        sys.path[:] = sys.path[n:] + sys.path[:n]\n"
        "_packager_venv()\n"
    )
    return f"import sys; exec({body + (AS_OF_HOOK if as_of else '')!r})\n"


REFRESH_WHEELS = "/opt/packager-refresh"
"""Where the grader image keeps wheels of what the gold patch declares (Grading.refresh_*)."""


def make_plan(spec: TaskSpec) -> dict[str, Any]:
    """plan.json: everything the grading runtime needs (see docs/grading.md)."""
    g = spec.grading
    command = g.test_command
    if command and spec.environment.shell_setup:
        command = f"{spec.environment.shell_setup}; {command}"
    plan: dict[str, Any] = {
        "version": 1,
        "instance_id": spec.task_id,
        "repo_dir": spec.repo.workdir,
        "base_commit": spec.repo.head,
        "rule": g.rule,
        "parser": g.parser,
        "test_command": command,
        "timeout_sec": g.timeout_sec,
        "env": dict(sorted(g.env.items())),
        "test_patch": "payload/test.patch" if g.test_patch else None,
        "environment_patch": ENVIRONMENT_PATCH if records_environment(spec) else None,
        "hidden_files": "payload/hidden" if g.hidden_files else None,
        "protected_paths": list(g.protected_paths),
        "fail_to_pass": list(g.fail_to_pass),
        "pass_to_pass": list(g.pass_to_pass),
        "formula": None,
        "patch_policy": None,
        "script": None,
    }
    if g.services:
        plan["services"] = [
            {"name": s.name, "command": s.command, "python": s.python, "port": s.port}
            for s in g.services
        ]
    if g.unroutable:
        plan["unroutable"] = list(g.unroutable)
    if g.refresh_command:
        plan["refresh"] = {"command": g.refresh_command, "wheels": REFRESH_WHEELS}
    if g.rule == "formula":
        plan["formula"] = {
            "expression": g.formula,
            "hidden_paths": sorted(g.hidden_files),
            "hidden_tests": list(g.hidden_tests),
            "public_tests": list(g.public_tests),
            "build_command": g.build_command,
            "build_health": g.build_health,
        }
    if g.patch_allowed or g.patch_forbidden:
        plan["patch_policy"] = {
            "allowed": list(g.patch_allowed),
            "forbidden": list(g.patch_forbidden),
        }
    if g.rule == "script":
        plan["script"] = {
            "command": g.grader_command,
            "dir": posixpath.join("payload/files", g.grader_dir),
            "criteria": [{"name": c.name, "weight": c.weight} for c in g.criteria],
        }
    if g.browser_judged:
        # The tests as JSON too: the runtime is standard library only (no YAML).
        tests = copy.deepcopy(list(_judge_tests(g.workflows or "")))  # the cache stays intact
        plan["judge"] = {
            "workflows": "payload/workflows.yaml",
            "tests": tests,
            "start_command": g.app_start,
            "port": g.app_port,
            "start_detected_from": g.app_start_how,
            "start_timeout_sec": JUDGE_START_TIMEOUT,
            "workflow_timeout_sec": g.timeout_sec // max(1, len(tests)),
            "max_steps": JUDGE_MAX_STEPS,
        }
    return plan


@functools.lru_cache(maxsize=256)
def _judge_tests(workflows: str) -> tuple[dict[str, Any], ...]:
    """The plan's view of a judge task's workflows (parsed once per text: a render of many
    rows would otherwise parse the same YAML for every row that shares it).
    """
    return tuple(
        {k: t[k] for k in ("id", "category", "purpose", "steps")}
        for t in yaml.safe_load(workflows)["tests"]
    )


@functools.lru_cache(maxsize=1)
def read_grading_archive() -> bytes:
    """The grading runtime as a zipapp, built once per process (it is the same in every task).

    One file instead of a folder of modules: fewer files per task is most of what a render
    costs (issue 10). The bytes are reproducible: entries in a fixed order, a fixed time and
    mode, and stored uncompressed, so no zlib version can change them.
    """
    members = [("__main__.py", _ARCHIVE_MAIN)]
    members += [(name, (GRADING_DIR / name).read_bytes()) for name in GRADING_MODULES]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=_ARCHIVE_TIME)
            info.create_system = 3  # Unix, so external_attr holds the mode on every platform
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, data)
    return buffer.getvalue()


@functools.lru_cache(maxsize=1)
def _grading_archive_sha256() -> str:
    return hashlib.sha256(read_grading_archive()).hexdigest()


def file_sha256(data: bytes) -> str:
    """sha256 (hex) of a file's bytes. The grading archive, in every task, is hashed once per
    process (hashing it again for each task took a tenth of a render's time).
    """
    if data is read_grading_archive():
        return _grading_archive_sha256()
    return hashlib.sha256(data).hexdigest()


def _grader_payload(spec: TaskSpec) -> FileTree:
    g = spec.grading
    payload: FileTree = {
        "plan.json": text_file(json.dumps(make_plan(spec), indent=2, sort_keys=True)),
        GRADING_ARCHIVE: OutFile(read_grading_archive()),
    }
    if g.test_patch:
        payload["payload/test.patch"] = OutFile(g.test_patch.encode())
    for path, data in g.hidden_files.items():
        payload[f"payload/hidden/{path}"] = OutFile(data)
    for path, data in g.grader_files.items():
        payload[f"payload/files/{path}"] = OutFile(data)
    if g.workflows:
        payload["payload/workflows.yaml"] = OutFile(g.workflows.encode())
    return payload


def task_name(spec: TaskSpec) -> str:
    """The task's name in task.toml and in the Harbor dataset manifest."""
    return f"{TASK_ORG}/{spec.provenance.slug}"


def _task_toml(spec: TaskSpec, agent_image: str, grader_image: str) -> bytes:
    """task.toml: both images are prebuilt (`docker_image`), so Harbor neither builds nor
    deletes them; the grader is a separate container of the grader image, with /tests baked in.
    """
    p = spec.provenance
    config: dict[str, Any] = {
        "schema_version": "1.4",
        "source": f"{p.dataset}/{p.split}",
        "task": {
            "name": task_name(spec),
            "version": "1.0.0",
            "description": f"{p.instance_id} ({p.schema_name})",
        },
        "metadata": {
            "instance_id": p.instance_id,
            "dataset": p.dataset,
            "split": p.split,
            "schema": p.schema_name,
            "language": p.language,
            "repo": spec.repo.name,
            "base_commit": spec.repo.base_commit,
            "agent_image": agent_image,
            "grader_image": grader_image,
            **{k: v for k, v in sorted(p.metadata.items()) if v is not None},
        },
        "agent": {"timeout_sec": float(spec.agent_timeout_sec)},
        "environment": {
            "build_timeout_sec": BUILD_TIMEOUT_SEC,
            "docker_image": agent_image,
            "workdir": spec.repo.workdir,
        },
        "verifier": {
            "timeout_sec": float(spec.grading.timeout_sec + 300),
            "environment_mode": "separate",
            "environment": {"docker_image": grader_image},
            "collect": [{"command": collect_command(spec), "timeout_sec": 120.0}],
        },
    }
    if spec.environment.cpus is not None:
        # Harbor's docker environment turns `cpus` into the compose service's CPU limit.
        config["environment"]["cpus"] = spec.environment.cpus
        config["verifier"]["environment"]["cpus"] = spec.environment.cpus
    if spec.calibration is not None:
        # Measured on the gold runs (Harbor 0.25 defaults none of them): each phase's limits.
        c = spec.calibration
        limits = {"cpus": c.cpus, "memory_mb": c.memory_limit_mb, "storage_mb": c.storage_limit_mb}
        config["environment"].update(limits)
        config["verifier"]["environment"].update(limits)
        config["verifier"]["timeout_sec"] = c.verifier_timeout_sec
    if spec.grading.network:
        # `--grader-network public`, in Harbor's terms: the verifier phase's network policy.
        config["verifier"]["network_mode"] = "public"
        config["metadata"]["grader_network"] = "public"
    if spec.grading.browser_judged:
        # The judge's model endpoint, read from the environment of `harbor run` (docs/sweeper.md).
        config["verifier"]["env"] = {name: f"${{{name}:-}}" for name in JUDGE_ENV}
    return tomli_w.dumps(config).encode()


def _manifests(spec: TaskSpec, agent_image: str, grader_image: str) -> FileTree:
    common = {
        "task": spec.provenance.slug,
        "instance_id": spec.task_id,
        "agent_image": agent_image,
        "grader_image": grader_image,
        "workdir": spec.repo.workdir,
        "collect": collect_command(spec),
        "grade": "/tests/test.sh",
    }
    oracle = {
        **common,
        "kind": "oracle",
        "agent": "/solution/solve.sh",
        "runs": 2,
        "expect": {"reward": spec.expectations.gold_reward},
    }
    nop = {
        **common,
        "kind": "nop",
        "agent": None,
        "runs": 1,
        "expect": {"reward_below": 1.0, "reward": spec.expectations.nop_reward},
    }
    return {
        "oracle.json": text_file(json.dumps(oracle, indent=2, sort_keys=True)),
        "nop.json": text_file(json.dumps(nop, indent=2, sort_keys=True)),
    }


def make_harbor_task(spec: TaskSpec) -> HarborTask:
    """Render one task folder. `spec.gold_patch` must be resolved (SWEeper: by the pipeline)."""
    if spec.gold_patch is None:
        raise ValueError(f"{spec.task_id}: gold patch not resolved")
    p = spec.provenance
    agent_ctx = _agent_context(spec)
    agent_image = naming.make_image_tag(
        p.dataset, p.slug, "agent", image_digest(agent_ctx, snapshot_key(spec))
    )
    payload = _grader_payload(spec)
    helper = PIP_HELPER in agent_ctx
    tests: FileTree = {
        "Dockerfile": OutFile(
            render_template(
                "harbor/tests/Dockerfile.jinja",
                instance_id=spec.task_id,
                agent_image=agent_image,
                grader_roots=sorted({p.split("/")[0] for p in spec.grading.grader_files}),
                judge_image=judge_image_tag() if spec.grading.browser_judged else None,
                judge_venv=JUDGE_VENV,
                refresh_requirements=" ".join(
                    shlex.quote(r) for r in spec.grading.refresh_requirements
                ),
                refresh_wheels=REFRESH_WHEELS,
                services=[
                    (s.name, s.python.rsplit("/bin/", 1)[0], " ".join(map(shlex.quote, s.packages)))
                    for s in spec.grading.services
                ],
                restore_installers=list(spec.environment.installers_out) if helper else [],
                installer_tools=installer_tools(spec.environment.installers_out),
                pip_helper=PIP_HELPER,
            )
        ),
        "test.sh": OutFile(
            render_template("harbor/tests/test.sh.jinja", instance_id=spec.task_id), 0o755
        ),
        # Harbor's grader container (its directory is tests/): offline, as in the local engine,
        # except a browser judge's, which reaches its model endpoint, or `--grader-network public`.
        "docker-compose.yaml": text_file(
            compose_override(spec, "harbor-grader", network=grader_has_network(spec))
        ),
        **payload,
    }
    grader_image = naming.make_image_tag(p.dataset, p.slug, "grader", image_digest(tests))
    files: FileTree = {
        ".gitignore": _TASK_GITIGNORE_FILE,
        "task.toml": OutFile(_task_toml(spec, agent_image, grader_image)),
        "instruction.md": OutFile(
            render_template(
                "harbor/instruction.md.jinja",
                instruction=spec.instruction.strip(),
                workdir=spec.repo.workdir,
            )
        ),
        "solution/solve.sh": OutFile(
            render_template(
                "harbor/solution/solve.sh.jinja",
                instance_id=spec.task_id,
                workdir=spec.repo.workdir,
            ),
            0o755,
        ),
        "solution/gold.patch": OutFile(spec.gold_patch.encode()),
    }
    files.update({f"environment/{k}": v for k, v in agent_ctx.items()})
    # Outside the agent image's digest: it changes how the container runs, not the image.
    files["environment/docker-compose.yaml"] = text_file(
        compose_override(spec, "harbor-agent", network=spec.environment.network)
    )
    files.update({f"tests/{k}": v for k, v in tests.items()})
    return HarborTask(
        files=files,
        manifests=_manifests(spec, agent_image, grader_image),
        agent_image=agent_image,
        grader_image=grader_image,
        grader_payload=payload,
    )
