"""The browser state: its interactive elements, and element references resolved against them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packager.judge.replay.request import ReplayError

_ELEMENT_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<marks>(?:\*|\|[^|\n]*\|)*)\[(?P<index>\d+)\]"
    r"<(?P<tag>[A-Za-z][\w:-]*)(?P<rest>.*)$"
)
_MARKER_LINE = re.compile(r"^\s*(?:\[(?:Start|End) of page\]|\.\.\.)")
_REFERENCE = re.compile(
    r"@(?P<tag>[A-Za-z][\w-]*)(?P<filters>(?:\[[^\[\]]+\])*):(?P<text>.*)", re.DOTALL
)


@dataclass(frozen=True)
class Element:
    """One interactive element of the browser state, as browser-use serialises it."""

    index: int
    tag: str
    attrs: str
    blob: str


def _is_toggle(tag: str, attrs: str) -> bool:
    """A checkbox or radio button (whose label is usually sibling text, not a child)."""
    if tag == "input" and ("type=checkbox" in attrs or "type=radio" in attrs):
        return True
    return "role=checkbox" in attrs or "role=radio" in attrs


def _indent(line: str) -> int:
    """Leading whitespace characters (browser-use indents one tab per tree level)."""
    return len(line) - len(line.lstrip(" \t"))


def _split_rest(rest: str) -> tuple[str, str]:
    """`<tag` remainder -> (attributes text, text after the tag on the same line)."""
    if "/>" in rest:
        end = rest.rfind("/>")
        return rest[:end].strip(), rest[end + 2 :].strip()
    if ">" in rest:
        end = rest.find(">")
        return rest[:end].strip(), rest[end + 1 :].strip()
    return rest.strip(), ""


def parse_elements(state: str) -> list[Element]:
    """The interactive elements of a `<browser_state>` text, in order.

    An element line is `[N]<tag attrs... />`, possibly after indentation and the markers `*`
    (new element) and `|...|` (e.g. `|SHADOW(open)|`). Text lines are the other non-blank
    lines, except `[Start of page]`, `[End of page]` and `...` scroll hints, which end a run
    of text. An element's blob is, joined by newlines:

    1. its attributes text (between the tag name and `/>`) and any text after `/>`;
    2. its own text: the text lines right after it that are indented deeper than its line,
       up to the first element line or the first text line not indented deeper;
    3. for a checkbox or radio (`<input type=checkbox|radio>`, or `role=checkbox|radio`):
       every text line after it up to the next element line, whatever the indentation, since
       browser-use writes a sibling label (`<li><input type=checkbox><label>Buy milk`) as a
       text line at the checkbox's own level. A label written before the checkbox is not in
       its blob.
    """
    lines = state.splitlines()
    elements = []
    for number, line in enumerate(lines):
        found = _ELEMENT_LINE.match(line)
        if not found:
            continue
        tag = found["tag"]
        attrs, after = _split_rest(found["rest"])
        depth = len(found["indent"])
        toggle = _is_toggle(tag, attrs)
        parts = [attrs, after]
        own = True
        for following in lines[number + 1 :]:
            if not following.strip():
                continue
            if _ELEMENT_LINE.match(following) or _MARKER_LINE.match(following):
                break
            own = own and _indent(following) > depth
            if not (own or toggle):
                break
            parts.append(following.strip())
        blob = "\n".join(part for part in parts if part)
        elements.append(Element(index=int(found["index"]), tag=tag, attrs=attrs, blob=blob))
    return elements


@dataclass(frozen=True)
class Reference:
    """A parsed `@tag[attr=value]:text` element reference."""

    tag: str
    filters: tuple[str, ...]
    text: str

    @classmethod
    def parse(cls, value: str) -> Reference | None:
        """The reference `value` spells, or None when it is not one."""
        if value.startswith("@@"):
            return None
        found = _REFERENCE.fullmatch(value)
        if not found:
            return None
        filters = tuple(re.findall(r"\[([^\[\]]+)\]", found["filters"]))
        return cls(tag=found["tag"], filters=filters, text=found["text"])

    def matches(self, element: Element) -> bool:
        """Whether `element` is one this reference names."""
        return (
            element.tag == self.tag
            and all(item in element.attrs for item in self.filters)
            and self.text in element.blob
        )


def resolve(value: Any, elements: Sequence[Element]) -> Any:
    """`value` with every element reference string replaced by its element index (a copy)."""
    if isinstance(value, Mapping):
        return {key: resolve(item, elements) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, elements) for item in value]
    if not isinstance(value, str):
        return value
    if value.startswith("@@"):
        return value[1:]
    reference = Reference.parse(value)
    if reference is None:
        return value
    for element in elements:
        if reference.matches(element):
            return element.index
    same_tag = [element for element in elements if element.tag == reference.tag]
    shown = "; ".join(f"[{e.index}] {e.blob!r}" for e in same_tag[:10]) or "none"
    raise ReplayError(
        f"no interactive element matches {value!r} ({len(elements)} elements in the browser "
        f"state; <{reference.tag}> elements: {shown})"
    )
