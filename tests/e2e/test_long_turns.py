"""A turn longer than API Gateway's 29 s integration timeout, through the whole local stack.

``$default`` only decides and launches the turn; the model streams in the turn runner's own
invocation, so however long the answer takes, the app never hears API Gateway's own
``{"message": "Endpoint request timed out"}`` frame. The local API Gateway keeps that timeout
(its default, as deployed) and the offline brain's ``slow 60`` answers over a full minute.

This test takes a minute by design (``LONG_TURN_S``); it runs in CI like every other test.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from conductor_local.bedrock.offline_brain import SLOW_TEXT
from conductor_local.gateway.server import INTEGRATION_TIMEOUT_S
from conductor_local.stack import LocalStack
from shared.wire.protocol import Event
from tests.e2e.conftest import assert_cumulative, client_for, collapse_partials, is_partial, label

LONG_TURN_S = 60
"""How long the model takes to answer: twice API Gateway's integration timeout and more."""
TEST_BOUND_S = 150.0
"""Bound on the test body: the minute-long turn plus generous room for a loaded machine."""

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(TEST_BOUND_S + 60)]


async def _say_slowly(stack: LocalStack) -> None:
    arrivals: list[tuple[float, Event]] = []
    async with client_for(stack, on_event=lambda event: arrivals.append((time.monotonic(), event))) as client:
        sent_at = time.monotonic()
        turn = await client.say(f"slow {LONG_TURN_S}", timeout=TEST_BOUND_S)
        ended_at = time.monotonic()

        assert turn.completed, "the long turn did not reach idle"
        assert collapse_partials([label(e) for e in turn.events]) == [
            "thinking",
            "partial+",
            "final",
            "tool:tts.speak",
            "idle",
        ]
        assert_cumulative(turn.partials, SLOW_TEXT)
        assert turn.finals == [SLOW_TEXT]
        assert turn.states == ["thinking", "idle"]
        assert turn.errors == []
        # Nothing but protocol events reached the app: no "Endpoint request timed out" from API Gateway.
        assert client.gateway_frames == []
        assert client.errors == [] and client.ignored == []
        assert client.connections == 1
    # It really outlasted the integration timeout, and the stream kept flowing past it.
    assert ended_at - sent_at >= LONG_TURN_S - 1
    partials_at = [at - sent_at for at, event in arrivals if is_partial(event)]
    assert any(at > INTEGRATION_TIMEOUT_S + 1 for at in partials_at)
    assert any(at < INTEGRATION_TIMEOUT_S - 1 for at in partials_at)


def test_a_minute_long_turn_reaches_idle_without_a_gateway_timeout(stack: LocalStack) -> None:
    assert stack.gateway is not None and stack.gateway.integration_timeout == INTEGRATION_TIMEOUT_S
    asyncio.run(asyncio.wait_for(_say_slowly(stack), TEST_BOUND_S))
