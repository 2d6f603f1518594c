"""The speech segment as the turn runner streams it: when a partial is due, which sentences are
complete enough to speak. Pure: the runner passes the clock in.

Partials are coalesced: the first goes out as soon as there is text (the user sees the answer
start); after that one is due when the flush window has passed or a sentence/clause ends, and
the new text is at least ``growth`` of what is already shown. Partials are cumulative, so the
growth rule keeps the bytes posted linear in the answer (a geometric series) instead of
quadratic; with ``flush_ms=0`` and ``growth=0`` every delta is a partial.

Speech goes out sentence by sentence, except that a segment's first speech may be its first
phrase (see ``first_phrase_end``): the words before a clause boundary are heard while the model
still writes the rest of the sentence. An app that announced ``wholeSentences`` never gets one.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from shared.core.inline_reasoning import Visible, find_reasoning, visible
from shared.core.math_speech import Formulas
from shared.core.speakable import split_answer, unfinished_block_start
from shared.wire.protocol import WHOLE_SENTENCES

# A sentence ends at . ! ? … (closing quotes/brackets may follow) or at a blank line, and is
# complete once other text follows it: "main.swift" or "3.5" do not end one.
_CLOSERS = "\"')\\]\u201d\u2019"  # closing quotes and brackets
_SENTENCE_END = re.compile(rf"(?:[.!?\u2026]+[{_CLOSERS}]*[ \t\n]+|\n[ \t]*\n\s*)(?=\S)")
_CLAUSE_END = re.compile(rf"[.!?\u2026,;:][{_CLOSERS}]*\s*$|\n\s*$")
_SENTENCE_TAIL = re.compile(rf"(?:[.!?\u2026]+[{_CLOSERS}]*[ \t\n]+|\n[ \t]*\n\s*)\Z")  # text ends a sentence


_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)
_BLOCK_LINE = re.compile(r"^(?:[ \t]*(?:[-*+\u2022]|\d{1,9}[.)])\s|[ \t]*\||    |\t|[+@-])", re.MULTILINE)


def _in_block(text: str, index: int) -> bool:
    """Whether ``index`` falls inside a fenced block or on a list, table, indented or diff line."""
    if len(_FENCE_LINE.findall(text, 0, index)) % 2:
        return True
    line_start = text.rfind("\n", 0, index) + 1
    return _BLOCK_LINE.match(text, line_start) is not None


# ---- the first phrase --------------------------------------------------------------------------
# A phrase is plain words (letters and digits, apostrophes and hyphens inside a word, "1,000")
# on the segment's first line, ending at a comma, semicolon, colon or spaced dash that the same
# line goes on after, with a letter. Anything else before the boundary (a period, so no decimal,
# version, file name or abbreviation; quotes, brackets, markdown, code, math, a URL, a path, a
# tag) means the sentence is spoken whole.
PHRASE_MIN_WORDS = 3
PHRASE_MAX_CHARS = 200  # past this the first sentence is spoken whole
_WORD = re.compile(r"[^\W_]+(?:(?:['\u2019\u2013\u2014-]|,(?=\d{3}(?!\d)))[^\W_]+)*")
_GAP = re.compile(r"[ \t]*")
_DASHES = "-\u2013\u2014"
_SERIES_WORDS = frozenset({"and", "or", "nor"})
_DETERMINERS = frozenset({"a", "an", "the", "some", "any", "my", "your", "our", "its", "their", "this", "that"})
NOT_YET = -1  # ``first_phrase_end``: the text so far may still become a phrase
NEVER = -2  # ``first_phrase_end``: no phrase to speak first, whatever follows


def first_phrase_end(text: str, min_words: int = PHRASE_MIN_WORDS) -> int:
    """The end of ``text``'s first speakable phrase (after the spaces following its boundary),
    ``NOT_YET`` when more text may make one, or ``NEVER``.

    A boundary counts after at least ``min_words`` words. A comma is one only once the next
    whole words (two; three for "a struct, a class") show that it does not build a list ("Swift,
    Kotlin, and Go"; "a struct, a class or an enum"): none of them ends in a comma, none but the
    first is "and"/"or", and the words since an earlier comma are more than two.
    """
    start = len(text) - len(text.lstrip())
    indent = text[text.rfind("\n", 0, start) + 1 : start]
    if "\t" in indent or len(indent) >= 4 or start >= PHRASE_MAX_CHARS:  # an indented line is code
        return NEVER
    words = 0
    item = 0  # words since the last comma
    commas = 0
    last: list[str] = []  # the last two words, lowercased
    at = start
    while True:
        word = _WORD.match(text, at)
        if word is None:
            return NOT_YET if at >= len(text) else NEVER
        at = word.end()
        if at >= len(text):
            return NOT_YET  # the word may go on
        if at >= PHRASE_MAX_CHARS:
            return NEVER
        words += 1
        item += 1
        last = [*last[-1:], word[0].lower()]
        mark, gap_at = text[at], at + 1
        if mark in " \t":
            dash = _past_gap(text, at)
            if dash >= len(text):
                return NOT_YET
            if text[dash] not in _DASHES:
                at = dash
                continue
            mark, gap_at = text[dash], dash + 1
            if gap_at >= len(text):
                return NOT_YET
            if text[gap_at] not in " \t":  # "-flag", "x -1": not a dash
                return NEVER
        elif mark not in ",;:":
            return NEVER  # a sentence end, a quote, a bracket, markup, a line end
        after = _past_gap(text, gap_at)
        if after >= len(text) or (mark == "," and after == gap_at and text[after:].isdigit() and len(text) - after < 3):
            return NOT_YET  # "1," or "1,00" may become "1,000"
        if after == gap_at or text[after] == "\n":
            return NEVER  # "a:b", "x,y", or the line ends: a list or a block may follow
        if words >= min_words and text[after].isalpha():
            if mark != ",":
                return after
            parallel = not _DETERMINERS.isdisjoint(last)  # "with a struct," may go on "a class or"
            verdict = _clause_follows(text, after, parallel) if (item > 2 or not commas) else NEVER
            if verdict != NEVER:
                return verdict
        if mark == ",":
            commas += 1
            item = 0
        at = after


def _past_gap(text: str, at: int) -> int:
    """Where the spaces and tabs from ``at`` end (``at`` itself when there are none)."""
    gap = _GAP.match(text, at)
    assert gap is not None  # the pattern matches the empty gap too
    return gap.end()


def _clause_follows(text: str, cut: int, parallel: bool) -> int:
    """After a comma at a phrase's end: ``cut`` when the next words start a clause, ``NEVER`` when
    they continue a list (or the sentence ends: nothing is gained), ``NOT_YET`` while they are not
    all whole. Two words are looked at; three when a determiner follows a comma that one shortly
    precedes (``parallel``: "with a struct, a class or an enum")."""
    at = cut
    needed = 2
    count = 0
    while count < needed:
        word = _WORD.match(text, at)
        if word is None:
            return NOT_YET if at >= len(text) else NEVER
        if word.end() >= len(text):
            return NOT_YET
        count += 1
        lower = word[0].lower()
        if count == 1 and parallel and lower in _DETERMINERS:
            needed = 3
        if count > 1 and lower in _SERIES_WORDS:
            return NEVER
        if text[word.end()] not in " \t":
            return NEVER
        at = _past_gap(text, word.end())
        if at >= len(text) and count < needed:
            return NOT_YET
    return cut


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
    # A segment's first speech may be its first phrase of at least this many words (0: never).
    phrase_min_words: int = PHRASE_MIN_WORDS


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
        self._phrase = NOT_YET  # the first phrase's end (see ``first_phrase_end``)
        self._phrase_looked = 0  # the text's length when the first phrase was last looked for
        self.after_phrase = False  # the last tts.speak was the segment's first phrase

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
        seen = self._tail + delta  # a mark anywhere in a long delta counts, not only in its end
        self._tail = seen[-_TAIL:]
        if not delta.isspace():
            self._fresh = True
        if any(mark in seen for mark in _SENTENCE_MARKS):
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
        """Whether completed sentences may go to tts.speak now: the first speech at once, and the
        rest of the sentence after a first phrase as soon as it is complete (the app has only the
        phrase to play); after that at most once per ``speak_interval_ms``."""
        return (
            self._spoke_at is None
            or self.after_phrase
            or (now - self._spoke_at) * 1000 >= self.pacing.speak_interval_ms
        )

    def spoke(self, until: int, now: float) -> None:
        self.after_phrase = self.spoken == 0 and until == self._phrase
        self.spoken = until
        self._spoke_at = now

    def speakable_until(self, capabilities: Collection[str] | None = None) -> int:
        """End of the text to speak next: the last complete sentence not yet spoken (``spoken``
        when there is none), or, for the segment's first speech before its first sentence is
        complete, the first phrase's end (``first_phrase_end``) when ``capabilities`` (the app's)
        are given and do not hold ``wholeSentences``. Without ``capabilities``: sentences only."""
        end = self._sentences_until()
        if end > self.spoken or self.spoken or capabilities is None or WHOLE_SENTENCES in capabilities:
            return end
        phrase = self._first_phrase()
        return phrase if phrase > end else end

    def _first_phrase(self) -> int:
        """The first phrase's end, looked for again only when text arrived and it may still come."""
        if self._phrase == NOT_YET and self._length != self._phrase_looked:
            self._phrase_looked = self._length
            if self.pacing.phrase_min_words <= 0:
                self._phrase = NEVER
            else:
                text = self.text
                found = first_phrase_end(text, self.pacing.phrase_min_words)
                if found >= 0:
                    limit = unfinished_block_start(text)
                    found = found if limit is None or found <= limit else NEVER
                self._phrase = found
        return self._phrase

    def _sentences_until(self) -> int:
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
