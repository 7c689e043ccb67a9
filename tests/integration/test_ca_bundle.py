"""`--ca-bundle`: builds trust an extra CA bundle (TLS-intercepting proxies)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, sample_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_build_with_extra_ca_bundle(tmp_path: Path, docker_client: Any) -> None:
    row = next(r for r in sample_rows() if r["instance_id"] == "samples__inventory-4")
    row["instance_id"] = "samples__inventory-ca"  # a distinct task, so its images are built here
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(row) + "\n")
    (tmp_path / "repos").symlink_to(ROOT / "packager" / "samples" / "repos")
    bundle = tmp_path / "proxy-ca.crt"
    bundle.write_bytes(Path("/etc/ssl/certs/ca-certificates.crt").read_bytes()[:4096])
    out = tmp_path / "out"
    proc = run_cli(
        "build",
        row["instance_id"],
        "--dataset",
        str(data),
        "--out",
        str(out),
        "--ca-bundle",
        str(bundle),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / "rows" / "results" / f"{row['instance_id']}.json").read_text())
    agent = result["images"]["agent"]
    try:
        # A digest, not the file: a container's last output line without a newline can be lost
        # when it is removed right after it exits.
        shown = docker_client.containers.run(
            agent, ["bash", "-c", "sha256sum < $PIP_CERT"], remove=True, network_mode="none"
        )
        assert shown.split()[0].decode() == hashlib.sha256(bundle.read_bytes()).hexdigest()
        # Verified with the same option, then a candidate graded on that task: the very images
        # verified, nothing built again (no build log written).
        verified = run_cli(
            "package", row["instance_id"], "--dataset", str(data), "--out", str(out),
            "--ca-bundle", str(bundle),
        )  # fmt: skip
        assert verified.returncode == 0, verified.stdout + verified.stderr
        logs = out / "rows" / "logs" / row["instance_id"]
        stamps = {p.name: p.stat().st_mtime_ns for p in logs.glob("*.log")}
        assert "build-grader.log" in stamps
        ids = {role: docker_client.images.get(tag).id for role, tag in result["images"].items()}
        gold = tmp_path / "gold.patch"
        gold.write_text(row["patch"])
        graded = run_cli(
            "verify", row["instance_id"], "--dataset", str(data), "--out", str(out),
            "--ca-bundle", str(bundle), "--patch", str(gold),
        )  # fmt: skip
        assert graded.returncode == 0, graded.stdout + graded.stderr
        verdict = json.loads(graded.stdout[graded.stdout.index("{") :])
        assert verdict["reward"] == 1.0 and verdict["status"] == "graded", verdict
        after = {role: docker_client.images.get(tag).id for role, tag in result["images"].items()}
        assert after == ids
        assert {p.name: p.stat().st_mtime_ns for p in logs.glob("*.log")} == stamps
    finally:
        for tag in result["images"].values():
            docker_client.images.remove(tag, force=True)
