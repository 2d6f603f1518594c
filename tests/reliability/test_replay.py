"""Seq, outbox and replay: what a connection missed reaches the app's next connection.

Every server event carries ``seq`` (1, 2, 3, ... per session). Non-partial events are kept in the
outbox; ``sessionStart`` with ``lastSeq`` re-sends the kept events after it, in order. Partials are
not kept: each carries the whole text so far and the final supersedes it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.adapters.outbox import events_of
from shared.core import event_ids
from tests.handlers.conftest import Connection, Harness, summarize
from tests.reliability.support import (
    IDLE,
    THINKING,
    by_seq,
    errors,
    gated,
    model_calls,
    non_partial,
    outbox_seqs,
    seqs,
    tool_calls,
    wait_partials,
)

SENTENCE = "one two three four five six"


def start_session_after(conductor: Harness, conn: Connection, last_seq: int) -> None:
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "lastSeq": last_seq})


def assert_nothing_lost(conductor: Harness, session_id: str, *connections: Connection) -> None:
    """Every kept (non-partial) event reached the app on one of its connections, exactly once."""
    received = [seq for conn in connections for seq in seqs(non_partial(conductor.events(conn)))]
    kept = outbox_seqs(session_id)
    assert sorted(received) == kept, f"received {sorted(received)}, kept {kept}"


def test_seq_runs_1_2_3_across_turns_and_connections(conductor: Harness) -> None:
    use = tool_call("editor.openFile", {"path": "a.swift"})
    conductor.script.push(message("Opening.", use), message("Open."), message("Bye."))
    first = conductor.connect()
    conductor.say(first, "open a")
    conductor.answer(first, use.tool_use_id)
    conductor.finish_turn(first)
    conductor.disconnect(first)
    second = conductor.connect(first.session_id)
    conductor.start_session(second)
    conductor.say(second, "bye")
    numbers = seqs(conductor.events(first)) + seqs(conductor.events(second))
    assert numbers == list(range(1, len(numbers) + 1))
    everything = conductor.events(first) + conductor.events(second)
    unnumbered = ("assistantSpeechPartial", "turnUsage")  # coalesced partials and what a turn cost
    assert all((event.seq is None) == (event.kind_name in unnumbered) for event in everything)
    # the outbox holds exactly the numbered ones
    numbered = [event for event in non_partial(everything) if event.kind_name != "turnUsage"]
    assert outbox_seqs(first.session_id) == seqs(numbered)


def test_gone_mid_turn_then_replay_on_the_new_connection(conductor: Harness) -> None:
    gate = threading.Event()
    conductor.script.push(gated(message(SENTENCE), gate, after_deltas=2), message("Still here."))
    first = conductor.connect()
    streaming = conductor.send_in_background(first, "userAudioTranscriptFinal", {"text": "count"})
    wait_partials(conductor, first, 2)
    conductor.management.gone.add(first.connection_id)  # the app lost its network
    gate.set()
    streaming.join(30)
    assert not streaming.is_alive()
    # the turn finished and was stored although nobody heard it
    assert conductor.history(first.session_id) == [
        {"role": "user", "content": [{"text": "count"}]},
        {"role": "assistant", "content": [{"text": SENTENCE}]},
    ]
    seen = conductor.events(first)
    assert summarize(seen) == [THINKING, ("partial", "one"), ("partial", "one two")]
    last_seq = max(seqs(seen))

    second = conductor.connect(first.session_id)
    start_session_after(conductor, second, last_seq)
    replayed = conductor.events(second)
    assert summarize(replayed) == [("final", SENTENCE), ("toolCall", "tts.speak", {"text": SENTENCE})]
    assert seqs(replayed) == sorted(seqs(replayed)) and min(seqs(replayed)) > last_seq
    assert not set(seqs(replayed)) & set(seqs(seen))  # nothing the app had seen
    assert_nothing_lost(conductor, first.session_id, first, second)

    conductor.finish_turn(second)  # the replayed speak is answerable
    assert summarize(conductor.events(second))[-1] == IDLE
    conductor.say(second, "are you there")
    assert ("final", "Still here.") in conductor.summary(second)
    assert_nothing_lost(conductor, first.session_id, first, second)


def test_pending_tool_calls_are_replayed_in_order_and_answerable(conductor: Harness) -> None:
    gate = threading.Event()
    first_use = tool_call("editor.openFile", {"path": "a.swift"})
    second_use = tool_call("project.search", {"query": "TODO"})
    conductor.script.push(
        gated(message("Let me look.", first_use, second_use), gate, after_deltas=1), message("Both done.")
    )
    first = conductor.connect()
    streaming = conductor.send_in_background(first, "userAudioTranscriptFinal", {"text": "look around"})
    wait_partials(conductor, first, 1)
    conductor.management.gone.add(first.connection_id)
    gate.set()
    streaming.join(30)
    assert not streaming.is_alive()
    last_seq = max(seqs(conductor.events(first)))

    second = conductor.connect(first.session_id)
    start_session_after(conductor, second, last_seq)
    assert summarize(conductor.events(second)) == [
        ("final", "Let me look."),
        ("toolCall", "tts.speak", {"text": "Let me look."}),
        ("toolCall", "editor.openFile", {"path": "a.swift"}),
        ("toolCall", "project.search", {"query": "TODO"}),
    ]
    conductor.answer(second, second_use.tool_use_id, '{"matches":2}')
    conductor.answer(second, first_use.tool_use_id, '{"opened":true}')
    assert len(conductor.script.requests) == 2
    assert ("final", "Both done.") in conductor.summary(second)
    assert errors(conductor.events(second)) == []
    assert_nothing_lost(conductor, first.session_id, first, second)


def test_session_start_without_last_seq_resends_only_the_calls_still_pending(conductor: Harness) -> None:
    first_use = tool_call("editor.openFile", {"path": "a.swift"})
    second_use = tool_call("project.search", {"query": "TODO"})
    conductor.script.push(message("Looking.", first_use, second_use), message("Both done."))
    first = conductor.connect()
    conductor.say(first, "look around")
    conductor.answer(first, first_use.tool_use_id)
    conductor.disconnect(first)
    second = conductor.connect(first.session_id)
    conductor.start_session(second)
    assert summarize(conductor.events(second)) == [("toolCall", "project.search", {"query": "TODO"})]
    conductor.start_session(second)  # again: this connection already has it
    assert len(conductor.events(second)) == 1
    conductor.answer(second, second_use.tool_use_id)
    assert ("final", "Both done.") in conductor.summary(second)


def test_a_client_that_vanished_mid_stream_still_gets_its_turn_finished_and_stored(conductor: Harness) -> None:
    gate = threading.Event()
    conductor.script.push(gated(message(SENTENCE), gate, after_deltas=3), message("Welcome back."))
    conn = conductor.connect()
    streaming = conductor.send_in_background(conn, "userAudioTranscriptFinal", {"text": "count"})
    wait_partials(conductor, conn, 3)
    assert conductor.disconnect(conn) == {"statusCode": 200}
    seen = len(conductor.events(conn))
    gate.set()
    streaming.join(30)
    assert not streaming.is_alive()
    assert len(conductor.events(conn)) == seen  # nothing posted to a connection that is closed
    assert conductor.history(conn.session_id)[-1] == {"role": "assistant", "content": [{"text": SENTENCE}]}

    back = conductor.connect(conn.session_id)
    start_session_after(conductor, back, max(seqs(conductor.events(conn))))
    assert summarize(conductor.events(back)) == [("final", SENTENCE), ("toolCall", "tts.speak", {"text": SENTENCE})]
    conductor.finish_turn(back)
    conductor.say(back, "hello again")
    assert ("final", "Welcome back.") in conductor.summary(back)
    assert_nothing_lost(conductor, conn.session_id, conn, back)


def test_last_seq_zero_replays_everything_kept_and_a_future_last_seq_nothing(conductor: Harness) -> None:
    conductor.script.push(message("Fine."))
    first = conductor.connect()
    conductor.say(first, "how are you")
    kept = non_partial(conductor.events(first))
    conductor.disconnect(first)
    again = conductor.connect(first.session_id)
    start_session_after(conductor, again, 0)
    assert [(e.seq, e.kind_name) for e in conductor.events(again)] == [(e.seq, e.kind_name) for e in kept]
    future = conductor.connect(first.session_id)
    start_session_after(conductor, future, 10_000)
    assert conductor.events(future) == []


def reconnect_mid_turn(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, *, session_start_before_the_rest: bool
) -> tuple[Connection, Connection]:
    """The app's network drops mid-turn (410) and the turn goes on; the app reconnects and says
    ``sessionStart(lastSeq)`` either while the turn still runs or once it is over.

    "Opening it." (final + tts.speak) is made while nobody listens, so it is kept. The model's
    toolCall comes after ``$connect`` re-bound the session: it must not reach the new connection
    before the missed events do.
    """
    store = runtime.store()
    commit = store.commit
    kept_unheard = threading.Event()

    def watching_commit(state: Any, history: Any = (), **kwargs: Any) -> Any:
        committed = commit(state, history, **kwargs)
        if any('"tts.speak"' in item for _, item in kwargs.get("outbox", ())):
            kept_unheard.set()
        return committed

    monkeypatch.setattr(store, "commit", watching_commit)
    first_gate, second_gate = threading.Event(), threading.Event()
    use = tool_call("editor.openFile", {"path": "a.swift"})
    steps = message("Opening it.", use)  # deltas: "Opening", " it.", then the tool input in 3 parts
    conductor.script.push(gated(steps, first_gate, after_deltas=1, after_3=second_gate), message("Open."))
    first = conductor.connect()
    conductor.start_session(first)
    talking = conductor.send_in_background(first, "userAudioTranscriptFinal", {"text": "open a"})
    wait_partials(conductor, first, 1)
    conductor.management.gone.add(first.connection_id)
    first_gate.set()
    assert kept_unheard.wait(10)
    second = conductor.connect(first.session_id)
    if session_start_before_the_rest:
        start_session_after(conductor, second, max(seqs(conductor.events(first))))
        second_gate.set()
    else:
        second_gate.set()
        talking.join(30)
        assert conductor.events(second) == []  # nothing goes live before the app's sessionStart
        start_session_after(conductor, second, max(seqs(conductor.events(first))))
    talking.join(30)
    assert not talking.is_alive()
    return first, second


WHEN_THE_APP_STARTS = pytest.mark.parametrize(
    "session_start_before_the_rest", [True, False], ids=["sessionStart-mid-turn", "sessionStart-after-the-turn"]
)


@WHEN_THE_APP_STARTS
def test_reconnect_while_the_turn_still_runs_loses_nothing_and_repeats_nothing(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, session_start_before_the_rest: bool
) -> None:
    """Before 65cfec4 the replay re-sent what had gone live (twice); in 65cfec4 it sent nothing."""
    first, second = reconnect_mid_turn(
        conductor, monkeypatch, session_start_before_the_rest=session_start_before_the_rest
    )
    assert_nothing_lost(conductor, first.session_id, first, second)
    assert len(seqs(conductor.events(second))) == len(set(seqs(conductor.events(second))))
    call = model_calls(conductor.events(second))[0]
    conductor.answer(second, call.payload.call_id)
    assert ("final", "Open.") in conductor.summary(second)


@WHEN_THE_APP_STARTS
def test_reconnect_while_the_turn_still_runs_gets_the_missed_events_in_order(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, session_start_before_the_rest: bool
) -> None:
    """The app hears the "Opening it." final and speak it missed before the model's toolCall.

    (Until the catch-up, $connect made the new connection live at once, so the toolCall went out
    live before the sessionStart replayed the two events made before it.)
    """
    first, second = reconnect_mid_turn(
        conductor, monkeypatch, session_start_before_the_rest=session_start_before_the_rest
    )
    received = seqs(conductor.events(second))
    assert received == sorted(received), f"seqs out of order on the new connection: {received}"
    assert summarize(non_partial(conductor.events(second))) == [
        ("final", "Opening it."),
        ("toolCall", "tts.speak", {"text": "Opening it."}),
        ("toolCall", "editor.openFile", {"path": "a.swift"}),
    ]
    last_seen = max(seqs(conductor.events(first)))
    assert received == [seq for seq in outbox_seqs(first.session_id) if seq > last_seen]  # all it missed, no more


def test_a_new_connection_hears_nothing_until_its_first_event_then_everything_after_the_bind(
    conductor: Harness,
) -> None:
    """An app that never says sessionStart is caught up by its first event of any kind."""
    gate = threading.Event()
    conductor.script.push(gated(message(SENTENCE), gate, after_deltas=1), message("Hi again."))
    first = conductor.connect()
    talking = conductor.send_in_background(first, "userAudioTranscriptFinal", {"text": "count"})
    wait_partials(conductor, first, 1)
    second = conductor.connect(first.session_id)  # the old socket is still open
    gate.set()
    talking.join(30)
    assert conductor.events(second) == [] and len(non_partial(conductor.events(first))) == 1  # just "thinking"
    conductor.say(second, "hello?")  # a transcript, no sessionStart: the missed turn end comes first
    assert summarize(non_partial(conductor.events(second)))[:2] == [
        ("final", SENTENCE),
        ("toolCall", "tts.speak", {"text": SENTENCE}),
    ]
    assert seqs(conductor.events(second)) == sorted(seqs(conductor.events(second)))
    assert_nothing_lost(conductor, first.session_id, first, second)


def test_replayed_frames_are_the_original_events(conductor: Harness) -> None:
    """Replay re-sends the kept frame itself (same id, seq and payload), so the app can dedupe by id or seq."""
    gate = threading.Event()
    conductor.script.push(gated(message(SENTENCE), gate, after_deltas=1))
    conn = conductor.connect()
    streaming = conductor.send_in_background(conn, "userAudioTranscriptFinal", {"text": "count"})
    wait_partials(conductor, conn, 1)
    gate.set()
    streaming.join(30)
    original = {e.seq: e for e in non_partial(conductor.events(conn))}
    again = conductor.connect(conn.session_id)
    start_session_after(conductor, again, 0)
    for event in by_seq(conductor.events(again)):
        assert event == original[event.seq]
    assert len(tool_calls(conductor.events(again), "tts.speak")) == 1


def test_the_outbox_and_the_processed_ids_expire(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept events carry the outbox TTL, the state (which remembers the ids taken) the session TTL."""
    monkeypatch.setenv("CONDUCTOR_OUTBOX_TTL_SECONDS", "3600")
    monkeypatch.setenv("CONDUCTOR_SESSION_TTL_SECONDS", "7200")
    runtime.reset()
    conductor.script.push(message("Fine."))
    conn = conductor.connect()
    event_id = conductor.say(conn, "how are you")
    now = time.time()
    items = boto3.client("dynamodb").query(
        TableName=runtime.store()._table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"SESSION#{conn.session_id}"}},
    )["Items"]
    expiry = {item["sk"]["S"]: int(item["expires_at"]["N"]) for item in items}
    moved = [event.seq for item in items if item["sk"]["S"].startswith("OUTBOX#") for event in events_of(item)]
    stored = runtime.store().load(conn.session_id)
    assert stored is not None and event_ids.taken(stored, event_id)
    # Every kept event is held once: in the state item (until a write moves it) or in an outbox item.
    assert sorted([*moved, *(event.seq for event in stored.kept)]) == outbox_seqs(conn.session_id)
    assert outbox_seqs(conn.session_id)
    assert all(now + 3600 - 60 <= expiry[sk] <= now + 3600 + 60 for sk in expiry if sk.startswith("OUTBOX#"))
    assert now + 7200 - 60 <= expiry["STATE"] <= now + 7200 + 60
    assert all(sk in expiry for sk in ("STATE", "MSG#0000000000", "MSG#0000000001"))
