"""The replay model server: request -> recorded agent output, over real loopback HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from packager.judge.replay import (
    RecordProxy,
    ReplayError,
    ReplayScript,
    ReplayServer,
    main,
    parse_elements,
    read_transcript,
    resolve,
    respond,
    skeleton,
)

ROOT = Path(__file__).resolve().parents[3]

STATE = """\
<page_stats>1 links, 6 interactive</page_stats>
Current tab: BF14
Interactive elements:
[Start of page]
Hello
[10]<button />
\tAdd
|SHADOW(open)|[2]<input placeholder=New todo />
*[14]<input type=checkbox checked=false />
Buy milk
[15]<button aria-label=Delete />
\t\u00d7
[16]<input type=checkbox checked=true />
Walk dog
1 items left
[20]<a href=/about />
Footer text
[End of page]"""

SCRIPT_YAML = """\
model: replay-todo-web
conversations:
  - match: "add-todo"
    steps:
      - response:
          thinking: "Type the todo."
          evaluation_previous_goal: "Start"
          memory: ""
          next_goal: "Add Buy milk"
          action:
            - input: {index: "@input:New todo", text: "Buy milk", clear: true}
            - click: {index: "@button:Add"}
      - cases:
          - if_all: ["Buy milk", "!Title is required"]
            response:
              thinking: "Added."
              action:
                - click: {index: "@input[type=checkbox]:Buy milk"}
                - click: {index: "@input[type=checkbox][checked=true]:"}
                - done: {text: "@@button:Add is literal", success: true}
        else:
          thinking: "Not added."
          action: [{done: {text: "failed", success: false}}]
  - match: "blank-title"
    steps:
      - response: {action: [{click: {index: "@button:Buy milk"}}]}
"""


def state_text(task: str, step: int, state: str = STATE) -> str:
    return (
        f"<user_request>\nOpen http://127.0.0.1:8766/ [{task}]\n</user_request>\n\n"
        "<agent_history>\n</agent_history>\n"
        f"<browser_state>\n{state}\n</browser_state>\n"
        f"<step_info>Step{step} maximum:5\nToday:2026-12-01</step_info>"
    )


def body_for(task: str, step: int, state: str = STATE, **extra: Any) -> dict[str, Any]:
    """A request shaped like browser-use's: system prompt, state message, screenshot message."""
    return {
        "model": "replay",
        "messages": [
            {"role": "system", "content": "You are a browser agent."},
            {"role": "user", "content": [{"type": "text", "text": state_text(task, step, state)}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Current screenshot:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "agent_output"}},
        "temperature": 0.2,
        "frequency_penalty": 0.3,
        "max_completion_tokens": 4096,
        **extra,
    }


def output(completion: dict[str, Any]) -> Any:
    return json.loads(completion["choices"][0]["message"]["content"])


@pytest.fixture(scope="module")
def script() -> ReplayScript:
    return ReplayScript.from_data(yaml.safe_load(SCRIPT_YAML), source="todo.yaml")


@pytest.fixture()
def server(script: ReplayScript) -> Iterator[ReplayServer]:
    with ReplayServer(script, host="127.0.0.1") as running:
        yield running


def http(url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    """POST JSON (or GET without a body); the status and the decoded JSON answer."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


# ----------------------------------------------------------------- pure: respond


def test_step_one_resolves_button_and_input_placeholder(script: ReplayScript) -> None:
    agent = output(respond(script, body_for("add-todo", 1)))
    assert agent["action"] == [
        {"input": {"index": 2, "text": "Buy milk", "clear": True}},
        {"click": {"index": 10}},
    ]
    assert agent["next_goal"] == "Add Buy milk"


def test_step_two_case_matches_and_resolves_checkboxes(script: ReplayScript) -> None:
    agent = output(respond(script, body_for("add-todo", 2)))
    assert agent["thinking"] == "Added."
    assert agent["action"] == [
        {"click": {"index": 14}},  # checkbox followed by the text line "Buy milk"
        {"click": {"index": 16}},  # attribute filters only, empty text
        {"done": {"text": "@button:Add is literal", "success": True}},  # `@@` escape
    ]


def test_step_two_negated_condition_falls_to_else(script: ReplayScript) -> None:
    state = STATE.replace("Hello", "Hello\nTitle is required")
    assert output(respond(script, body_for("add-todo", 2, state)))["thinking"] == "Not added."


def test_step_two_missing_text_falls_to_else(script: ReplayScript) -> None:
    state = STATE.replace("Buy milk", "Buy bread")
    assert output(respond(script, body_for("add-todo", 2, state)))["thinking"] == "Not added."


def test_completion_shape_and_usage_estimate(script: ReplayScript) -> None:
    body = body_for("add-todo", 1, model="gpt-replay")
    completion = respond(script, body)
    assert completion["object"] == "chat.completion"
    assert completion["created"] == 0
    assert completion["model"] == "gpt-replay"
    assert completion["id"].startswith("chatcmpl-")
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    chars = (
        len("You are a browser agent.")
        + len(state_text("add-todo", 1))
        + len("Current screenshot:")
    )
    content = choice["message"]["content"]
    assert completion["usage"] == {
        "prompt_tokens": chars // 4 + 85,
        "completion_tokens": len(content) // 4,
        "total_tokens": chars // 4 + 85 + len(content) // 4,
    }


def test_user_request_without_tag_uses_all_user_text(script: ReplayScript) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "please do add-todo now"},
            {"role": "user", "content": f"<browser_state>{STATE}</browser_state><step_info>Step1"},
        ]
    }
    assert output(respond(script, body))["action"][1] == {"click": {"index": 10}}


def test_only_the_user_request_selects_the_conversation(script: ReplayScript) -> None:
    body = body_for("other", 1, STATE + "\nadd-todo")  # in the page, not in the request
    with pytest.raises(ReplayError, match="no conversation of todo.yaml matches"):
        respond(script, body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (body_for("add-todo", 3), "'add-todo' has 2 recorded step(s); the agent asked for step 3"),
        (body_for("nothing", 1), "no conversation of todo.yaml matches the user request"),
        (body_for("blank-title", 1), "no interactive element matches '@button:Buy milk'"),
        ({"model": "x"}, "non-empty 'messages' list"),
        ({"messages": ["hi"]}, "messages[0] must be an object"),
        ({"messages": [{"role": "user", "content": 3}]}, "must be a string or a list of parts"),
        ({"messages": [{"role": "user", "content": "add-todo"}]}, "no '<step_info>StepN'"),
        (body_for("add-todo", 1, stream=True), "streaming"),
    ],
)
def test_errors(script: ReplayScript, body: dict[str, Any], message: str) -> None:
    with pytest.raises(ReplayError) as caught:
        respond(script, body)
    assert message in caught.value.message


def test_unresolved_reference_names_step_and_candidates(script: ReplayScript) -> None:
    with pytest.raises(ReplayError) as caught:
        respond(script, body_for("blank-title", 1))
    message = caught.value.message
    assert "conversation 'blank-title' step 1 (response)" in message
    assert "[10] 'Add'" in message and "[15] 'aria-label=Delete\\n\u00d7'" in message
    assert caught.value.conversation == "blank-title" and caught.value.step == 1


def test_reference_text_may_contain_colons_and_non_references_stay() -> None:
    elements = parse_elements("[21]<a href=http://x.test/ />\n\tDocs: start\n")
    value = {"a": ["@a:http://x.test", "@a:Docs: start"], "b": "@home", "c": 3, "d": "x@a:y"}
    assert resolve(value, elements) == {"a": [21, 21], "b": "@home", "c": 3, "d": "x@a:y"}


# ----------------------------------------------------------------- element blobs


def test_element_blobs() -> None:
    blobs = {element.index: (element.tag, element.blob) for element in parse_elements(STATE)}
    assert blobs == {
        10: ("button", "Add"),
        2: ("input", "placeholder=New todo"),
        14: ("input", "type=checkbox checked=false\nBuy milk"),
        15: ("button", "aria-label=Delete\n\u00d7"),
        16: ("input", "type=checkbox checked=true\nWalk dog\n1 items left"),
        20: ("a", "href=/about"),  # a non-indented line is not the link's own text
    }


def test_element_blob_indentation_and_role_checkbox() -> None:
    state = (
        "\t[3]<div role=checkbox />\n\tRemember me\n"
        "\t[4]<button />\n\t\tSave\n\t\t\tdraft\n\tOutside\n"
        "\t\t*[5]<span>inline text\n"
    )
    blobs = {element.index: element.blob for element in parse_elements(state)}
    assert blobs == {3: "role=checkbox\nRemember me", 4: "Save\ndraft", 5: "inline text"}


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[]", "(top level): must be a mapping, not list"),
        ("conversations: []", "conversations: must be a non-empty list"),
        ("model: 3\nconversations: [x]", "model: must be a non-empty string"),
        ("conversations: [{match: a}]", "conversations[0]: missing key(s) ['steps']"),
        ("conversations: [{match: '', steps: [x]}]", "'match' must be a non-empty string"),
        (
            "conversations: [{match: a, steps: [{response: {}},"
            " {cases: [{if_all: x, response: {}}], else: {}}]}]",
            "conversations[0].steps[1].cases[0]: 'if_all' must be a list of strings",
        ),
        (
            "conversations: [{match: a, steps:"
            " [{cases: [{if_all: ['!'], response: {}}], else: {}}]}]",
            "conversations[0].steps[0].cases[0]: 'if_all' has an empty condition '!'",
        ),
        (
            "conversations: [{match: a, steps: [{cases: [{if_all: [x], response: {}}]}]}]",
            "conversations[0].steps[0]: 'else' is required when 'cases' is given",
        ),
        (
            "conversations: [{match: a, steps: [{response: {}, cases: []}]}]",
            "conversations[0].steps[0]: needs exactly one of 'response' or 'cases'",
        ),
        (
            "conversations: [{match: a, steps: [{respone: {}}]}]",
            "conversations[0].steps[0]: unknown key(s) ['respone']",
        ),
        (
            "conversations: [{match: a, steps: [{response: [1]}]}]",
            "conversations[0].steps[0].response: must be a mapping (the agent output), not list",
        ),
        (
            "conversations: [{match: a, steps: [{response: {action: {click: 1}}}]}]",
            "conversations[0].steps[0].response: 'action' must be a list of mappings",
        ),
        ("conversations: [", "not valid YAML"),
    ],
)
def test_script_validation_names_file_and_yaml_path(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        ReplayScript.load(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert problem in str(caught.value)


def test_load_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "todo.yaml"
    path.write_text(SCRIPT_YAML)
    loaded = ReplayScript.load(path)
    assert loaded.model == "replay-todo-web"
    assert [c.match for c in loaded.conversations] == ["add-todo", "blank-title"]
    assert loaded.source == str(path)
    with pytest.raises(ValueError, match="cannot read the replay file"):
        ReplayScript.load(tmp_path / "missing.yaml")


# ----------------------------------------------------------------- HTTP


def test_http_chat_completions_on_both_paths(server: ReplayServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/v1"
    status, completion = http(f"{server.url}/chat/completions", body_for("add-todo", 1))
    assert status == 200
    assert output(completion)["action"][1] == {"click": {"index": 10}}
    status, completion = http(
        f"http://127.0.0.1:{server.port}/chat/completions", body_for("add-todo", 2)
    )
    assert status == 200 and output(completion)["thinking"] == "Added."
    calls = server.calls
    assert [(c["conversation"], c["step"], c["status"], c["error"]) for c in calls] == [
        ("add-todo", 1, 200, None),
        ("add-todo", 2, 200, None),
    ]
    assert calls[1]["completion_tokens"] == completion["usage"]["completion_tokens"]
    assert calls[1]["prompt_tokens"] == completion["usage"]["prompt_tokens"]


def test_http_errors_are_400_and_server_keeps_serving(server: ReplayServer) -> None:
    status, answer = http(f"{server.url}/chat/completions", body_for("add-todo", 9))
    assert status == 400
    assert answer["error"]["type"] == "replay_error"
    assert "asked for step 9" in answer["error"]["message"]
    status, answer = http(f"{server.url}/chat/completions", raw=b"{not json")
    assert status == 400 and "not JSON" in answer["error"]["message"]
    status, answer = http(f"{server.url}/chat/completions", raw=b"[1, 2]")
    assert status == 400 and "JSON object" in answer["error"]["message"]
    status, answer = http(f"{server.url}/nope", {})
    assert status == 404 and answer["error"]["type"] == "not_found"
    status, _ = http(f"{server.url}/chat/completions", body_for("add-todo", 1))
    assert status == 200
    calls = server.calls
    assert [c["status"] for c in calls] == [400, 400, 400, 200]
    assert calls[0]["conversation"] == "add-todo" and calls[0]["step"] == 9
    assert "asked for step 9" in calls[0]["error"]
    assert calls[1]["conversation"] is None and "not JSON" in calls[1]["error"]


def test_http_models_and_health(server: ReplayServer) -> None:
    status, models = http(f"{server.url}/models")
    assert status == 200
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["replay-todo-web"]
    assert http(f"http://127.0.0.1:{server.port}/health") == (200, {"status": "ok"})
    assert server.calls == []


def test_http_concurrent_requests_are_all_recorded(server: ReplayServer) -> None:
    statuses: list[int] = []

    def call(step: int) -> None:
        statuses.append(http(f"{server.url}/chat/completions", body_for("add-todo", step))[0])

    threads = [threading.Thread(target=call, args=(1 + n % 3,)) for n in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] * 6 + [400] * 3
    assert len(server.calls) == 9


def test_server_stop_is_idempotent_and_port_needs_start(script: ReplayScript) -> None:
    replay = ReplayServer(script, host="127.0.0.1")
    with pytest.raises(RuntimeError, match="not started"):
        _ = replay.port
    replay.start()
    replay.stop()
    replay.stop()


# ----------------------------------------------------------------- record and skeleton


@pytest.fixture()
def recorded(
    server: ReplayServer, tmp_path: Path
) -> tuple[Path, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """A transcript recorded through a proxy in front of a replay server; requests+answers."""
    out = tmp_path / "transcript.jsonl"
    exchanges = []
    with RecordProxy(server.url, out, api_key="sk-test", host="127.0.0.1") as proxy:
        for step in (1, 2):
            body = body_for("add-todo", step)
            status, answer = http(f"{proxy.url}/chat/completions", body)
            assert status == 200
            exchanges.append((body, answer))
        status, answer = http(f"{proxy.url}/chat/completions", body_for("add-todo", 7))
        assert status == 400 and "asked for step 7" in answer["error"]["message"]
        assert http(f"{proxy.url}/models")[1]["data"][0]["id"] == "replay-todo-web"
    return out, exchanges


def test_record_proxy_passes_answers_through_and_writes_transcript(
    recorded: tuple[Path, list[tuple[dict[str, Any], dict[str, Any]]]], script: ReplayScript
) -> None:
    out, exchanges = recorded
    for body, answer in exchanges:
        assert answer == respond(script, body)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2  # the upstream 400 is passed on, not recorded
    assert lines[0]["user_request"] == "Open http://127.0.0.1:8766/ [add-todo]"
    assert [line["step"] for line in lines] == [1, 2]
    assert lines[0]["browser_state"].strip() == STATE
    assert lines[0]["response"]["action"][1] == {"click": {"index": 10}}


def test_record_proxy_unreachable_upstream_is_502(tmp_path: Path, script: ReplayScript) -> None:
    with ReplayServer(script, host="127.0.0.1") as gone:
        dead = gone.url
    with RecordProxy(dead, tmp_path / "t.jsonl", host="127.0.0.1") as proxy:
        status, answer = http(f"{proxy.url}/chat/completions", body_for("add-todo", 1))
    assert status == 502 and answer["error"]["type"] == "upstream_error"
    assert not (tmp_path / "t.jsonl").exists()


def test_skeleton_loads_back_and_replays_the_recording(
    recorded: tuple[Path, list[tuple[dict[str, Any], dict[str, Any]]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, exchanges = recorded
    assert main(["skeleton", str(out)]) == 0
    text = capsys.readouterr().out
    assert "#   [14] <input> 'type=checkbox checked=false Buy milk'" in text
    path = tmp_path / "skeleton.yaml"
    path.write_text(text)
    replayed = ReplayScript.load(path)
    assert len(replayed.conversations) == 1
    assert [s.response is not None for s in replayed.conversations[0].steps] == [True, True]
    for body, answer in exchanges:
        assert output(respond(replayed, body)) == output(answer)


def test_skeleton_orders_steps_groups_requests_and_wraps_raw_content() -> None:
    entries = [
        {"user_request": "task B", "step": 2, "browser_state": "", "response": {"n": "b2"}},
        {"user_request": "task A", "step": 1, "browser_state": None, "response": "not json"},
        {"user_request": "task B", "step": 1, "browser_state": STATE, "response": {"n": "b1"}},
    ]
    data = yaml.safe_load(skeleton(entries, model="m"))
    assert data["model"] == "m"
    assert [c["match"] for c in data["conversations"]] == ["task B", "task A"]
    assert data["conversations"][0]["steps"] == [
        {"response": {"n": "b1"}},
        {"response": {"n": "b2"}},
    ]
    assert data["conversations"][1]["steps"] == [{"response": {"raw_content": "not json"}}]
    ReplayScript.from_data(data)


def test_read_transcript_names_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"user_request": "a", "step": 1, "response": {}}\n\n{oops\n')
    with pytest.raises(ValueError, match=r"t.jsonl:3: not JSON"):
        read_transcript(path)


# ----------------------------------------------------------------- command line


def test_main_serve_rejects_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("conversations: []")
    assert main(["serve", str(path)]) == 1
    assert f"error: {path}: conversations: must be a non-empty list" in capsys.readouterr().err


def test_main_record_needs_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REPLAY_TEST_KEY", raising=False)
    argv = ["record", "--upstream", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "t.jsonl")]
    assert main([*argv, "--api-key-env", "REPLAY_TEST_KEY"]) == 1
    assert "REPLAY_TEST_KEY is not set" in capsys.readouterr().err


def test_cli_serve_prints_url_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "todo.yaml"
    path.write_text(SCRIPT_YAML)
    command = [sys.executable, "-m", "packager.judge.replay", "serve", str(path)]
    command += ["--host", "127.0.0.1", "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("replay server: http://127.0.0.1:"), line
            url = line.removeprefix("replay server: ")
            status, completion = http(f"{url}/chat/completions", body_for("add-todo", 1))
            assert status == 200 and output(completion)["action"][1] == {"click": {"index": 10}}
            assert http(f"{url}/chat/completions", body_for("none", 1))[0] == 400
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    assert "no conversation of" in err  # the error is in the server's log
