"""The replay file: its dataclasses, loading and validation (the format: package docstring)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


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
    """A parsed and validated replay file (see the package docstring for the format)."""

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
