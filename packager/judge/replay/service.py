"""The HTTP plumbing the replay server and the record proxy share: a threaded loopback service."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from packager.judge.replay.request import error_body

LOG = logging.getLogger(__name__)

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
HEALTH_PATHS = ("/health", "/v1/health")


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


class Service:
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

    def __enter__(self) -> Service:
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


def _handler_for(service: Service) -> type[BaseHTTPRequestHandler]:
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


def not_found(method: str, path: str) -> HttpAnswer:
    """An OpenAI-style 404."""
    return HttpAnswer.of_json(404, error_body(f"no route for {method} {path}", "not_found"))
