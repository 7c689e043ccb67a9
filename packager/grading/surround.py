"""What the grading runtime sets up around the test command: the stand-in services a row's
tests call (served on loopback for the command's lifetime), the unroutable addresses they
expect no answer from (routed nowhere), and the refresh of the environment's install step when
the gold patch declares dependencies.

Standard library only, Python >= 3.9; a sibling of grade.py in the grading zipapp.
"""

from __future__ import annotations

import glob
import ipaddress
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

if TYPE_CHECKING:
    from . import processes
elif __package__:
    from . import processes
else:  # run as a script or from the zipapp: sys.path[0] holds the siblings
    import processes

REFRESH_OUTPUT = "refresh-output.txt"
REFRESH_TIMEOUT_SEC = 900.0

SERVICE_WAIT = (
    "import socket, sys, time\n"
    "for _ in range(600):\n"
    "    try:\n"
    "        socket.create_connection(('127.0.0.1', {port}), 1).close()\n"
    "        sys.exit(0)\n"
    "    except OSError:\n"
    "        time.sleep(0.1)\n"
    "sys.exit(1)\n"
)


def with_services(plan: Mapping[str, Any], command: str, out_dir: Path) -> str:
    """The test command, after the plan's stand-in services are started in its own process
    group (so they end with it) and their ports answer (up to 60 s each); their output goes to
    ``service-<name>.txt``.
    """
    services = plan.get("services") or []
    if not isinstance(services, list):
        raise ValueError("plan: services must be a list")
    steps = []
    for service in services:
        name, port = str(service["name"]), int(service["port"])
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"plan: bad service name {name!r}")
        log = shlex.quote(str(out_dir / f"service-{name}.txt"))
        python = shlex.quote(str(service["python"]))
        wait = shlex.quote(SERVICE_WAIT.format(port=port))
        steps.append(f"{{ {service['command']} ; }} >{log} 2>&1 &")
        steps.append(
            f"{python} -c {wait} || echo 'grading: stand-in service {name} did not answer on "
            f"port {port}' >&2"
        )
    return "\n".join([*steps, command]) if steps else command


# rtnetlink (linux/netlink.h, linux/rtnetlink.h): one RTM_NEWROUTE per address.
RTM_NEWROUTE = 24
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_LINK, RTN_UNICAST = 254, 4, 253, 1
RTA_DST, RTA_OIF = 1, 4


def _attribute(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * (-length % 4)


def route_message(address: str, ifindex: int, seq: int = 1) -> bytes:
    """The netlink request that routes ``address``/32 into interface ``ifindex`` (loopback):
    a connect to it then waits for an answer that never comes, as on a network where nothing
    answers, instead of failing at once with "network unreachable" as a grader without a
    network does.
    """
    dst = ipaddress.IPv4Address(address).packed
    body = struct.pack(
        "=BBBBBBBBI", socket.AF_INET, 32, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_LINK,
        RTN_UNICAST, 0,
    )  # fmt: skip
    body += _attribute(RTA_DST, dst) + _attribute(RTA_OIF, struct.pack("=I", ifindex))
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return struct.pack("=IHHII", 16 + len(body), RTM_NEWROUTE, flags, seq, 0) + body


def route_nowhere(plan: Mapping[str, Any]) -> Dict[str, Any]:
    """Route the plan's ``unroutable`` addresses into loopback (needs CAP_NET_ADMIN, which the
    engine grants a grader of such a task): ``{"routed": [...], "failed": {address: why}}``.
    A failure is recorded, not raised: the tests then meet the offline network as before.
    """
    addresses = plan.get("unroutable") or []
    if not isinstance(addresses, list):
        raise ValueError("plan: unroutable must be a list")
    done: Dict[str, Any] = {"routed": [], "failed": {}}
    if not addresses:
        return done
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    except (OSError, AttributeError) as exc:
        done["failed"] = {str(a): f"no netlink socket: {exc}" for a in addresses}
        return done
    with sock:
        sock.bind((0, 0))
        sock.settimeout(5)
        for seq, address in enumerate(addresses, 1):
            try:
                sock.send(route_message(str(address), socket.if_nametoindex("lo"), seq))
                reply = sock.recv(4096)
                kind = struct.unpack_from("=H", reply, 4)[0]
                code = struct.unpack_from("=i", reply, 16)[0] if kind == NLMSG_ERROR else 0
            except (OSError, ValueError, struct.error) as exc:
                done["failed"][str(address)] = str(exc)
                continue
            if code in (0, -17):  # routed, or routed already (EEXIST)
                done["routed"].append(str(address))
            else:
                done["failed"][str(address)] = os.strerror(-code)
    return done


def _pip_wheel(wheels: str, repo: Path, env: Dict[str, str]) -> Optional[str]:
    """A pip wheel of the refresh wheels when the environment's ``python`` has no pip (an
    image whose pip was taken out because it vendors the package under test: the HUD image,
    which the agent shares); pip runs from a wheel on ``PYTHONPATH``. None otherwise.
    """
    found = sorted(glob.glob(os.path.join(wheels, "pip-*.whl"))) if wheels else []
    python = shutil.which("python", path=env.get("PATH"))
    if not found or python is None:
        return None
    try:
        probe = subprocess.run(
            [python, "-c", "import pip"],
            cwd=str(repo),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return None if probe.returncode == 0 else found[-1]


def refresh(
    plan: Mapping[str, Any], repo: Path, out_dir: Path, timeout: float, env: Dict[str, str]
) -> Optional[Dict[str, Any]]:
    """The gold patch declares dependencies: re-run the environment's install step on the
    candidate's tree, offline, from the wheels the grader image holds (as the harness re-runs
    it with the network), so a candidate that declares the same dependency gets it. Returns
    its exit code and whether it timed out (None when the plan has no refresh); the tests
    decide (a failed install shows as failing tests).
    """
    spec = plan.get("refresh")
    if not spec:
        return None
    if not isinstance(spec, dict) or not spec.get("command"):
        raise ValueError("plan: refresh needs a command")
    wheels = str(spec.get("wheels") or "")
    env = {
        **env,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": wheels,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    pip_wheel = _pip_wheel(wheels, repo, env)
    if pip_wheel is not None:
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = pip_wheel + (os.pathsep + path if path else "")
    code, timed_out, _ = processes.run_logged(
        str(spec["command"]),
        repo,
        env,
        min(timeout, REFRESH_TIMEOUT_SEC),
        out_dir / REFRESH_OUTPUT,
    )
    return {"exit_code": code, "timed_out": timed_out}
