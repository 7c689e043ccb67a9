"""What the replay reads from a chat-completions request, and the errors it answers with."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

IMAGE_TOKENS = 85
"""Estimated prompt tokens of one image part."""

_USER_REQUEST = re.compile(r"<user_request>(.*?)(?:</user_request>|\Z)", re.DOTALL)
_BROWSER_STATE = re.compile(r"<browser_state>(.*?)(?:</browser_state>|\Z)", re.DOTALL)
_STEP_INFO = re.compile(r"<step_info>\s*Step\s*(\d+)")


class ReplayError(Exception):
    """A request the replay file cannot answer; served as HTTP 400 with `message`."""

    def __init__(self, message: str, *, conversation: str | None = None, step: int | None = None):
        """Keep `message` and, when known, the conversation `match` and agent step."""
        super().__init__(message)
        self.message = message
        self.conversation = conversation
        self.step = step


@dataclass(frozen=True)
class ChatRequest:
    """What the replay needs from a chat-completions request body."""

    model: str | None
    user_texts: tuple[str, ...]
    text_chars: int
    images: int

    @property
    def user_request(self) -> str:
        """The first `<user_request>` section of the user messages, else all user text."""
        found = _USER_REQUEST.search(self.all_user_text)
        return found[1].strip() if found else self.all_user_text

    @property
    def all_user_text(self) -> str:
        """The text parts of all user messages, joined by newlines."""
        return "\n".join(self.user_texts)

    @property
    def browser_state(self) -> str:
        """The `<browser_state>` section of the user text, else all user text."""
        found = _BROWSER_STATE.search(self.all_user_text)
        return found[1] if found else self.all_user_text

    @property
    def step(self) -> int | None:
        """N of `<step_info>StepN`, or None when there is none."""
        found = _STEP_INFO.search(self.all_user_text)
        return int(found[1]) if found else None

    @property
    def prompt_tokens(self) -> int:
        """Estimated prompt tokens: characters // 4 + 85 per image."""
        return self.text_chars // 4 + IMAGE_TOKENS * self.images


def parse_request(body: Any) -> ChatRequest:
    """Read the messages of a request body; `ReplayError` when it is malformed."""
    if not isinstance(body, Mapping):
        raise ReplayError(f"the request body must be a JSON object, not {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ReplayError("the request needs a non-empty 'messages' list")
    model = body.get("model")
    texts: list[str] = []
    chars = images = 0
    for number, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ReplayError(f"messages[{number}] must be an object")
        message_texts, message_images = _content(message.get("content"), number)
        chars += sum(len(text) for text in message_texts)
        images += message_images
        if message.get("role") == "user":
            texts.append("\n".join(message_texts))
    return ChatRequest(
        model=model if isinstance(model, str) else None,
        user_texts=tuple(texts),
        text_chars=chars,
        images=images,
    )


def _content(content: Any, number: int) -> tuple[list[str], int]:
    """The text parts and image count of one message's `content`."""
    if content is None:
        return [], 0
    if isinstance(content, str):
        return [content], 0
    if not isinstance(content, list):
        raise ReplayError(f"messages[{number}].content must be a string or a list of parts")
    texts, images = [], 0
    for part in content:
        if not isinstance(part, Mapping):
            raise ReplayError(f"messages[{number}].content has a part that is not an object")
        if part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ReplayError(f"messages[{number}].content has a text part without text")
            texts.append(text)
        elif part.get("type") in ("image_url", "input_image", "image"):
            images += 1
    return texts, images


def error_body(message: str, kind: str = "replay_error") -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
