"""Completing a spec from its repository source: the reads adapters cannot do (commits checked,
a commit-given gold patch, recipe requirement files, the base-only commit, how a web app starts).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from packager import assumptions as A
from packager import repos
from packager.adapters.app_start import detect_start
from packager.datasets.conda import CondaError, from_environment_yml
from packager.datasets.harness_specs import replacements
from packager.errors import RepoSourceError, RowError
from packager.images.timemachine import exact_pins, raised_for_pins
from packager.images.wheeltags import moved_pins
from packager.models.app import AppStart
from packager.models.spec import Environment, Grading, TaskSpec
from packager.repos.objects import base_only_commit_sha
from packager.repos.read import commit_date, list_files, read_file, tree_sha
from packager.stamps import as_stamp


def resolve_spec(
    spec: TaskSpec, repo_sources: dict[str, str], mirror_dirs: tuple[str, ...] = ()
) -> TaskSpec:
    """Complete a spec from its repository source (the only reads adapters cannot do): check
    the commits exist, read a commit-given gold patch (SWEeper), requirement files named by a
    recipe, the base-only commit id, and how a web app starts.
    """
    if spec.repo.files is not None:
        return spec
    return _pins_win(_pins_follow_python(_resolve_from_source(spec, repo_sources, mirror_dirs)))


def _pins_follow_python(spec: TaskSpec) -> TaskSpec:
    """A spec pinning binary packages for a Python no image here serves: each pinned release
    with wheels, none for the Python used, moves to the newest of its series that has one
    (packager.images.wheeltags), recorded as `pins_moved_for_python`.
    """
    env = spec.environment
    asked = spec.provenance.metadata.get("python_requested")
    if env.python is None or not isinstance(asked, str) or asked == env.python:
        return spec

    texts = {n: d.decode("utf-8", "replace") for n, d in env.requirements.items()}
    lines = [*env.pip_packages, *(line for t in texts.values() for line in t.splitlines())]
    moved = moved_pins(exact_pins(lines), env.python, env.as_of)
    if not moved:
        return spec

    def move(line: str) -> str:
        pins = exact_pins([line])
        if not pins or pins[0] not in moved:
            return line
        name, version = pins[0]
        where = re.compile(rf"==(\s*){re.escape(version)}")
        return where.sub(lambda m: f"=={m.group(1)}{moved[(name, version)]}", line, count=1)

    requirements = {
        n: "".join(move(line) for line in t.splitlines(keepends=True)).encode()
        for n, t in texts.items()
    }
    environment = env.model_copy(
        update={
            "pip_packages": tuple(move(p) for p in env.pip_packages),
            "requirements": requirements,
        }
    )
    notes = [f"{n}=={v} -> {new}" for (n, v), new in moved.items()]
    meta = {**spec.provenance.metadata, "pins_moved_for_python": notes}
    return spec.model_copy(
        update={
            "environment": environment,
            "provenance": spec.provenance.model_copy(update={"metadata": meta}),
        }
    )


def _pins_win(spec: TaskSpec) -> TaskSpec:
    """An environment resolved as of a date (`--as-of`) whose spec pins a release made after it
    (`name==version` in pip_packages or a requirements file): the cut-off is raised to that
    release, so that every pin exists then (pins win over the date; their own dependencies
    resolve as of when they existed), recorded as `as_of_raised_by`.
    """
    env = spec.environment
    if env.as_of is None:
        return spec

    lines = list(env.pip_packages)
    for _, data in sorted(env.requirements.items()):
        lines += data.decode("utf-8", "replace").splitlines()
    stamp, by = raised_for_pins(env.as_of, exact_pins(lines))
    if by is None:
        return spec
    meta = {**spec.provenance.metadata, "resolved_as_of": stamp, "as_of_raised_by": by}
    return spec.model_copy(
        update={
            "environment": env.model_copy(update={"as_of": stamp}),
            "provenance": spec.provenance.model_copy(update={"metadata": meta}),
        }
    )


def _resolve_from_source(
    spec: TaskSpec, repo_sources: dict[str, str], mirror_dirs: tuple[str, ...]
) -> TaskSpec:
    name = spec.repo.name
    env = spec.environment
    needs_source = bool(
        spec.repo.reference_commit is not None
        or env.requirements_paths
        or env.conda_env_paths
        or spec.repo.history == "base-only"
        or spec.grading.browser_judged
        or env.as_of_commit is not None
    )
    if name not in repo_sources and not mirror_dirs and not needs_source:
        # A remote source is only contacted when the image is built.
        return spec
    try:
        git_dir = repos.git_dir_for(repos.source_for(name, repo_sources, mirror_dirs=mirror_dirs))
    except RepoSourceError as exc:
        raise RowError(spec.task_id, "repo", str(exc).split(": ", 2)[-1]) from exc
    for field_name, sha in (
        ("base_commit", spec.repo.base_commit),
        ("reference_commit", spec.repo.reference_commit),
    ):
        if sha is not None and not repos.has_commit(git_dir, sha):
            raise RowError(
                spec.task_id, field_name, f"commit {sha} not found in repo source for {name}"
            )
    update: dict[str, object] = {}
    if env.as_of_commit is not None:
        spec = _dated_by_commit(spec, git_dir)
    if spec.repo.reference_commit is not None and spec.gold_patch is None:
        diff = repos.read_diff(git_dir, spec.repo.base_commit, spec.repo.reference_commit)
        if not diff.strip():
            raise RowError(spec.task_id, "reference_commit", "no change from base_commit")
        update["gold_patch"] = diff
    if env.requirements_paths or env.conda_env_paths:
        update["environment"] = _read_recipe_files(spec, git_dir)
    if spec.repo.history == "base-only":
        tree = tree_sha(git_dir, spec.repo.base_commit)
        if tree is None:
            raise RowError(spec.task_id, "base_commit", "cannot read its tree in the repo source")
        head = base_only_commit_sha(tree, spec.repo.base_commit)
        update["repo"] = spec.repo.model_copy(update={"diff_base": head})
    if spec.grading.browser_judged:
        grading, environment = _web_app(spec, git_dir)
        update["grading"] = grading
        update["environment"] = environment
    return spec.model_copy(update=update) if update else spec


def _dated_by_commit(spec: TaskSpec, git_dir: Path) -> TaskSpec:
    """`--as-of setup-commit`: the environment resolves as of the committer date of the commit
    the adapter named (`as_of_commit`), recorded as `resolved_as_of`.
    """
    env = spec.environment
    assert env.as_of_commit is not None
    when = commit_date(git_dir, env.as_of_commit)
    if when is None:
        raise RowError(
            spec.task_id,
            "environment_setup_commit",
            f"commit {env.as_of_commit} not found in repo source for {spec.repo.name} "
            "(--as-of setup-commit reads its date)",
        )
    stamp = as_stamp(when)
    meta = {**spec.provenance.metadata, "resolved_as_of": stamp}
    return spec.model_copy(
        update={
            "environment": env.model_copy(update={"as_of": stamp, "as_of_commit": None}),
            "provenance": spec.provenance.model_copy(update={"metadata": meta}),
        }
    )


def _read_recipe_files(spec: TaskSpec, git_dir: Path) -> Environment:
    """The recipe's requirement file and environment.yml, read from the repository at the
    environment setup commit as the harness reads them: the first of the candidate paths that
    exists, `-r` includes inlined, lines that install the repository itself dropped, yanked
    names replaced; an environment.yml becomes pip requirements (packager.datasets.conda).
    """
    env = spec.environment
    commit = env.source_commit or spec.repo.base_commit

    def first(paths: tuple[str, ...], key: str) -> tuple[str, bytes]:
        for path in paths:
            data = read_file(git_dir, commit, path)
            if data is not None:
                return path, data
        raise RowError(
            spec.task_id,
            key,
            f"none of {', '.join(paths)} is in {spec.repo.name} at {commit[:12]} (the "
            "environment setup commit); files are read from the repository, never downloaded",
        )

    def inline(path: str, data: bytes, depth: int = 0) -> list[str]:
        lines = []
        for line in data.decode("utf-8", "replace").splitlines():
            words = line.strip().split()
            if depth < 5 and len(words) == 2 and words[0] in ("-r", "--requirement"):
                included = os.path.normpath(os.path.join(os.path.dirname(path), words[1]))
                found = read_file(git_dir, commit, included)
                if found is not None:  # the harness skips an include it cannot fetch
                    lines += inline(included, found, depth + 1)
            elif not line.strip().startswith(A.REQUIREMENT_LINES_DROPPED):
                lines.append(line)
        return lines

    requirements = dict(env.requirements)
    packages = env.packages
    if env.requirements_paths:
        path, data = first(env.requirements_paths, "install_config.reqs_path")
        lines = replace_yanked(inline(path, data))
        requirements[path.replace("/", "__")] = ("\n".join(lines).strip("\n") + "\n").encode()
    if env.conda_env_paths:
        path, data = first(env.conda_env_paths, "install_config.env_yml_path")
        try:
            converted = from_environment_yml(data.decode("utf-8", "replace"))
        except CondaError as exc:
            raise RowError(spec.task_id, "install_config.env_yml_path", f"{path}: {exc}") from exc
        text = "".join(f"{line}\n" for line in replace_yanked(list(converted.requirements)))
        requirements[path.replace("/", "__") + ".txt"] = text.encode()
        packages = tuple(dict.fromkeys((*env.packages, *converted.system)))
    return env.model_copy(
        update={
            "requirements": requirements,
            "requirements_paths": (),
            "conda_env_paths": (),
            "packages": packages,
        }
    )


def replace_yanked(lines: list[str]) -> list[str]:
    """Requirement lines with the names the harness replaces (yanked from the index) replaced,
    as the harness does (its replacement drops the version of the yanked name).
    """
    import re

    out = []
    for line in lines:
        for old, new in replacements():
            if re.match(rf"^{re.escape(old)}([<>=!~]=?.*|$)", line.strip()):
                line = new or ""
        if line:
            out.append(line)
    return out


def _web_app(spec: TaskSpec, git_dir: Path) -> tuple[Grading, Environment]:
    """How a SWEeper app starts (the recipe's command, else detected from the repository's
    top-level files) and the runtimes its image needs.
    """
    import json as _json

    top = [p for p in list_files(git_dir, spec.repo.base_commit) if "/" not in p]
    files = {p: read_file(git_dir, spec.repo.base_commit, p) or b"" for p in top}
    g = spec.grading
    start: AppStart | None
    if g.app_start:
        start = AppStart(g.app_start, g.app_port or A.SWEEPER_DEFAULT_PORT, "recipe")
    else:
        start = detect_start(files, default_port=A.SWEEPER_DEFAULT_PORT)
    if start is None:
        raise RowError(
            spec.task_id,
            "repo",
            "cannot tell how to start the app (no package.json start script, Compose file, "
            "manage.py or Flask app at the top of the repository); give a --recipes entry keyed "
            "by case_id or slug with start_command and port",
        )
    packages: list[str] = []
    install: list[str] = []
    python = None
    requirements: dict[str, bytes] = {}
    if "package.json" in files:
        packages.append("nodejs")
        try:
            manifest = _json.loads(files["package.json"] or b"{}")
        except ValueError:
            manifest = {}
        deps = isinstance(manifest, dict) and (
            manifest.get("dependencies") or manifest.get("devDependencies")
        )
        if deps:
            packages.append("npm")
        if deps:
            install.append("npm install --no-audit --no-fund")
        scripts = manifest.get("scripts") if isinstance(manifest, dict) else None
        script_name = start.how.removeprefix("package.json scripts.")
        if (
            not deps
            and start.how.startswith("package.json scripts.")
            and isinstance(scripts, dict)
            and isinstance(scripts.get(script_name), str)
        ):
            # What `npm run` would do, without needing npm for an app with no dependencies.
            start = AppStart(
                f'export PATH="$PWD/node_modules/.bin:$PATH"; {scripts[script_name]}',
                start.port,
                start.how,
            )
    if any(p in files for p in ("manage.py", "app.py", "wsgi.py", "requirements.txt")):
        python = A.DEBIAN_PYTHON
        if files.get("requirements.txt"):
            requirements["requirements.txt"] = files["requirements.txt"]
    environment = spec.environment.model_copy(
        update={
            "packages": tuple(packages),
            "install": tuple(install),
            "python": python,
            "requirements": requirements,
        }
    )
    grading = g.model_copy(
        update={"app_start": start.command, "app_port": start.port, "app_start_how": start.how}
    )
    return grading, environment
