"""LocalConductorStub: answers transcripts offline once the conductor cannot be reached.

It plays the conductor's side of a turn (thinking → speech → ``tts.speak`` → idle) through
the same events the server would send, so the client's tools, rendering and ``say`` work
unchanged and the user is never left waiting for an answer that cannot come.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Event,
    ToolCall,
    ToolResult,
    UserAudioTranscriptFinal,
    make_event,
)
from voiceide_client.tools.router import SET_STATE, TTS_SPEAK

OFFLINE_REPLY = "I can't reach the conductor right now. Please check your connection and try again."

Emit = Callable[[Event], Awaitable[None]]


class LocalConductorStub:
    """A tiny offline conductor: ``receive`` takes client events, ``emit`` delivers its own."""

    def __init__(self, emit: Emit, reply: str = OFFLINE_REPLY) -> None:
        self._emit = emit
        self.reply = reply
        self.received: list[Event] = []
        self._speak_calls: set[str] = set()
        self._calls = 0

    async def receive(self, event: Event) -> None:
        self.received.append(event)
        payload = event.payload
        if isinstance(payload, UserAudioTranscriptFinal):
            await self._answer(payload.text)
        elif isinstance(payload, ToolResult) and payload.call_id in self._speak_calls:
            self._speak_calls.discard(payload.call_id)
            await self._call(SET_STATE, {"state": "idle"})

    async def _answer(self, text: str) -> None:
        await self._call(SET_STATE, {"state": "thinking"})
        if not text.strip():
            await self._emit(make_event(ErrorPayload(code=ErrorCode.EMPTY_TRANSCRIPT, message="transcript is empty")))
            await self._call(SET_STATE, {"state": "idle"})
            return
        await self._emit(make_event(AssistantSpeechPartial(text=self.reply)))
        await self._emit(make_event(AssistantSpeechFinal(text=self.reply)))
        await self._call(TTS_SPEAK, {"text": self.reply})

    async def _call(self, name: str, arguments: dict[str, str]) -> None:
        self._calls += 1
        call_id = f"local-{self._calls}"
        if name == TTS_SPEAK:
            self._speak_calls.add(call_id)  # before emitting: the result may come back at once
        await self._emit(make_event(ToolCall(call_id=call_id, name=name, arguments=json.dumps(arguments))))
