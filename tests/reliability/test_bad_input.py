"""Bad input, one case each: the limits, the codes, and the shapes the generated suites steer clear of."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from tests.handlers.conftest import Harness, summarize
from tests.reliability.support import IDLE, OK, THINKING, errors, frame, model_calls, non_partial


def last_error(conductor: Harness, conn: object) -> str:
    return errors(conductor.events(conn))[-1]  # type: ignore[arg-type]


def assert_session_still_works(conductor: Harness, conn: object) -> None:
    conductor.script.push(message("Still fine."))
    conductor.say(conn, "still there?")  # type: ignore[arg-type]
    assert summarize(non_partial(conductor.events(conn)))[-2:] == [  # type: ignore[arg-type]
        ("final", "Still fine."),
        ("toolCall", "tts.speak", {"text": "Still fine."}),
    ]
    conductor.finish_turn(conn)  # type: ignore[arg-type]


def test_a_transcript_of_100k_characters_is_transcript_too_long(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.say(conn, "a" * 100_000)
    assert conductor.summary(conn) == [("error", "transcript_too_long")]
    assert conductor.script.requests == [] and conductor.history(conn.session_id) == []
    conductor.say(conn, "b" * 8000)  # the limit itself is fine
    assert conductor.summary(conn)[1] == THINKING


def test_frames_over_the_limit_are_frame_too_large(conductor: Harness) -> None:
    conn = conductor.connect()
    assert conductor.send_raw(conn, frame("userAudioTranscriptPartial", {"text": "x" * 140_000})) == OK
    assert conductor.send_raw(conn, base64.b64encode(b"{" * 140_000).decode(), is_base64=True) == OK
    assert conductor.summary(conn) == [("error", "frame_too_large")] * 2
    assert_session_still_works(conductor, conn)


def test_a_blank_transcript_is_empty_transcript(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.say(conn, " \t\n\u00a0\u3000")
    assert conductor.summary(conn) == [("error", "empty_transcript")]
    assert conductor.script.requests == []


def test_too_many_turns_a_minute_is_rate_limited(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_MAX_TURNS_PER_MINUTE", "2")
    runtime.reset()
    conductor.script.push(message("One."), message("Two."), message("Never."))
    conn = conductor.connect()
    conductor.say(conn, "one")
    conductor.say(conn, "two")
    before = len(conductor.events(conn))
    conductor.say(conn, "three")
    assert summarize(conductor.events(conn)[before:]) == [("error", "rate_limited")]
    assert len(conductor.script.requests) == 2
    assert "three" not in json.dumps(conductor.history(conn.session_id))
    state = runtime.store().load(conn.session_id)
    assert state is not None and state.turn is not None  # the turn in progress was left alone
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE


def test_tool_results_for_another_sessions_calls_are_no_pending_tool_call(conductor: Harness) -> None:
    use = tool_call("editor.openFile", {"path": "theirs.swift"}, call_id="their-call")
    conductor.script.push(message(use), message("Theirs is open."))
    theirs, mine = conductor.connect(), conductor.connect()
    conductor.say(theirs, "open theirs")
    conductor.answer(mine, "their-call", '{"stolen":true}')
    conductor.answer(mine, use.tool_use_id, '{"stolen":true}')
    assert conductor.summary(mine) == [("error", "no_pending_tool_call")] * 2
    assert len(conductor.script.requests) == 1
    conductor.answer(theirs, "their-call", '{"opened":true}')
    assert ("final", "Theirs is open.") in conductor.summary(theirs)
    assert "stolen" not in json.dumps(conductor.history(theirs.session_id))


def test_a_duplicate_id_in_another_spelling_is_still_a_duplicate(conductor: Harness) -> None:
    conductor.script.push(message("Once."), message("Twice must not happen."))
    conn = conductor.connect()
    event_id = uuid.uuid4()
    for spelling in (str(event_id), str(event_id).upper(), event_id.hex, "{" + str(event_id) + "}", event_id.urn):
        assert conductor.send_raw(conn, frame("userAudioTranscriptFinal", {"text": "hi"}, spelling)) == OK
    assert conductor.summary(conn).count(THINKING) == 1
    assert len(conductor.script.requests) == 1


def test_a_session_start_for_another_session_is_invalid_event(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send(conn, "sessionStart", {"sessionId": str(uuid.uuid4())})
    assert conductor.summary(conn) == [("error", "invalid_event")]
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id.upper()})  # its own, in capitals
    assert conductor.summary(conn) == [("error", "invalid_event")]


def test_pending_calls_survive_a_storm_of_garbage(conductor: Harness) -> None:
    use = tool_call("git.status", {})
    conductor.script.push(message(use), message("Clean."))
    conn = conductor.connect()
    conductor.say(conn, "status")
    for body in ("{", "[]", "null", json.dumps({"id": 1}), frame("toolResult", {"callId": 5}), "\x00" * 10):
        assert conductor.send_raw(conn, body) == OK
    assert len(errors(conductor.events(conn))) == 6
    again = conductor.connect(conn.session_id)
    conductor.send(again, "sessionStart", {"sessionId": again.session_id})
    assert [e.payload.call_id for e in model_calls(conductor.events(again))] == [use.tool_use_id]
    conductor.answer(again, use.tool_use_id, '{"clean":true}')
    assert ("final", "Clean.") in conductor.summary(again)


# ---- found by these suites, fixed since: regression tests -------------------------------------------


def test_a_transcript_with_a_lone_surrogate_is_invalid_event(conductor: Harness) -> None:
    """Fixed in 7e59282 (was: accepted, then DynamoDB failed on it: handler_error)."""
    conn = conductor.connect()
    body = (
        f'{{"id":"{uuid.uuid4()}","timestamp":"2025-01-15T10:30:00.000Z",'
        '"kind":{"userAudioTranscriptFinal":{"text":"hello \\ud800 world"}}}'
    )
    assert conductor.send_raw(conn, body) == OK
    assert conductor.summary(conn) == [("error", "invalid_event")]
    assert conductor.history(conn.session_id) == [] and conductor.script.requests == []
    assert_session_still_works(conductor, conn)


def test_a_timestamp_with_non_ascii_digits_is_invalid_event(conductor: Harness) -> None:
    """Fixed in 7e59282 (``\\d`` matched any Unicode digit)."""
    conn = conductor.connect()
    arabic = "\u0662\u0660\u0662\u0665-01-15T10:30:00.000Z"  # the year 2025 in Arabic-Indic digits
    body = json.dumps({"id": str(uuid.uuid4()), "timestamp": arabic, "kind": {"toolResult": {"callId": "x"}}})
    assert conductor.send_raw(conn, body) == OK
    assert conductor.summary(conn) == [("error", "invalid_event")]


def test_the_frame_limit_counts_bytes(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed in dfdc19c (the limit counted characters)."""
    monkeypatch.setenv("CONDUCTOR_MAX_FRAME_BYTES", "32768")  # one billed WebSocket frame
    runtime.reset()
    conn = conductor.connect()
    body = json.dumps(
        {
            "id": str(uuid.uuid4()),
            "timestamp": "2025-01-15T10:30:00.000Z",
            "kind": {"userAudioTranscriptPartial": {"text": "\u20ac" * 20_000}},  # 60 KB, 20 k characters
        },
        ensure_ascii=False,
    )
    assert len(body) < 32768 < len(body.encode("utf-8"))
    assert conductor.send_raw(conn, body) == OK
    assert conductor.summary(conn) == [("error", "frame_too_large")]


def test_a_binary_frame_of_exactly_the_limit_is_accepted(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed in dfdc19c (base64 length rounding refused it)."""
    monkeypatch.setenv("CONDUCTOR_MAX_FRAME_BYTES", "1000")
    runtime.reset()
    conn = conductor.connect()
    padding = 1000 - len(frame("userAudioTranscriptPartial", {"text": ""}))
    body = frame("userAudioTranscriptPartial", {"text": "x" * padding}).encode()  # 1000 bytes in all
    assert len(body) == 1000
    assert conductor.send_raw(conn, base64.b64encode(body).decode(), is_base64=True) == OK
    assert conductor.events(conn) == []  # a partial needs no reply


def test_a_session_start_for_another_session_replays_nothing(conductor: Harness) -> None:
    """Fixed in dfdc19c (it replayed the outbox, and its own error twice)."""
    conductor.script.push(message("Hello."))
    first = conductor.connect()
    conductor.say(first, "hello")
    conductor.disconnect(first)
    refused = conductor.connect(first.session_id)
    conductor.send(refused, "sessionStart", {"sessionId": str(uuid.uuid4()), "lastSeq": 0})
    assert conductor.summary(refused) == [("error", "invalid_event")]
    accepted = conductor.connect(first.session_id)  # the control: its own session id replays
    conductor.send(accepted, "sessionStart", {"sessionId": accepted.session_id, "lastSeq": 0})
    kept = [seq for seq, _ in runtime.store().outbox(first.session_id)]  # the refused one's error too
    assert [e.seq for e in conductor.events(accepted)] == kept
    assert set(kept) > {e.seq for e in non_partial(conductor.events(first))}


# ---- DynamoDB rules moto does not enforce ----------------------------------------------------------


def strict_between(query: Callable[..., Any]) -> Callable[..., Any]:
    """``Query`` that refuses a reversed BETWEEN, as DynamoDB does (moto just returns nothing)."""

    def checked(**kwargs: Any) -> Any:
        found = re.search(r"BETWEEN (:\w+) AND (:\w+)", kwargs.get("KeyConditionExpression", ""))
        if found:
            values = kwargs["ExpressionAttributeValues"]
            low, high = values[found.group(1)], values[found.group(2)]
            if low.get("S", "").encode() > high.get("S", "").encode():
                raise ClientError(
                    {
                        "Error": {
                            "Code": "ValidationException",
                            "Message": "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound "
                            "to be greater than or equal to lower bound",
                        }
                    },
                    "Query",
                )
        return query(**kwargs)

    return checked


@pytest.mark.parametrize("last_seq", [9_999_999_999, 99_999_999_990, 2**63 - 1, 10**30])
def test_a_huge_last_seq_replays_nothing_and_breaks_nothing(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, last_seq: int
) -> None:
    """Fixed in c0c1a88 (lastSeq 99999999990 reversed the outbox query's BETWEEN: handler_error on AWS)."""
    conductor.script.push(message("Hello."))
    first = conductor.connect()
    conductor.say(first, "hello")
    conductor.disconnect(first)
    again = conductor.connect(first.session_id)
    client = runtime.store()._client
    monkeypatch.setattr(client, "query", strict_between(client.query))
    conductor.send(again, "sessionStart", {"sessionId": again.session_id, "lastSeq": last_seq})
    assert conductor.events(again) == []
