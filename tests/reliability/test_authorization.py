"""Authorization (a session belongs to its principal) and what the logs may contain."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conductor_local.bedrock.server import message, tool_call
from conductor_local.lambda_runtime.context import LocalLambdaContext
from lambdas import authorizer, connect, runtime
from tests.handlers.conftest import Connection, Harness
from tests.infra.test_cognito import connect_event, make_pool
from tests.reliability.support import OK, THINKING, errors, frame, model_calls, send_frame_as


def connect_with(harness: Harness, session_id: str, authorizer: dict[str, Any] | None) -> int:
    """``$connect`` with an arbitrary authorizer context; returns the status code."""
    context = harness._context(uuid.uuid4().hex[:16], "$connect", "CONNECT")
    if authorizer is not None:
        context["authorizer"] = authorizer
    event = {
        "headers": {},
        "multiValueHeaders": {},
        "queryStringParameters": {"sessionId": session_id},
        "requestContext": context,
        "isBase64Encoded": False,
    }
    return int(connect.handler(event, LocalLambdaContext(function_name="connect"))["statusCode"])


def test_a_session_bound_to_a_principal_refuses_others_at_connect(conductor: Harness) -> None:
    owner = conductor.connect(principal="alice")
    assert owner.status == 200
    refused = [
        conductor.connect(owner.session_id, principal="mallory"),
        conductor.connect(owner.session_id),  # anonymous
        conductor.connect(owner.session_id.upper(), principal="mallory"),  # the same session, in capitals
    ]
    assert [conn.status for conn in refused] == [403, 403, 403]
    for conn in refused:
        assert runtime.store().get_connection(conn.connection_id) is None
    state = runtime.store().load(owner.session_id)
    assert state is not None and state.connection_id == owner.connection_id and state.principal == "alice"
    assert conductor.connect(owner.session_id, principal="alice").status == 200


def test_a_token_issued_for_another_session_is_refused(conductor: Harness) -> None:
    session_id = str(uuid.uuid4())
    assert connect_with(conductor, session_id, {"principalId": "alice", "sessionId": str(uuid.uuid4())}) == 403
    assert runtime.store().load(session_id) is None


def test_a_message_from_another_principal_gets_no_session(conductor: Harness) -> None:
    use = tool_call("editor.openFile", {"path": "a.swift"})
    conductor.script.push(message(use), message("Opened."))
    owner = conductor.connect(principal="alice")
    assert (
        send_frame_as(conductor, owner, frame("userAudioTranscriptFinal", {"text": "open a"}), principal="alice") == OK
    )
    assert [e.payload.call_id for e in model_calls(conductor.events(owner))] == [use.tool_use_id]

    stolen = [
        frame("userAudioTranscriptFinal", {"text": "do what I say"}),
        frame("toolResult", {"callId": use.tool_use_id, "result": '{"forged":true}', "error": None}),
        frame("error", {"code": "audio.output.interrupted", "message": ""}),
        frame("sessionStart", {"sessionId": owner.session_id, "lastSeq": 0}),
    ]
    before = len(conductor.events(owner))
    for body in stolen:
        assert send_frame_as(conductor, owner, body, principal="mallory") == OK
    replies = conductor.events(owner)[before:]
    assert [e.kind_name for e in replies] == ["error"] * len(stolen)  # nothing replayed, nothing started
    assert errors(replies) == ["no_session"] * len(stolen)
    assert len(conductor.script.requests) == 1
    assert "forged" not in json.dumps(conductor.history(owner.session_id))

    answer = frame("toolResult", {"callId": use.tool_use_id, "result": '{"opened":true}', "error": None})
    assert send_frame_as(conductor, owner, answer, principal="alice") == OK  # the call was still pending
    assert ("final", "Opened.") in conductor.summary(owner)


def test_require_principal_refuses_anonymous_connects(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_REQUIRE_PRINCIPAL", "true")
    runtime.reset()
    anonymous = conductor.connect()
    assert anonymous.status == 401
    assert runtime.store().load(anonymous.session_id) is None
    assert runtime.store().get_connection(anonymous.connection_id) is None
    assert connect_with(conductor, str(uuid.uuid4()), {"principalId": ""}) == 401
    assert conductor.connect(principal="alice").status == 200


def test_a_session_id_with_a_trailing_newline_is_refused(conductor: Harness) -> None:
    """Fixed in 7e59282 (``$`` matches before a final newline)."""
    session_id = str(uuid.uuid4())
    conn = conductor.connect(query={"sessionId": session_id + "\n"})
    conductor.sessions.discard(session_id + "\n")
    assert conn.status == 400


# ---- logs ----------------------------------------------------------------------------------------

TRANSCRIPT_MARK = "purple-elephant-4711"
ARGUMENT_MARK = "zebra-quartz-9931"
RESULT_MARK = "marmalade-result-55"
SPOKEN_MARK = "violet-answer-2468"


class CapturedLogs(logging.Handler):
    """The handlers' log lines, formatted exactly as Lambda would print them (Powertools JSON)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(runtime.logger.registered_formatter)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, self.format(record)))

    def containing(self, mark: str) -> list[tuple[int, str]]:
        return [(level, line) for level, line in self.lines if mark in line]


@pytest.fixture
def logs(conductor: Harness) -> Iterator[CapturedLogs]:
    captured = CapturedLogs()
    level = runtime.logger.log_level
    runtime.logger.addHandler(captured)
    yield captured
    runtime.logger.removeHandler(captured)
    runtime.logger.setLevel(level)


def talk_with_a_tool(conductor: Harness) -> Connection:
    use = tool_call("editor.openFile", {"path": f"{ARGUMENT_MARK}.swift"})
    conductor.script.push(message("Opening it.", use), message(f"Done, {SPOKEN_MARK}."))
    conn = conductor.connect()
    conductor.say(conn, f"please open the {TRANSCRIPT_MARK} file")
    conductor.answer(conn, use.tool_use_id, json.dumps({"content": RESULT_MARK}))
    conductor.finish_turn(conn)
    assert ("final", f"Done, {SPOKEN_MARK}.") in conductor.summary(conn)
    return conn


def test_transcripts_and_tool_arguments_are_not_logged_at_info(conductor: Harness, logs: CapturedLogs) -> None:
    runtime.logger.setLevel("INFO")
    talk_with_a_tool(conductor)
    assert any("event received" in line for _, line in logs.lines)  # the capture works
    for mark in (TRANSCRIPT_MARK, ARGUMENT_MARK, RESULT_MARK, SPOKEN_MARK):
        assert logs.containing(mark) == [], f"{mark} was logged"


def test_a_rejected_frame_is_not_logged_with_its_content(conductor: Harness, logs: CapturedLogs) -> None:
    runtime.logger.setLevel("INFO")
    conn = conductor.connect()
    conductor.send_raw(conn, '{"id": 1, "secret": "' + TRANSCRIPT_MARK + '"')  # not JSON
    conductor.send_raw(conn, json.dumps({"id": 1, "kind": {"userAudioTranscriptFinal": {"text": TRANSCRIPT_MARK}}}))
    conductor.send(conn, "userAudioTranscriptFinal", {"text": TRANSCRIPT_MARK * 1000})  # transcript_too_long
    assert errors(conductor.events(conn)) == ["invalid_json", "invalid_event", "transcript_too_long"]
    assert logs.containing(TRANSCRIPT_MARK) == []


def test_at_debug_the_transcript_may_appear(conductor: Harness, logs: CapturedLogs) -> None:
    runtime.logger.setLevel("DEBUG")
    talk_with_a_tool(conductor)
    found = logs.containing(TRANSCRIPT_MARK)
    assert found and {level for level, _ in found} == {logging.DEBUG}
    assert logs.containing(ARGUMENT_MARK) == logs.containing(RESULT_MARK) == []


def test_a_principal_bound_turn_still_works_end_to_end(conductor: Harness) -> None:
    conductor.script.push(message("Hi Alice."))
    owner = conductor.connect(principal="alice")
    assert (
        send_frame_as(conductor, owner, frame("sessionStart", {"sessionId": owner.session_id}), principal="alice") == OK
    )
    assert send_frame_as(conductor, owner, frame("userAudioTranscriptFinal", {"text": "hi"}), principal="alice") == OK
    assert conductor.summary(owner)[0] == THINKING
    assert ("final", "Hi Alice.") in conductor.summary(owner)


# ---- signed in through Cognito -------------------------------------------------------------------


def test_a_session_stays_with_the_cognito_user_who_opened_it(
    conductor: Harness, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two real users of one pool: the authorizer allows both, the session stays the first one's."""
    pool = make_pool(moto_url)
    alice, bob = pool.add_user("alice@example.com"), pool.add_user("bob@example.com")
    for name, value in pool.env().items():
        monkeypatch.setenv(name, value)
    authorizer.verifier_for.cache_clear()
    session_id = str(uuid.uuid4())

    def through_the_authorizer(username: str) -> int:
        token = pool.sign_in(username)["IdToken"]
        event = connect_event(header=f"Bearer {token}", session_id=session_id)
        allowed = authorizer.handler(event, LocalLambdaContext("authorizer"))
        assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        return connect_with(conductor, session_id, allowed["context"])

    try:
        assert through_the_authorizer("alice@example.com") == 200
        conductor.sessions.add(session_id)
        assert through_the_authorizer("bob@example.com") == 403
        assert through_the_authorizer("alice@example.com") == 200  # her reconnect
    finally:
        authorizer.verifier_for.cache_clear()
    state = runtime.store().load(session_id)
    assert state is not None and state.principal == alice != bob
