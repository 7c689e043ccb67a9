"""Status decisions and image caching, with a fake Docker client (no engine needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker.errors
import pytest

from packager.engines.verdict import decide_status
from packager.errors import BuildError
from packager.images.build import build_image
from packager.models.spec import RunResult


def _run(kind: str, reward: float | None, status: str = "graded") -> RunResult:
    return RunResult(kind=kind, reward=reward, grade_status=status, duration_sec=1.0, log_dir="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("oracle", "nop", "expected_nop", "status"),
    [
        ([1.0, 1.0], 0.0, None, "verified"),
        ([1.0, 1.0], 0.2, 0.2, "verified"),
        ([1.0, 1.0], 0.3, 0.2, "nop_mismatch"),
        ([0.0, 0.0], 0.0, None, "gold_failed"),
        ([1.0, 0.0], 0.0, None, "flaky"),
        ([1.0, 1.0], 1.0, None, "nop_solved"),
        ([1.0, None], 0.0, None, "infra_error"),
    ],
)
def test_decide_status(
    oracle: list[float | None], nop: float, expected_nop: float | None, status: str
) -> None:
    runs = [_run("oracle", r, "graded" if r is not None else "infra_error") for r in oracle]
    got, reason = decide_status(runs, _run("nop", nop), expected_nop)
    assert got == status
    assert (reason is None) == (status == "verified")


def test_judge_rule_needs_judge() -> None:
    got, _ = decide_status(
        [_run("oracle", 0.0, "needs_judge")], _run("nop", 0.0, "needs_judge"), None
    )
    assert got == "needs_judge"


class FakeImages:
    def __init__(self, present: set[str]) -> None:
        self.present = present

    def get(self, tag: str) -> object:
        if tag not in self.present:
            raise docker.errors.ImageNotFound(tag)
        return object()


class FakeAPI:
    def __init__(self, images: FakeImages, chunks: list[dict[str, str]], produce: bool) -> None:
        self.images, self.chunks, self.produce, self.calls = images, chunks, produce, 0

    def build(self, **kwargs: Any) -> Any:
        self.calls += 1
        yield from self.chunks
        if self.produce:
            self.images.present.add(kwargs["tag"])


class FakeClient:
    def __init__(
        self, present: set[str], chunks: list[dict[str, str]], produce: bool = True
    ) -> None:
        self.images = FakeImages(present)
        self.api = FakeAPI(self.images, chunks, produce)
        self.containers = None

    def ping(self) -> bool:
        return True


def test_existing_image_is_not_rebuilt(tmp_path: Path) -> None:
    client = FakeClient({"t:1"}, [])
    outcome = build_image(
        client,
        task="x",
        role="agent",
        context=tmp_path,
        tag="t:1",
        log_path=tmp_path / "b.log",
        timeout_sec=5,
    )
    assert not outcome.built and client.api.calls == 0


def test_build_logs_and_failure(tmp_path: Path) -> None:
    ok = FakeClient(set(), [{"stream": "Step 1/1\n"}])
    outcome = build_image(
        ok,
        task="x",
        role="agent",
        context=tmp_path,
        tag="t:2",
        log_path=tmp_path / "ok.log",
        timeout_sec=5,
    )
    assert outcome.built and "Step 1/1" in (tmp_path / "ok.log").read_text()
    bad = FakeClient(
        set(), [{"stream": "Step 1/1\n"}, {"error": "RUN false returned 1"}], produce=False
    )
    with pytest.raises(BuildError) as err:
        build_image(
            bad,
            task="x",
            role="agent",
            context=tmp_path,
            tag="t:3",
            log_path=tmp_path / "bad.log",
            timeout_sec=5,
        )
    assert err.value.log_path == tmp_path / "bad.log" and "returned 1" in err.value.reason


def test_the_grader_gate_never_touches_its_own_file() -> None:
    # The engine creates the gate member, then sets its owner and times: a gate that removed or
    # moved it in between failed the whole put_archive (lchown: no such file; scale test, CI).
    from packager.engines.containers import GATE_MEMBER, GATE_SCRIPT, PATCH_MEMBER

    commands = [part.strip() for part in GATE_SCRIPT.split(";")]
    handing = f"exec bash /tests/test.sh --after /{GATE_MEMBER}"
    touching = [c for c in commands if GATE_MEMBER in c and c != handing]
    assert touching == [], touching
    # The runtime waits for the gate (grading.grade.wait_for only looks at it).
    assert GATE_SCRIPT.rstrip().endswith(handing)
    assert PATCH_MEMBER < GATE_MEMBER  # the tar puts the patch first: complete when the gate opens
