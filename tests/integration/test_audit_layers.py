"""Audit by layer, on the real engine: a layer shared by two tasks' images is read once (its
index kept in the machine cache) and still judged against each task's own secrets.

Images: `env` (debian:bookworm-slim plus one layer holding task B's hidden test and a copy of
its fixed file) and, FROM it, each task's snapshot (a tiny repository at /testbed). Task A's
secrets differ, so its audit is clean and indexes the shared layer; task B's audit reuses that
index (the layer is not read again) and finds both of B's leaks in it. Every image carries a
per-session `packager.task` label; the fixture removes them and asserts none is left.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from packager.checks.audit import audit_image, index
from packager.checks.audit import image as audit_image_module
from packager.images import build
from packager.models.spec import Grading, Provenance, Repo, TaskSpec
from packager.render import naming

pytestmark = pytest.mark.docker

SESSION = uuid.uuid4().hex[:10]
TEST_LABEL = f"audit-layers-test/{SESSION}"

B_FIXED = (
    '"""Totals."""\n\n\n'
    "def total_with_discount(prices: list[float], discount_rate: float) -> float:\n"
    '    """The sum of the prices, less the discount."""\n'
    "    undiscounted_sum = sum(prices)\n"
    "    return round(undiscounted_sum * (1.0 - discount_rate), 2)\n"
)
B_HIDDEN = (
    b"from shop.totals import total_with_discount\n\n\n"
    b"def test_total_with_discount_rounds_to_cents() -> None:\n"
    b"    assert total_with_discount([10.0, 5.555], 0.1) == 14.0\n"
)


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@x",
    }
    out = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return out.stdout.decode().strip()


def _repo(root: Path, files: dict[str, str]) -> str:
    """A snapshot-like repository (one commit, no reflogs, packed): its base commit."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    _git(root, "gc", "-q", "--prune=now")
    subprocess.run(["rm", "-rf", str(root / ".git" / "logs")], check=True)
    return _git(root, "rev-parse", "HEAD")


def _diff(root: Path, rel: str, new: str) -> str:
    """The patch that turns `rel` into `new` (the working tree is left as it was)."""
    old = (root / rel).read_text()
    (root / rel).write_text(new)
    patch = _git(root, "diff") + "\n"
    (root / rel).write_text(old)
    return patch


def _spec(name: str, base: str, gold: str, hidden: dict[str, bytes]) -> TaskSpec:
    return TaskSpec(
        provenance=Provenance(
            dataset="t", split="test", schema_name="swebench", instance_id=name, slug=name
        ),
        instruction="fix it",
        repo=Repo(name=f"o/{name}", base_commit=base),
        gold_patch=gold,
        grading=Grading(rule="all_pass", fail_to_pass=("t",), hidden_files=hidden),
    )


class Images:
    """Builds the test's images from folders; removes all of them at the end."""

    def __init__(self, client: Any, root: Path) -> None:
        self.client, self.root, self.tags = client, root, []

    def build(self, name: str, dockerfile: str) -> str:
        tag = f"packager/audit-layers-test:{name}-{SESSION}"
        ctx = self.root / name
        (ctx / "Dockerfile").write_text(dockerfile)
        self.tags.append(tag)
        build.build_image(
            self.client,
            task=TEST_LABEL,
            role=name,
            context=ctx,
            tag=tag,
            log_path=self.root / f"{name}.log",
            timeout_sec=600,
        )
        return tag

    def cleanup(self) -> list[str]:
        for tag in reversed(self.tags):
            try:
                self.client.images.remove(tag, force=True)
            except Exception:  # noqa: BLE001 - a failed build left no image
                pass
        label = f"{naming.LABEL_TASK}={TEST_LABEL}"
        self.client.images.prune(filters={"dangling": True, "label": label})
        return [
            str(i.tags or i.id) for i in self.client.images.list(all=True, filters={"label": label})
        ]


@pytest.fixture()
def images(docker_client: Any, tmp_path: Path) -> Iterator[Images]:
    made = Images(docker_client, tmp_path / "contexts")
    yield made
    assert made.cleanup() == []


def test_shared_layer_indexed_for_a_is_caught_for_b(
    images: Images, docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    a_ctx, b_ctx, env_ctx = (images.root / n for n in ("a", "b", "env"))
    a_base = _repo(a_ctx / "repo", {"greet/hello.py": 'def hello() -> str:\n    return "hi"\n'})
    a_gold = _diff(
        a_ctx / "repo",
        "greet/hello.py",
        'def hello() -> str:\n    return "hello there, general kenobi, nice to see you"\n',
    )
    b_old = '"""Totals."""\n\n\ndef total(prices: list[float]) -> float:\n    return sum(prices)\n'
    b_base = _repo(b_ctx / "repo", {"shop/totals.py": b_old})
    b_gold = _diff(b_ctx / "repo", "shop/totals.py", B_FIXED)
    hidden = "tests/test_totals_hidden.py"
    spec_a = _spec(
        "a-1", a_base, a_gold, {"tests/test_hello.py": b"def test_hello_says_hi(): ...\n"}
    )
    spec_b = _spec("b-1", b_base, b_gold, {hidden: B_HIDDEN})

    # The environment layer: B's hidden test byte for byte, and B's fixed file inside a
    # vendored copy of the library (found by its lines: it is not an exact copy).
    (env_ctx / "share").mkdir(parents=True)
    (env_ctx / "share" / "test_totals_hidden.py").write_bytes(B_HIDDEN)
    (env_ctx / "share" / "vendored.py").write_text("# vendored\n" + B_FIXED + "# end\n")
    env = images.build("env", "FROM debian:bookworm-slim\nCOPY share/ /opt/env/share/\n")
    tag_a = images.build("a", f"FROM {env}\nCOPY repo/ /testbed/\n")
    tag_b = images.build("b", f"FROM {env}\nCOPY repo/ /testbed/\n")
    env_layer = docker_client.images.get(env).attrs["RootFS"]["Layers"][-1]
    assert env_layer in docker_client.images.get(tag_b).attrs["RootFS"]["Layers"]

    first = audit_image(docker_client, tag_a, spec_a)
    assert first.clean, first.to_json()
    assert first.stats["layers_read"] == first.stats["layers"] == 3
    assert first.stats["layers_indexed_before"] == 0
    kept = index.index_dir(index.index_root(), env_layer) / "meta.json"
    assert kept.is_file()
    stamp = kept.stat()

    second = audit_image(docker_client, tag_b, spec_b)
    # The shared layers (base and environment) came from the cache: only B's snapshot was read.
    assert second.stats["layers_indexed_before"] == 2 and second.stats["layers_read"] == 1
    assert (kept.stat().st_ino, kept.stat().st_mtime_ns) == (stamp.st_ino, stamp.st_mtime_ns)
    assert not second.clean
    found = {(f.kind, f.path) for f in second.findings}
    assert found == {
        ("hidden_test", "/opt/env/share/test_totals_hidden.py"),
        ("gold_patch", "/opt/env/share/vendored.py"),
    }, second.to_json()
    assert all(f.layer == env_layer for f in second.findings)

    # The same verdict from `docker save` with an empty cache (the path without the store).
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache-saved"))
    monkeypatch.setattr(audit_image_module, "open_local_store", lambda client: None)
    saved = audit_image(docker_client, tag_b, spec_b)
    assert saved.stats["layers_read"] == 3 and saved.stats["layers_indexed_before"] == 0
    assert {(f.kind, f.path, f.layer) for f in saved.findings} == {
        (f.kind, f.path, f.layer) for f in second.findings
    }
