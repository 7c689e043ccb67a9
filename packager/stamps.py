"""Cut-off moments (`--as-of`, `Environment.as_of`) as written everywhere: a UTC stamp
`2019-08-21T15:45:13Z`. A leaf: config, adapters and the time machine all read it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_stamp(text: str) -> datetime:
    """A cut-off as written in an image (`2019-08-21T15:45:13Z`), as an aware datetime."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def as_stamp(value: str) -> str:
    """A date or datetime (`2019-08-21`, `2019-08-21T15:45:13Z`, with an offset) as a UTC stamp
    (`2019-08-21T00:00:00Z`); ValueError when it is neither.
    """
    moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
