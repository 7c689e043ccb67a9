"""Servers the end-to-end tests and benchmarks start on loopback and stop again: a container
registry (Debian's docker-registry). Plain functions, so benchmarks use them without pytest.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REGISTRY_FIX = "make registry (Debian: docker-registry)"


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceError(RuntimeError):
    """A service could not be started (the message says why and how to fix it)."""


def start_registry(root: Path) -> tuple[str, Callable[[], None]]:
    """A registry on loopback storing under `root`; returns HOST:PORT and its stop function."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        raise ServiceError(f"no registry binary. Fix: {REGISTRY_FIX}")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (root / "registry.log").open("wb")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)

    def stop() -> None:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()

    for _ in range(100):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1):
                return f"127.0.0.1:{port}", stop
        except OSError:
            time.sleep(0.1)
    stop()
    raise ServiceError(f"the registry did not start: {(root / 'registry.log').read_text()}")
