"""The speech segment as the turn runner streams it: when a partial is due, which sentences are
complete enough to speak. Pure: the runner passes the clock in.

Partials are coalesced: the first goes out as soon as there is text (the user sees the answer
start); after that one is due when the flush window has passed or a sentence/clause ends, and
the new text is at least ``growth`` of what is already shown. Partials are cumulative, so the
growth rule keeps the bytes posted linear in the answer (a geometric series) instead of
quadratic; with ``flush_ms=0`` and ``growth=0`` every delta is a partial.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.core.speakable import split_answer, unfinished_block_start

# A sentence ends at . ! ? … (closing quotes/brackets may follow) or at a blank line, and is
# complete once other text follows it: "main.swift" or "3.5" do not end one.
_CLOSERS = "\"')\\]\u201d\u2019"  # closing quotes and brackets
_SENTENCE_END = re.compile(rf"(?:[.!?\u2026]+[{_CLOSERS}]*[ \t\n]+|\n[ \t]*\n\s*)(?=\S)")
_CLAUSE_END = re.compile(rf"[.!?\u2026,;:][{_CLOSERS}]*\s*$|\n\s*$")


_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)
_BLOCK_LINE = re.compile(r"^(?:[ \t]*(?:[-*+\u2022]|\d{1,9}[.)])\s|[ \t]*\||    |\t|[+@-])")


def _in_block(text: str, index: int) -> bool:
    """Whether ``index`` falls inside a fenced block or on a list, table, indented or diff line."""
    if len(_FENCE_LINE.findall(text, 0, index)) % 2:
        return True
    line_start = text.rfind("\n", 0, index) + 1
    return _BLOCK_LINE.match(text, line_start) is not None


@dataclass(frozen=True)
class Pacing:
    flush_ms: int = 120
    growth: float = 0.25


class SegmentText:
    """The text of the current speech segment, what was shown of it and what was spoken."""

    def __init__(self, pacing: Pacing) -> None:
        self.pacing = pacing
        self.text = ""
        self.shown = 0  # characters of ``text`` in the last partial posted
        self.spoken = 0  # characters of ``text`` already sent to tts.speak
        self._flushed_at: float | None = None

    def add(self, delta: str) -> None:
        self.text += delta

    @property
    def partial(self) -> str:
        """The text as the app shows it: markdown made plain, code on cards, and nothing of a
        block still being written."""
        limit = unfinished_block_start(self.text)
        visible = self.text if limit is None else self.text[:limit]
        return split_answer(visible).display if visible.strip() else ""

    def partial_due(self, now: float) -> bool:
        """Whether the text not yet shown should go out now as a partial."""
        if not self.text[self.shown :].strip():
            return False
        if self._flushed_at is None:
            return True
        if len(self.text) - self.shown < self.pacing.growth * self.shown:
            return False
        waited_ms = (now - self._flushed_at) * 1000
        return waited_ms >= self.pacing.flush_ms or _CLAUSE_END.search(self.text) is not None

    def shown_now(self, now: float) -> None:
        self.shown = len(self.text)
        self._flushed_at = now

    def speakable_until(self) -> int:
        """End of the last complete sentence not yet spoken (``spoken`` when there is none).

        Only prose is cut into sentences: never inside a code block, list, table or diff (the
        whole block becomes one card), nor into a block still being written.
        """
        limit = unfinished_block_start(self.text)
        end = self.spoken
        for match in _SENTENCE_END.finditer(self.text, self.spoken):
            if limit is not None and match.end() > limit:
                break
            if not _in_block(self.text, match.start()):
                end = match.end()
        return end

    def next_segment(self) -> None:
        """The segment was finalized (a tool call follows): the next text starts a new one."""
        self.text, self.shown, self.spoken, self._flushed_at = "", 0, 0, None
