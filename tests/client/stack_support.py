"""Helpers for the client's tests against the whole local stack."""

from __future__ import annotations

import asyncio

from conductor_local.stack import LocalStack
from shared.wire.protocol import SessionStart
from tests.e2e.conftest import event_processed
from voiceide_client.conversation.client import ConductorClient


async def session_started(stack: LocalStack, client: ConductorClient, timeout: float = 5.0) -> None:
    """Wait until the conductor has taken the client's latest ``sessionStart`` (its capabilities,
    its handoff). It may take a connection's events in any order: a transcript sent at once could
    overtake it and start the turn without them."""
    start = next(event for event in reversed(client.sent) if isinstance(event.payload, SessionStart))
    async with asyncio.timeout(timeout):
        while not await asyncio.to_thread(event_processed, stack, client.session_id, str(start.id)):
            await asyncio.sleep(0.02)
