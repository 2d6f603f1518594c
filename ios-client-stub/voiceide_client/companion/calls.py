"""How the companion runs each tool call: knowing which call a tool runs for (its progress names the
call), stopping one on ``toolCancel``, never running twice a call that changes something or runs
long (``journal``), and answering ``tts.speak`` as a device without a voice.

The conductor sends ``tts.speak`` only to the session's voice device; a companion that is the
only device of a session (or talks to a conductor that does not know devices) gets it anyway, and
answers the protocol's "not played" ``{"spoken": false, "heardText": "", "reason": "no_voice"}``:
the answer is shown, not spoken, and stays whole in the conversation.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Collection, Mapping
from typing import Any

from shared.wire.protocol import ToolCall, ToolResult
from voiceide_client.tools.router import TTS_SPEAK, ToolHandler, ToolRouter

from .journal import CallJournal, Interrupted

_CURRENT_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("voiceide_current_call", default=None)
NOT_SPOKEN = {"spoken": False, "heardText": "", "reason": "no_voice"}


def interrupted_result(call: ToolCall) -> ToolResult:
    """The answer to a call an earlier run of the companion started and never finished: it stopped
    (a restart, a crash) while the call ran, and the call is not run again."""
    what = {
        "build.run": "the build was not run again",
        "tests.run": "the tests were not run again",
        "editor.replaceText": "the edit was not made again: look at the file before asking again",
    }.get(call.name, "it was not run again")
    return ToolResult(call_id=call.call_id, result=None, error=f"the companion restarted while {call.name} ran; {what}")


def current_call_id() -> str | None:
    """The ``callId`` of the call the running tool was called for (None outside a call)."""
    return _CURRENT_CALL.get()


async def _no_voice(arguments: dict[str, Any]) -> dict[str, Any]:
    return dict(NOT_SPOKEN)


class CompanionRouter(ToolRouter):
    """A ToolRouter whose handlers know their call, whose running calls can be cancelled by
    ``callId``, and which journals the calls of ``journaled`` tools."""

    def __init__(
        self,
        handlers: Mapping[str, ToolHandler],
        *,
        journal: CallJournal | None = None,
        journaled: Collection[str] = (),
        waits: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(None, {TTS_SPEAK: _no_voice, **handlers})
        self.journal = journal
        self.journaled = frozenset(journaled)
        self.waits = dict(waits or {})  # tool -> how long the conductor waits for its result (deadline)
        self.cancelled: list[str] = []  # callIds stopped by toolCancel
        self._running: dict[str, asyncio.Task[Any]] = {}

    @property
    def running(self) -> list[str]:
        return sorted(self._running)

    def cancel(self, call_id: str) -> bool:
        """Stop the call's tool (a command's process group is killed); False if it is not running."""
        task = self._running.get(call_id)
        if task is None or task.done():
            return False
        self.cancelled.append(call_id)
        task.cancel()
        return True

    async def execute(self, call: ToolCall) -> ToolResult:
        journal = self.journal if call.name in self.journaled else None
        if journal is not None:
            recorded = journal.lookup(call)
            if isinstance(recorded, ToolResult):
                return recorded
            if isinstance(recorded, Interrupted):
                answer = interrupted_result(call)
                journal.finished(call, answer)
                return answer
            journal.started(call, wait_s=self.waits.get(call.name))
        task = asyncio.current_task()
        token = _CURRENT_CALL.set(call.call_id)
        if task is not None:
            self._running[call.call_id] = task
        try:
            result = await super().execute(call)
        except asyncio.CancelledError:
            if journal is not None and call.call_id in self.cancelled:
                journal.finished(call, ToolResult(call_id=call.call_id, result=None, error="cancelled"))
            raise
        finally:
            self._running.pop(call.call_id, None)
            _CURRENT_CALL.reset(token)
        if journal is not None:
            journal.finished(call, result)
        return result
