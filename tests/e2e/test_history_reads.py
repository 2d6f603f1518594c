"""How much history ``$default`` reads beside the state: a usual voice session's window in one
Query (one round trip on the way to the first word), a session of big messages only as far as a
request could carry it."""

from __future__ import annotations

import uuid

import pytest

from conductor_local.stack import LocalStack
from shared.adapters.history_reads import FIRST_HISTORY_PAGE, RecentHistory
from shared.adapters.store import SessionStore
from shared.core.history_ops import AppendMessage
from shared.core.state import SessionState
from tests.e2e.conftest import session_store

pytestmark = pytest.mark.e2e


def stored_session(store: SessionStore, messages: int, text_chars: int) -> str:
    session_id = str(uuid.uuid4())
    state = store.commit(SessionState(session_id=session_id), [])
    for seq in range(messages):
        role = "user" if seq % 2 == 0 else "assistant"
        state = store.commit(state, [AppendMessage(seq, role, [{"text": f"{seq} " + "x" * text_chars}])])
    return session_id


def read_counting_queries(
    store: SessionStore, session_id: str, limit: int, max_chars: int
) -> tuple[RecentHistory, int]:
    """The recent history as ``$default`` reads it, and how many Query requests that took."""
    calls: list[str] = []
    events = store._client.meta.events
    events.register("before-call.dynamodb.Query", lambda **_: calls.append("Query"), unique_id="count-queries")
    try:
        recent = store.recent_history(session_id, limit, max_chars=max_chars)
    finally:
        events.unregister("before-call.dynamodb.Query", unique_id="count-queries")
    return recent, len(calls)


def test_a_usual_sessions_window_is_read_in_one_query(stack: LocalStack) -> None:
    store = session_store(stack)
    session_id = stored_session(store, FIRST_HISTORY_PAGE - 2, text_chars=200)
    recent, queries = read_counting_queries(store, session_id, 80, max_chars=192_000)
    assert queries == 1
    assert len(recent.messages) == FIRST_HISTORY_PAGE - 2 and recent.first_seq == 0


def test_a_session_of_big_messages_is_read_only_as_far_as_a_request_could_carry(stack: LocalStack) -> None:
    store = session_store(stack)
    session_id = stored_session(store, 120, text_chars=3000)
    recent, queries = read_counting_queries(store, session_id, 200, max_chars=150_000)
    assert queries >= 2
    messages = recent.messages
    assert 50 <= len(messages) < 120  # past 150,000 characters, not the whole session
    assert messages[0]["role"] == "user"  # a window starts at a plain user message
