"""Idempotent client events: an event id already processed for the session is not processed again.

The id is claimed in the same DynamoDB transaction as the state change, so a frame that API
Gateway (or the app, after a reconnect) delivers twice changes the session once.
"""

from __future__ import annotations

from conductor_local.bedrock.server import message, tool_call
from tests.handlers.conftest import Harness
from tests.reliability.support import OK, THINKING, errors, frame, model_calls, tool_calls


def test_the_same_transcript_frame_twice_starts_one_turn(conductor: Harness) -> None:
    conductor.script.push(message("Hello there."), message("A second turn must not happen."))
    conn = conductor.connect()
    body = frame("userAudioTranscriptFinal", {"text": "hello"})
    assert conductor.send_raw(conn, body) == OK
    seen = len(conductor.events(conn))
    assert conductor.send_raw(conn, body) == OK
    assert len(conductor.events(conn)) == seen  # the duplicate got no reply at all
    assert conductor.summary(conn).count(THINKING) == 1
    assert len(conductor.script.requests) == 1
    assert conductor.script.pending == 1
    assert conductor.history(conn.session_id) == [
        {"role": "user", "content": [{"text": "hello"}]},
        {"role": "assistant", "content": [{"text": "Hello there."}]},
    ]


def test_the_same_tool_result_twice_resumes_the_model_once(conductor: Harness) -> None:
    use = tool_call("editor.openFile", {"path": "a.swift"})
    conductor.script.push(message(use), message("Opened."), message("A second resume must not happen."))
    conn = conductor.connect()
    conductor.say(conn, "open a")
    body = frame("toolResult", {"callId": use.tool_use_id, "result": '{"opened":true}', "error": None})
    assert conductor.send_raw(conn, body) == OK
    seen = len(conductor.events(conn))
    assert conductor.send_raw(conn, body) == OK
    assert len(conductor.events(conn)) == seen
    assert len(conductor.script.requests) == 2
    assert errors(conductor.events(conn)) == []  # not even no_pending_tool_call: it is the same event
    assert [s for s in conductor.summary(conn) if s[0] == "final"] == [("final", "Opened.")]
    results = [block for msg in conductor.history(conn.session_id) for block in msg["content"] if "toolResult" in block]
    assert len(results) == 1


def test_a_duplicate_after_a_reconnect_is_still_ignored(conductor: Harness) -> None:
    conductor.script.push(message("Hi."), message("A second turn must not happen."))
    first = conductor.connect()
    body = frame("userAudioTranscriptFinal", {"text": "hi"})
    assert conductor.send_raw(first, body) == OK
    conductor.disconnect(first)
    second = conductor.connect(first.session_id)
    conductor.start_session(second)
    assert conductor.send_raw(second, body) == OK  # the app re-sends what it never saw acknowledged
    assert conductor.events(second) == []
    assert len(conductor.script.requests) == 1
    assert len(conductor.history(first.session_id)) == 2


def test_a_tool_result_resent_on_the_new_connection_resumes_the_model_once(conductor: Harness) -> None:
    use = tool_call("project.search", {"query": "main"})
    conductor.script.push(message(use), message("Found it."), message("A second resume must not happen."))
    first = conductor.connect()
    conductor.say(first, "find main")
    body = frame("toolResult", {"callId": use.tool_use_id, "result": '{"files":1}', "error": None})
    conductor.management.gone.add(first.connection_id)  # the answer gets through, the reply does not
    assert conductor.send_raw(first, body) == OK
    second = conductor.connect(first.session_id)
    conductor.start_session(second)
    assert conductor.send_raw(second, body) == OK
    assert len(conductor.script.requests) == 2
    assert errors(conductor.events(second)) == []
    assert model_calls(conductor.events(second)) == []  # nothing pending any more: nothing re-sent


def test_event_ids_are_per_session(conductor: Harness) -> None:
    conductor.script.push(message("One."), message("Two."))
    alice, bob = conductor.connect(), conductor.connect()
    event_id = "3f9a3c52-3a2b-4b8e-9d7c-0e5f1a2b3c4d"
    assert conductor.send_raw(alice, frame("userAudioTranscriptFinal", {"text": "one"}, event_id)) == OK
    assert conductor.send_raw(bob, frame("userAudioTranscriptFinal", {"text": "two"}, event_id)) == OK
    assert len(conductor.script.requests) == 2
    assert conductor.summary(alice).count(THINKING) == conductor.summary(bob).count(THINKING) == 1


def test_an_own_call_result_twice_ends_the_turn_once(conductor: Harness) -> None:
    conductor.script.push(message("Done."), message("Next."))
    conn = conductor.connect()
    conductor.say(conn, "go")
    speak = tool_calls(conductor.events(conn), "tts.speak")[-1].payload.call_id
    body = frame("toolResult", {"callId": speak, "result": '{"spoken":true}', "error": None})
    assert conductor.send_raw(conn, body) == OK
    assert conductor.send_raw(conn, body) == OK
    assert conductor.summary(conn).count(("toolCall", "convo.setState", {"state": "idle"})) == 1
    assert errors(conductor.events(conn)) == []
    conductor.say(conn, "next")
    assert ("final", "Next.") in conductor.summary(conn)
