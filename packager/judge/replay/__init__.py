"""A local OpenAI chat-completions server that replays recorded model turns for browser-use.

Tests of the browser judge run the real app, the real Chromium and the real browser-use agent
(0.13.14); only the model is replaced. browser-use's `ChatOpenAI` with `base_url=server.url`
posts to `{base_url}/chat/completions` and gets back, as `choices[0].message.content`, the JSON
agent output that a replay file (YAML) recorded for that task and step.

Replay file::

    model: replay-todo-web                 # informational; served by GET /v1/models
    conversations:
      - match: "blank-title-rejected"      # substring of the <user_request> text
        steps:                             # agent step N (`<step_info>StepN`) uses steps[N-1]
          - response: {...agent output...}
          - cases:                         # first case whose `if_all` all hold wins
              - if_all: ["Title is required", "!0 items left"]
                response: {...}
            else: {...}                    # required with `cases`

Selection, per request:

- Conversation: the first whose `match` occurs in the `<user_request>` section (the first one
  in the user messages, normally in the first user message; all user text when there is none).
- Step: N from `<step_info>StepN` (or `Step N`) in the user text; step N uses `steps[N-1]`.
- Case: `if_all` strings are substrings of the `<browser_state>` section (all user text when
  absent) that must all occur; a string starting with `!` must not occur. No match -> `else`.

Element references: every string value (not key) in the chosen response, at any depth, that is
exactly `@tag:text` or `@tag[attr=value]...:text` becomes the integer index of the first
interactive element of the `<browser_state>` (see `parse_elements`) whose tag equals `tag`,
whose attributes text contains every `attr=value` filter, and whose blob (attributes text,
its own indented text lines, and for a checkbox or radio the text lines after it) contains
`text` (case-sensitive; an empty `text` matches any blob). A string starting with `@@` is a literal
and loses one `@`; other strings are left alone. An unresolvable reference is an error.

Errors (no conversation, step beyond the recorded ones, unresolvable reference, malformed
request) are answered HTTP 400 `{"error": {"message": ..., "type": "replay_error"}}`, logged
and recorded in `ReplayServer.calls`; the server keeps serving.

Token usage is an estimate, not a tokenizer count: prompt_tokens = characters of all text
(string contents and text parts of every message) // 4 + 85 per image part; completion_tokens
= characters of the returned content // 4.

Command line (`python -m packager.judge.replay`): `serve FILE` replays a file; `record
--upstream URL --out FILE.jsonl` is a recording proxy in front of a real OpenAI-compatible
endpoint; `skeleton TRANSCRIPT.jsonl` prints a replay file from a recording, to be edited.
"""

from packager.judge.replay.cli import main
from packager.judge.replay.record import RecordProxy
from packager.judge.replay.reply import respond
from packager.judge.replay.request import ReplayError
from packager.judge.replay.script import ReplayScript
from packager.judge.replay.server import ReplayServer
from packager.judge.replay.skeleton import read_transcript, skeleton
from packager.judge.replay.state import parse_elements, resolve

__all__ = [
    "RecordProxy",
    "ReplayError",
    "ReplayScript",
    "ReplayServer",
    "main",
    "parse_elements",
    "read_transcript",
    "resolve",
    "respond",
    "skeleton",
]
