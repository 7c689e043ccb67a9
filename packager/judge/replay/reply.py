"""Answering a request from a replay file: conversation, step, branch, references, completion."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packager.judge.replay.request import ReplayError, parse_request
from packager.judge.replay.script import ReplayScript
from packager.judge.replay.state import parse_elements, resolve


@dataclass(frozen=True)
class Reply:
    """A completion and where in the replay file it came from."""

    completion: dict[str, Any]
    conversation: str
    step: int
    branch: str


def one_line(text: str, limit: int = 200) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def reply(script: ReplayScript, body: Mapping[str, Any]) -> Reply:
    """Answer a request body from `script`; `ReplayError` says why it cannot."""
    if body.get("stream"):
        raise ReplayError("streaming ('stream': true) is not supported by the replay server")
    request = parse_request(body)
    user_request = request.user_request
    found = [i for i, c in enumerate(script.conversations) if c.match in user_request]
    if not found:
        known = ", ".join(repr(c.match) for c in script.conversations)
        raise ReplayError(
            f"no conversation of {script.source} matches the user request "
            f"{one_line(user_request)!r}; matches: {known}"
        )
    index = found[0]
    conversation = script.conversations[index]
    step = request.step
    if step is None:
        raise ReplayError(
            "the request has no '<step_info>StepN' in its user text",
            conversation=conversation.match,
        )
    if not 1 <= step <= len(conversation.steps):
        raise ReplayError(
            f"conversation {conversation.match!r} has {len(conversation.steps)} recorded "
            f"step(s); the agent asked for step {step}",
            conversation=conversation.match,
            step=step,
        )
    state = request.browser_state
    response, branch = conversation.steps[step - 1].choose(state)
    try:
        resolved = resolve(response, parse_elements(state))
    except ReplayError as exc:
        raise ReplayError(
            f"conversation {conversation.match!r} step {step} ({branch}): {exc.message}",
            conversation=conversation.match,
            step=step,
        ) from None
    content = json.dumps(resolved, ensure_ascii=False)
    completion_tokens = len(content) // 4
    completion = {
        "id": f"chatcmpl-replay-{index}-{step}",
        "object": "chat.completion",
        "created": 0,
        "model": request.model or script.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": request.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": request.prompt_tokens + completion_tokens,
        },
    }
    return Reply(completion=completion, conversation=conversation.match, step=step, branch=branch)


def respond(script: ReplayScript, body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat.completion for a request body (pure); `ReplayError(message)` when none."""
    return reply(script, body).completion
