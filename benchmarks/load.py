"""Many app sessions at once against a running local stack, driven from a process of their own.

The apps run on phones, not inside the conductor: here their 50 client stubs run in a child
process, so their WebSocket and JSON work does not share the stack's Python interpreter. What
comes back per turn: whether it completed (``idle`` arrived), whether the final carried the whole
answer, and when the first ``assistantSpeechPartial`` arrived.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from shared.wire.protocol import AssistantSpeechFinal, AssistantSpeechPartial, Event
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.conversation.turn import TurnTimeout

PLAIN = "please open the main file"
TURN_TIMEOUT_S = 60.0


class TimedClient:
    """A client stub that timestamps every received event (announcing ``sentenceSpeech`` when the
    stub can, unless ``sentence_speech`` is off: then it announces nothing)."""

    def __init__(self, url: str, tools: dict[str, Any] | None = None, *, sentence_speech: bool = True) -> None:
        self.arrivals: list[tuple[float, Event]] = []
        options: dict[str, Any] = {}
        if "capabilities" in inspect.signature(ConductorClient).parameters:
            options["capabilities"] = ("sentenceSpeech",) if sentence_speech else ()
        self.client = ConductorClient(
            url,
            session_id=str(uuid.uuid4()),
            tools=tools,
            backoff=scaled_backoff(0.01),
            on_event=self._on_event,
            **options,
        )

    def _on_event(self, event: Event) -> None:
        self.arrivals.append((time.perf_counter(), event))


@dataclass(frozen=True)
class LoadTurn:
    completed: bool
    final_complete: bool
    first_partial_ms: float | None


async def _plain_turns(timed: TimedClient, turns: int, into: list[LoadTurn]) -> None:
    expected = f"You said: {PLAIN}"
    for _ in range(turns):
        sent = time.perf_counter()
        start = len(timed.arrivals)
        completed = True
        try:
            await timed.client.say(PLAIN, timeout=TURN_TIMEOUT_S)
        except TurnTimeout:
            completed = False
        arrivals = timed.arrivals[start:]
        first = next((at for at, e in arrivals if isinstance(e.payload, AssistantSpeechPartial)), None)
        finals = [e.payload.text for _, e in arrivals if isinstance(e.payload, AssistantSpeechFinal)]
        into.append(
            LoadTurn(
                completed=completed,
                final_complete=bool(finals) and finals[-1] == expected,
                first_partial_ms=None if first is None else (first - sent) * 1000,
            )
        )


async def sessions_at_once(url: str, sessions: int, turns: int) -> tuple[list[LoadTurn], float]:
    """``sessions`` sessions taking ``turns`` plain turns each, all at once, after one warm-up
    turn; (every turn, seconds the sessions took)."""
    warm = TimedClient(url)
    async with warm.client:
        await warm.client.say(PLAIN, timeout=TURN_TIMEOUT_S)
    clients = [TimedClient(url) for _ in range(sessions)]
    await asyncio.gather(*(timed.client.connect(retries=3) for timed in clients))
    done: list[LoadTurn] = []
    began = time.perf_counter()
    try:
        await asyncio.gather(*(_plain_turns(timed, turns, done) for timed in clients))
    finally:
        await asyncio.gather(*(timed.client.close() for timed in clients))
    return done, time.perf_counter() - began


@dataclass(frozen=True)
class LoadRun:
    turns: list[LoadTurn]
    seconds: float
    """How long the sessions took."""
    apps_cpu_s: float
    """CPU time the apps' process used while they ran."""


def _run_sessions(url: str, sessions: int, turns: int) -> LoadRun:
    began = time.process_time()
    done, seconds = asyncio.run(sessions_at_once(url, sessions, turns))
    return LoadRun(done, seconds, time.process_time() - began)


def sessions_in_own_process(url: str, sessions: int, turns: int) -> LoadRun:
    """``sessions_at_once`` in a child process (spawned: nothing of this process's stack in it)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(_run_sessions, url, sessions, turns).result()
