"""The replay server: a `ReplayScript` served over HTTP, with a record of every call."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from packager.judge.replay.reply import reply
from packager.judge.replay.request import ReplayError, error_body
from packager.judge.replay.script import ReplayScript
from packager.judge.replay.service import (
    CHAT_PATHS,
    HEALTH_PATHS,
    MODELS_PATHS,
    HttpAnswer,
    Service,
    not_found,
)

LOG = logging.getLogger(__name__)


class ReplayServer(Service):
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
        return not_found(method, path)

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
