"""Conversation memory over real WebSockets: a long session with big tool results stays within the
token budget (the local Bedrock endpoint refuses what exceeds the model's context window, as
Bedrock does), every turn answers, and what left the window lives on in the rolling summary; the
summary written after each turn never makes the next turn's model request go to waste."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import Counter
from typing import Any

from conductor_local.stack import LocalStack
from lambdas import runtime
from shared.core.memory import SUMMARY_MARKER
from tests.e2e.conftest import STACK_ENV, client_for, session_store
from tests.history_check import assert_valid_history

TURNS = 60
RESULT_CHARS = 30_000
BUDGET_TOKENS = 24_000


async def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"path": arguments.get("path"), "text": ("let answer = 42 // a long generated file\n" * 800)[:RESULT_CHARS]}


class CountedMetrics:
    """A metrics sink that passes everything on to the one it wraps, keeping the counts."""

    def __init__(self, inner: Any, counts: Counter[str], lock: threading.Lock) -> None:
        self.inner, self.counts, self.lock = inner, counts, lock

    def count(self, name: str, value: int = 1) -> None:
        with self.lock:
            self.counts[name] += value
        self.inner.count(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        self.inner.timing(name, milliseconds)


def conductor_counts() -> Counter[str]:
    """The counts ``$default``, the turn runner and its memory keeper make from now on (the local
    stack runs them in this process)."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    service, runner = runtime.service(), runtime.turn_runner()
    assert runner.memory is not None
    service.metrics = CountedMetrics(service.metrics, counts, lock)
    runner.metrics = CountedMetrics(runner.metrics, counts, lock)
    runner.memory.metrics = CountedMetrics(runner.memory.metrics, counts, lock)
    return counts


def test_a_sixty_turn_session_with_big_tool_results_stays_within_the_budget() -> None:
    with LocalStack(
        port=0,
        quiet=True,
        env={
            **STACK_ENV,
            "CONDUCTOR_INPUT_BUDGET_TOKENS": str(BUDGET_TOKENS),
            "CONDUCTOR_MAX_TURNS_PER_MINUTE": "1000",
        },
    ) as stack:
        counts = conductor_counts()

        async def session() -> str:
            session_id = str(uuid.uuid4())
            async with client_for(stack, session_id=session_id, tools={"editor.readFile": read_file}) as client:
                for number in range(TURNS):
                    call = f'call editor.readFile {{"path": "Sources/File{number}.swift"}}'
                    turn = await client.say(call, timeout=30)
                    assert turn.completed and turn.errors == [], (number, turn.errors)
                    assert turn.final_text and turn.final_text.startswith("editor.readFile returned"), number
            return session_id

        session_id = asyncio.run(asyncio.wait_for(session(), 600))
        streamed = [r.body for r in stack.bedrock_server.requests if "toolConfig" in r.body]
        # The call, then the read-back, every turn. A turn launched alongside its write asks the
        # model once more only when that write lost its race (the conductor counts it). Each
        # transcript here is said the instant the last turn went idle, while the summary of what
        # left the window is still being written: that write is announced by the turn's last
        # commit, so the transcript is launched after its own write instead, and only a memory
        # write that landed unannounced (none is, however slow the machine, unless it came more
        # than a minute late) could make an early launch lose.
        user_turns = [body for body in streamed if "toolResult" not in json.dumps(body["messages"][-1])]
        lost = counts["EarlyLaunchesLost"]
        assert len(streamed) - len(user_turns) == TURNS and len(user_turns) == TURNS + lost, dict(counts)
        assert lost <= counts["MemoryWritesUnannounced"], dict(counts)
        # How many turns are launched early depends on the machine's pace (a window the last write has
        # not stored yet is read after it): the bound above holds however many were.
        stored = session_store(stack).load(session_id)  # the rolling summary was written (read, not counted)
        assert stored is not None and stored.summary
        for body in streamed:
            chars = (
                len(json.dumps(body["messages"]))
                + len(json.dumps(body["system"]))
                + len(json.dumps(body["toolConfig"]))
            )
            assert chars <= BUDGET_TOKENS * 4.5, chars  # the budget (with the measured chars per token) held
            assert_valid_history(body["messages"])
        assert any(SUMMARY_MARKER in json.dumps(body["system"]) for body in streamed[-10:])
        state = session_store(stack).load(session_id)
        assert state is not None and state.summary and state.summary_until > 0
