"""Prints the conversation: one line per final, tool call, state and error; cards with their body.

The client reports what it receives, sends, raises, which state it enters and the cards its UI
model gains; the library default is ``NullRenderer`` so nothing is printed unless a caller asks
for it.
``TranscriptRenderer`` writes plain lines (no control characters: logs and pipes stay clean);
``LiveTranscriptRenderer`` (``live``) adds the growing partial answer on a terminal.
``choice.transcript_renderer`` picks one for a stream.

What came from the network (the model's text, cards, device names, error messages) is printed
without its escape sequences and control characters (``printable``): it cannot act on the terminal.
The names the conductor says a transcript's words may have meant (``namesHeard``) are one line each,
``heard 'get user buy id' → getUserById (src/users.ts)``; a new vocabulary for the recognizer is one
line with its first phrases (the same vocabulary again is not shown). The conductor's own reads for
a change card (``editor.readFile`` with a ``conductor-preview-`` callId) are not printed: the card
shows them. The errors after which the client stops (``taken_over``, ``too_many_devices``) are not
printed either: the client says them as it stops.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, TextIO

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Event,
    ToolCall,
    ToolResult,
    UserAudioTranscriptFinal,
)
from shared.wire.workspace import NamesHeard, Vocabulary
from voiceide_client.connection.incoming import STOPPING
from voiceide_client.tools.router import BUILTIN_TOOLS

from .terminal_text import printable

Card = dict[str, Any]
LONG_TEXT = 200
"""Characters of a transcript echoed in full; a longer one (a paste) shows its start and its length."""
STATE_LABELS = {"executing": "executing a tool"}
"""How a state reads in the transcript, where its name alone says too little."""
PREVIEW_PREFIX = "conductor-preview-"
"""The callId prefix of the conductor's reads of a file for a change card."""
VOCABULARY_SHOWN = 8
"""Phrases of a new vocabulary named in its line."""


class Renderer(Protocol):
    def received(self, event: Event) -> None: ...
    def sent(self, event: Event) -> None: ...
    def client_error(self, error: ErrorPayload) -> None: ...
    def state(self, state: str) -> None: ...
    def cards(self, cards: list[Card]) -> None: ...
    def warning(self, text: str) -> None: ...


class NullRenderer:
    """Prints nothing (library use)."""

    def received(self, event: Event) -> None:
        pass

    def sent(self, event: Event) -> None:
        pass

    def client_error(self, error: ErrorPayload) -> None:
        pass

    def state(self, state: str) -> None:
        pass

    def cards(self, cards: list[Card]) -> None:
        pass

    def warning(self, text: str) -> None:
        pass


class TranscriptRenderer:
    """Human-readable transcript as plain lines; partials are not shown (the final follows).

    ``quiet`` prints only errors and connection notices, to ``err``. Otherwise errors are part
    of the transcript on ``out`` and notices (reconnecting, offline) go to ``err``.
    """

    live = False
    """Whether lines and notices share one terminal display (then a notice needs no error line too)."""

    def __init__(self, out: TextIO | None = None, *, err: TextIO | None = None, quiet: bool = False) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self.quiet = quiet
        self._tool_names: dict[str, str] = {}
        self._previews: set[str] = set()  # callIds of the conductor's reads for a change card
        self._vocabulary: tuple[str, ...] | None = None  # the phrases last shown

    # ---- what the client reports ----------------------------------------------------------------

    def received(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, AssistantSpeechPartial):
            self._partial(f"assistant: {payload.text}")
        elif isinstance(payload, AssistantSpeechFinal):
            # a segment stopped by a barge-in ends with what was heard of it (maybe nothing), marked
            mark = " [interrupted]" if payload.interrupted else ""
            self._final(f"assistant: {payload.text}{mark}".replace(":  [", ": ["))
        elif isinstance(payload, ToolCall):
            if payload.call_id.startswith(PREVIEW_PREFIX):
                self._previews.add(payload.call_id)
                return
            self._tool_names[payload.call_id] = payload.name
            if payload.name not in BUILTIN_TOOLS:
                self._emit(f"→ tool {payload.name} {payload.arguments}", "tool")
        elif isinstance(payload, ErrorPayload) and payload.code not in STOPPING:  # said as the client stops
            self.error(f"[error] {payload.code}: {payload.message}")
        elif isinstance(payload, NamesHeard):
            for line in names_heard_lines(payload):
                self._emit(line, "names")
        elif isinstance(payload, Vocabulary) and payload.phrases != self._vocabulary:  # the same again: unsaid
            self._vocabulary = payload.phrases
            self._emit(vocabulary_line(payload), "names")

    def sent(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, UserAudioTranscriptFinal):
            self._emit(f"you: {excerpt(payload.text)}", "you")
        elif isinstance(payload, ErrorPayload) and payload.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED:
            self._emit(barge_in_line(payload.heard_text), "barge-in")
        elif isinstance(payload, ToolResult):
            if payload.call_id in self._previews:
                if payload.parts is None or payload.part == payload.parts - 1:
                    self._previews.discard(payload.call_id)
                return
            name = self._tool_names.pop(payload.call_id, payload.call_id)
            if payload.error is not None:
                self._emit(f"← error {name}: {payload.error}", "tool-error")
            elif name not in BUILTIN_TOOLS:
                self._emit(f"← result {name} {payload.result}", "tool")

    def client_error(self, error: ErrorPayload) -> None:
        if error.code == ErrorCode.WS_CONNECT_FAILED:
            return  # the first connection failed: no transcript; whoever connects says why, once
        self.error(f"[error] {error.code}: {error.message}")

    def state(self, state: str) -> None:
        self._emit(f"[state] {STATE_LABELS.get(state, state)}", f"state-{state}")

    def cards(self, cards: list[Card]) -> None:
        """Cards the UI model gained: ``[card] <title>`` and the body, indented."""
        for card in cards:
            for line in card_lines(card):
                self._emit(line, "ui")

    def warning(self, text: str) -> None:
        """Something from the conductor the client could not use (one line, never a traceback)."""
        self.error(f"[warning] {text}")

    # ---- what the CLI reports -------------------------------------------------------------------

    def line(self, text: str, kind: str = "speech") -> None:
        """A line of the transcript (e.g. the printed stand-in for speech; ``kind`` styles it on a
        terminal: ``device`` and ``progress`` for the session's other devices)."""
        self._emit(text, kind)

    def error(self, text: str) -> None:
        """An error line: in the transcript, or on ``err`` when quiet."""
        if self.quiet:
            self._write(self._err, text)
        else:
            self._emit(text, "error")

    def notice(self, text: str) -> None:
        """How the connection is doing (retrying, offline, back): shown even when quiet."""
        self._write(self._err, text)

    def close(self) -> None:
        """Leave the terminal as a shell expects it (nothing to do for plain lines)."""

    # ---- output; LiveTranscriptRenderer overrides these ----------------------------------------

    def _partial(self, text: str) -> None:
        """A growing answer: not printed as plain lines (its final follows)."""

    def _final(self, text: str) -> None:
        self._emit(text, "assistant")

    def _emit(self, text: str, kind: str) -> None:
        if not self.quiet:
            self._write(self._out, text)

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        stream.write(printable(text) + "\n")
        stream.flush()


def barge_in_line(heard: str | None) -> str:
    """Where a barge-in cut the answer: the last words heard of it, or that none were."""
    if not heard:
        return "[barge-in] cut before a word was heard"
    words = heard.split()
    tail = " ".join(words[-12:])
    return f'[barge-in] cut after "{"…" if len(words) > 12 else ""}{tail}"'


def names_heard_lines(heard: NamesHeard) -> list[str]:
    """One line a name: ``heard 'get user buy id' → getUserById (src/users.ts)``."""
    return [
        f"heard '{match.heard}' → {match.name}" + (f" ({match.path})" if match.path else "") for match in heard.matches
    ]


def vocabulary_line(vocabulary: Vocabulary, shown: int = VOCABULARY_SHOWN) -> str:
    """``[vocabulary] 42 phrases: getUserById, UserService, …``"""
    phrases = vocabulary.phrases
    if not phrases:
        return "[vocabulary] none"
    more = ", …" if len(phrases) > shown else ""
    count = f"{len(phrases)} phrase" + ("s" if len(phrases) != 1 else "")
    return f"[vocabulary] {count}: {', '.join(phrases[:shown])}{more}"


def excerpt(text: str, limit: int = LONG_TEXT) -> str:
    """``text`` as is when it has at most ``limit`` characters; else its start and its length."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 40].rstrip()}… ({len(text):,} characters)"


def card_lines(card: Card) -> list[str]:
    """A card as plain lines: ``[card] <title>`` (with the file when it names one) and its body
    indented by four spaces."""
    title = str(card.get("title") or card.get("type") or "card")
    file = card.get("file")
    heading = f"[card] {title}" + (f" ({file})" if isinstance(file, str) and file and file not in title else "")
    return [heading, *(f"    {line}" for line in str(card.get("body", "")).splitlines())]
