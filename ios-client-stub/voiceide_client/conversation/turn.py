"""What one turn (a final transcript up to ``convo.setState idle``) looked like to the client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorPayload,
    Event,
    ToolCall,
    TurnUsage,
    UserAudioTranscriptFinal,
)
from voiceide_client.rendering.transcript import excerpt
from voiceide_client.tools.router import SET_STATE, TTS_SPEAK


@dataclass
class ToolInvocation:
    """One ``toolCall`` the client ran; ``result``/``error`` are filled in when it finishes."""

    call_id: str
    name: str
    arguments: str
    result: str | None = None
    error: str | None = None
    finished: bool = False

    @property
    def args(self) -> Any:
        """The arguments decoded (``None`` when they are not valid JSON)."""
        try:
            return json.loads(self.arguments)
        except ValueError:
            return None

    @property
    def value(self) -> Any:
        """The result decoded (``None`` for an error result)."""
        return None if self.result is None else json.loads(self.result)


@dataclass
class TurnResult:
    """Everything that happened in one turn, in arrival order.

    ``transcript`` is the text of the final transcript. ``errors`` holds the server's ``error``
    events and the client-side errors raised during the turn. ``completed`` is false when the turn
    timed out or a newer transcript replaced it.

    Times are ``time.perf_counter()`` readings (a monotonic clock, the one the benchmarks' meters
    read): ``final_sent_at`` when the final transcript was handed to the connection (the last
    time, if a reconnect made the client send it again), ``received_at[i]`` when ``events[i]``
    arrived. ``first_partial_at - final_sent_at`` is how long the answer took to start.

    ``usage`` is what the turn cost (the conductor's ``turnUsage``). The conductor sends it after
    the turn's ``convo.setState idle``, so it may arrive once the next turn has started: it is
    kept here, on the turn it describes, never among ``events`` (which end at the idle).
    """

    transcript: str
    events: list[Event] = field(default_factory=list)
    received_at: list[float] = field(default_factory=list)
    final_sent_at: float | None = None
    tool_calls: list[ToolInvocation] = field(default_factory=list)
    errors: list[ErrorPayload] = field(default_factory=list)
    completed: bool = False
    usage: TurnUsage | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    @property
    def partials(self) -> list[str]:
        return [e.payload.text for e in self.events if isinstance(e.payload, AssistantSpeechPartial)]

    @property
    def finals(self) -> list[str]:
        return [e.payload.text for e in self.events if isinstance(e.payload, AssistantSpeechFinal)]

    @property
    def final_text(self) -> str:
        """The assistant's last final of the turn ("" when it said nothing)."""
        finals = self.finals
        return finals[-1] if finals else ""

    @property
    def states(self) -> list[str]:
        """The conversation states set during the turn, in order."""
        states = []
        for call in self.tool_calls:
            args = call.args
            if call.name == SET_STATE and isinstance(args, dict) and isinstance(args.get("state"), str):
                states.append(args["state"])
        return states

    @property
    def first_partial_at(self) -> float | None:
        """When the turn's first ``assistantSpeechPartial`` arrived (None if none did)."""
        return self.first_at(lambda event: isinstance(event.payload, AssistantSpeechPartial))

    @property
    def first_speak_at(self) -> float | None:
        """When the turn's first ``tts.speak`` call arrived (None if none did)."""
        return self.first_at(lambda event: isinstance(event.payload, ToolCall) and event.payload.name == TTS_SPEAK)

    def first_at(self, predicate: Callable[[Event], bool]) -> float | None:
        """When the turn's first event matching ``predicate`` arrived (None if none did)."""
        return next((at for at, event in zip(self.received_at, self.events, strict=True) if predicate(event)), None)

    @property
    def went_idle(self) -> bool:
        """Whether the conductor set the conversation ``idle`` in this turn (its end)."""
        return any(
            isinstance(event.payload, ToolCall)
            and event.payload.name == SET_STATE
            and _state_of(event.payload.arguments) == "idle"
            for event in self.events
        )

    def calls(self, name: str) -> list[ToolInvocation]:
        return [call for call in self.tool_calls if call.name == name]

    def received(self, event: Event) -> None:
        """``event`` arrived during the turn: kept, with the time."""
        self.events.append(event)
        self.received_at.append(time.perf_counter())

    def sending(self, event: Event) -> None:
        """``event`` is about to go out: the final transcript's time is kept."""
        if isinstance(event.payload, UserAudioTranscriptFinal):
            self.final_sent_at = time.perf_counter()

    def finish(self, *, completed: bool) -> None:
        if not self.done.is_set():
            self.completed = completed
            self.done.set()


def _state_of(arguments: str) -> Any:
    try:
        decoded = json.loads(arguments)
    except ValueError:
        return None
    return decoded.get("state") if isinstance(decoded, dict) else None


class TurnTimeout(TimeoutError):
    """``say`` did not see the turn finish in time; ``result`` holds what did happen."""

    def __init__(self, result: TurnResult, timeout: float) -> None:
        super().__init__(f"turn {excerpt(result.transcript, 80)!r} did not finish within {timeout:g} s")
        self.result = result
