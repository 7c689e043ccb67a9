"""An `install_config` recipe (SWE-rebench's keys, as the SWE-bench harness means them) →
the agent image's Environment, the test command and the runtime's parser. Pure.

Keys and what they do (docs/datasets.md has the full table):
- `python`: the interpreter; its image is chosen by `packager.images.pythons.choose_python`
  (`--base-image`, the official image, Debian's python3, the nearest Debian one).
- `packages`: `requirements.txt` (the first of `reqs_path` that exists, read from the
  repository at `environment_setup_commit` by the pipeline, never downloaded),
  `environment.yml` (likewise, converted to pip requirements: `packager.datasets.conda`), or a conda
  package list (converted the same way).
- `pip_packages`: installed with pip after `packages`.
- `pre_install`: shell commands run as root in the repository, after the snapshot (as the
  harness runs them after its clone), before `install`.
- `install`: shell commands run in the repository after `pre_install`.
- `test_cmd`: the test command; the test files a row's `test_patch` touches are appended.
- `log_parser`: a harness parser name, mapped to a parser of the grading runtime.
- `env_vars`: ENV lines of the image (expanded by Docker, inherited by grading).
- `docker_specs`: the toolchain (`node_version`, `go_version`, ... and `pnpm_version`), served
  from Debian by `packager.toolchains.choose_toolchain`; a C repository (the harness's
  language `c`) gets Debian's compilers and build tools.
- `build`: shell commands run after `install` in the image (as the harness's repository setup
  runs them) and again before the tests at grading, after the candidate and test patches are
  applied (as the harness's eval script runs them): a compiled project is tested as patched.
  A build command that `install` already ran (axios' `npm install`) is not rerun at grading.
- `apt-pkgs`: Debian packages installed first.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packager import assumptions as A
from packager.datasets.conda import CondaError, from_package_list
from packager.datasets.harness_parsers import (
    default_test_command,
    join_test_commands,
    runtime_parser,
)
from packager.diffs import parse_diff
from packager.errors import RowError
from packager.images.pythons import Fallback, PythonChoice, PythonUnavailable, choose_python
from packager.models.spec import Environment
from packager.stamps import as_stamp
from packager.toolchains import (
    TOOL_KEYS,
    VERSIONED,
    ToolchainChoice,
    ToolchainUnavailable,
    choose_toolchain,
    for_language,
    tool_setup,
)

KNOWN_KEYS = frozenset(
    {
        "python",
        "packages",
        "pip_packages",
        "reqs_path",
        "env_yml_path",
        "pre_install",
        "install",
        "test_cmd",
        "log_parser",
        "env_vars",
        "no_use_env",
        "eval_commands",
        "docker_specs",
        "apt-pkgs",
        "base_image",
        "timeout",
        "start_command",
        "port",
        "execute_test_as_nonroot",
        "nano_cpus",
        "build",
        "validated_as_of",
    }
)
"""Keys a recipe may carry. `no_use_env` and `execute_test_as_nonroot` are conda and container
details of the harness's specs with no meaning here (docs/datasets.md says why each); they are
accepted and ignored. Unknown keys are an error."""

DOCKER_SPECS_IGNORED = frozenset({"_variant", "run_args"})
"""`docker_specs` keys with no meaning here: the harness's Dockerfile template variant and the
container's extra run arguments (`cap_add`)."""


@dataclass(frozen=True)
class PythonPolicy:
    """How a recipe's Python version becomes an image (the user's options and the engine)."""

    base_images: Mapping[str, str]
    available: Callable[[str], bool]
    """Whether the engine has (or can pull) an image."""
    fallback: Fallback = "nearest"
    toolchain_fallback: Fallback = "nearest"
    """`--toolchain-fallback`: the same choice for the toolchains of `docker_specs`."""


@dataclass(frozen=True)
class RecipeResult:
    """What a recipe decides."""

    environment: Environment
    test_command: str
    parser: str
    timeout_sec: int
    harness_parser: str
    python: PythonChoice | None = None
    notes: tuple[str, ...] = ()
    """What converting the recipe did besides (conda entries not installed with pip, renames)."""
    toolchain: ToolchainChoice | None = None


def commands(value: Any, task: str, field: str) -> tuple[str, ...]:
    """A command string or a list of them (None/empty = none)."""
    if value is None or value == "" or value == []:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise RowError(task, field, "expected a command string or a list of them")


def _string_list(value: Any, task: str, field: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise RowError(task, field, "expected a list of strings")


def test_directives(test_patch: str | None, style: str = "path") -> tuple[str, ...]:
    """Test files a test patch touches, as the harness passes them to the test command."""
    if not test_patch:
        return ()
    found: list[str] = []
    # As the harness finds them: the new path (`b/` side) of each `diff --git` section.
    for file in parse_diff(test_patch).files:
        path = file.path.strip() if file.git else ""
        if not path or path.endswith(A.NON_TEST_EXTS):
            continue
        if style == "django":
            # Django's runner takes dotted module labels relative to tests/.
            if not path.endswith(".py"):
                continue
            path = path.removeprefix("tests/").removesuffix(".py").replace("/", ".")
        if path not in found:
            found.append(path)
    return tuple(found)


@dataclass(frozen=True)
class _Packages:
    """What a recipe installs with pip, before the repository is in."""

    requirements: dict[str, bytes]
    requirements_paths: tuple[str, ...]
    conda_paths: tuple[str, ...]
    pip_packages: tuple[str, ...]
    notes: tuple[str, ...]
    system: tuple[str, ...] = ()
    """Debian packages a conda package list needs (packager.datasets.conda)."""

    def any(self) -> bool:
        """Whether anything is installed (then the recipe needs an interpreter)."""
        return bool(
            self.requirements or self.requirements_paths or self.conda_paths or self.pip_packages
        )


def _test_side(
    config: Mapping[str, Any],
    task: str,
    field: str,
    test_patch: str | None,
    language: str | None = None,
) -> tuple[str, str, str]:
    """The harness parser's name, the runtime parser, and the test command with the test
    patch's files appended as the harness derives them (Python only), after the spec's `build`
    commands: the harness rebuilds once the patches are applied, so a compiled project's tests
    run against the patched build (a failed build runs no test: fail closed).
    """
    harness_parser = str(config.get("log_parser") or A.DEFAULT_LOG_PARSER)
    try:
        parser = runtime_parser(harness_parser)
    except ValueError as exc:
        raise RowError(task, f"{field}.log_parser", str(exc)) from exc
    test_cmds = commands(config.get("test_cmd"), task, f"{field}.test_cmd")
    if not test_cmds:
        default = default_test_command(harness_parser)
        if default is None:
            raise RowError(
                task,
                f"{field}.test_cmd",
                f"missing, and the harness has no default test command for {harness_parser}",
            )
        test_cmds = (default,)
    style = A.directive_style(harness_parser, parser, language)
    test_command = join_test_commands(parser, test_cmds)
    if style is not None:
        directives = test_directives(test_patch, style)
        if directives:
            test_command += " " + " ".join(shlex.quote(d) for d in directives)
    # A build step the image's install already ran (axios' `npm install`) is not run again at
    # grading: the harness reruns it with a network, which grader containers do not have.
    installed = commands(config.get("install"), task, f"{field}.install")
    build = tuple(
        c for c in commands(config.get("build"), task, f"{field}.build") if c not in installed
    )
    if build:
        test_command = " && ".join((*build, test_command))
    return harness_parser, parser, test_command


def _toolchain(
    config: Mapping[str, Any], task: str, field: str, language: str | None, pythons: PythonPolicy
) -> tuple[ToolchainChoice | None, tuple[str, ...], tuple[str, ...]]:
    """The toolchain `docker_specs` names (or C's, for a C repository), the commands that
    install what npm serves (`pnpm_version`, run before `pre_install`), and notes naming the
    keys left unread (other harnesses' keys, e.g. `python_version`, which `python` covers).
    """
    specs = config.get("docker_specs") or {}
    if not isinstance(specs, Mapping):
        raise RowError(task, f"{field}.docker_specs", "expected a mapping")
    choice: ToolchainChoice | None = None
    setup: list[str] = []
    notes: list[str] = []
    tools: list[str] = []
    for key, value in specs.items():
        where = f"{field}.docker_specs.{key}"
        if key in DOCKER_SPECS_IGNORED:
            continue
        name = key.removesuffix("_version")
        if key not in TOOL_KEYS and name not in VERSIONED:
            notes.append(f"{where}: not read (no toolchain of that name here)")
            continue
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise RowError(task, where, "expected a version string such as '20'")
        if key in TOOL_KEYS:
            tools.append(key)
            setup.append(tool_setup(key, shlex.quote(str(value))))
            continue
        if choice is not None:
            raise RowError(task, where, f"a second toolchain besides {choice.name}")
        try:
            choice = choose_toolchain(name, str(value), pythons.toolchain_fallback)
        except ToolchainUnavailable as exc:
            raise RowError(task, where, str(exc)) from exc
    if choice is None:
        choice = for_language(language)
    for key in tools:
        if choice is None or choice.name != TOOL_KEYS[key]:
            needed = f"{TOOL_KEYS[key]}_version"
            raise RowError(task, f"{field}.docker_specs.{key}", f"needs {needed}")
    return choice, tuple(setup), tuple(notes)


def _packages(
    config: Mapping[str, Any], task: str, field: str, frozen_requirements: str | None
) -> _Packages:
    """`packages` (requirements.txt, environment.yml or a conda list) and `pip_packages`; a
    row's frozen pin set replaces both.
    """
    if frozen_requirements:
        frozen = {"requirements.frozen.txt": frozen_pins(frozen_requirements).encode()}
        return _Packages(frozen, (), (), (), ())
    requirements: dict[str, bytes] = {}
    reqs_paths: tuple[str, ...] = ()
    conda_paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    system: tuple[str, ...] = ()
    packages = config.get("packages")
    if packages == "requirements.txt":
        reqs_paths = _string_list(config.get("reqs_path"), task, f"{field}.reqs_path")
        reqs_paths = reqs_paths or A.DEFAULT_REQS_PATHS
    elif packages == "environment.yml":
        conda_paths = _string_list(config.get("env_yml_path"), task, f"{field}.env_yml_path")
        conda_paths = conda_paths or A.DEFAULT_ENV_YML_PATHS
    elif packages:
        if not isinstance(packages, str):
            packages = " ".join(_string_list(packages, task, f"{field}.packages"))
        try:
            converted = from_package_list(packages)
        except CondaError as exc:
            raise RowError(task, f"{field}.packages", str(exc)) from exc
        if converted.requirements:
            requirements[A.CONDA_PACKAGES_FILE] = converted.text().encode()
        notes = tuple(f"{field}.packages: {note}" for note in converted.notes)
        system = converted.system
    pips = _string_list(config.get("pip_packages"), task, f"{field}.pip_packages")
    return _Packages(requirements, reqs_paths, conda_paths, pips, notes, system)


def _interpreter(
    config: Mapping[str, Any], task: str, field: str, pythons: PythonPolicy, needed: bool
) -> PythonChoice | None:
    """The recipe's Python and the image serving it (Debian's python3 when it installs
    packages without naming one); None for a recipe that needs no Python.
    """
    python = config.get("python")
    if python is not None and not isinstance(python, str | int | float):
        raise RowError(task, f"{field}.python", "expected a version string such as '3.9'")
    version = str(python) if python is not None else (A.DEBIAN_PYTHON if needed else None)
    if version is None:
        return None
    if config.get("base_image"):
        return PythonChoice(version, version, str(config["base_image"]), "recipe base_image")
    try:
        return choose_python(
            version,
            base_images=pythons.base_images,
            available=pythons.available,
            fallback=pythons.fallback,
        )
    except PythonUnavailable as exc:
        raise RowError(task, f"{field}.python", str(exc)) from exc


def _positive_int(config: Mapping[str, Any], key: str, task: str, field: str, what: str) -> Any:
    value = config.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise RowError(task, f"{field}.{key}", f"expected a positive integer ({what})")
    return value


def _system(
    config: Mapping[str, Any],
    choice: PythonChoice | None,
    toolchain: ToolchainChoice | None,
    apt: tuple[str, ...],
) -> tuple[str, tuple[str, ...]]:
    """The base image and Debian packages: a Python's image (its toolchain packages first), or
    the toolchain's Debian release (the common non-Python packages, then the toolchain's).
    """
    packages: tuple[str, ...] = ()
    if choice is not None:
        packages = A.PYTHON_TOOLCHAIN_PACKAGES
    elif toolchain is not None:
        packages = A.NON_PYTHON_PACKAGES
    if toolchain is not None:
        packages = (*packages, *toolchain.packages)
    if choice is not None:
        image = choice.image
    elif toolchain is not None and not config.get("base_image"):
        image = toolchain.image
    else:
        image = str(config.get("base_image") or A.DEFAULT_BASE_IMAGE)
    return image, tuple(dict.fromkeys((*packages, *apt)))


def _env(env_vars: Mapping[str, Any], toolchain: ToolchainChoice | None) -> dict[str, str]:
    """The image's ENV lines: the toolchain's (its profile's `env`), then the recipe's
    `env_vars`.
    """
    merged = toolchain.env if toolchain is not None else {}
    merged.update({str(k): str(v) for k, v in env_vars.items()})
    return dict(sorted(merged.items()))


def make_recipe(
    config: Mapping[str, Any],
    *,
    task: str,
    field: str,
    test_patch: str | None,
    pythons: PythonPolicy,
    env_commit: str | None,
    frozen_requirements: str | None = None,
    language: str | None = None,
) -> RecipeResult:
    """Read one recipe (an `install_config`, a `--recipes` entry or a harness spec);
    `language` is the repository's as the harness files it (None: unknown).
    """
    unknown = sorted(set(config) - KNOWN_KEYS)
    if unknown:
        raise RowError(
            task,
            f"{field}.{unknown[0]}",
            f"unknown recipe key (known: {', '.join(sorted(KNOWN_KEYS))})",
        )
    harness_parser, parser, test_command = _test_side(config, task, field, test_patch, language)
    pkgs = _packages(config, task, field, frozen_requirements)
    choice = _interpreter(config, task, field, pythons, needed=pkgs.any())
    toolchain, tool_setup, tool_notes = _toolchain(config, task, field, language, pythons)
    env_vars = config.get("env_vars") or {}
    if not isinstance(env_vars, Mapping):
        raise RowError(task, f"{field}.env_vars", "expected a mapping NAME -> value")
    timeout = _positive_int(config, "timeout", task, field, "seconds")
    if timeout is None and "timeout" in config:
        raise RowError(task, f"{field}.timeout", "expected a positive integer (seconds)")
    nano_cpus = _positive_int(config, "nano_cpus", task, field, "1e9 = one CPU")
    eval_commands = commands(config.get("eval_commands"), task, f"{field}.eval_commands")
    apt = _string_list(config.get("apt-pkgs"), task, f"{field}.apt-pkgs")
    base_image, packages = _system(config, choice, toolchain, (*apt, *pkgs.system))
    pre_install = commands(config.get("pre_install"), task, f"{field}.pre_install")
    install = commands(config.get("install"), task, f"{field}.install")
    build = commands(config.get("build"), task, f"{field}.build")
    validated = _validated_as_of(config, task, field)
    environment = Environment(
        base_image=base_image,
        packages=packages,
        pre_install=(*tool_setup, *pre_install),
        # One shell for the build, as the harness's script runs it (`cd build` then `cmake ..`).
        install=(*install, *((" && ".join(build),) if build else ())),
        env=_env(env_vars, toolchain),
        python=choice.used if choice is not None else None,
        requirements=pkgs.requirements,
        requirements_paths=pkgs.requirements_paths,
        conda_env_paths=pkgs.conda_paths,
        source_commit=env_commit if (pkgs.requirements_paths or pkgs.conda_paths) else None,
        pip_packages=pkgs.pip_packages,
        shell_setup="; ".join(eval_commands) or None,
        cpus=nano_cpus / 1e9 if nano_cpus else None,
        toolchain=toolchain.name if toolchain is not None else None,
        validated_as_of=validated,
    )
    return RecipeResult(
        environment,
        test_command,
        parser,
        timeout or A.DEFAULT_TEST_TIMEOUT_SEC,
        harness_parser,
        choice,
        (*pkgs.notes, *tool_notes),
        toolchain,
    )


def _validated_as_of(config: Mapping[str, Any], task: str, field: str) -> str | None:
    """The recipe's `validated_as_of` as a UTC stamp (a date or a time; None when absent)."""
    value = config.get("validated_as_of")
    if value is None:
        return None
    try:
        return as_stamp(value.isoformat() if hasattr(value, "isoformat") else str(value))
    except ValueError:
        raise RowError(
            task, f"{field}.validated_as_of", f"not a date such as 2024-08-13: {value!r}"
        ) from None


def frozen_pins(text: str) -> str:
    """A `pip freeze` as an installable pin set: lines naming the repository itself (editable
    or local installs, which `install` makes) are dropped.
    """
    kept = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-e ", "--editable")):
            continue
        if " @ file:" in stripped or stripped.startswith("file:"):
            continue
        kept.append(stripped)
    return "\n".join(kept) + "\n"
