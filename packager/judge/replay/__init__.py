"""A local OpenAI chat-completions server that replays recorded model turns for browser-use.

Tests of the browser judge run the real app, the real Chromium and the real browser-use agent
(0.13.14); only the model is replaced. browser-use's `ChatOpenAI` with `base_url=server.url`
posts to `{base_url}/chat/completions` and gets back, as `choices[0].message.content`, the JSON
agent output that a replay file (YAML) recorded for that task and step.

Replay file::

    model: replay-todo-web                 # informational; served by GET /v1/models
    conversations:
      - match: "blank-title-rejected"      # substring of the <user_request> text
        steps:                             # agent step N (`<step_info>StepN`) uses steps[N-1]
          - response: {...agent output...}
          - cases:                         # first case whose `if_all` all hold wins
              - if_all: ["Title is required", "!0 items left"]
                response: {...}
            else: {...}                    # required with `cases`

Selection, per request:

- Conversation: the first whose `match` occurs in the `<user_request>` section (the first one
  in the user messages, normally in the first user message; all user text when there is none).
- Step: N from `<step_info>StepN` (or `Step N`) in the user text; step N uses `steps[N-1]`.
- Case: `if_all` strings are substrings of the `<browser_state>` section (all user text when
  absent) that must all occur; a string starting with `!` must not occur. No match -> `else`.

Element references: every string value (not key) in the chosen response, at any depth, that is
exactly `@tag:text` or `@tag[attr=value]...:text` becomes the integer index of the first
interactive element of the `<browser_state>` (see `parse_elements`) whose tag equals `tag`,
whose attributes text contains every `attr=value` filter, and whose blob (attributes text,
its own indented text lines, and for a checkbox or radio the text lines after it) contains
`text` (case-sensitive; an empty `text` matches any blob). A string starting with `@@` is a literal
and loses one `@`; other strings are left alone. An unresolvable reference is an error.

Errors (no conversation, step beyond the recorded ones, unresolvable reference, malformed
request) are answered HTTP 400 `{"error": {"message": ..., "type": "replay_error"}}`, logged
and recorded in `ReplayServer.calls`; the server keeps serving.

Token usage is an estimate, not a tokenizer count: prompt_tokens = characters of all text
(string contents and text parts of every message) // 4 + 85 per image part; completion_tokens
= characters of the returned content // 4.

Command line (`python -m packager.judge.replay`): `serve FILE` replays a file; `record
--upstream URL --out FILE.jsonl` is a recording proxy in front of a real OpenAI-compatible
endpoint; `skeleton TRANSCRIPT.jsonl` prints a replay file from a recording, to be edited.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import yaml

LOG = logging.getLogger(__name__)

IMAGE_TOKENS = 85
"""Estimated prompt tokens of one image part."""
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
HEALTH_PATHS = ("/health", "/v1/health")

_USER_REQUEST = re.compile(r"<user_request>(.*?)(?:</user_request>|\Z)", re.DOTALL)
_BROWSER_STATE = re.compile(r"<browser_state>(.*?)(?:</browser_state>|\Z)", re.DOTALL)
_STEP_INFO = re.compile(r"<step_info>\s*Step\s*(\d+)")
_ELEMENT_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<marks>(?:\*|\|[^|\n]*\|)*)\[(?P<index>\d+)\]"
    r"<(?P<tag>[A-Za-z][\w:-]*)(?P<rest>.*)$"
)
_MARKER_LINE = re.compile(r"^\s*(?:\[(?:Start|End) of page\]|\.\.\.)")
_REFERENCE = re.compile(
    r"@(?P<tag>[A-Za-z][\w-]*)(?P<filters>(?:\[[^\[\]]+\])*):(?P<text>.*)", re.DOTALL
)


class ReplayError(Exception):
    """A request the replay file cannot answer; served as HTTP 400 with `message`."""

    def __init__(self, message: str, *, conversation: str | None = None, step: int | None = None):
        """Keep `message` and, when known, the conversation `match` and agent step."""
        super().__init__(message)
        self.message = message
        self.conversation = conversation
        self.step = step


# --------------------------------------------------------------------------- replay file


@dataclass(frozen=True)
class Case:
    """One branch of a step: `response` when every `if_all` condition holds."""

    if_all: tuple[str, ...]
    response: Mapping[str, Any]

    def holds(self, state: str) -> bool:
        """Whether every condition holds for `state` (`!x`: x must not occur)."""
        return all(condition_holds(condition, state) for condition in self.if_all)


@dataclass(frozen=True)
class Step:
    """One recorded agent step: a fixed `response`, or `cases` with an `otherwise` fallback."""

    response: Mapping[str, Any] | None = None
    cases: tuple[Case, ...] = ()
    otherwise: Mapping[str, Any] | None = None

    def choose(self, state: str) -> tuple[Mapping[str, Any], str]:
        """The response for browser `state` and a label of the branch taken."""
        if self.response is not None:
            return self.response, "response"
        for number, case in enumerate(self.cases):
            if case.holds(state):
                return case.response, f"cases[{number}]"
        assert self.otherwise is not None  # validated by `ReplayScript`
        return self.otherwise, "else"


@dataclass(frozen=True)
class Conversation:
    """The recorded steps of one task, selected by `match` in the user request."""

    match: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class ReplayScript:
    """A parsed and validated replay file (see the module docstring for the format)."""

    model: str
    conversations: tuple[Conversation, ...]
    source: str = "<memory>"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ReplayScript:
        """Read a replay file; `ValueError` names the file and the YAML path of a problem."""
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{where}: cannot read the replay file: {exc}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{where}: not valid YAML: {exc}") from exc
        return cls.from_data(data, source=where)

    @classmethod
    def from_data(cls, data: Any, source: str = "<memory>") -> ReplayScript:
        """Validate parsed YAML; `ValueError` messages start with `source` and a YAML path."""
        try:
            return _script(data, source)
        except _Invalid as exc:
            raise ValueError(f"{source}: {exc.path}: {exc.problem}") from None


class _Invalid(Exception):
    """A validation problem at a YAML path."""

    def __init__(self, path: str, problem: str):
        """Keep the YAML path and the problem."""
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def _keys(data: Any, path: str, allowed: set[str], required: set[str]) -> Mapping[str, Any]:
    """`data` as a mapping with only `allowed` keys and all `required` ones."""
    if not isinstance(data, Mapping):
        raise _Invalid(path, f"must be a mapping, not {type(data).__name__}")
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise _Invalid(path, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(data))
    if missing:
        raise _Invalid(path, f"missing key(s) {missing}")
    return data


def _response(data: Any, path: str) -> Mapping[str, Any]:
    """An agent output mapping; its `action`, when present, is a list of mappings."""
    if not isinstance(data, Mapping):
        raise _Invalid(path, f"must be a mapping (the agent output), not {type(data).__name__}")
    action = data.get("action")
    if "action" in data and not (
        isinstance(action, list) and all(isinstance(item, Mapping) for item in action)
    ):
        raise _Invalid(path, "'action' must be a list of mappings such as {click: {index: 3}}")
    return data


def _conditions(data: Any, path: str) -> tuple[str, ...]:
    """A non-empty list of non-empty condition strings (`!x` must keep a non-empty x)."""
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise _Invalid(path, "'if_all' must be a list of strings")
    if not data:
        raise _Invalid(path, "'if_all' must not be empty")
    for item in data:
        if not item.removeprefix("!"):
            raise _Invalid(path, f"'if_all' has an empty condition {item!r}")
    return tuple(data)


def _step(data: Any, path: str) -> Step:
    """One step: exactly one of `response` or `cases` (+ required `else`)."""
    step = _keys(data, path, {"response", "cases", "else"}, set())
    if ("response" in step) == ("cases" in step):
        raise _Invalid(path, "needs exactly one of 'response' or 'cases'")
    if "response" in step:
        if "else" in step:
            raise _Invalid(path, "'else' goes with 'cases', not with 'response'")
        return Step(response=_response(step["response"], f"{path}.response"))
    if "else" not in step:
        raise _Invalid(path, "'else' is required when 'cases' is given")
    raw_cases = step["cases"]
    if not isinstance(raw_cases, list) or not raw_cases:
        raise _Invalid(f"{path}.cases", "must be a non-empty list")
    cases = []
    for number, raw in enumerate(raw_cases):
        where = f"{path}.cases[{number}]"
        case = _keys(raw, where, {"if_all", "response"}, {"if_all", "response"})
        cases.append(
            Case(
                if_all=_conditions(case["if_all"], where),
                response=_response(case["response"], f"{where}.response"),
            )
        )
    return Step(cases=tuple(cases), otherwise=_response(step["else"], f"{path}.else"))


def _script(data: Any, source: str) -> ReplayScript:
    """The whole file: optional `model`, non-empty `conversations`."""
    top = _keys(data, "(top level)", {"model", "conversations"}, {"conversations"})
    model = top.get("model", "replay")
    if not isinstance(model, str) or not model:
        raise _Invalid("model", "must be a non-empty string")
    raw_conversations = top["conversations"]
    if not isinstance(raw_conversations, list) or not raw_conversations:
        raise _Invalid("conversations", "must be a non-empty list")
    conversations = []
    for number, raw in enumerate(raw_conversations):
        where = f"conversations[{number}]"
        conversation = _keys(raw, where, {"match", "steps"}, {"match", "steps"})
        match = conversation["match"]
        if not isinstance(match, str) or not match:
            raise _Invalid(where, "'match' must be a non-empty string")
        steps = conversation["steps"]
        if not isinstance(steps, list) or not steps:
            raise _Invalid(where, "'steps' must be a non-empty list")
        conversations.append(
            Conversation(
                match=match,
                steps=tuple(_step(step, f"{where}.steps[{i}]") for i, step in enumerate(steps)),
            )
        )
    return ReplayScript(model=model, conversations=tuple(conversations), source=source)


def condition_holds(condition: str, state: str) -> bool:
    """`condition` occurs in `state`; with a leading `!`, the rest must not occur."""
    if condition.startswith("!"):
        return condition[1:] not in state
    return condition in state


# --------------------------------------------------------------------------- browser state


@dataclass(frozen=True)
class Element:
    """One interactive element of the browser state, as browser-use serialises it."""

    index: int
    tag: str
    attrs: str
    blob: str


def _is_toggle(tag: str, attrs: str) -> bool:
    """A checkbox or radio button (whose label is usually sibling text, not a child)."""
    if tag == "input" and ("type=checkbox" in attrs or "type=radio" in attrs):
        return True
    return "role=checkbox" in attrs or "role=radio" in attrs


def _indent(line: str) -> int:
    """Leading whitespace characters (browser-use indents one tab per tree level)."""
    return len(line) - len(line.lstrip(" \t"))


def _split_rest(rest: str) -> tuple[str, str]:
    """`<tag` remainder -> (attributes text, text after the tag on the same line)."""
    if "/>" in rest:
        end = rest.rfind("/>")
        return rest[:end].strip(), rest[end + 2 :].strip()
    if ">" in rest:
        end = rest.find(">")
        return rest[:end].strip(), rest[end + 1 :].strip()
    return rest.strip(), ""


def parse_elements(state: str) -> list[Element]:
    """The interactive elements of a `<browser_state>` text, in order.

    An element line is `[N]<tag attrs... />`, possibly after indentation and the markers `*`
    (new element) and `|...|` (e.g. `|SHADOW(open)|`). Text lines are the other non-blank
    lines, except `[Start of page]`, `[End of page]` and `...` scroll hints, which end a run
    of text. An element's blob is, joined by newlines:

    1. its attributes text (between the tag name and `/>`) and any text after `/>`;
    2. its own text: the text lines right after it that are indented deeper than its line,
       up to the first element line or the first text line not indented deeper;
    3. for a checkbox or radio (`<input type=checkbox|radio>`, or `role=checkbox|radio`):
       every text line after it up to the next element line, whatever the indentation, since
       browser-use writes a sibling label (`<li><input type=checkbox><label>Buy milk`) as a
       text line at the checkbox's own level. A label written before the checkbox is not in
       its blob.
    """
    lines = state.splitlines()
    elements = []
    for number, line in enumerate(lines):
        found = _ELEMENT_LINE.match(line)
        if not found:
            continue
        tag = found["tag"]
        attrs, after = _split_rest(found["rest"])
        depth = len(found["indent"])
        toggle = _is_toggle(tag, attrs)
        parts = [attrs, after]
        own = True
        for following in lines[number + 1 :]:
            if not following.strip():
                continue
            if _ELEMENT_LINE.match(following) or _MARKER_LINE.match(following):
                break
            own = own and _indent(following) > depth
            if not (own or toggle):
                break
            parts.append(following.strip())
        blob = "\n".join(part for part in parts if part)
        elements.append(Element(index=int(found["index"]), tag=tag, attrs=attrs, blob=blob))
    return elements


@dataclass(frozen=True)
class Reference:
    """A parsed `@tag[attr=value]:text` element reference."""

    tag: str
    filters: tuple[str, ...]
    text: str

    @classmethod
    def parse(cls, value: str) -> Reference | None:
        """The reference `value` spells, or None when it is not one."""
        if value.startswith("@@"):
            return None
        found = _REFERENCE.fullmatch(value)
        if not found:
            return None
        filters = tuple(re.findall(r"\[([^\[\]]+)\]", found["filters"]))
        return cls(tag=found["tag"], filters=filters, text=found["text"])

    def matches(self, element: Element) -> bool:
        """Whether `element` is one this reference names."""
        return (
            element.tag == self.tag
            and all(item in element.attrs for item in self.filters)
            and self.text in element.blob
        )


def resolve(value: Any, elements: Sequence[Element]) -> Any:
    """`value` with every element reference string replaced by its element index (a copy)."""
    if isinstance(value, Mapping):
        return {key: resolve(item, elements) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, elements) for item in value]
    if not isinstance(value, str):
        return value
    if value.startswith("@@"):
        return value[1:]
    reference = Reference.parse(value)
    if reference is None:
        return value
    for element in elements:
        if reference.matches(element):
            return element.index
    same_tag = [element for element in elements if element.tag == reference.tag]
    shown = "; ".join(f"[{e.index}] {e.blob!r}" for e in same_tag[:10]) or "none"
    raise ReplayError(
        f"no interactive element matches {value!r} ({len(elements)} elements in the browser "
        f"state; <{reference.tag}> elements: {shown})"
    )


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class ChatRequest:
    """What the replay needs from a chat-completions request body."""

    model: str | None
    user_texts: tuple[str, ...]
    text_chars: int
    images: int

    @property
    def user_request(self) -> str:
        """The first `<user_request>` section of the user messages, else all user text."""
        found = _USER_REQUEST.search(self.all_user_text)
        return found[1].strip() if found else self.all_user_text

    @property
    def all_user_text(self) -> str:
        """The text parts of all user messages, joined by newlines."""
        return "\n".join(self.user_texts)

    @property
    def browser_state(self) -> str:
        """The `<browser_state>` section of the user text, else all user text."""
        found = _BROWSER_STATE.search(self.all_user_text)
        return found[1] if found else self.all_user_text

    @property
    def step(self) -> int | None:
        """N of `<step_info>StepN`, or None when there is none."""
        found = _STEP_INFO.search(self.all_user_text)
        return int(found[1]) if found else None

    @property
    def prompt_tokens(self) -> int:
        """Estimated prompt tokens: characters // 4 + 85 per image."""
        return self.text_chars // 4 + IMAGE_TOKENS * self.images


def parse_request(body: Any) -> ChatRequest:
    """Read the messages of a request body; `ReplayError` when it is malformed."""
    if not isinstance(body, Mapping):
        raise ReplayError(f"the request body must be a JSON object, not {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ReplayError("the request needs a non-empty 'messages' list")
    model = body.get("model")
    texts: list[str] = []
    chars = images = 0
    for number, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ReplayError(f"messages[{number}] must be an object")
        message_texts, message_images = _content(message.get("content"), number)
        chars += sum(len(text) for text in message_texts)
        images += message_images
        if message.get("role") == "user":
            texts.append("\n".join(message_texts))
    return ChatRequest(
        model=model if isinstance(model, str) else None,
        user_texts=tuple(texts),
        text_chars=chars,
        images=images,
    )


def _content(content: Any, number: int) -> tuple[list[str], int]:
    """The text parts and image count of one message's `content`."""
    if content is None:
        return [], 0
    if isinstance(content, str):
        return [content], 0
    if not isinstance(content, list):
        raise ReplayError(f"messages[{number}].content must be a string or a list of parts")
    texts, images = [], 0
    for part in content:
        if not isinstance(part, Mapping):
            raise ReplayError(f"messages[{number}].content has a part that is not an object")
        if part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ReplayError(f"messages[{number}].content has a text part without text")
            texts.append(text)
        elif part.get("type") in ("image_url", "input_image", "image"):
            images += 1
    return texts, images


# --------------------------------------------------------------------------- responding


@dataclass(frozen=True)
class Reply:
    """A completion and where in the replay file it came from."""

    completion: dict[str, Any]
    conversation: str
    step: int
    branch: str


def _short(text: str, limit: int = 200) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def reply(script: ReplayScript, body: Mapping[str, Any]) -> Reply:
    """Answer a request body from `script`; `ReplayError` says why it cannot."""
    if body.get("stream"):
        raise ReplayError("streaming ('stream': true) is not supported by the replay server")
    request = parse_request(body)
    user_request = request.user_request
    found = [i for i, c in enumerate(script.conversations) if c.match in user_request]
    if not found:
        known = ", ".join(repr(c.match) for c in script.conversations)
        raise ReplayError(
            f"no conversation of {script.source} matches the user request "
            f"{_short(user_request)!r}; matches: {known}"
        )
    index = found[0]
    conversation = script.conversations[index]
    step = request.step
    if step is None:
        raise ReplayError(
            "the request has no '<step_info>StepN' in its user text",
            conversation=conversation.match,
        )
    if not 1 <= step <= len(conversation.steps):
        raise ReplayError(
            f"conversation {conversation.match!r} has {len(conversation.steps)} recorded "
            f"step(s); the agent asked for step {step}",
            conversation=conversation.match,
            step=step,
        )
    state = request.browser_state
    response, branch = conversation.steps[step - 1].choose(state)
    try:
        resolved = resolve(response, parse_elements(state))
    except ReplayError as exc:
        raise ReplayError(
            f"conversation {conversation.match!r} step {step} ({branch}): {exc.message}",
            conversation=conversation.match,
            step=step,
        ) from None
    content = json.dumps(resolved, ensure_ascii=False)
    completion_tokens = len(content) // 4
    completion = {
        "id": f"chatcmpl-replay-{index}-{step}",
        "object": "chat.completion",
        "created": 0,
        "model": request.model or script.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": request.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": request.prompt_tokens + completion_tokens,
        },
    }
    return Reply(completion=completion, conversation=conversation.match, step=step, branch=branch)


def respond(script: ReplayScript, body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat.completion for a request body (pure); `ReplayError(message)` when none."""
    return reply(script, body).completion


def error_body(message: str, kind: str = "replay_error") -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# --------------------------------------------------------------------------- HTTP plumbing


@dataclass(frozen=True)
class HttpAnswer:
    """A status, a body and its content type."""

    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def of_json(cls, status: int, data: Any) -> HttpAnswer:
        """An answer carrying `data` as JSON."""
        return cls(status, json.dumps(data, ensure_ascii=False).encode("utf-8"))


class _HttpServer(ThreadingHTTPServer):
    """A threaded HTTP server with daemon threads and a longer listen queue."""

    daemon_threads = True
    request_queue_size = 64


class _Service:
    """A threaded loopback HTTP service whose subclasses answer in `answer`."""

    def __init__(self, host: str = "0.0.0.0", port: int = 0):
        """Remember where to listen; `start` binds."""
        self.host = host
        self._requested_port = port
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    def answer(self, method: str, path: str, body: bytes) -> HttpAnswer:
        """The answer to one request (never raises in subclasses that catch their errors)."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        """The bound port (after `start`)."""
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The OpenAI base URL on loopback, `http://127.0.0.1:{port}/v1`."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Bind and serve in a daemon thread."""
        if self._httpd is not None:
            return
        self._httpd = _HttpServer((self.host, self._requested_port), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=type(self).__name__,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> _Service:
        """Start; the context manager stops on exit."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop."""
        self.stop()


def _handler_for(service: _Service) -> type[BaseHTTPRequestHandler]:
    """A request handler class that hands every request to `service.answer`."""

    class Handler(BaseHTTPRequestHandler):
        """Reads the request, asks the service, writes the answer."""

        server_version = "packager-replay/1"

        def _serve(self, method: str) -> None:
            """Answer one request; an unexpected failure becomes HTTP 500."""
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length > 0 else b""
                path = self.path.split("?", 1)[0]
                answer = service.answer(method, path, body)
            except Exception as exc:  # never let one request take the server down
                LOG.exception("replay: %s %s failed", method, self.path)
                answer = HttpAnswer.of_json(500, error_body(f"internal error: {exc}", "server"))
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def do_GET(self) -> None:
            """Serve a GET."""
            self._serve("GET")

        def do_POST(self) -> None:
            """Serve a POST."""
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:
            """Access log to the module logger (debug), not to stderr."""
            LOG.debug("%s - %s", self.address_string(), format % args)

    return Handler


def _not_found(method: str, path: str) -> HttpAnswer:
    """An OpenAI-style 404."""
    return HttpAnswer.of_json(404, error_body(f"no route for {method} {path}", "not_found"))


class ReplayServer(_Service):
    """Serves a `ReplayScript` over HTTP; a context manager (`with ReplayServer(s) as srv`).

    `calls` lists, per chat-completions request: `conversation` (the match, or None), `step`,
    `branch`, `status`, `prompt_tokens`, `completion_tokens` and `error` (message or None).
    """

    def __init__(self, script: ReplayScript, host: str = "0.0.0.0", port: int = 0):
        """Serve `script` on `host:port` (port 0: any free port) once started."""
        super().__init__(host, port)
        self.script = script
        self._calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> ReplayServer:
        """Start; the context manager stops on exit."""
        self.start()
        return self

    @property
    def calls(self) -> list[dict[str, Any]]:
        """A copy of the call records so far."""
        with self._lock:
            return [dict(call) for call in self._calls]

    def _record(self, call: dict[str, Any]) -> None:
        """Append one call record."""
        with self._lock:
            self._calls.append(call)

    def answer(self, method: str, path: str, body: bytes) -> HttpAnswer:
        """Route health, models and chat completions."""
        if method == "GET" and path in HEALTH_PATHS:
            return HttpAnswer.of_json(200, {"status": "ok"})
        if method == "GET" and path in MODELS_PATHS:
            model = {"id": self.script.model, "object": "model", "created": 0, "owned_by": "replay"}
            return HttpAnswer.of_json(200, {"object": "list", "data": [model]})
        if method == "POST" and path in CHAT_PATHS:
            return self._chat(body)
        return _not_found(method, path)

    def _chat(self, raw: bytes) -> HttpAnswer:
        """Answer one chat-completions request and record it."""
        call: dict[str, Any] = {
            "conversation": None,
            "step": None,
            "branch": None,
            "status": 400,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "error": None,
        }
        try:
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ReplayError(f"the request body is not JSON: {exc}") from None
            if not isinstance(body, Mapping):
                raise ReplayError("the request body must be a JSON object")
            result = reply(self.script, body)
        except ReplayError as exc:
            call.update(conversation=exc.conversation, step=exc.step, error=exc.message)
            LOG.warning("replay error: %s", exc.message)
            self._record(call)
            return HttpAnswer.of_json(400, error_body(exc.message))
        usage = result.completion["usage"]
        call.update(
            conversation=result.conversation,
            step=result.step,
            branch=result.branch,
            status=200,
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
        )
        LOG.info("replay: %r step %d (%s)", result.conversation, result.step, result.branch)
        self._record(call)
        return HttpAnswer.of_json(200, result.completion)


# --------------------------------------------------------------------------- recording


def transcript_entry(request_body: bytes, response_body: bytes) -> dict[str, Any]:
    """One transcript line: user request, step, browser state and the (parsed) content."""
    entry: dict[str, Any] = {
        "user_request": None,
        "step": None,
        "browser_state": None,
        "response": None,
    }
    try:
        request = parse_request(json.loads(request_body.decode("utf-8")))
    except (ReplayError, UnicodeDecodeError, json.JSONDecodeError):
        pass
    else:
        entry.update(
            user_request=request.user_request,
            step=request.step,
            browser_state=request.browser_state,
        )
    text = response_body.decode("utf-8", errors="replace")
    try:
        content = json.loads(text)["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        entry["response"] = text
        return entry
    try:
        entry["response"] = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        entry["response"] = content
    return entry


class RecordProxy(_Service):
    """Forwards chat completions to an upstream endpoint and appends a transcript line each.

    The upstream answer (status, body, content type) is returned unchanged; only answers with
    status 200 are written to the transcript. An unreachable upstream is answered 502.
    """

    def __init__(
        self,
        upstream: str,
        out: str | os.PathLike[str],
        api_key: str | None = None,
        host: str = "0.0.0.0",
        port: int = 0,
        timeout: float = 600.0,
    ):
        """Proxy to `upstream` (a base URL such as https://api.openai.com/v1) into `out`."""
        super().__init__(host, port)
        self.upstream = upstream.rstrip("/")
        self.out = Path(out)
        self.api_key = api_key
        self.timeout = timeout
        self._lock = threading.Lock()

    def answer(self, method: str, path: str, body: bytes) -> HttpAnswer:
        """Route health locally; forward models and chat completions."""
        if method == "GET" and path in HEALTH_PATHS:
            return HttpAnswer.of_json(200, {"status": "ok"})
        if method == "GET" and path in MODELS_PATHS:
            return self._forward("GET", "/models", None)
        if method == "POST" and path in CHAT_PATHS:
            answer = self._forward("POST", "/chat/completions", body)
            if answer.status == 200:
                self._append(transcript_entry(body, answer.body))
            return answer
        return _not_found(method, path)

    def _forward(self, method: str, path: str, body: bytes | None) -> HttpAnswer:
        """Send one request upstream and return its answer as is."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            self.upstream + path, data=body, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return HttpAnswer(
                    response.status,
                    response.read(),
                    response.headers.get("Content-Type", "application/json"),
                )
        except urllib.error.HTTPError as exc:
            with exc:
                return HttpAnswer(
                    exc.code, exc.read(), exc.headers.get("Content-Type", "application/json")
                )
        except (urllib.error.URLError, OSError) as exc:
            message = f"upstream {self.upstream + path} is unreachable: {exc}"
            LOG.warning("record: %s", message)
            return HttpAnswer.of_json(502, error_body(message, "upstream_error"))

    def _append(self, entry: Mapping[str, Any]) -> None:
        """Append one JSON line to the transcript."""
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock, self.out.open("a", encoding="utf-8") as handle:
            handle.write(line)


# --------------------------------------------------------------------------- skeleton


def read_transcript(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON lines of a transcript; `ValueError` names a bad line."""
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("user_request"), str):
            raise ValueError(f"{path}:{number}: not a transcript entry with a user_request")
        entries.append(entry)
    return entries


def _escaped(value: Any) -> Any:
    """`value` with every string starting with `@` escaped as `@@` (a literal on replay)."""
    if isinstance(value, Mapping):
        return {key: _escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, str) and value.startswith("@"):
        return "@" + value
    return value


def _yaml_block(data: Any, indent: str) -> list[str]:
    """`data` as block YAML lines, each prefixed by `indent`."""
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return [indent + line for line in text.splitlines()]


def _element_notes(state: Any, limit: int = 40) -> list[str]:
    """One-line summaries of the interactive elements of a recorded browser state."""
    if not isinstance(state, str):
        return []
    notes = [f"[{e.index}] <{e.tag}> {_short(e.blob, 80)!r}" for e in parse_elements(state)]
    if len(notes) > limit:
        notes = notes[:limit] + [f"... {len(notes) - limit} more"]
    return notes


def skeleton(entries: Sequence[Mapping[str, Any]], model: str = "replay") -> str:
    """A replay file from transcript entries, to be edited (cases, element references).

    One conversation per distinct user request (first-seen order), matching its whole text;
    one `response:` step per recorded call, ordered by step (calls without a step come last).
    Each step carries comments listing the interactive elements the agent saw. Recorded strings
    starting with `@` are escaped as `@@`, so they replay literally.
    """
    conversations: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        conversations.setdefault(str(entry["user_request"]), []).append(entry)
    lines = [
        "# Replay file generated from a recording; edit it:",
        "# - shorten each `match` to a stable part of the task (ports and dates change),",
        "# - replace element indexes by references such as '@button:Add' or '@input:New todo',",
        "# - turn a step into `cases:` (if_all: [...], response: ...) with an `else:` response,",
        "# - steps[N-1] answers agent step N: drop repeated steps (retries of one `# step N`).",
        f"model: {json.dumps(model)}",
        "conversations:",
    ]
    for match, calls in conversations.items():
        lines.append(f"  - match: {json.dumps(match, ensure_ascii=False)}")
        lines.append("    steps:")
        ordered = sorted(calls, key=lambda c: (c.get("step") is None, c.get("step") or 0))
        for call in ordered:
            lines.append(f"      # step {call.get('step')}; interactive elements:")
            lines.extend(f"      #   {note}" for note in _element_notes(call.get("browser_state")))
            response = call.get("response")
            if not isinstance(response, Mapping):
                lines.append("      # the recorded content was not a JSON object; rewrite it")
                response = {"raw_content": response}
            block = _yaml_block({"response": _escaped(response)}, "        ")
            block[0] = "      - " + block[0].lstrip()
            lines.extend(block)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- command line


def _wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT."""
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(0.2):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say(text: str, stream: Any = None) -> None:
    """Write one line and flush (the first line of `serve` is read by other programs)."""
    out = stream or sys.stdout
    out.write(text + "\n")
    out.flush()


def _parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(
        prog="python -m packager.judge.replay",
        description="Replay recorded model turns for browser-use over the OpenAI API.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a replay file")
    serve.add_argument("file", type=Path)
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=0)
    record = commands.add_parser("record", help="recording proxy to a real endpoint")
    record.add_argument("--upstream", required=True, help="base URL, e.g. https://…/v1")
    record.add_argument("--api-key-env", default="OPENAI_API_KEY")
    record.add_argument("--out", required=True, type=Path, help="transcript (JSON lines)")
    record.add_argument("--host", default="0.0.0.0")
    record.add_argument("--port", type=int, default=0)
    make = commands.add_parser("skeleton", help="print a replay file from a transcript")
    make.add_argument("transcript", type=Path)
    make.add_argument("--model", default="replay")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `serve`, `record` or `skeleton`; 0 on success, 1 on a bad file or setting."""
    args = _parser().parse_args(argv)
    if args.command == "skeleton":
        try:
            text = skeleton(read_transcript(args.transcript), model=args.model)
        except (OSError, ValueError) as exc:
            _say(f"error: {exc}", sys.stderr)
            return 1
        sys.stdout.write(text)
        return 0
    service: _Service
    if args.command == "serve":
        try:
            service = ReplayServer(ReplayScript.load(args.file), host=args.host, port=args.port)
        except ValueError as exc:
            _say(f"error: {exc}", sys.stderr)
            return 1
        label, suffix = "replay server", ""
    else:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            _say(f"error: environment variable {args.api_key_env} is not set", sys.stderr)
            return 1
        service = RecordProxy(args.upstream, args.out, api_key, host=args.host, port=args.port)
        label, suffix = "record proxy", f" -> {args.upstream} (transcript {args.out})"
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        service.start()
    except OSError as exc:
        _say(f"error: cannot listen on {args.host}:{args.port}: {exc}", sys.stderr)
        return 1
    try:
        _say(f"{label}: http://{args.host}:{service.port}/v1{suffix}")
        _wait_for_signal()
    finally:
        service.stop()
    return 0
