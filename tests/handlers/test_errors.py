"""Every server error code, and the connect/disconnect rules."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from conductor_local.bedrock.server import Text, message, model_stream_error, tool_call
from conductor_local.lambda_runtime.turn_functions import TURN_TIMEOUT_S
from lambdas import runtime
from shared.wire.protocol import SERVER_ERROR_CODES, now_timestamp
from tests.handlers.conftest import Harness


def last_error(conductor: Harness, conn: object) -> tuple[str, str]:
    errors = [e.payload for e in conductor.events(conn) if e.kind_name == "error"]  # type: ignore[arg-type]
    return errors[-1].code, errors[-1].message


def test_invalid_json(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send_raw(conn, "{not json")
    assert last_error(conductor, conn)[0] == "invalid_json"
    conductor.send_raw(conn, base64.b64encode(b"\xff\xfe").decode(), is_base64=True)
    assert last_error(conductor, conn)[0] == "invalid_json"


@pytest.mark.parametrize(
    "frame",
    [
        {"timestamp": "2025-01-15T10:30:00.000Z", "kind": {"userAudioTranscriptFinal": {"text": "hi"}}},
        {
            "id": "not-a-uuid",
            "timestamp": "2025-01-15T10:30:00.000Z",
            "kind": {"userAudioTranscriptFinal": {"text": "hi"}},
        },
        {
            "id": str(uuid.uuid4()),
            "timestamp": "2025-01-15 10:30",
            "kind": {"userAudioTranscriptFinal": {"text": "hi"}},
        },
        {"id": str(uuid.uuid4()), "timestamp": "2025-01-15T10:30:00.000Z"},
        {"id": str(uuid.uuid4()), "timestamp": "2025-01-15T10:30:00.000Z", "kind": {}},
        {"id": str(uuid.uuid4()), "timestamp": "2025-01-15T10:30:00.000Z", "kind": {"toolResult": {"result": "x"}}},
        {
            "id": str(uuid.uuid4()),
            "timestamp": "2025-01-15T10:30:00.000Z",
            "kind": {"userAudioTranscriptFinal": {"text": 5}},
        },
        [1, 2, 3],
    ],
)
def test_invalid_event(conductor: Harness, frame: object) -> None:
    conn = conductor.connect()
    conductor.send_raw(conn, json.dumps(frame))
    assert last_error(conductor, conn)[0] == "invalid_event"


def test_unknown_kind_is_ignored(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send(conn, "userGesture", {"type": "swipe"})
    assert conductor.events(conn) == []


def test_no_session(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.disconnect(conn)
    conductor.send(conn, "userAudioTranscriptFinal", {"text": "hello?"})
    assert last_error(conductor, conn)[0] == "no_session"


def test_empty_transcript(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.say(conn, "  \n ")
    assert last_error(conductor, conn)[0] == "empty_transcript"
    assert conductor.script.requests == []


def test_no_pending_tool_call(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.answer(conn, "call-that-never-was")
    assert last_error(conductor, conn)[0] == "no_pending_tool_call"


def test_invalid_tool_call(conductor: Harness) -> None:
    conductor.script.push(message(tool_call("editor.openFile", "not json at all")), message("Hmm."))
    conn = conductor.connect()
    conductor.say(conn, "open")
    assert any(e.kind_name == "error" and e.payload.code == "invalid_tool_call" for e in conductor.events(conn))


def test_bedrock_error(conductor: Harness) -> None:
    conductor.script.push(message("a", interrupted_by=model_stream_error()))
    conn = conductor.connect()
    conductor.say(conn, "x")
    assert last_error(conductor, conn)[0] == "bedrock_error"


def test_conductor_error_when_tool_rounds_run_away(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_MAX_TOOL_ROUNDS", "1")
    runtime.reset()
    first, second = tool_call("git.status", {}), tool_call("git.status", {})
    conductor.script.push(message(first), message(second))
    conn = conductor.connect()
    conductor.say(conn, "loop")
    conductor.answer(conn, first.tool_use_id)
    assert last_error(conductor, conn)[0] == "conductor_error"
    assert conductor.summary(conn)[-1] == ("toolCall", "convo.setState", {"state": "idle"})


def test_conductor_error_when_the_invocation_runs_out_of_time(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # leaves ~0.3 s of the turn runner's budget
    monkeypatch.setenv("CONDUCTOR_TURN_RESERVE_MS", str(int(TURN_TIMEOUT_S * 1000) - 300))
    runtime.reset()
    conductor.script.push(message(Text("one two three four five six seven eight", pause=0.1)), message("Back."))
    conn = conductor.connect()
    conductor.say(conn, "talk")
    code, text = last_error(conductor, conn)
    assert code == "conductor_error" and "time" in text
    monkeypatch.setenv("CONDUCTOR_TURN_RESERVE_MS", "1000")
    runtime.reset()
    conductor.say(conn, "again")
    assert ("final", "Back.") in conductor.summary(conn)


def test_handler_error_is_the_last_resort(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = conductor.connect()
    monkeypatch.setenv("CONDUCTOR_TABLE", "no-such-table")
    runtime.reset()
    response = conductor.send_raw(
        conn,
        json.dumps(
            {
                "id": str(uuid.uuid4()),
                "timestamp": now_timestamp(),
                "kind": {"userAudioTranscriptFinal": {"text": "hi"}},
            }
        ),
    )
    assert response == {"statusCode": 200}
    assert last_error(conductor, conn)[0] == "handler_error"
    monkeypatch.setenv("CONDUCTOR_TABLE", "voiceide-conductor-test")
    runtime.reset()


def test_every_server_error_code_is_covered_here() -> None:
    names = {name.removeprefix("test_") for name in globals() if name.startswith("test_")}
    for code in SERVER_ERROR_CODES:
        assert any(name.startswith(code.value) for name in names), code


def test_connect_requires_a_uuid_v4_and_writes_nothing(conductor: Harness) -> None:
    for query in (
        {},
        {"sessionId": "abc"},
        {"sessionId": str(uuid.uuid1())},
        {"sessionId": "{" + str(uuid.uuid4()) + "}"},
    ):
        conn = conductor.connect(query=query)
        assert conn.status == 400
        assert runtime.store().get_connection(conn.connection_id) is None
    assert runtime.store().load(str(uuid.uuid1())) is None


def test_reconnect_rebinds_and_a_stale_disconnect_does_not_unbind(conductor: Harness) -> None:
    first = conductor.connect()
    second = conductor.connect(first.session_id)
    assert runtime.store().load(first.session_id).connection_id == second.connection_id  # type: ignore[union-attr]
    conductor.disconnect(first)
    assert runtime.store().load(first.session_id).connection_id == second.connection_id  # type: ignore[union-attr]
    assert runtime.store().get_connection(first.connection_id) is None
    conductor.disconnect(second)
    assert runtime.store().load(first.session_id).connection_id is None  # type: ignore[union-attr]


def test_a_session_bound_to_a_principal_refuses_another(conductor: Harness) -> None:
    owner = conductor.connect(principal="alice")
    assert owner.status == 200
    assert conductor.connect(owner.session_id, principal="mallory").status == 403
    assert conductor.connect(owner.session_id).status == 403
    assert conductor.connect(owner.session_id, principal="alice").status == 200
