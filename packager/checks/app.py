"""Proof that a web app (a SWEeper row) answers HTTP: in a container of the task's agent image,
the app is started the way `packager.adapters.app_start` (or a recipe) says, and probed until
it answers or exits (`check_app_answers`).
"""

from __future__ import annotations

import posixpath
import shlex
import time
import uuid
from pathlib import Path
from typing import Any

from packager.context import RunContext
from packager.errors import RunError
from packager.images.build import (
    DockerClient,
    is_connection_error,
    labels_for,
)
from packager.images.tar import read_tar_member
from packager.models.app import AppStart

APP_LOG = "/tmp/packager-app.log"
POLL_SEC = 0.5
PROBE_READ_SEC = 5
TAIL_LINES = 20


def _wrapper(workdir: str, command: str) -> str:
    """The container's main process: the app, its output in APP_LOG; it ends when the app does."""
    return f"exec >{APP_LOG} 2>&1 </dev/null\ncd -- {shlex.quote(workdir)} || exit 97\n{command}\n"


def _probe_script(port: int, read_sec: int) -> str:
    """One HTTP request from inside the container with bash's /dev/tcp (no curl needed)."""
    return (
        "probe() {\n"
        f"  exec 3<>/dev/tcp/$1/{port} || return 1\n"
        "  printf 'GET / HTTP/1.0\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3\n"
        f"  IFS= read -r -t {read_sec} -u 3 line\n"
        "  printf 'answer from %s: %s\\n' \"$1\" \"${line%$'\\r'}\"\n"
        "  exec 3<&-\n"
        "}\n"
        "probe 127.0.0.1 || probe ::1\n"
    )


def _answer(output: str) -> str | None:
    """The status line a probe got, if it was HTTP."""
    for line in output.splitlines():
        if line.startswith("answer from "):
            status = line.split(": ", 1)[1] if ": " in line else ""
            if status.startswith("HTTP/"):
                return status
    return None


def _probe_summary(output: str) -> str:
    """A probe's output on one line; bash's two lines per failed connect become one."""
    lines = []
    for line in output.splitlines():
        if "/dev/tcp/" in line:
            lines.append(line[line.index("/dev/tcp/") :].strip())
        elif line.strip() and "connect: " not in line:
            lines.append(line.strip())
    return " | ".join(lines) if lines else "(no output)"


def log_tail(text: str, lines: int = TAIL_LINES, width: int = 300) -> str:
    """The last `lines` non-blank lines of a log on one line (" | "-separated)."""
    kept = [line.rstrip()[:width] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(the app log is empty)"


def _read_app_log(box: Any) -> str:
    try:
        stream, _ = box.get_archive(APP_LOG)
        data = read_tar_member(b"".join(stream), posixpath.basename(APP_LOG))
    except Exception:  # noqa: BLE001 - no log yet, or the container is gone
        return ""
    return (data or b"")[-1_000_000:].decode("utf-8", errors="replace")


def _state(box: Any) -> dict[str, Any]:
    box.reload()
    state = box.attrs.get("State") or {}
    return state if isinstance(state, dict) else {}


class _Transcript:
    """What `check_app_answers` saw, written to its log: the probes, then the app's log."""

    def __init__(self, log_path: Path, task: str, lines: list[str]) -> None:
        self.log_path = log_path
        self.task = task
        self.lines = lines
        self.app_log = ""
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def write(self) -> None:
        self.log_path.write_text(
            "\n".join(self.lines) + f"\n\napp log ({APP_LOG}):\n" + (self.app_log or "(empty)\n"),
            encoding="utf-8",
        )

    def fail(self, reason: str) -> RunError:
        """The RunError to raise, with the reason written last in the log."""
        self.lines.extend(["", f"FAILED: {reason}"])
        self.write()
        return RunError(self.task, reason, self.log_path)


def _create_app_box(
    client: DockerClient,
    image: str,
    start: AppStart,
    workdir: str,
    log: _Transcript,
    run: RunContext,
) -> Any:
    """The app's container, created (not started): no network, `PORT` set, labelled."""
    import docker.errors

    try:
        return client.containers.create(
            image,
            command=["bash", "-c", _wrapper(workdir, start.command)],
            name=f"packager-app-{uuid.uuid4().hex[:10]}",
            labels=labels_for(log.task, "app", run),
            environment={"PORT": str(start.port)},
            network_mode="none",
            detach=True,
        )
    except docker.errors.ImageNotFound as exc:
        raise log.fail(f"cannot start the app: image {image} not found") from exc
    except Exception as exc:  # APIError, connection errors
        raise log.fail(f"cannot create the app container ({type(exc).__name__}: {exc})") from exc


def _exited(box: Any, log: _Transcript, what: str) -> RunError | None:
    """The RunError of an app that has exited (None while it runs)."""
    elapsed = log.elapsed()
    state = _state(box)
    if state.get("Status") not in {"exited", "dead"}:
        return None
    log.app_log = _read_app_log(box)
    code = state.get("ExitCode")
    oom = " (killed for memory)" if state.get("OOMKilled") else ""
    log.lines.append(f"[{elapsed:7.2f}s] the app exited with code {code}{oom}")
    return log.fail(
        f"app did not answer HTTP: {what} exited with code {code}{oom} after "
        f"{elapsed:.1f} s; last log lines: {log_tail(log.app_log)}"
    )


def _poll(
    box: Any, start: AppStart, timeout_sec: float, log: _Transcript, what: str, run: RunContext
) -> float:
    """Probe the started app from inside until it answers HTTP; the seconds it took."""
    import docker.errors

    deadline = log.started + timeout_sec
    not_http: str | None = None
    while True:
        run.check()
        gone = _exited(box, log, what)
        if gone is not None:
            raise gone
        read_sec = max(1, min(PROBE_READ_SEC, int(deadline - time.monotonic())))
        try:
            result = box.exec_run(["bash", "-c", _probe_script(start.port, read_sec)])
        except docker.errors.APIError:
            # The app ended between the state check and the exec: report it above.
            if _state(box).get("Status") in {"exited", "dead"}:
                continue
            raise
        output = (result.output or b"").decode("utf-8", errors="replace")
        elapsed = log.elapsed()
        status = _answer(output)
        log.lines.append(f"[{elapsed:7.2f}s] {_probe_summary(output)}")
        if status is not None:
            log.app_log = _read_app_log(box)
            log.lines.append(f"answered after {elapsed:.2f} s: {status}")
            log.write()
            return elapsed
        if "answer from " in output:
            not_http = _probe_summary(output)
        if time.monotonic() >= deadline:
            log.app_log = _read_app_log(box)
            heard = (
                f"the port accepts connections but got no HTTP status line ({not_http})"
                if not_http
                else "nothing listens there"
            )
            raise log.fail(
                f"app did not answer HTTP on 127.0.0.1:{start.port} within "
                f"{timeout_sec:g} s ({heard}); started with {what}; last log lines: "
                f"{log_tail(log.app_log)}"
            )
        time.sleep(POLL_SEC)


def check_app_answers(
    client: DockerClient,
    image: str,
    start: AppStart,
    *,
    workdir: str,
    log_path: Path,
    timeout_sec: float = 60.0,
    task: str,
    run: RunContext,
) -> float:
    """Start the app in a container of `image` (no network; loopback works) and poll from
    inside until GET / on 127.0.0.1:PORT gets an HTTP status line. Return the seconds it took.

    RunError (reason names the command and quotes the app's last log lines) if the app exits
    or never answers within `timeout_sec`. The app log and the probe transcript are written to
    `log_path`; the container is always removed.
    """
    import docker.errors

    run.check()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = _Transcript(
        log_path,
        task,
        [
            f"image: {image}",
            f"workdir: {workdir}",
            f"command: {start.command}",
            f"port: {start.port} (PORT={start.port}; from {start.how})",
            f"timeout: {timeout_sec:g} s",
            "",
            "probes (GET / from inside the container):",
        ],
    )
    what = f"`{start.command}` (port {start.port})"
    box = _create_app_box(client, image, start, workdir, log, run)
    try:
        log.started = time.monotonic()
        box.start()
        return _poll(box, start, timeout_sec, log, what, run)
    except RunError:
        raise
    except Exception as exc:  # SDK errors while the app runs
        if not isinstance(exc, docker.errors.APIError) and not is_connection_error(exc):
            raise
        lost = "lost the Docker engine" if is_connection_error(exc) else "Docker refused"
        raise log.fail(
            f"{lost} while checking the app {what} ({type(exc).__name__}: {exc})"
        ) from exc
    finally:
        try:
            box.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone, or the daemon is gone: nothing to undo
            pass
