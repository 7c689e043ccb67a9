"""Machine-wide locks: held by one thread of one process at a time, per name (a thread lock,
then an fcntl lock on a file under the machine cache), so that work two workers or two runs
would both do (seeding a base image, building a cold environment) is done once.
"""

from __future__ import annotations

import fcntl
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from packager.storage import LOCKS

_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()
POLL_SEC = 0.2
"""How often a waiter with a `check` looks again (and lets `check` raise)."""


@contextmanager
def machine_lock(name: str, check: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the lock `name`; `check` (e.g. a cancellation check) runs while waiting and may
    raise to stop waiting. Without it, wait as long as it takes.
    """
    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(name, threading.Lock())
    while not thread_lock.acquire(timeout=POLL_SEC if check else -1):
        if check is not None:
            check()
    try:
        folder = LOCKS.path()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.lock"
        with path.open("a") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (fcntl.LOCK_NB if check else 0))
                    break
                except BlockingIOError:
                    if check is not None:
                        check()
                    time.sleep(POLL_SEC)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        thread_lock.release()
