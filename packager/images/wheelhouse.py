"""The machine's wheelhouse: wheels that image builds downloaded or built, kept once per machine
(under the machine cache) and served to later builds, so a cold environment build of packages
seen before downloads and compiles nothing.

The engine here builds with the classic builder (docker-py has no BuildKit client, so no cache
mounts): a build's containers reach the wheelhouse over HTTP, served by this process on the
engine's bridge gateway for as long as the run that started it (the run context's service,
`packager.context`; a Ray worker's job has its own). The build learns the server's address
only from an `/etc/hosts` entry of its containers (`extra_hosts`,
`p<port>-<token>.packager-wheelhouse.invalid`), which is in no
layer, no history and no build-cache key: the Dockerfile, the tags and the layers are the same
with the wheelhouse, without it, full or empty. The agent Dockerfile's pip steps go through
`packager-pip.py` (templates/harbor/environment), which installs from the wheelhouse alone
first, then builds what is missing (from the index) and uploads those wheels.

Responsible for: the folder (one subfolder per interpreter and platform key the helper
computes), the server (a random token in every path, so containers not started by a build of
this process can neither read nor write; uploads land atomically, and a name stored once is
never replaced), the build's host entry.
Must not: name an index (pip inside the build uses the image's own configuration), put a wheel
into a build context, or fail a build when the wheelhouse cannot be served (no entry, then).
Set PACKAGER_WHEELHOUSE=0 to build without it.
"""

from __future__ import annotations

import html
import ipaddress
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

from packager.images.timemachine import TimeMachine
from packager.storage import WHEELHOUSE

if TYPE_CHECKING:
    from packager.context import RunContext
    from packager.images.build import DockerClient

LOG = logging.getLogger(__name__)

HOST_SUFFIX = ".packager-wheelhouse.invalid"
"""The build containers' host name of the wheelhouse ends so (`.invalid` never resolves
elsewhere, so a build without the entry falls back at once)."""
HELPER = "packager-pip.py"
"""The pip helper's name in the agent context (templates/harbor/environment)."""
DROPPED = "packager-pip: dropped "
"""How the helper's build output says it dropped a requirement pip cannot install
(`--drop-unavailable`): `<prefix><requirement> from <file>: ...`."""
MAX_WHEEL_BYTES = 2 * 1024**3
_KEY = re.compile(r"[0-9a-f]{16}")
_WHEEL = re.compile(r"[A-Za-z0-9_.+!-]+\.whl")
_COMPILED = re.compile(r"[0-9a-f]{32}\.pycs")
"""A bundle of the byte code the helper compiled for one installed distribution's modules
(named by a hash of their sources and where they are installed; never on the links page)."""


def wheelhouse_root() -> Path:
    """Where this machine keeps the wheels builds made: `<cache>/wheelhouse/<platform key>/`."""
    return WHEELHOUSE.path()


def enabled() -> bool:
    """Whether builds use the wheelhouse (PACKAGER_WHEELHOUSE=0 turns it off)."""
    return os.environ.get("PACKAGER_WHEELHOUSE", "1").strip().lower() not in ("0", "false", "no")


class _Handler(BaseHTTPRequestHandler):
    """GET /<token>/<key>/ (a links page), GET and PUT /<token>/<key>/<name>.whl and
    /<token>/<key>/<hash>.pycs.
    """

    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        LOG.debug("wheelhouse %s: " + format, self.client_address[0], *args)

    def _target(self) -> tuple[Path, str | None] | None:
        parts = self.path.split("?", 1)[0].split("/")
        if len(parts) != 4 or parts[0] or not secrets.compare_digest(parts[1], self.server.token):
            return None
        name = parts[3]
        if not _KEY.fullmatch(parts[2]) or not (
            name == "" or _WHEEL.fullmatch(name) or _COMPILED.fullmatch(name)
        ):
            return None
        return self.server.root / parts[2], parts[3] or None

    def _reply(self, code: int, body: bytes = b"", kind: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        parts = self.path.split("?", 1)[0].split("/")
        if (
            len(parts) > 3
            and parts[2] == "asof"
            and not parts[0]
            and secrets.compare_digest(parts[1], self.server.token)
        ):
            try:
                if self.server.time_machine().handle(parts[2:], self):
                    return None
            except Exception as exc:  # noqa: BLE001 - the index unreachable: the build says
                LOG.info("time machine: %s: %s", self.path, exc)
                return self._reply(502, str(exc).encode())
            return self._reply(404)
        target = self._target()
        if target is None:
            return self._reply(404)
        folder, name = target
        if name is None:
            wheels = sorted(p.name for p in folder.glob("*.whl")) if folder.is_dir() else []
            links = "".join(f'<a href="{html.escape(w)}">{html.escape(w)}</a>\n' for w in wheels)
            return self._reply(200, f"<html><body>\n{links}</body></html>\n".encode(), "text/html")
        path = folder / name
        if not path.is_file():
            return self._reply(404)
        with path.open("rb") as handle:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(os.fstat(handle.fileno()).st_size))
            self.end_headers()
            if self.command != "HEAD":
                shutil.copyfileobj(handle, self.wfile)

    do_HEAD = do_GET

    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        """Store an upload under a name not stored yet; a name stored already is kept as it
        was first uploaded (409), even when two uploads race: a later build step (which may
        run any repository's setup code) cannot replace a wheel or byte code that other
        builds install.
        """
        target = self._target()
        size = int(self.headers.get("Content-Length") or -1)
        if target is None or target[1] is None or not 0 < size <= MAX_WHEEL_BYTES:
            return self._reply(403)
        folder, name = target
        if (folder / str(name)).exists():
            while size > 0:  # read it all: an unread upload would reset the connection
                chunk = self.rfile.read(min(size, 1 << 20))
                if not chunk:
                    break
                size -= len(chunk)
            return self._reply(409)
        folder.mkdir(parents=True, exist_ok=True)
        # Written aside, then linked in: a reader never sees half a wheel (names starting with
        # a dot are no wheel to the links page).
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".up-", delete=False) as handle:
            remaining = size
            while remaining:
                chunk = self.rfile.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                handle.write(chunk)
                remaining -= len(chunk)
        try:
            if remaining:
                return self._reply(400)
            os.link(handle.name, folder / str(name))  # fails when the name exists: atomic
        except FileExistsError:
            return self._reply(409)
        finally:
            os.unlink(handle.name)
        self._reply(201)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], root: Path) -> None:
        super().__init__(address, _Handler)
        self.root = root
        self.token = secrets.token_hex(16)
        self._time_machine: TimeMachine | None = None
        self._machine_guard = threading.Lock()

    def time_machine(self) -> TimeMachine:
        """The index as of a date (made on first use: it reads the host's pip settings)."""
        with self._machine_guard:
            if self._time_machine is None:
                self._time_machine = TimeMachine()
            return self._time_machine

    def close(self) -> None:
        """Stop serving (the run that started it is over)."""
        self.shutdown()
        self.server_close()


def bridge_gateway(client: DockerClient) -> str | None:
    """The engine's default bridge gateway: the host address a build's containers reach.

    An engine may list the bridge's subnet without its gateway (Debian's docker.io 20.10 on a
    fresh host: ``{"Subnet": "172.17.0.0/16"}``); the gateway is then the subnet's first host
    address, which is what the engine gives its bridge interface.
    """
    try:
        network = client.networks.get("bridge")  # type: ignore[attr-defined]
        configs = network.attrs.get("IPAM", {}).get("Config") or []
        for config in configs:
            if config.get("Gateway"):
                return str(config["Gateway"])
        for config in configs:
            subnet = ipaddress.ip_network(str(config.get("Subnet") or ""), strict=False)
            if subnet.version == 4 and subnet.num_addresses > 2:
                return str(subnet.network_address + 1)
    except Exception as exc:  # noqa: BLE001 - no bridge, a remote engine, an old API
        LOG.info("no wheelhouse: the engine's bridge network is unknown (%s)", exc)
    return None


def _start(client: DockerClient, root: Path | None) -> _Server | None:
    """A wheelhouse server on the engine's bridge gateway, serving in a thread of its own; None
    when there can be none (no bridge gateway on this host, e.g. a remote engine, or the
    wheelhouse turned off).
    """
    if not enabled():
        return None
    gateway = bridge_gateway(client)
    if gateway is None:
        return None
    try:
        server = _Server((gateway, 0), root or wheelhouse_root())
    except OSError as exc:  # not this host's address: a remote engine
        LOG.info("no wheelhouse: cannot serve it on the bridge gateway (%s)", exc)
        return None
    server.root.mkdir(parents=True, exist_ok=True)
    threading.Thread(target=server.serve_forever, name="wheelhouse", daemon=True).start()
    return server


def serve(client: DockerClient, run: RunContext, root: Path | None = None) -> _Server | None:
    """The run's wheelhouse server (started on its first build that may use it, stopped when
    the run closes its context); None when there can be none (`_start`).
    """
    server: _Server | None = run.service("wheelhouse", lambda: _start(client, root))
    return server


def build_hosts(client: DockerClient, run: RunContext) -> dict[str, str]:
    """The `extra_hosts` of a build whose pip steps may use the wheelhouse ({} without one)."""
    server = serve(client, run)
    if server is None:
        return {}
    host, port = server.server_address[:2]
    return {f"p{port}-{server.token}{HOST_SUFFIX}": str(host)}
