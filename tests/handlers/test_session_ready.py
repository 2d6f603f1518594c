"""The answer to ``sessionStart``: one unnumbered ``sessionReady`` after the catch-up it brought."""

from __future__ import annotations

from conductor_local.bedrock.server import message
from lambdas import runtime
from shared.wire.protocol import SessionReady
from tests.handlers.conftest import Harness


def _readies(conductor: Harness, conn) -> list[SessionReady]:  # type: ignore[no-untyped-def]
    return [event.payload for event in conductor.all_events(conn) if isinstance(event.payload, SessionReady)]


def test_a_new_session_is_answered_once_not_resumed_with_the_capabilities_it_took(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "capabilities": ["sentenceSpeech", "nope"]})
    (ready,) = _readies(conductor, conn)
    assert ready == SessionReady(resumed=False, title=None, lastSeq=0, capabilities=("sentenceSpeech",))
    assert [event.seq for event in conductor.all_events(conn) if event.kind_name == "sessionReady"] == [None]


def test_a_resumed_session_comes_after_what_it_missed_with_its_title_and_last_seq(conductor: Harness) -> None:
    conductor.script.push(message("Done."))
    first = conductor.connect()
    conductor.start_session(first)
    conductor.say(first, "open the main file")
    conductor.finish_turn(first)
    session_id = first.session_id
    stored = runtime.store().load(session_id)
    assert stored is not None and stored.title == "Open the main file"  # made after the first answer
    again = conductor.connect(session_id)
    conductor.send(again, "sessionStart", {"sessionId": session_id, "lastSeq": 0})
    events = conductor.all_events(again)
    kinds = [event.kind_name for event in events]
    assert kinds[-1] == "sessionReady" and kinds.count("sessionReady") == 1
    ready = events[-1].payload
    assert isinstance(ready, SessionReady) and ready.resumed and ready.title == "Open the main file"
    replayed = [event.seq for event in events if event.seq is not None]
    assert replayed and ready.last_seq == max(replayed) == runtime.store().load(session_id).next_seq - 1


def test_a_session_start_sent_again_is_answered_again_and_a_refused_one_is_not(conductor: Harness) -> None:
    conn = conductor.connect()
    event_id = conductor.start_session(conn)
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id}, event_id=event_id)
    assert len(_readies(conductor, conn)) == 2
    conductor.send(conn, "sessionStart", {"sessionId": "9c5b94b1-35ad-49bb-b118-8e8fc24abf80"})
    assert len(_readies(conductor, conn)) == 2
    assert ("error", "invalid_event") in conductor.summary(conn)
