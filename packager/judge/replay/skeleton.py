"""A replay file drafted from a recorded transcript, to be edited by hand."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from packager.judge.replay.reply import one_line
from packager.judge.replay.state import parse_elements


def read_transcript(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON lines of a transcript; `ValueError` names a bad line."""
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("user_request"), str):
            raise ValueError(f"{path}:{number}: not a transcript entry with a user_request")
        entries.append(entry)
    return entries


def _escaped(value: Any) -> Any:
    """`value` with every string starting with `@` escaped as `@@` (a literal on replay)."""
    if isinstance(value, Mapping):
        return {key: _escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, str) and value.startswith("@"):
        return "@" + value
    return value


def _yaml_block(data: Any, indent: str) -> list[str]:
    """`data` as block YAML lines, each prefixed by `indent`."""
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return [indent + line for line in text.splitlines()]


def _element_notes(state: Any, limit: int = 40) -> list[str]:
    """One-line summaries of the interactive elements of a recorded browser state."""
    if not isinstance(state, str):
        return []
    notes = [f"[{e.index}] <{e.tag}> {one_line(e.blob, 80)!r}" for e in parse_elements(state)]
    if len(notes) > limit:
        notes = notes[:limit] + [f"... {len(notes) - limit} more"]
    return notes


def skeleton(entries: Sequence[Mapping[str, Any]], model: str = "replay") -> str:
    """A replay file from transcript entries, to be edited (cases, element references).

    One conversation per distinct user request (first-seen order), matching its whole text;
    one `response:` step per recorded call, ordered by step (calls without a step come last).
    Each step carries comments listing the interactive elements the agent saw. Recorded strings
    starting with `@` are escaped as `@@`, so they replay literally.
    """
    conversations: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        conversations.setdefault(str(entry["user_request"]), []).append(entry)
    lines = [
        "# Replay file generated from a recording; edit it:",
        "# - shorten each `match` to a stable part of the task (ports and dates change),",
        "# - replace element indexes by references such as '@button:Add' or '@input:New todo',",
        "# - turn a step into `cases:` (if_all: [...], response: ...) with an `else:` response,",
        "# - steps[N-1] answers agent step N: drop repeated steps (retries of one `# step N`).",
        f"model: {json.dumps(model)}",
        "conversations:",
    ]
    for match, calls in conversations.items():
        lines.append(f"  - match: {json.dumps(match, ensure_ascii=False)}")
        lines.append("    steps:")
        ordered = sorted(calls, key=lambda c: (c.get("step") is None, c.get("step") or 0))
        for call in ordered:
            lines.append(f"      # step {call.get('step')}; interactive elements:")
            lines.extend(f"      #   {note}" for note in _element_notes(call.get("browser_state")))
            response = call.get("response")
            if not isinstance(response, Mapping):
                lines.append("      # the recorded content was not a JSON object; rewrite it")
                response = {"raw_content": response}
            block = _yaml_block({"response": _escaped(response)}, "        ")
            block[0] = "      - " + block[0].lstrip()
            lines.extend(block)
    return "\n".join(lines) + "\n"
