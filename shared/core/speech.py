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

from shared.core.inline_reasoning import Visible, find_reasoning, visible
from shared.core.math_speech import Formulas
from shared.core.speakable import split_answer, unfinished_block_start

# A sentence ends at . ! ? … (closing quotes/brackets may follow) or at a blank line, and is
# complete once other text follows it: "main.swift" or "3.5" do not end one.
_CLOSERS = "\"')\\]\u201d\u2019"  # closing quotes and brackets
_SENTENCE_END = re.compile(rf"(?:[.!?\u2026]+[{_CLOSERS}]*[ \t\n]+|\n[ \t]*\n\s*)(?=\S)")
_CLAUSE_END = re.compile(rf"[.!?\u2026,;:][{_CLOSERS}]*\s*$|\n\s*$")
_SENTENCE_TAIL = re.compile(rf"(?:[.!?\u2026]+[{_CLOSERS}]*[ \t\n]+|\n[ \t]*\n\s*)\Z")  # text ends a sentence


_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)
_BLOCK_LINE = re.compile(r"^(?:[ \t]*(?:[-*+\u2022]|\d{1,9}[.)])\s|[ \t]*\||    |\t|[+@-])")


def _in_block(text: str, index: int) -> bool:
    """Whether ``index`` falls inside a fenced block or on a list, table, indented or diff line."""
    if len(_FENCE_LINE.findall(text, 0, index)) % 2:
        return True
    line_start = text.rfind("\n", 0, index) + 1
    return _BLOCK_LINE.match(text, line_start) is not None


_TAIL = 16
_SENTENCE_MARKS = (".", "!", "?", "\u2026", "\n")
# Until a first partial went out, texts shorter than this are looked at on every delta.
EAGER_CHARS = 2000


@dataclass(frozen=True)
class Pacing:
    flush_ms: int = 120
    growth: float = 0.5
    # After a segment's first tts.speak, completed sentences go out together at most this often:
    # the app is still playing what it got, and each speak is a commit.
    speak_interval_ms: int = 1000


class SegmentText:
    """The text of the current speech segment, what was shown of it and what was spoken.

    Fed one model delta at a time, so every per-delta check is O(delta): the text is joined only
    when a partial or a sentence is due, and sentences are looked for only near punctuation.
    """

    def __init__(self, pacing: Pacing) -> None:
        self.pacing = pacing
        self._start()

    def _start(self) -> None:
        self.shown = 0  # characters of ``text`` in the last partial posted
        self.spoken = 0  # characters of ``text`` already sent to tts.speak
        self._pieces: list[str] = []
        self._joined = ""
        self._length = 0
        self._tail = ""  # the last few characters, for clause and sentence ends
        self._fresh = False  # text other than whitespace since the last partial
        self._maybe_sentence = False  # punctuation arrived since sentences were last looked for
        self._tagged = False  # a "<" arrived: the text may hold inline reasoning (<thinking>…</thinking>)
        self._speakable = 0
        self._flushed_at: float | None = None
        self._spoke_at: float | None = None

    @property
    def text(self) -> str:
        if self._pieces:
            self._joined += "".join(self._pieces)
            self._pieces.clear()
        return self._joined

    def add(self, delta: str) -> None:
        if not delta:
            return
        self._pieces.append(delta)
        self._length += len(delta)
        self._tail = (self._tail + delta)[-_TAIL:]
        if not delta.isspace():
            self._fresh = True
        if any(mark in self._tail for mark in _SENTENCE_MARKS):
            self._maybe_sentence = True
        if "<" in delta:
            self._tagged = True

    @property
    def partial(self) -> str:
        """The text as the app shows it: markdown made plain, code on cards, and nothing of a
        block still being written."""
        text = self.text
        limit = unfinished_block_start(text)
        visible = text if limit is None else text[:limit]
        return split_answer(visible).display if visible.strip() else ""

    def partial_due(self, now: float) -> bool:
        """Whether the text not yet shown should go out now as a partial. Until a first partial
        went out, a short text is looked at on every delta (the first visible words go at once)."""
        if not self._fresh:
            return False
        if self._flushed_at is None or (self.shown == 0 and self._length < EAGER_CHARS):
            return True
        if self._length - self.shown < self.pacing.growth * self.shown:
            return False
        waited_ms = (now - self._flushed_at) * 1000
        return waited_ms >= self.pacing.flush_ms or _CLAUSE_END.search(self._tail) is not None

    def shown_now(self, now: float, *, posted: bool = True) -> None:
        """A flush happened at ``now``: with ``posted``, the whole text so far is on screen."""
        self._flushed_at = now
        if posted:
            self.shown = self._length
            self._fresh = False

    def speak_due(self, now: float) -> bool:
        """Whether completed sentences may go to tts.speak now (the first at once)."""
        return self._spoke_at is None or (now - self._spoke_at) * 1000 >= self.pacing.speak_interval_ms

    def spoke(self, until: int, now: float) -> None:
        self.spoken = until
        self._spoke_at = now

    def speakable_until(self) -> int:
        """End of the last complete sentence not yet spoken (``spoken`` when there is none).

        Only prose is cut into sentences: never inside a code block, list, table, diff or display
        math (the whole block becomes one card), a formula or inline reasoning, nor into a block still
        being written. Sentences are looked for in the text without its reasoning, so no cut falls
        inside a region and reasoning never ends a sentence; reasoning the model is still writing
        counts as text after the sentence before it, which goes out at once.
        """
        if not self._maybe_sentence:
            return max(self._speakable, self.spoken)
        text = self.text
        limit = unfinished_block_start(text)
        reasoning = find_reasoning(text) if self._tagged else None
        shown = Visible(text) if reasoning is None else visible(text, reasoning)
        prose = shown.text
        formulas = Formulas(prose)
        end = self.spoken
        for match in _SENTENCE_END.finditer(prose, shown.offset(self.spoken)):
            cut = shown.raw(match.end())
            if limit is not None and cut > limit:
                break
            if not _in_block(prose, match.start()) and not formulas.covers(match.start()):
                end = cut
        thinking = None if reasoning is None else reasoning.open_at
        if thinking is not None and thinking > end and (limit is None or thinking <= limit):
            tail = _SENTENCE_TAIL.search(prose, max(0, len(prose) - _TAIL * 4))
            if tail and not _in_block(prose, tail.start()) and not formulas.covers(tail.start()):
                end = thinking
        self._speakable = end
        # a sentence end still needs the text after it: look again when more comes
        self._maybe_sentence = any(mark in text[end:] for mark in _SENTENCE_MARKS)
        return end

    def next_segment(self) -> None:
        """The segment was finalized (a tool call follows): the next text starts a new one."""
        self._start()
