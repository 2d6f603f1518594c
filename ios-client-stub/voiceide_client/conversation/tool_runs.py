"""The app's side of ``toolCall`` events: run each call once and send its ``toolResult``.

The conductor re-sends a call still waiting for its result after a reconnect (as a new event).
The tool is not run again (a build, an edit): the result already sent is sent again, the same
event, so the conductor takes it at most once; a call whose tool is still running answers when
it is done. A successful ``convo.setState idle`` ends the turn it belongs to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from shared.wire.protocol import Event, ToolCall, make_event
from voiceide_client.tools.router import SET_STATE, ToolRouter

from .turn import ToolInvocation, TurnResult

SendAnswer = Callable[[Event], Awaitable[bool]]
"""Delivers a ``toolResult`` event; False when the client closed before it could."""


class ToolRuns:
    """The tool calls a client received: ``invocations`` (each run once, in order) and ``repeated``
    (calls for a callId already run, answered without running the tool again)."""

    def __init__(
        self,
        router: ToolRouter,
        send_answer: SendAnswer,
        *,
        on_change: Callable[[], None],
        on_turn_done: Callable[[TurnResult], None],
    ) -> None:
        self.router = router
        self.invocations: list[ToolInvocation] = []
        self.repeated: list[ToolCall] = []
        self._send_answer = send_answer
        self._on_change = on_change
        self._on_turn_done = on_turn_done
        self._call_ids: set[str] = set()
        self._answers: dict[str, Event] = {}  # callId -> the toolResult event sent for it
        self._tasks: set[asyncio.Task[None]] = set()

    def take(self, call: ToolCall, turn: TurnResult | None) -> None:
        """Run a new callId's tool in the background; answer a repeated one with its result."""
        if call.call_id not in self._call_ids:
            self._call_ids.add(call.call_id)
            self._start(call, turn)
            return
        self.repeated.append(call)
        answer = self._answers.get(call.call_id)
        if answer is not None:  # else the tool is still running and answers when done
            self._spawn(self._resend(answer), f"re-answer {call.name}")

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel every running tool; the tasks, for the caller to await."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    def _start(self, call: ToolCall, turn: TurnResult | None) -> None:
        invocation = ToolInvocation(call_id=call.call_id, name=call.name, arguments=call.arguments)
        self.invocations.append(invocation)
        if turn is not None:
            turn.tool_calls.append(invocation)
        self._spawn(self._run(call, invocation, turn), f"tool {call.name}")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resend(self, answer: Event) -> None:
        await self._send_answer(answer)

    async def _run(self, call: ToolCall, invocation: ToolInvocation, turn: TurnResult | None) -> None:
        result = await self.router.execute(call)
        invocation.result, invocation.error, invocation.finished = result.result, result.error, True
        self._on_change()
        answer = make_event(result)
        self._answers[call.call_id] = answer
        if not await self._send_answer(answer):
            return
        args = invocation.args
        ends_turn = call.name == SET_STATE and isinstance(args, dict) and args.get("state") == "idle"
        if ends_turn and result.error is None and turn is not None:
            self._on_turn_done(turn)
