"""Reasoning a model writes inline, in its answer's text: ``<thinking>…</thinking>``.

Amazon Nova (and Claude 3 with tools) wrap their reasoning in these tags as plain text. It is the
model's note to itself: nothing inside a region is ever shown or spoken, while the history keeps
it as the model wrote it. This is the first stage of the answer scanner (speakable.py): the tags
sit anywhere in a line, so regions are cut out by character before the line scanner sees the text.
An answer without a tag costs one C-level ``in``. Pure and regex-based: it runs on the hot path.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

OPEN = "<thinking>"
CLOSE = "</thinking>"
_TAG = re.compile(r"<(/?)thinking>")
_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)


@dataclass(frozen=True)
class Reasoning:
    """Where a text's reasoning is: closed regions (tags included; a stray closing tag is one on its
    own) and the start of a region still open, which runs to the end of the text."""

    spans: tuple[tuple[int, int], ...] = ()
    open_at: int | None = None


_NONE = Reasoning()


def find_reasoning(text: str) -> Reasoning:
    """The reasoning regions of ``text``. A tag inside a fenced code block or inline code (an odd
    number of backticks before it on its line) is the answer talking about the tag, not reasoning."""
    if "thinking>" not in text:
        return _NONE
    spans: list[tuple[int, int]] = []
    pos = scanned = fences = 0
    while tag := _TAG.search(text, pos):
        start = tag.start()
        fences += len(_FENCE_LINE.findall(text, scanned, start))
        line_start = max(text.rfind("\n", 0, start) + 1, spans[-1][1] if spans else 0)
        scanned = pos = tag.end()
        if fences % 2 or text.count("`", line_start, start) % 2:
            continue
        if tag[1]:  # a closing tag with no opening one: never for the user either
            spans.append((start, tag.end()))
            continue
        close = text.find(CLOSE, tag.end())
        if close < 0:
            return Reasoning(tuple(spans), start)
        scanned = pos = close + len(CLOSE)
        spans.append((start, pos))
    return Reasoning(tuple(spans)) if spans else _NONE


def pending_tag(text: str) -> int | None:
    """Where a tag may be arriving at the very end of a streaming text (``"…<thin"``): it is held
    back until it is whole, as an unfinished code block is."""
    at = text.rfind("<", max(0, len(text) - len(CLOSE) + 1))
    if at >= 0 and (OPEN.startswith(text[at:]) or CLOSE.startswith(text[at:])):
        return at
    return None


@dataclass(frozen=True)
class Visible:
    """A text without its reasoning, and how offsets in it map to offsets in the text as written."""

    text: str
    _at: tuple[int, ...] = ()  # where in ``text`` a region was cut out
    _cut: tuple[int, ...] = ()  # characters cut out up to and including that region
    _ends: tuple[int, ...] = ()  # where each region ends in the text as written

    def raw(self, offset: int) -> int:
        """The offset in the text as written; a region right at ``offset`` counts as before it."""
        i = bisect_right(self._at, offset)
        return offset + (self._cut[i - 1] if i else 0)

    def offset(self, raw: int) -> int:
        """The offset in the visible text of ``raw``, an offset outside any region."""
        i = bisect_right(self._ends, raw)
        return raw - (self._cut[i - 1] if i else 0)


def visible(text: str, reasoning: Reasoning | None = None) -> Visible:
    """``text`` with every reasoning region cut out, an unclosed one to the end."""
    reasoning = find_reasoning(text) if reasoning is None else reasoning
    if not reasoning.spans and reasoning.open_at is None:
        return Visible(text)
    pieces: list[str] = []
    at: list[int] = []
    cut: list[int] = []
    length = removed = prev = 0
    for start, end in reasoning.spans:
        pieces.append(text[prev:start])
        length += start - prev
        removed += end - start
        at.append(length)
        cut.append(removed)
        prev = end
    pieces.append(text[prev : reasoning.open_at])
    return Visible("".join(pieces), tuple(at), tuple(cut), tuple(end for _, end in reasoning.spans))


def reasoning_words(text: str) -> str:
    """The words inside ``text``'s closed reasoning regions, without the tags."""
    regions = find_reasoning(text).spans
    inner = (text[start:end].removeprefix(OPEN).removesuffix(CLOSE).strip() for start, end in regions)
    return " ".join(part for part in inner if part)


def without_reasoning(text: str) -> str:
    """What of ``text`` may be shown or spoken."""
    return visible(text).text
