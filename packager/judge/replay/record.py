"""The record proxy: chat completions forwarded to a real endpoint, each answer transcribed."""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packager.judge.replay.request import ReplayError, error_body, parse_request
from packager.judge.replay.service import (
    CHAT_PATHS,
    HEALTH_PATHS,
    MODELS_PATHS,
    HttpAnswer,
    Service,
    not_found,
)

LOG = logging.getLogger(__name__)


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


class RecordProxy(Service):
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
        return not_found(method, path)

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
