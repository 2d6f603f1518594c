"""Sending a transcript as the app's speech recognizer does: partials word by word, then the final.

While the person speaks, the iOS app sends ``userAudioTranscriptPartial`` events with the text
recognized so far (cumulative, one more word each time); after the recognizer's end-of-speech
silence it sends ``userAudioTranscriptFinal``. The conductor may start answering while the
person finishes the sentence, so a client that sends only finals never exercises that path.
``RecognizerPace`` says how fast the words come and how long the silence before the final is;
``send_transcript`` does the sending. Nothing here is a new event: the wire is the protocol's.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from shared.wire.protocol import Event, UserAudioTranscriptFinal, UserAudioTranscriptPartial, make_event

Send = Callable[[Event], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]

PACE_SPEC = "MS_PER_WORD:SILENCE_MS"


def cumulative_partials(text: str) -> list[str]:
    """The partials a recognizer sends for ``text``: its words, cumulatively, joined by single
    spaces ("open the file" -> ["open", "open the", "open the file"]); none for blank text."""
    words = text.split()
    return [" ".join(words[:count]) for count in range(1, len(words) + 1)]


@dataclass(frozen=True)
class RecognizerPace:
    """How a recognizer paces a transcript.

    ``word_interval_s``: seconds between one partial and the next; ``final_after_s``: the silence
    after the last word before the final. ``final_text``, when set, is what the final says instead
    of the text the partials spelled out (a recognizer revising its guess at the end).
    ``longest_s``, when set, bounds the partials of a long text (a paste is not speech): they
    then grow by several words each, so the last comes at most that many seconds after the first.
    """

    word_interval_s: float = 0.2
    final_after_s: float = 0.8
    final_text: str | None = None
    longest_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("word_interval_s", "final_after_s", "longest_s"):
            value = getattr(self, name)
            if name == "longest_s" and value is None:
                continue
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number of seconds, 0 or more (got {value!r})")

    @classmethod
    def parse(cls, spec: str) -> RecognizerPace:
        """The pace in a ``"<ms per word>:<silence ms>"`` spec, e.g. ``"200:800"``; ValueError (one
        line saying what is wrong) for anything else, negative numbers included."""
        parts = spec.strip().split(":")
        if len(parts) != 2:
            raise ValueError(f"{spec!r} is not {PACE_SPEC} (e.g. 200:800)")
        values: list[float] = []
        for label, part in zip(("MS_PER_WORD", "SILENCE_MS"), parts, strict=True):
            try:
                value = float(part)
            except ValueError:
                raise ValueError(f"{spec!r}: {label} {part.strip()!r} is not a number of milliseconds") from None
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{spec!r}: {label} must be 0 or more milliseconds")
            values.append(value / 1000)
        return cls(word_interval_s=values[0], final_after_s=values[1])

    def final_for(self, text: str) -> str:
        """What the final transcript says for ``text``."""
        return text if self.final_text is None else self.final_text

    def speaking_s(self, text: str) -> float:
        """Seconds from the first partial of ``text`` to its final (0 when it has no words)."""
        partials = len(self.partials(text))
        return 0.0 if partials == 0 else (partials - 1) * self.word_interval_s + self.final_after_s

    def partials(self, text: str) -> list[str]:
        """The partials sent for ``text``: one a word, or, past ``longest_s``, one every few words
        (the last always the whole text)."""
        partials = cumulative_partials(text)
        if self.longest_s is None or not self.word_interval_s or not partials:
            return partials
        most = max(2, int(self.longest_s / self.word_interval_s) + 1)
        if len(partials) <= most:
            return partials
        last = len(partials) - 1
        return [partials[round(index * last / (most - 1))] for index in range(most)]


def final_transcript(text: str, pace: RecognizerPace | None) -> str:
    """The text of the final transcript ``send_transcript`` sends for ``text``."""
    return text if pace is None else pace.final_for(text)


def speaking_time(text: str, pace: RecognizerPace | None) -> float:
    """Seconds ``send_transcript`` spends before it sends the final (0 without a pace)."""
    return 0.0 if pace is None else pace.speaking_s(text)


async def send_transcript(send: Send, text: str, pace: RecognizerPace | None, *, sleep: Sleep = asyncio.sleep) -> None:
    """Send ``text`` as the app does: without a pace, the final alone; with one, a partial per
    word ``word_interval_s`` apart, then, ``final_after_s`` after the last, the final."""
    if pace is not None:
        partials = pace.partials(text)
        for index, partial in enumerate(partials):
            if index:
                await sleep(pace.word_interval_s)
            await send(make_event(UserAudioTranscriptPartial(text=partial)))
        if partials:
            await sleep(pace.final_after_s)
    await send(make_event(UserAudioTranscriptFinal(text=final_transcript(text, pace))))
