"""Conda package lists and environment.yml files as pip requirements ("conda without conda").

The SWE-bench harness creates its environments with conda; its specs name conda packages (a
`packages` string handed to `conda create`, or an environment.yml). Images here have no conda:
each conda package becomes a pip requirement with the same name and pin where pip has it, or
the name in `CONDA_TO_PIP` where the two differ. Nothing is dropped silently: the interpreter
(`python`) and the installer (`pip`) are the only entries not turned into requirements, and each
conversion says what it did with them (`notes`). A package pip cannot install is dropped at
build time by the pip helper (`--drop-unavailable`) and recorded, or with `--strict-environment`
fails the build, whose failure names it and the spec key it came from
(`packager.images.failures`).
Pure: text in, requirement lines out.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

CONDA_TO_PIP = {
    "dask-core": "dask",
    "matplotlib-base": "matplotlib",
    "msgpack-python": "msgpack",
    "pytables": "tables",
    "python-graphviz": "graphviz",
    "pytorch": "torch",
    "iris": "scitools-iris",
    "pyqt": "PyQt5",
    "gitpython": "GitPython",
}
"""Conda-forge names whose PyPI distribution is named otherwise."""

SYSTEM_LIBRARIES = {
    "cfgrib": ("libeccodes-dev",),
    "eccodes": ("libeccodes-dev",),
    "python-eccodes": ("libeccodes-dev",),
}
"""Conda-forge packages whose PyPI distribution does not carry the C library conda ships with
them (cfgrib's bindings look for ecCodes at import), and the Debian packages that do. They are
installed before the requirements; without them the tests fail at collection ("Cannot find the
ecCodes library") rather than the build."""

NOT_REQUIREMENTS = {
    "python": "the interpreter: its version comes from the spec's `python` key",
    "pip": "the installer itself",
}
"""Conda entries that are not packages to install with pip, and why."""

_OPERATORS = ("==", ">=", "<=", "!=", "~=", ">", "<")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*(\[[A-Za-z0-9_,.\-]+\])?")


class CondaError(ValueError):
    """An entry that is neither a conda match spec nor a pip requirement."""


@dataclass(frozen=True)
class Converted:
    """Requirement lines for `pip install -r`, and what the conversion did besides."""

    requirements: tuple[str, ...]
    notes: tuple[str, ...] = ()
    system: tuple[str, ...] = ()
    """Debian packages the converted requirements need (SYSTEM_LIBRARIES)."""

    def text(self) -> str:
        """The requirements file."""
        return "".join(f"{line}\n" for line in self.requirements)


def pip_requirement(spec: str) -> str | None:
    """One conda match spec as a pip requirement (None: `python`/`pip`, not requirements).

    `name`, `name=1.2` (conda: any 1.2.x, so pip `==1.2.*`), `name=1.2.*`, `name==1.2`,
    `name>=1,<2`, `name 1.2` and `channel::name=1.2=build` (the build string names a conda
    build, which pip has no notion of; the version pin stays).
    """
    text = spec.strip()
    if "::" in text:
        text = text.split("::", 1)[1]
    match = _NAME.match(text)
    if match is None:
        raise CondaError(f"not a package spec: {spec!r}")
    name, rest = match.group(0), text[match.end() :].strip()
    if name.lower() in NOT_REQUIREMENTS:
        return None
    name = CONDA_TO_PIP.get(name.lower(), name)
    if not rest:
        return name
    if rest.startswith(_OPERATORS):
        return f"{name}{rest.replace(' ', '')}"
    if rest.startswith("="):
        rest = rest[1:]
    version = rest.replace(" ", "=").split("=", 1)[0]
    if not version:
        raise CondaError(f"no version after '=': {spec!r}")
    if version.endswith("*") or "," in version or version.startswith(_OPERATORS):
        return f"{name}{version if version.startswith(_OPERATORS) else '==' + version}"
    return f"{name}=={version}.*"


def from_package_list(packages: str) -> Converted:
    """A spec's `packages` string (what the harness hands to `conda create`, shell-quoted)."""
    try:
        words = shlex.split(packages)
    except ValueError as exc:
        raise CondaError(f"cannot split {packages!r}: {exc}") from exc
    return _convert(words, [])


def from_environment_yml(text: str) -> Converted:
    """An environment.yml: its conda dependencies converted, its `pip:` entries kept as they
    are (they are pip requirements already); channels and the env name have no meaning here.
    """
    import yaml

    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CondaError(f"not YAML: {exc}") from exc
    deps = data.get("dependencies") if isinstance(data, dict) else None
    if not isinstance(deps, list):
        raise CondaError("no `dependencies:` list")
    conda: list[str] = []
    pip: list[str] = []
    for entry in deps:
        if isinstance(entry, dict) and set(entry) == {"pip"} and isinstance(entry["pip"], list):
            pip.extend(str(line) for line in entry["pip"])
        elif isinstance(entry, str | int | float):
            conda.append(str(entry))
        else:
            raise CondaError(f"unexpected dependency entry {entry!r}")
    return _convert(conda, pip)


def _conda_name(spec: str) -> str:
    match = _NAME.match(spec.strip().split("::")[-1])
    return match.group(0).lower() if match else spec.strip()


def _convert(conda: list[str], pip: list[str]) -> Converted:
    lines: list[str] = []
    notes: list[str] = []
    system: list[str] = []
    for spec in conda:
        requirement = pip_requirement(spec)
        name = _conda_name(spec)
        if requirement is None:
            notes.append(f"{spec}: not installed with pip ({NOT_REQUIREMENTS[name]})")
            continue
        if name in CONDA_TO_PIP:
            notes.append(f"{spec}: installed as {requirement} (its name on the package index)")
        if name in SYSTEM_LIBRARIES:
            debs = SYSTEM_LIBRARIES[name]
            notes.append(f"{spec}: its C library from Debian ({', '.join(debs)})")
            system.extend(debs)
        lines.append(requirement)
    lines.extend(line.strip() for line in pip if line.strip())
    return Converted(tuple(lines), tuple(notes), tuple(dict.fromkeys(system)))
