"""The exception tree. Every error carries plain data; the CLI turns them into exit codes.

PackagerError                    exit 1 unless a subclass says otherwise
├── InputError                   exit 2: the dataset or the command line is wrong
│   ├── RowError                 one row: names the task and the field
│   ├── UnknownTasksError        TASK ids not in the dataset (lists them all)
│   ├── DatasetError             the dataset cannot be read or its schema is unknown
│   └── UnknownEngineError       --engine names no engine (lists the available ones)
├── RepoSourceError              a repository cannot be fetched or lacks a commit
├── EngineUnavailableError       no Docker engine answers (the message says how to start one)
├── BuildError                   an image failed to build (carries the log path)
└── RunError                     a container run failed for an infrastructure reason

Interrupted (not a PackagerError)  Ctrl-C: the executor stopped its jobs, removed containers
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path


class PackagerError(Exception):
    """Base of every error this tool raises on purpose."""

    exit_code = 1

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled as message and fields, so one raised in a worker process (render, Ray)
        arrives whole, whatever its subclass's constructor takes.
        """
        return (_restore_error, (type(self), str(self), dict(self.__dict__)))


def _restore_error(
    kind: type[PackagerError], message: str, fields: dict[str, object]
) -> PackagerError:
    error = kind.__new__(kind)
    Exception.__init__(error, message)
    error.__dict__.update(fields)
    return error


class InputError(PackagerError):
    """The input (dataset, row or command line) is wrong; nothing was written."""

    exit_code = 2


class DatasetError(InputError):
    """The dataset cannot be read, or its schema cannot be told."""


class RowError(InputError):
    """One field of one row is wrong."""

    def __init__(self, task: str, field: str, problem: str) -> None:
        self.task = task
        self.field = field
        self.problem = problem
        super().__init__(f"{task}: field '{field}': {problem}")


class UnknownTasksError(InputError):
    """Some requested task ids are not in the dataset."""

    def __init__(self, unknown: Iterable[str], dataset: str) -> None:
        self.unknown = sorted(unknown)
        self.dataset = dataset
        super().__init__(f"unknown task id(s) in dataset '{dataset}': {', '.join(self.unknown)}")


class UnknownEngineError(InputError):
    """A verification engine name that `packager.engines` does not know."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        self.name = name
        self.available = tuple(available)
        super().__init__(f"unknown engine {name!r} (available: {', '.join(self.available)})")


class RepoSourceError(PackagerError):
    """A repository source cannot be read, or it lacks the commit a row names.

    When a git command failed, `command` is its argv and `stderr` the last lines git printed;
    `missing` lists the objects the source lacks as (object id, path) pairs (path "" when it
    cannot be told). All three also appear in the message.
    """

    exit_code = 2

    def __init__(
        self,
        task: str,
        field: str,
        problem: str,
        *,
        command: Sequence[str] | None = None,
        stderr: str = "",
        missing: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.task = task
        self.field = field
        self.problem = problem
        self.command = tuple(command) if command is not None else None
        self.stderr = stderr
        self.missing = tuple(missing)
        message = f"{task}: field '{field}': {problem}"
        if self.command is not None:
            message += f"\n  command: {shlex.join(self.command)}"
        if stderr.strip():
            said = "\n    ".join(line.rstrip() for line in stderr.strip().splitlines())
            message += f"\n  git said:\n    {said}"
        super().__init__(message)


class EngineUnavailableError(PackagerError):
    """No Docker engine can be reached."""

    exit_code = 3


class BuildError(PackagerError):
    """A Docker image failed to build."""

    def __init__(self, task: str, image: str, reason: str, log_path: Path | None) -> None:
        self.task = task
        self.image = image
        self.reason = reason
        self.log_path = log_path
        where = f" (log: {log_path})" if log_path else ""
        super().__init__(f"{task}: building {image} failed: {reason}{where}")


class RunError(PackagerError):
    """A container run failed for a reason outside the task (daemon gone, timeout, OOM)."""

    def __init__(self, task: str, reason: str, log_path: Path | None = None) -> None:
        self.task = task
        self.reason = reason
        self.log_path = log_path
        super().__init__(f"{task}: {reason}")


class Interrupted(Exception):
    """Ctrl-C reached the driver: the executor stopped its jobs and removed their containers."""

    def __init__(self, removed: int, where: str = "") -> None:
        super().__init__(f"interrupted: removed {removed} container(s){where}")
        self.removed = removed
        self.where = where
