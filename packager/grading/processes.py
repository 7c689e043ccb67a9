"""Running the grader's commands: each in its own process group, its output between
begin/end markers carrying a random nonce, every process it left behind killed afterwards (the
runtime is the child subreaper of all it starts, so a double fork or ``setsid`` does not escape).

Standard library only, Python >= 3.9; a sibling of grade.py in the runtime's archive.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple


class Runaway(Exception):
    """The processes a command started kept appearing after every kill (a fork bomb)."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _expire(proc: subprocess.Popen[bytes], expired: threading.Event) -> None:
    """The command's deadline passed: mark it timed out, then kill its process group."""
    expired.set()
    _kill_group(proc)


PR_SET_CHILD_SUBREAPER = 36
SWEEP_PASSES = 50


def set_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (Linux ``prctl``).

    A process that double-forks or calls ``setsid`` leaves the command's process group, but it
    is still re-parented to us rather than to init, so ``sweep_descendants`` can find it.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except Exception:
        return False


def _process_table() -> Dict[int, Tuple[int, str]]:
    """Map pid -> (ppid, state) from /proc (empty where /proc is unavailable)."""
    table: Dict[int, Tuple[int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        # "pid (comm) S ppid ...": comm may hold spaces and parentheses, so cut at the last ')'.
        fields = stat.rpartition(")")[2].split()
        if len(fields) >= 2 and fields[1].isdigit():
            table[int(name)] = (int(fields[1]), fields[0])
    return table


def descendants(root: int) -> List[int]:
    """Every live (non-zombie) process below ``root``."""
    table = _process_table()
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: List[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return [p for p in found if table[p][1] != "Z"]


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep_descendants() -> int:
    """SIGKILL every process the runtime's commands left behind; return how many were killed.

    Run after each command, before any of its results are read: nothing the code under test
    started (a daemon rewriting reward.json, a REWARD_FILE or the test log) survives it.
    Raises ``Runaway`` when processes keep appearing (a fork bomb): an infra error, reward 0.
    """
    me = os.getpid()
    killed = 0
    for _ in range(SWEEP_PASSES):
        alive = descendants(me)
        if not alive:
            _reap_children()
            return killed
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
        _reap_children()
    raise Runaway("the command's processes could not be stopped")


def run_logged(
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log_path: Path,
    stderr_path: Optional[Path] = None,
) -> Tuple[int, bool, str]:
    """Run ``command`` with the shell, its output appended to ``log_path``.

    Returns (exit code, timed out, output). The runtime writes begin/end markers carrying a
    random per-run nonce around the command's output and returns only what lies between them:
    the command never sees the nonce, so it cannot forge the end of its own output, and whatever
    a stray background process writes after the end marker is ignored. The whole process group
    is killed when the command ends or times out.
    """
    nonce = secrets.token_hex(16)
    begin = f"===== grading: output begin {nonce} ====="
    end = f"===== grading: output end {nonce}"
    shell = shutil.which("bash") or "/bin/sh"
    set_subreaper()
    with open(log_path, "ab") as log:
        log.write(f"$ {command}\n{begin}\n".encode("utf-8", "replace"))
        log.flush()
        err = open(stderr_path, "ab") if stderr_path is not None else None
        expired = threading.Event()
        try:
            proc = subprocess.Popen(
                [shell, "-c", command],
                cwd=str(cwd),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=err if err is not None else subprocess.STDOUT,
                start_new_session=True,  # own process group, so one kill reaches every child
            )
            # A timer kills the group at the deadline and `wait` blocks in waitpid: returns the
            # moment the command ends (`wait(timeout=...)` polls, up to 50 ms late every run).
            timer = threading.Timer(timeout, _expire, args=(proc, expired))
            timer.daemon = True
            timer.start()
            try:
                code = proc.wait()
            finally:
                timer.cancel()
                _kill_group(proc)
                sweep_descendants()
            timed_out = expired.is_set()
        finally:
            if err is not None:
                err.close()
        note = " (timed out)" if timed_out else ""
        log.write(f"\n{end}: exit code {code}{note} =====\n".encode())
    text = log_path.read_bytes().decode("utf-8", "replace")
    start = text.find(begin)
    stop = text.find(end, start) if start >= 0 else -1
    section = text[start + len(begin) + 1 : stop if stop >= 0 else len(text)] if start >= 0 else ""
    return code, timed_out, section


CGROUP = Path("/sys/fs/cgroup")
"""The container's own cgroup (a container sees its cgroup at the root of this mount)."""


def _read_number(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cgroup_usage(root: Path = CGROUP) -> Dict[str, float]:
    """The container's peak memory (MiB) and CPU seconds so far, read from its cgroup: v2
    (``memory.peak``, ``cpu.stat``'s ``usage_usec``) or v1 (``memory.max_usage_in_bytes``,
    which counts the page cache too, and ``cpuacct.usage``). What cannot be read is left out.
    """
    usage: Dict[str, float] = {}
    peak = _read_number(root / "memory.peak")
    if peak is None:
        peak = _read_number(root / "memory" / "memory.max_usage_in_bytes")
    if peak is not None:
        usage["memory_peak_mb"] = round(peak / 2**20, 1)
    try:
        stat = (root / "cpu.stat").read_text()
        usec = next(
            int(line.split()[1]) for line in stat.splitlines() if line.startswith("usage_usec")
        )
        usage["cpu_sec"] = round(usec / 1e6, 3)
    except (OSError, ValueError, IndexError, StopIteration):
        nsec = _read_number(root / "cpuacct" / "cpuacct.usage")
        if nsec is not None:
            usage["cpu_sec"] = round(nsec / 1e9, 3)
    return usage
