"""Where the browser judge's model is (packager/judge/endpoint.py): the host's variables, their
form inside the grader container, and the replay server on real loopback HTTP.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from packager.adapters import Context, row_id, to_spec
from packager.errors import PackagerError
from packager.judge import endpoint
from packager.judge.endpoint import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    container_url,
    host_judge_env,
    judge_endpoint,
    judge_grader_env,
    missing_judge_env,
    replay_files,
)
from packager.models.spec import TaskSpec
from tests.conftest import sample_rows

TODO = "samples__todo-web-5"  # sweeper: rule judge
INTSET = "samples__intset-2"  # swe-rebench: rule all_pass


def sample_spec(task: str) -> TaskSpec:
    row = next(r for r in sample_rows() if row_id(r) == task)
    return to_spec(row, Context(dataset="cards", split="test"))


def renamed(spec: TaskSpec, instance_id: str) -> TaskSpec:
    provenance = spec.provenance.model_copy(update={"instance_id": instance_id})
    return spec.model_copy(update={"provenance": provenance})


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        return json.loads(response.read())


def chat(base_url: str, user_text: str) -> dict[str, Any]:
    """One chat-completions request; the agent output the server chose."""
    body = {"model": "replay", "messages": [{"role": "user", "content": user_text}]}
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        completion = json.loads(response.read())
    return dict(json.loads(completion["choices"][0]["message"]["content"]))


def refused(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return False
    except urllib.error.HTTPError:
        return False
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, ConnectionRefusedError)


@pytest.fixture
def no_judge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in endpoint.JUDGE_ENV:
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------------------ variables


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:8000/v1", "http://host.docker.internal:8000/v1"),
        ("http://127.0.0.1:11434/v1/", "http://host.docker.internal:11434/v1/"),
        ("https://localhost/v1?x=1", "https://host.docker.internal/v1?x=1"),
        ("http://0.0.0.0:9/", "http://host.docker.internal:9/"),
        ("http://[::1]:8080/v1", "http://host.docker.internal:8080/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://10.0.0.5:8000/v1", "http://10.0.0.5:8000/v1"),
        ("http://localhost.example.com:8000/v1", "http://localhost.example.com:8000/v1"),
    ],
)
def test_container_url(url: str, expected: str) -> None:
    assert container_url(url) == expected


def test_judge_grader_env_keeps_only_the_judge_variables() -> None:
    env = {
        ENV_BASE_URL: "http://localhost:8000/v1",
        ENV_MODEL: "qwen",
        ENV_API_KEY: "k",
        "PATH": "/usr/bin",
        "PACKAGER_OTHER": "x",
    }
    assert judge_grader_env(env) == (
        (ENV_API_KEY, "k"),
        (ENV_BASE_URL, "http://host.docker.internal:8000/v1"),
        (ENV_MODEL, "qwen"),
    )
    assert judge_grader_env({ENV_MODEL: "m"}) == ((ENV_MODEL, "m"),)
    assert judge_grader_env(None) == ()
    assert judge_grader_env({}) == ()


def test_missing_judge_env() -> None:
    assert missing_judge_env(None) == [ENV_BASE_URL, ENV_MODEL]
    assert missing_judge_env({ENV_API_KEY: "k", ENV_MODEL: " "}) == [ENV_BASE_URL, ENV_MODEL]
    assert missing_judge_env({ENV_BASE_URL: "http://x/v1"}) == [ENV_MODEL]
    assert missing_judge_env({ENV_BASE_URL: "http://x/v1", ENV_MODEL: "m"}) == []


def test_host_judge_env(monkeypatch: pytest.MonkeyPatch, no_judge_env: None) -> None:
    assert host_judge_env() == {}
    monkeypatch.setenv(ENV_BASE_URL, "http://localhost:8000/v1")
    monkeypatch.setenv(ENV_MODEL, "qwen")
    monkeypatch.setenv(ENV_API_KEY, "")  # set but empty: left out
    monkeypatch.setenv("PACKAGER_JUDGE_OTHER", "x")
    assert host_judge_env() == {ENV_BASE_URL: "http://localhost:8000/v1", ENV_MODEL: "qwen"}
    assert host_judge_env({ENV_API_KEY: "k", "PATH": "/bin"}) == {ENV_API_KEY: "k"}


# -------------------------------------------------------------------------------- endpoint


def test_replay_endpoint_serves_the_recorded_turns(no_judge_env: None) -> None:
    spec = sample_spec(TODO)
    assert spec.grading.rule == "judge"
    with judge_endpoint("replay", [spec, sample_spec(INTSET)]) as env:
        assert set(env) == {ENV_BASE_URL, ENV_MODEL, ENV_API_KEY}
        assert env[ENV_MODEL] == endpoint.REPLAY_MODEL
        base = env[ENV_BASE_URL]
        assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
        assert get_json(f"{base}/health") == {"status": "ok"}
        assert get_json(base.removesuffix("/v1") + "/health") == {"status": "ok"}
        models = get_json(f"{base}/models")
        assert [m["id"] for m in models["data"]] == ["replay-todo-web"]
        assert missing_judge_env(env) == []
        # Inside the grader container the replay server is the host's.
        grader = dict(judge_grader_env(env))
        assert grader[ENV_BASE_URL].startswith("http://host.docker.internal:")
    assert refused(f"{base}/health")  # stopped with the block


REPLAY = """\
model: {model}
conversations:
  - match: "{match}"
    steps:
      - response:
          action:
            - done: {{success: true, text: "{match} done"}}
"""


def test_replay_endpoint_merges_the_tasks_files(tmp_path: Path, no_judge_env: None) -> None:
    todo = sample_spec(TODO)
    specs = [renamed(todo, "t__first-1"), renamed(todo, "t__second-2")]
    (tmp_path / "t__first-1.yaml").write_text(REPLAY.format(model="one", match="first-flow"))
    (tmp_path / "t__second-2.yaml").write_text(REPLAY.format(model="two", match="second-flow"))
    assert replay_files(specs, tmp_path) == [
        tmp_path / "t__first-1.yaml",
        tmp_path / "t__second-2.yaml",
    ]
    with judge_endpoint("replay", specs, replay_dir=tmp_path) as env:
        base = env[ENV_BASE_URL]
        for match in ("first-flow", "second-flow"):
            text = f"<user_request>Run {match}.</user_request>\n<step_info>Step1 of 5</step_info>"
            output = chat(base, text)
            assert output["action"] == [{"done": {"success": True, "text": f"{match} done"}}]
    assert refused(f"{base}/health")


def test_replay_without_a_recording_names_the_task(tmp_path: Path, no_judge_env: None) -> None:
    shutil.copy(endpoint.REPLAY_DIR / f"{TODO}.yaml", tmp_path / f"{TODO}.yaml")
    specs = [sample_spec(TODO), renamed(sample_spec(TODO), "samples__unrecorded-9")]
    with pytest.raises(PackagerError) as caught:
        with judge_endpoint("replay", specs, replay_dir=tmp_path):
            pytest.fail("the block must not run")
    message = str(caught.value)
    assert "samples__unrecorded-9" in message
    assert TODO not in message.split(" in ")[0]  # only the missing one is named
    assert str(tmp_path) in message


def test_replay_with_a_broken_recording(tmp_path: Path, no_judge_env: None) -> None:
    (tmp_path / f"{TODO}.yaml").write_text("conversations: []\n")
    with pytest.raises(PackagerError, match="conversations"):
        with judge_endpoint("replay", [sample_spec(TODO)], replay_dir=tmp_path):
            pytest.fail("the block must not run")


def test_unknown_mode(no_judge_env: None) -> None:
    with pytest.raises(PackagerError, match="unknown --judge 'live'.*env, replay"):
        with judge_endpoint("live", [sample_spec(TODO)]):
            pytest.fail("the block must not run")


def test_env_mode_and_replay_without_judge_tasks_use_the_host(
    monkeypatch: pytest.MonkeyPatch, no_judge_env: None
) -> None:
    monkeypatch.setenv(ENV_BASE_URL, "http://localhost:8000/v1")
    monkeypatch.setenv(ENV_MODEL, "qwen")
    expected = {ENV_BASE_URL: "http://localhost:8000/v1", ENV_MODEL: "qwen"}
    with judge_endpoint("env", [sample_spec(TODO)]) as env:
        assert env == expected
    # No judge task selected: nothing to replay, no server, no replay files needed.
    with judge_endpoint("replay", [sample_spec(INTSET)], replay_dir=Path("/nonexistent")) as env:
        assert env == expected
