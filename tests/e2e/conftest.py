"""End-to-end fixtures: ONE local stack for the whole package, driven by the client stub over real WebSockets.

The stack runs the deployed Lambda handlers behind the local API Gateway, with DynamoDB on a
moto server and Bedrock answered by the offline brain (docs/local-stack.md). Starting it costs a second or
two, so it lives as long as the ``tests/e2e`` package; every test uses its own session(s), so
tests do not see each other's events (and the per-session turn rate limit is never shared).

pytest-asyncio is not installed: async test bodies run under ``async_test``, each in a fresh
event loop with a time bound. Waits are on events (``ConductorClient.wait_for``/``wait_until``)
with timeouts, never sleeps; state that only the conductor's table shows (has it handled this
client event?) is polled with ``poll_until``, also bounded.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from conductor_local.stack import LocalStack
from shared.adapters import state_codec
from shared.adapters.store import SessionStore
from shared.core import event_ids
from shared.core.messages import Message
from shared.wire.protocol import (
    AssistantSpeechPartial,
    ErrorPayload,
    Event,
    ToolCall,
    ToolResult,
    make_event,
    parse_event,
)
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

TEST_TIMEOUT_S = 30.0
"""Bound on one async test body."""
TURN_TIMEOUT_S = 10.0
"""Bound on one ``say`` (an offline-brain turn takes a fraction of a second on loopback)."""
WAIT_S = 5.0
"""Bound on one wait for an event."""
HANDSHAKE_WAIT_S = 30.0
"""Bound on one WebSocket handshake: ``$connect`` may be a cold start of its function, which on a
busy 2-core machine takes seconds."""
STACK_ENV = {"CONDUCTOR_TURN_RESERVE_MS": "1000", "CONDUCTOR_LOCAL_READBACK": "literal"}
"""The Lambda timeout is 600 s locally; a 1 s reserve keeps the out-of-time check out of the way. The
offline brain says tool results back word for word, so a test sees exactly what reached the model."""


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop, bounded by ``TEST_TIMEOUT_S``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), TEST_TIMEOUT_S))

    return wrapper


@pytest.fixture(scope="package")
def stack() -> Iterator[LocalStack]:
    """The whole conductor on a free loopback port, started once for the e2e package."""
    with LocalStack(port=0, quiet=True, env=STACK_ENV) as local:
        yield local


def client_for(stack: LocalStack, session_id: str | None = None, **kwargs: Any) -> ConductorClient:
    """A client stub on a new session (unless given), reconnecting fast (the spec's backoff / 100).

    It announces no capabilities unless given: these tests follow the protocol's base flow (one
    tts.speak per answer); sentence speech and the extra states have their own tests."""
    kwargs.setdefault("backoff", scaled_backoff(0.01))
    kwargs.setdefault("capabilities", ())
    return ConductorClient(stack.ws_url, session_id=session_id or str(uuid.uuid4()), **kwargs)


def session_store(stack: LocalStack) -> SessionStore:
    """The conductor's own DynamoDB store, pointed at the stack's table (to read what it kept)."""
    return SessionStore(stack.dynamodb_client(), stack.table_name, ttl_seconds=3600)


async def caught_up(stack: LocalStack, client: ConductorClient) -> None:
    """Wait until the client's new connection is live (its sessionStart caught it up).

    Partials the model streams before that are dropped by design (the final carries the whole
    text): the offline brain answers in milliseconds, so a test that asserts partials on the
    first turn after connecting waits for this first, as a deployed model's first token would.
    """

    def live() -> bool:
        state = session_store(stack).load(client.session_id)
        return state is not None and state.connection_live and state.connection_id is not None

    await poll_until(live)


def stored_history(stack: LocalStack, session_id: str) -> list[Message]:
    return session_store(stack).history(session_id, 1000)


def event_processed(stack: LocalStack, session_id: str, event_id: str) -> bool:
    """Whether the conductor has committed the effects of a client event: its id is recorded in the
    session's state with them (the ``STATE`` item of the store's documented table layout)."""
    item = (
        stack.dynamodb_client()
        .get_item(
            TableName=stack.table_name,
            Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "STATE"}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item is not None and event_ids.taken(state_codec.decoded(item), event_id)


def brain_requests_for(stack: LocalStack, transcript: str) -> int:
    """How many ConverseStream requests had ``transcript`` as the last user text (i.e. started a turn)."""
    count = 0
    for request in stack.bedrock_server.requests:
        messages = request.body.get("messages") or []
        if not messages or messages[-1].get("role") != "user":
            continue
        texts = [block["text"] for block in messages[-1].get("content") or [] if "text" in block]
        if texts and texts[-1] == transcript:
            count += 1
    return count


async def poll_until(condition: Callable[[], bool], timeout: float = WAIT_S, interval: float = 0.02) -> None:
    """Wait until a blocking ``condition`` (e.g. a DynamoDB read) holds.

    For state that has no change notification (the conductor's table); the condition runs in a
    worker thread so the client keeps handling frames meanwhile.
    """
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(condition):
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout:g} s")
        await asyncio.sleep(interval)


# ---- event predicates and checks -----------------------------------------------------------


def is_tool_call(event: Event, name: str | None = None) -> bool:
    return isinstance(event.payload, ToolCall) and (name is None or event.payload.name == name)


def is_state(event: Event, state: str) -> bool:
    """A ``convo.setState`` call setting ``state``."""
    return is_tool_call(event, "convo.setState") and event.payload.arguments.replace(" ", "") == (
        f'{{"state":"{state}"}}'
    )


def is_partial(event: Event) -> bool:
    return isinstance(event.payload, AssistantSpeechPartial)


def label(event: Event) -> str:
    """A short name for order checks.

    ``thinking``, ``idle``, ``partial``, ``final``, ``tool:<name>``, ``error:<code>``, else the kind.
    """
    payload = event.payload
    if is_state(event, "thinking"):
        return "thinking"
    if is_state(event, "idle"):
        return "idle"
    if isinstance(payload, ToolCall):
        return f"tool:{payload.name}"
    if isinstance(payload, ErrorPayload):
        return f"error:{payload.code}"
    return {"assistantSpeechPartial": "partial", "assistantSpeechFinal": "final"}.get(event.kind_name, event.kind_name)


def collapse_partials(labels: Sequence[str]) -> list[str]:
    """``partial`` runs collapsed to one ``partial+``, for order checks that don't count deltas."""
    out: list[str] = []
    for name in labels:
        if name == "partial":
            if out and out[-1] == "partial+":
                continue
            name = "partial+"
        out.append(name)
    return out


def assert_cumulative(partials: Sequence[str], final: str | None = None) -> None:
    """Each partial carries all the text so far: it strictly extends the one before and leads to
    the final, which carries the whole text (partials are coalesced: the last may be shorter)."""
    assert partials, "no assistantSpeechPartial was received"
    for before, after in itertools.pairwise(partials):
        assert after.startswith(before) and len(after) > len(before), f"not cumulative: {before!r} → {after!r}"
    if final is not None:
        assert final.startswith(partials[-1]), f"the last partial {partials[-1]!r} does not lead to the final {final!r}"


def assert_seq_counts_up_by_one(events: Sequence[Event]) -> None:
    """Every kept server event carries a ``seq``: 1, 2, 3, … in arrival order (one session's
    events); partials, ``sessionReady`` (the answer to each sessionStart) and ``turnUsage`` (what
    a turn cost, sent after it) are never kept and carry none."""
    unkept = [event for event in events if event.kind_name in ("assistantSpeechPartial", "sessionReady", "turnUsage")]
    assert all(event.seq is None for event in unkept)
    kept = [event for event in events if event not in unkept]
    seqs = [event.seq for event in kept]
    assert None not in seqs, f"server events without seq: {[e.kind_name for e in kept if e.seq is None]}"
    assert seqs == list(range(1, len(kept) + 1)), f"seqs are not 1, 2, 3, …: {seqs}"
    assert all(event.seq is None for event in events if event.kind_name == "assistantSpeechPartial")


def result_call_ids(sent: Sequence[Event]) -> set[str]:
    """The callIds the client has answered so far."""
    return {event.payload.call_id for event in sent if isinstance(event.payload, ToolResult)}


class RawApp:
    """One raw WebSocket of the app, for timings the client stub never produces (a late sessionStart).

    ``send`` returns the event sent (its id tells when the conductor has handled it).

    Records every server event as received (duplicates included) and answers ``convo.setState``.
    """

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[Event] = []

    async def send(self, payload: Any) -> Event:
        event = make_event(payload)
        await self.ws.send(event.to_json())
        return event

    async def read_until(self, predicate: Callable[[Event], bool]) -> Event:
        async with asyncio.timeout(WAIT_S):
            while True:
                event = parse_event(await self.ws.recv())
                assert isinstance(event, Event), event
                self.events.append(event)
                if is_tool_call(event, "convo.setState"):
                    await self.send(ToolResult(call_id=event.payload.call_id, result='{"ok":true}', error=None))
                if predicate(event):
                    return event


NUMBERS = re.compile(r"\d+(?: \d+)*")
"""The text of a ``count <n>`` stream: ``1 2 3 …``."""
