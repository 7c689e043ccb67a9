"""The command line of `python -m packager.judge.replay`: `serve`, `record` and `skeleton`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from packager.judge.replay.record import RecordProxy
from packager.judge.replay.script import ReplayScript
from packager.judge.replay.server import ReplayServer
from packager.judge.replay.service import Service
from packager.judge.replay.skeleton import read_transcript, skeleton


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
    service: Service
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
