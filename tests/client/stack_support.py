"""Helpers for the client's tests against the whole local stack."""

from __future__ import annotations

import asyncio

from conductor_local.stack import LocalStack
from shared.adapters import state_codec
from shared.core import event_ids
from shared.wire.protocol import SessionStart
from voiceide_client import ConductorClient


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


async def session_started(stack: LocalStack, client: ConductorClient, timeout: float = 5.0) -> None:
    """Wait until the conductor has taken the client's latest ``sessionStart`` (its capabilities,
    its handoff). It may take a connection's events in any order: a transcript sent at once could
    overtake it and start the turn without them."""
    start = next(event for event in reversed(client.sent) if isinstance(event.payload, SessionStart))
    async with asyncio.timeout(timeout):
        while not await asyncio.to_thread(event_processed, stack, client.session_id, str(start.id)):
            await asyncio.sleep(0.02)
