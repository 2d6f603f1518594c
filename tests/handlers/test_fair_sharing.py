"""Fair sharing: one session cannot use up the stage's Lambda and DynamoDB budget. Events other
than partials beyond the session's budget a second are answered ``rate_limited`` (no ``seq``, not
recorded: the same event may be sent again), and a partial sooner than the minimum interval after
the last one kept costs its one read and no write."""

from __future__ import annotations

import time

import pytest

from lambdas import runtime
from tests.handlers.conftest import Harness
from tests.handlers.test_turn_runner import dynamodb_calls, launches_held

WRITES = ("PutItem", "TransactWriteItems", "UpdateItem", "DeleteItem")


def test_events_over_the_sessions_budget_a_second_are_refused_and_may_be_sent_again(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_MAX_EVENTS_PER_SECOND", "3")
    runtime.reset()
    conn = conductor.connect()
    ids = [conductor.send(conn, "toolResult", {"callId": f"call-{n}", "result": "{}"}) for n in range(5)]
    errors = [e for e in conductor.events(conn) if e.kind_name == "error"]
    codes = [(e.payload.code, e.seq is not None) for e in errors]
    # Five at once on a budget of three: three are decided (no such call: with seq), the rest refused.
    assert len(codes) == 5 and codes.count(("no_pending_tool_call", True)) + codes.count(("rate_limited", False)) == 5
    refused = [e for e in errors if e.payload.code == "rate_limited"]
    assert refused and all(e.seq is None for e in refused)
    assert "events a second" in refused[0].payload.message
    time.sleep(1.05)  # the next second: a budget of its own
    before = len(conductor.events(conn))
    conductor.send(conn, "toolResult", {"callId": "call-4", "result": "{}"}, event_id=ids[4])  # sent again
    again = [e for e in conductor.events(conn)[before:] if e.kind_name == "error"]
    assert [e.payload.code for e in again] == ["no_pending_tool_call"]  # decided: it was never recorded


def test_a_partial_too_soon_after_the_last_one_kept_costs_one_read_and_no_write(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_SPECULATION", "true")
    monkeypatch.setenv("CONDUCTOR_MIN_PARTIAL_INTERVAL_MS", "5000")
    runtime.reset()
    conn = conductor.connect()
    conductor.start_session(conn)
    with launches_held(conductor):  # the watcher is not run: only the partials' own costs
        conductor.send(conn, "userAudioTranscriptPartial", {"text": "open"})
        log: list[str] = []
        with dynamodb_calls(log):
            conductor.send(conn, "userAudioTranscriptPartial", {"text": "open the"})
            conductor.send(conn, "userAudioTranscriptPartial", {"text": "open the main"})
    assert [call for call in log if not call.startswith("post:")] == ["GetItem", "GetItem"]
    stored = runtime.store().load(conn.session_id)
    assert stored is not None and stored.listening is not None and stored.listening.text == "open"
