"""One run's context: its id, its cancellation and its services, made by the driver and handed
down to every job, build and container of the run (no module global holds them).

- `run_id` labels the containers the run starts, so Ctrl-C removes exactly those, and a later
  run recognises its own (`images.build.remove_run_containers` / `remove_orphan_containers`).
  A Ray job carries the driver's id to its worker (the context is pickled with the job), so one
  sweep finds every container of the run on every node.
- `cancel` is set on Ctrl-C: jobs stop before their next container or build, and builds stop
  waiting. It is the process's own: a pickled context arrives with a fresh, unset event (a
  worker's jobs are cancelled by the worker, `executors.ray`).
- `service(name, start)`: a server the run's builds share (the machine wheelhouse,
  `images.wheelhouse`), started on first use and stopped by `close()` at the end of the run.
  Services are the process's own too: a pickled context arrives with none.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Cancelled(Exception):
    """The run was interrupted (Ctrl-C); raised in workers, never reported as a task result."""


def new_run_id() -> str:
    """A fresh run id (12 hex digits)."""
    return uuid.uuid4().hex[:12]


@dataclass(eq=False)
class RunContext:
    """The run's id and cancellation (see the module docstring)."""

    run_id: str = field(default_factory=new_run_id)
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _services: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self) -> None:
        """Raise Cancelled once the run has been interrupted."""
        if self.cancel.is_set():
            raise Cancelled

    def service(self, name: str, start: Callable[[], Any]) -> Any:
        """The run's service `name`, started by `start` on first use. A start that gives None
        (the service cannot be had here) is remembered and not tried again in this run.
        """
        with self._lock:
            if name not in self._services:
                self._services[name] = start()
            return self._services[name]

    def close(self) -> None:
        """Stop the run's services (each one's `close()`); the run is over."""
        with self._lock:
            services, self._services = self._services, {}
        for service in services.values():
            if service is not None and hasattr(service, "close"):
                with contextlib.suppress(Exception):
                    service.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.run_id = str(state["run_id"])
        self.cancel = threading.Event()
        self._services = {}
        self._lock = threading.Lock()
