"""Prints the conversation: partials overwrite the current line, finals commit it.

The client reports what it receives, sends, raises and which state it enters; the library
default is ``NullRenderer`` so nothing is printed unless a caller asks for it.
"""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from shared.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    AssistantUIPatch,
    ErrorCode,
    ErrorPayload,
    Event,
    ToolCall,
    ToolResult,
    UserAudioTranscriptFinal,
)

from .tools import BUILTIN_TOOLS

CLEAR_LINE = "\r\x1b[K"


class Renderer(Protocol):
    def received(self, event: Event) -> None: ...
    def sent(self, event: Event) -> None: ...
    def client_error(self, error: ErrorPayload) -> None: ...
    def state(self, state: str) -> None: ...


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


class TranscriptRenderer:
    """Human-readable transcript.

    ``live`` (default: whether ``out`` is a terminal) shows each partial by rewriting the
    current line; without it only finals are printed, so logs and pipes stay clean.
    """

    def __init__(self, out: TextIO | None = None, *, live: bool | None = None) -> None:
        self._out = out or sys.stdout
        self.live = self._out.isatty() if live is None else live
        self._line_open = False
        self._tool_names: dict[str, str] = {}

    def received(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, AssistantSpeechPartial):
            if self.live:
                self._out.write(f"{CLEAR_LINE}assistant: {payload.text}")
                self._out.flush()
                self._line_open = True
        elif isinstance(payload, AssistantSpeechFinal):
            if self._line_open:
                self._out.write(CLEAR_LINE)
                self._line_open = False
            self._line(f"assistant: {payload.text}")
        elif isinstance(payload, ToolCall):
            self._tool_names[payload.call_id] = payload.name
            if payload.name not in BUILTIN_TOOLS:
                self._line(f"→ tool {payload.name} {payload.arguments}")
        elif isinstance(payload, ErrorPayload):
            self._line(f"[error] {payload.code}: {payload.message}")
        elif isinstance(payload, AssistantUIPatch):
            self._line(f"[ui] {payload.patch}")

    def sent(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, UserAudioTranscriptFinal):
            self._line(f"you: {payload.text}")
        elif isinstance(payload, ErrorPayload) and payload.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED:
            self._line("[barge-in]")
        elif isinstance(payload, ToolResult):
            name = self._tool_names.pop(payload.call_id, payload.call_id)
            if payload.error is not None:
                self._line(f"← error {name}: {payload.error}")
            elif name not in BUILTIN_TOOLS:
                self._line(f"← result {name} {payload.result}")

    def client_error(self, error: ErrorPayload) -> None:
        self._line(f"[error] {error.code}: {error.message}")

    def state(self, state: str) -> None:
        self._line(f"[state] {state}")

    def _line(self, text: str) -> None:
        if self._line_open:
            self._out.write("\n")
            self._line_open = False
        self._out.write(text + "\n")
        self._out.flush()
