"""The ToolRouter: runs a ``toolCall`` by name and builds the ``toolResult`` to send back.

Handlers are ``async fn(arguments: dict) -> JSON-serializable value``; raising ``ToolError``
(or any exception) turns into an error result. The two tools the conductor itself calls,
``tts.speak`` and ``convo.setState``, are built in; the speaker plays tts.speak texts one at a
time, in the order the calls arrived, and each call is answered once its text has been played:
``{"spoken": true}``, or ``{"spoken": false, "heardText": …}`` when a barge-in cut it short or
dropped it (what the user heard of the answer, see ``voice.heard``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from shared.wire.protocol import MAX_HEARD_TEXT, ToolCall, ToolResult
from voiceide_client.voice.heard import HeardSpeech
from voiceide_client.voice.speaker import SilentSpeaker, Speaker, SpeakerError

logger = logging.getLogger(__name__)

ToolHandler = Callable[[dict[str, Any]], Awaitable[Any]]
StateListener = Callable[[str], None]

TTS_SPEAK = "tts.speak"
SET_STATE = "convo.setState"
BUILTIN_TOOLS = (TTS_SPEAK, SET_STATE)


class ToolError(Exception):
    """A tool failed; the message becomes the ``error`` of the toolResult."""


class ToolRouter:
    """Name → handler registry with the built-in speech and state tools."""

    def __init__(
        self,
        speaker: Speaker | None = None,
        handlers: Mapping[str, ToolHandler] | None = None,
    ) -> None:
        self.speaker: Speaker = speaker or SilentSpeaker()
        self.heard = HeardSpeech()
        self.state = "idle"
        self._state_listeners: list[StateListener] = []
        self._handlers: dict[str, ToolHandler] = {TTS_SPEAK: self._speak, SET_STATE: self._set_state}
        for name, handler in (handlers or {}).items():
            self.register(name, handler)

    def register(self, name: str, handler: ToolHandler) -> None:
        self._handlers[name] = handler

    def unregister(self, name: str) -> None:
        self._handlers.pop(name, None)

    @property
    def names(self) -> list[str]:
        return sorted(self._handlers)

    def add_state_listener(self, listener: StateListener) -> None:
        self._state_listeners.append(listener)

    def hold_speech(self) -> None:
        """From now on tts.speak plays nothing and answers ``interrupted``, until ``resume_speech``:
        speech the conductor asked for before it heard a barge-in must not be played after it."""
        self.speaker.hold()

    def interrupt(self) -> None:
        """Barge-in: stop playback in progress, drop the speech waiting to be played and hold
        speech until ``resume_speech``; every tts.speak concerned answers ``interrupted``."""
        self.speaker.hold()
        self.speaker.stop()
        self.speaker.stop()

    def resume_speech(self) -> None:
        """The user asked for something new: its answer may be spoken."""
        self.speaker.resume()

    def new_request(self) -> None:
        """The user asked for something new: its answer may be spoken, and is a new segment."""
        self.heard.new_segment()
        self.resume_speech()

    @property
    def heard_text(self) -> str:
        """What the user heard of the answer being spoken, as ``heardText`` carries it."""
        return self.heard.text[:MAX_HEARD_TEXT]

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run one call; never raises (except cancellation)."""
        if call.name not in BUILTIN_TOOLS:
            self.heard.new_segment()  # the model ran a tool: what it says next is a new segment
        handler = self._handlers.get(call.name)
        if handler is None:
            return _error(call, f"unknown tool: {call.name}")
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            return _error(call, f"arguments are not valid JSON: {exc}")
        if not isinstance(arguments, dict):
            return _error(call, "arguments must be a JSON object")
        try:
            value = await handler(arguments)
        except ToolError as exc:
            return _error(call, str(exc))
        except SpeakerError as exc:
            return _error(call, f"tts failed: {exc}")
        except Exception as exc:
            logger.exception("tool %s failed", call.name)
            return _error(call, f"{type(exc).__name__}: {exc}")
        try:
            encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            return _error(call, f"result is not JSON-serializable: {exc}")
        return ToolResult(call_id=call.call_id, result=encoded, error=None)

    async def _speak(self, arguments: dict[str, Any]) -> dict[str, Any]:
        text = arguments.get("text")
        if not isinstance(text, str):
            raise ToolError("tts.speak needs a string 'text'")
        if not await self.speaker.speak(text, self.heard.playback(text)):
            return {"spoken": False, "heardText": self.heard_text}
        return {"spoken": True}

    async def _set_state(self, arguments: dict[str, Any]) -> dict[str, Any]:
        state = arguments.get("state")
        if not isinstance(state, str) or not state:
            raise ToolError("convo.setState needs a string 'state'")
        self.state = state
        for listener in self._state_listeners:
            listener(state)
        return {"ok": True}


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call_id=call.call_id, result=None, error=message)
