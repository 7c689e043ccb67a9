"""An unroutable address in a real grader container (the engine's own container helper): with
NET_ADMIN, which the engine grants a grader of such a task, the runtime routes it into loopback
and a connect waits until its timeout, as on a real network; without it the route is refused,
recorded, and the connect fails at once, as offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from packager.context import RunContext
from packager.engines import containers
from packager.grading import surround
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker]

TASK = "samples__textkit-1"
PROBE = """
import json, socket, sys, time
sys.path.insert(0, "/logs")
import surround
done = surround.route_nowhere({"unroutable": ["10.255.255.1"]})
s = socket.socket(); s.settimeout(1.0); started = time.monotonic()
try:
    s.connect(("10.255.255.1", 80)); outcome = "connected"
except socket.timeout:
    outcome = "timeout"
except OSError as exc:
    outcome = f"refused: {exc}"
print(json.dumps({"done": done, "outcome": outcome, "seconds": time.monotonic() - started}))
"""


@pytest.fixture(scope="module")
def grader_image(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> str:
    out = tmp_path_factory.mktemp("unroutable")
    proc = run_cli("build", TASK, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tags = [t for i in docker_client.images.list() for t in i.tags if f"{TASK}:grader-" in t]
    assert tags
    return str(tags[0])


@pytest.mark.parametrize("caps", [("NET_ADMIN",), ()])
def test_the_tarpit_waits_only_with_the_route(
    grader_image: str, docker_client: Any, tmp_path: Path, caps: tuple[str, ...]
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("surround.py", "processes.py"):
        shutil.copy(Path(surround.__file__).with_name(name), folder / name)
    command = ["python3", "-c", PROBE]
    with containers._container(
        docker_client, grader_image, TASK, "grader-probe", command, "/", False,
        folder=folder, cap_add=caps, run=RunContext(),
    ) as box:  # fmt: skip
        box.start()
        assert box.wait(timeout=60)["StatusCode"] == 0
        seen = json.loads(box.logs(stdout=True, stderr=False).decode().strip().splitlines()[-1])
    if caps:
        assert seen["done"] == {"routed": ["10.255.255.1"], "failed": {}}
        assert seen["outcome"] == "timeout" and seen["seconds"] >= 0.9
    else:
        assert seen["done"]["routed"] == [] and "10.255.255.1" in seen["done"]["failed"]
        assert seen["outcome"].startswith("refused") and seen["seconds"] < 0.5
