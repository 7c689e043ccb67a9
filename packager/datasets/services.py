"""Stand-in services for rows whose tests call a well-known service (`services.yaml`, data).

A SWE-bench row of psf/requests before 2.9 fetches `http://httpbin.org/`; the harness grades it
with the network, an offline grader cannot. `httpbin` is a package, so the grader image carries
it and the grading runtime serves it on loopback for the test command (docs/datasets.md). Its
tests also expect a connect to 10.255.255.1 to hang: such addresses are `unroutable`, routed
nowhere by the grading runtime.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from importlib import resources
from typing import Any

import yaml

from packager.models.spec import SERVICES_ROOT, Service

SERVICES_FILE = "services.yaml"

_COMPARISON = re.compile(r"^\s*(<=|>=|==|!=|<|>)?\s*([0-9][0-9.]*)\s*$")


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files("packager.datasets").joinpath(SERVICES_FILE).read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def version_matches(version: str | None, rule: str) -> bool:
    """Whether a row's version satisfies every comparison of `rule` (`*`: any version)."""
    if rule.strip() == "*":
        return True
    if version is None or not re.fullmatch(r"[0-9][0-9.]*", version.strip()):
        return False
    have = _numbers(version)
    for part in rule.split(","):
        found = _COMPARISON.match(part)
        if found is None:
            raise ValueError(f"{SERVICES_FILE}: bad version comparison {part!r}")
        op, want = found.group(1) or "==", _numbers(found.group(2))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        ok = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
        if not ok[op]:
            return False
    return True


def services_for(repo: str, version: str | None) -> tuple[Service, ...]:
    """The stand-in services a row of `repo` at `version` gets (none for most rows)."""
    table = _table()
    names: list[str] = []
    for entry in table.get("repos", {}).get(repo, []):
        if version_matches(version, str(entry["versions"])):
            names += [n for n in entry.get("services") or () if n not in names]
    found = []
    for name in names:
        spec = table["services"][name]
        python = f"{SERVICES_ROOT}/{name}/bin/python"
        port = int(spec["port"])
        found.append(
            Service(
                name=name,
                packages=tuple(spec["packages"]),
                command=str(spec["command"]).format(python=python, port=port),
                python=python,
                port=port,
                env={str(k): str(v) for k, v in (spec.get("env") or {}).items()},
            )
        )
    return tuple(found)


def unroutable_for(repo: str, version: str | None) -> tuple[str, ...]:
    """The addresses a row of `repo` at `version` expects no answer from (none for most rows)."""
    found: list[str] = []
    for entry in _table().get("repos", {}).get(repo, []):
        if version_matches(version, str(entry["versions"])):
            for address in entry.get("unroutable") or ():
                text = str(ipaddress.IPv4Address(str(address)))  # ValueError names it
                if text not in found:
                    found.append(text)
    return tuple(found)
