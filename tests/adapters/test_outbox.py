"""The outbox: kept events held in the state item until a write moves them to one item (moto)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conductor_local.dynamodb.tables import create_tables
from shared.adapters import outbox
from shared.adapters.store import SessionStore
from shared.core.history_ops import AppendMessage
from shared.core.state import KeptEvent, SessionState
from tests.handlers.conftest import moto_url as moto_url  # the session's moto server, a fixture

TABLE = "outbox-test"


def event(seq: int, size: int = 200, to: str | None = None) -> KeptEvent:
    return KeptEvent(seq=seq, frame=json.dumps({"seq": seq, "pad": "x" * max(0, size - 30)}), to=to)


@pytest.fixture
def store(moto_url: str) -> SessionStore:
    """On the tests' moto server (a ``mock_aws`` block here would reset every moto backend of the
    process when it ends, the server's tables with them)."""
    client = boto3.client(
        "dynamodb", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    create_tables(client, TABLE)
    return SessionStore(client, TABLE, ttl_seconds=3600)


def items(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    return store._client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"SESSION#{session_id}"}},
    )["Items"]


def outbox_items(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    return [item for item in items(store, session_id) if item["sk"]["S"].startswith("OUTBOX#")]


# ---- where a write's events go (pure) ----------------------------------------------------------


def test_a_small_write_holds_its_events_in_the_state() -> None:
    placed = outbox.held_after([event(1, 400)], [event(2, 400)], transaction=False)
    assert [e.seq for e in placed.held] == [1, 2] and placed.moved == []


def test_a_transaction_moves_every_event_past_the_soft_budget() -> None:
    """A write that is a transaction anyway moves what the state holds and its own events into one
    item, leaving the state item small for the writes of the state alone that follow."""
    placed = outbox.held_after([event(1, 200)], [event(2, 200)], transaction=True)
    assert [e.seq for e in placed.moved] == [1, 2] and placed.held == []
    # Under the soft budget a transaction keeps holding them.
    small = outbox.SOFT_HELD_BYTES // 3
    assert outbox.held_after([event(1, small)], [event(2, small)], transaction=True).moved == []


def test_any_write_moves_the_older_events_past_the_hard_budget() -> None:
    held = [event(seq, 500) for seq in range(1, 5)]
    placed = outbox.held_after(held, [event(5)], transaction=False)
    assert [e.seq for e in placed.moved] == [1, 2, 3, 4] and [e.seq for e in placed.held] == [5]


def test_a_write_whose_own_events_are_too_big_holds_none() -> None:
    placed = outbox.held_after([event(1)], [event(2, 2500)], transaction=False)
    assert placed.held == [] and [e.seq for e in placed.moved] == [1, 2]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(20, 1800), st.booleans()), max_size=60))
def test_every_event_is_held_or_moved_exactly_once(writes: list[tuple[int, int, bool]]) -> None:
    """Over any run of writes, each event ends up once, in the state or in one moved batch, in
    seq order; the state never holds more than the hard budget past one write's own events."""
    held: list[KeptEvent] = []
    moved: list[int] = []
    seq = 0
    for count, size, transaction in writes:
        new = [event(seq + i + 1, size) for i in range(count)]
        seq += count
        placed = outbox.held_after(held, new, transaction=transaction)
        moved.extend(e.seq for e in placed.moved)
        held = placed.held
        assert sum(len(e.frame) for e in held) <= max(outbox.HARD_HELD_BYTES, sum(len(e.frame) for e in new))
    assert moved + [e.seq for e in held] == list(range(1, seq + 1))


# ---- stored and replayed (moto) ----------------------------------------------------------------


def commit_events(
    store: SessionStore, state: SessionState, seqs: list[int], size: int, *, history: bool
) -> SessionState:
    ops = [AppendMessage(seq=state.history_len, role="user", content=[{"text": "hi"}])] if history else []
    if history:
        state = state.model_copy(update={"history_len": state.history_len + 1})
    frames = [(seq, event(seq, size).frame) for seq in seqs]
    return store.commit(state, ops, outbox=frames, outbox_targets={seqs[-1]: "desk"} if seqs else {})


def test_a_conversation_replays_every_kept_event_once_in_order(store: SessionStore) -> None:
    state = SessionState(session_id="s-1")
    seq = 0
    for turn in range(12):
        for size, history in ((220, True), (240, False), (900 if turn % 3 else 1800, True), (210, False)):
            seq += 1
            state = commit_events(store, state, [seq], size, history=history)
    replayed = store.outbox("s-1")
    assert [s for s, _frame in replayed] == list(range(1, seq + 1))
    assert all(json.loads(frame)["seq"] == s for s, frame in replayed)
    assert outbox_items(store, "s-1"), "the state moved its older events to items"
    assert [s for s, _ in store.outbox("s-1", after_seq=20, before_seq=25)] == [21, 22, 23, 24]
    stored = store.load("s-1")
    assert stored is not None and len(stored.kept) < 12


def test_a_device_replays_only_what_was_for_it(store: SessionStore) -> None:
    state = SessionState(session_id="s-2")
    state = commit_events(store, state, [1, 2], 100, history=True)
    state = commit_events(store, state, [3, 4], 100, history=False)
    assert [s for s, _ in store.outbox_for("s-2", "desk")] == [1, 2, 3, 4]
    assert [s for s, _ in store.outbox_for("s-2", "phone")] == [1, 3]


def test_a_state_only_write_stays_one_put_item(store: SessionStore) -> None:
    calls: list[str] = []
    store._client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    state = commit_events(store, SessionState(session_id="s-3"), [1], 200, history=True)
    calls.clear()
    commit_events(store, state, [2], 200, history=False)
    assert calls == ["PutItem"]
    assert outbox_items(store, "s-3") == []


def test_events_kept_one_item_each_are_still_replayed(store: SessionStore) -> None:
    """Items of the earlier form (one event each, ``frame``) beside the new ones."""
    for seq in (1, 2):
        store._client.put_item(
            TableName=TABLE,
            Item={"pk": {"S": "SESSION#s-4"}, "sk": {"S": outbox.outbox_sk(seq)}, "frame": {"S": f'{{"old":{seq}}}'}},
        )
    state = SessionState(session_id="s-4", next_seq=3)
    state = commit_events(store, state, [3], 200, history=True)
    assert [s for s, _ in store.outbox("s-4")] == [1, 2, 3]
