"""Why an agent image did not build, in the terms of the environment it was made from.

A failed build's log (the legacy builder prints `Step N/M : INSTRUCTION` before each step) is
read back against the task's Environment: which step failed (the interpreter, a Debian
package, a requirements file and the spec key it came from, `pip_packages`, `pre_install[i]`,
`install[i]`), which package pip or apt could not install, and the last lines of that step's
output. Pure: log text in, one sentence out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packager import assumptions as A
from packager.images.wheelhouse import HELPER
from packager.models.spec import Environment

_STEP = re.compile(r"^Step \d+/\d+ : (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BUILDER_NOISE = re.compile(r"^( ---> |Removing intermediate container|Successfully )")
_PROGRESS = re.compile(r"━|\beta \d|^\s*(Collecting|Downloading|Using cached|Obtaining) ")
"""pip's progress lines: never why a step failed."""
_PACKAGE_PATTERNS = (
    re.compile(r"No matching distribution found for ([^\s;]+)"),
    re.compile(r"Could not find a version that satisfies the requirement ([^\s;]+)"),
    re.compile(r"Failed building wheel for ([^\s;]+)"),
    re.compile(
        r"Failed to build installable wheels for some pyproject\.toml based projects \(([^)]+)\)"
    ),
    re.compile(r"Failed to build (?!installable wheels)([^\s;]+)"),
    re.compile(r"Unable to locate package ([^\s;]+)"),
    re.compile(r"Package '?([^\s']+)'? has no installation candidate"),
)
TAIL_LINES = 6
_UNTRUSTED = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|problem confirming the ssl certificate"
    r"|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT|unable to get local issuer certificate",
    re.IGNORECASE,
)
"""A package index (pip, npm, apt over https) whose TLS certificate the build does not trust."""
CA_HINT = (
    "the package index's TLS certificate is not trusted inside the build: pass --ca-bundle "
    "with the CA bundle this host trusts (the one its pip uses)"
)


@dataclass(frozen=True)
class Failure:
    """The failed step of an agent build."""

    step: str
    """`pre_install[0]`, `pip_packages`, `packages (requirements.txt: tests/requirements.txt)`…"""
    package: str | None
    """The package pip or apt could not install, when the log names one."""
    tail: tuple[str, ...]
    """The last lines that step printed."""
    untrusted: bool = False
    """The step's downloads failed on a TLS certificate the build does not trust."""

    def sentence(self) -> str:
        """One line for a task's reason."""
        text = f"the environment's {self.step} step failed"
        if self.package:
            text += f": package {self.package} could not be installed"
        if self.untrusted:
            text += f" ({CA_HINT})"
        if self.tail:
            text += "; last lines: " + " | ".join(self.tail)
        return text


def requirements_step(name: str) -> str:
    """The spec key a requirements file of the agent context was written from."""
    if name == A.CONDA_PACKAGES_FILE:
        return "packages (the conda package list, as pip requirements)"
    if name == "requirements.frozen.txt":
        return "requirements (the row's pip freeze)"
    path = name.replace("__", "/")
    if path.endswith(".yml.txt") or path.endswith(".yaml.txt"):
        return f"packages (environment.yml: {path.removesuffix('.txt')}, as pip requirements)"
    return f"packages (requirements.txt: {path})"


def _step_name(instruction: str, env: Environment) -> str:
    """The environment key a Dockerfile instruction was written from."""
    command = instruction[4:].strip() if instruction.upper().startswith("RUN ") else instruction
    for i, pre in enumerate(env.pre_install):
        if command == pre.strip():
            return f"pre_install[{i}]"
    for i, step in enumerate(env.install):
        if command == step.strip():
            return f"install[{i}]"
    pip = "pip install" in command or HELPER in command  # the wheelhouse's pip helper
    match = re.search(r"/tmp/packager-requirements/(\S+)", command)
    if match and pip:
        return requirements_step(match.group(1).strip("'\""))
    if pip and env.pip_packages:
        return "pip_packages"
    if "apt-get install" in command and env.packages and all(p in command for p in env.packages):
        return "apt-pkgs (Debian packages)"
    if "-m venv" in command or "python3-venv" in command:
        return f"python {env.python or ''}".strip()
    if instruction.upper().startswith(("ADD REPO.TAR", "COPY")):
        return "snapshot"
    return f"`{instruction[:120]}`"


def explain(log_text: str, env: Environment) -> Failure | None:
    """The failed step of a build log, or None when the log shows no step."""
    lines = _ANSI.sub("", log_text).splitlines()
    start = None
    for i, line in enumerate(lines):
        if _STEP.match(line):
            start = i
    if start is None:
        return None
    match = _STEP.match(lines[start])
    assert match is not None
    output = [
        line.rstrip()
        for line in lines[start + 1 :]
        if line.strip()
        and not _BUILDER_NOISE.match(line)
        and not _PROGRESS.search(line)
        and not line.startswith("ERROR: The")
    ]
    package = None
    for line in output:
        for pattern in _PACKAGE_PATTERNS:
            found = pattern.search(line)
            if found:
                package = found.group(1).rstrip(".,:")
    tail = tuple(line[:200] for line in output[-TAIL_LINES:])
    untrusted = any(_UNTRUSTED.search(line) for line in output)
    return Failure(_step_name(match.group(1), env), package, tail, untrusted)
