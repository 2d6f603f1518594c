"""The fault matrix: each fault mid-turn, then the same checks.

Every case ends the same way: no exception out of the handler (it returns 200 and the app gets
no ``handler_error``), the stored history is valid for Bedrock (also asserted at teardown), and
the next turn succeeds.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from conductor_local.bedrock.server import (
    Pause,
    RaiseInStream,
    RejectRequest,
    message,
    throttled,
    tool_call,
    validation_error,
)
from lambdas import runtime
from shared.adapters.store import SessionStore
from shared.core.failure_lines import FAILURE_LINES, FailureCause
from shared.core.messages import ERROR_MARKER
from tests.handlers.conftest import Connection, Harness, summarize
from tests.history_check import assert_valid_history
from tests.net import free_port
from tests.reliability.conftest import ConflictCounter
from tests.reliability.figures import count
from tests.reliability.support import (
    FALLBACK_LINE_START,
    IDLE,
    OK,
    THINKING,
    Background,
    ControlledContext,
    errors,
    frame,
    gated,
    model_calls,
    non_partial,
    send_with_turn_context,
    seqs,
    wait_partials,
)

SENTENCE = "one two three four five six"


@pytest.fixture(autouse=True)
def _count_fault_case(request: pytest.FixtureRequest) -> None:
    count("faults: cases run")


def failed_aloud(code: str, cause: FailureCause) -> list[tuple[Any, ...]]:
    """A turn that ended in an error with nothing spoken: the error, then its cause's line spoken
    (idle follows the line's playback)."""
    line = FAILURE_LINES[cause]
    return [("error", code), ("toolCall", "tts.speak", {"text": line})]


def assert_line_played_then_idle(conductor: Harness, conn: Connection) -> None:
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE
    assert_valid_history(conductor.history(conn.session_id))


def assert_next_turn_succeeds(conductor: Harness, conn: Connection) -> None:
    conductor.script.push(message("Back on track."))
    before = len(conductor.events(conn))
    conductor.say(conn, "are you still there")
    assert summarize(non_partial(conductor.events(conn)[before:])) == [
        THINKING,
        ("final", "Back on track."),
        ("toolCall", "tts.speak", {"text": "Back on track."}),
    ]
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE
    assert errors(conductor.events(conn)[before:]) == []
    assert_valid_history(conductor.history(conn.session_id))


def say_in_background(conductor: Harness, conn: Connection, text: str) -> Background:
    return Background(lambda: conductor.send_raw(conn, frame("userAudioTranscriptFinal", {"text": text})))


def test_connection_gone_mid_stream(conductor: Harness) -> None:
    gate = threading.Event()
    conductor.script.push(gated(message(SENTENCE), gate, after_deltas=2))
    conn = conductor.connect()
    talking = say_in_background(conductor, conn, "count")
    wait_partials(conductor, conn, 2)
    conductor.management.gone.add(conn.connection_id)
    gate.set()
    assert talking.result() == OK
    assert conductor.history(conn.session_id)[-1] == {"role": "assistant", "content": [{"text": SENTENCE}]}
    back = conductor.connect(conn.session_id)
    conductor.send(back, "sessionStart", {"sessionId": back.session_id, "lastSeq": max(seqs(conductor.events(conn)))})
    conductor.finish_turn(back)
    assert_next_turn_succeeds(conductor, back)


def test_throttling_before_the_stream_is_retried_then_reported(conductor: Harness) -> None:
    conductor.script.push(throttled(), throttled())
    conn = conductor.connect()
    conductor.say(conn, "hello")
    assert len(conductor.script.requests) == 2  # BEDROCK_MAX_ATTEMPTS=2: botocore retried once
    line = FAILURE_LINES[FailureCause.THROTTLED]  # throttled on every attempt: the person hears why
    assert conductor.summary(conn) == [
        THINKING,
        ("error", "bedrock_error"),
        ("toolCall", "tts.speak", {"text": line}),
    ]
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE
    assert conductor.history(conn.session_id) == [
        {"role": "user", "content": [{"text": "hello"}]},
        {"role": "assistant", "content": [{"text": "[no answer: the model failed: ThrottlingException]"}]},
    ]
    assert_next_turn_succeeds(conductor, conn)


def test_throttling_once_before_the_stream_is_absorbed_by_the_retry(conductor: Harness) -> None:
    conductor.script.push(throttled(), message("Got there."))
    conn = conductor.connect()
    conductor.say(conn, "hello")
    assert errors(conductor.events(conn)) == []
    assert ("final", "Got there.") in conductor.summary(conn)
    conductor.finish_turn(conn)
    assert_next_turn_succeeds(conductor, conn)


@pytest.mark.parametrize(
    "rejection",
    [
        validation_error("The model rejected the request."),
        RejectRequest(403, "AccessDeniedException", "You don't have access to the model."),
        RejectRequest(404, "ResourceNotFoundException", "No such model."),
    ],
    ids=["validation", "access-denied", "not-found"],
)
def test_a_request_bedrock_refuses_is_reported_once(conductor: Harness, rejection: RejectRequest) -> None:
    conductor.script.push(rejection)
    conn = conductor.connect()
    conductor.say(conn, "hello")
    assert len(conductor.script.requests) == 1  # not retried
    assert conductor.summary(conn) == [THINKING, *failed_aloud("bedrock_error", FailureCause.REFUSED)]
    assert_line_played_then_idle(conductor, conn)
    assert_next_turn_succeeds(conductor, conn)


@pytest.mark.parametrize(
    "exception_type",
    [
        "throttlingException",
        "modelStreamErrorException",
        "internalServerException",
        "serviceUnavailableException",
        "validationException",
    ],
)
def test_an_exception_mid_stream_keeps_the_text_so_far(conductor: Harness, exception_type: str) -> None:
    conductor.script.push(message("Let me think about", interrupted_by=RaiseInStream(exception_type, "mid-stream")))
    conn = conductor.connect()
    conductor.say(conn, "think")
    assert summarize(non_partial(conductor.events(conn))) == [
        THINKING,
        ("final", "Let me think about"),
        *failed_aloud("bedrock_error", FailureCause.MODEL_FAILED),  # shown, never spoken
    ]
    assert_line_played_then_idle(conductor, conn)
    assert exception_type in next(e.payload.message for e in conductor.events(conn) if e.kind_name == "error")
    assert conductor.history(conn.session_id)[-1] == {
        "role": "assistant",
        "content": [{"text": f"Let me think about {ERROR_MARKER}"}],
    }
    assert_next_turn_succeeds(conductor, conn)


def test_an_exception_in_the_stream_resumed_after_tool_results(conductor: Harness) -> None:
    use = tool_call("project.search", {})
    conductor.script.push(
        message("Building.", use),
        message("The build", interrupted_by=RaiseInStream("modelStreamErrorException", "broke")),
    )
    conn = conductor.connect()
    conductor.say(conn, "build")
    conductor.answer(conn, use.tool_use_id, '{"ok":true}')
    assert summarize(non_partial(conductor.events(conn)))[-3:] == [
        ("final", "The build"),
        *failed_aloud("bedrock_error", FailureCause.MODEL_FAILED),  # this round said nothing yet
    ]
    assert_line_played_then_idle(conductor, conn)
    history = conductor.history(conn.session_id)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[-1]["content"] == [{"text": f"The build {ERROR_MARKER}"}]
    assert_next_turn_succeeds(conductor, conn)


def test_lambda_time_running_low_mid_turn_ends_it_with_the_text_so_far(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_TURN_RESERVE_MS", "600000")
    runtime.reset()
    gate = threading.Event()
    conductor.script.push(gated(message(SENTENCE), gate, after_deltas=3))
    conn = conductor.connect()
    context = ControlledContext(remaining_ms=900_000)
    body = frame("userAudioTranscriptFinal", {"text": "talk"})
    talking = Background(lambda: send_with_turn_context(conductor, conn, body, context))
    wait_partials(conductor, conn, 3)
    context.remaining_ms = 599_999  # less than the reserve: end the turn before Lambda kills it
    gate.set()
    assert talking.result() == OK
    assert summarize(non_partial(conductor.events(conn))) == [
        THINKING,
        ("final", "one two three"),
        *failed_aloud("conductor_error", FailureCause.OUT_OF_TIME),
    ]
    assert_line_played_then_idle(conductor, conn)
    assert "time" in next(e.payload.message for e in conductor.events(conn) if e.kind_name == "error")
    assert conductor.history(conn.session_id)[-1] == {
        "role": "assistant",
        "content": [{"text": f"one two three {ERROR_MARKER}"}],
    }
    monkeypatch.setenv("CONDUCTOR_TURN_RESERVE_MS", "1000")
    runtime.reset()
    assert_next_turn_succeeds(conductor, conn)


def test_lambda_time_already_low_before_the_model_is_called(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_TURN_RESERVE_MS", "600000")
    runtime.reset()
    conn = conductor.connect()
    body = frame("userAudioTranscriptFinal", {"text": "talk"})
    assert send_with_turn_context(conductor, conn, body, ControlledContext(remaining_ms=1000)) == OK
    assert conductor.summary(conn) == [THINKING, *failed_aloud("conductor_error", FailureCause.OUT_OF_TIME)]
    assert conductor.script.requests == []
    monkeypatch.setenv("CONDUCTOR_TURN_RESERVE_MS", "1000")
    runtime.reset()
    assert_next_turn_succeeds(conductor, conn)


def stalled_script() -> list[Any]:
    steps = message("Well, I think")
    return [*steps[:3], Pause(2), *steps[3:]]  # messageStart, "Well,", " I", then silence


def test_a_stalled_stream_speaks_the_fallback_line(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_STREAM_IDLE_TIMEOUT_S", "0.5")
    runtime.reset()
    conductor.script.push(stalled_script())
    conn = conductor.connect()
    conductor.say(conn, "think")
    summary = summarize(non_partial(conductor.events(conn)))
    assert summary[:3] == [THINKING, ("final", "Well, I"), ("error", "bedrock_error")]
    speak = summary[-1]
    assert speak[:2] == ("toolCall", "tts.speak") and speak[2]["text"].startswith(FALLBACK_LINE_START)
    conductor.finish_turn(conn)  # the app has said the fallback line
    assert conductor.summary(conn)[-1] == IDLE
    assert_next_turn_succeeds(conductor, conn)


def test_a_dropped_bedrock_connection_is_a_bedrock_error(conductor: Harness) -> None:
    def dropped() -> Any:
        steps = message(SENTENCE)
        yield from steps[:3]  # messageStart, "one", " two"
        raise ConnectionResetError("the connection to Bedrock dropped")  # the server cuts the response

    conductor.script.push(dropped())
    conn = conductor.connect()
    conductor.say(conn, "talk")
    assert summarize(non_partial(conductor.events(conn))) == [
        THINKING,
        ("final", "one two"),
        *failed_aloud("bedrock_error", FailureCause.MODEL_FAILED),
    ]
    assert_next_turn_succeeds(conductor, conn)


def test_bedrock_unreachable(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = conductor.connect()
    endpoint = os.environ["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"]
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f"http://127.0.0.1:{free_port()}")  # nobody listens
    runtime.reset()
    conductor.say(conn, "hello")
    assert conductor.summary(conn) == [THINKING, *failed_aloud("bedrock_error", FailureCause.UNAVAILABLE)]
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", endpoint)
    runtime.reset()
    assert_next_turn_succeeds(conductor, conn)


# ---- DynamoDB: lost races and errors -------------------------------------------------------------


def raw_dynamodb() -> Any:
    return boto3.client("dynamodb")


def bump_version_behind_its_back(store: SessionStore, session_id: str) -> None:
    """Another writer changed the session: same data, next version."""
    raw_dynamodb().update_item(
        TableName=store._table,
        Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "STATE"}},
        UpdateExpression="SET version = version + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )


def test_a_lost_conditional_write_is_decided_again_on_fresh_state(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, conflicts: ConflictCounter
) -> None:
    store = runtime.store()
    commit = store.commit
    event_id = "6a1f8a52-3a2b-4b8e-9d7c-0e5f1a2b3c4d"
    bumped: list[int] = []

    def racing_commit(state: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("claim_event_id") == event_id and len(bumped) < 2:
            bump_version_behind_its_back(store, state.session_id)  # twice in a row
            bumped.append(state.version)
        return commit(state, *args, **kwargs)

    monkeypatch.setattr(store, "commit", racing_commit)
    conductor.script.push(message("Hello."))
    conn = conductor.connect()
    assert conductor.send_raw(conn, frame("userAudioTranscriptFinal", {"text": "hi"}, event_id)) == OK
    assert conflicts.conflicts == 2 and len(bumped) == 2
    assert conductor.summary(conn).count(THINKING) == 1
    assert len(conductor.script.requests) == 1
    assert conductor.history(conn.session_id) == [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": "Hello."}]},
    ]
    conductor.finish_turn(conn)
    assert_next_turn_succeeds(conductor, conn)


def test_a_reconnect_committed_during_a_transcript_is_not_overwritten(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, conflicts: ConflictCounter
) -> None:
    """The transcript's decision was made on the old binding; its commit loses and is redone."""
    store = runtime.store()
    commit = store.commit
    event_id = "7b2f8a52-3a2b-4b8e-9d7c-0e5f1a2b3c4d"
    reconnected: list[Connection] = []
    conductor.script.push(message("Hello."))
    old = conductor.connect()

    def racing_commit(state: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("claim_event_id") == event_id and not reconnected:
            reconnected.append(conductor.connect(old.session_id))  # $connect of the app's new socket
        return commit(state, *args, **kwargs)

    monkeypatch.setattr(store, "commit", racing_commit)
    assert conductor.send_raw(old, frame("userAudioTranscriptFinal", {"text": "hi"}, event_id)) == OK
    new = reconnected[0]
    assert conflicts.conflicts >= 1
    assert store.load(old.session_id).connection_id == new.connection_id  # type: ignore[union-attr]
    assert conductor.events(old) == []  # the redone decision is the new connection's
    assert conductor.events(new) == []  # kept until the new connection has said sessionStart
    conductor.start_session(new)
    assert summarize(non_partial(conductor.events(new))) == [
        THINKING,
        ("final", "Hello."),
        ("toolCall", "tts.speak", {"text": "Hello."}),
    ]
    conductor.finish_turn(new)
    assert_next_turn_succeeds(conductor, new)


def test_the_other_tool_result_committed_first_is_kept(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, conflicts: ConflictCounter
) -> None:
    """Deterministic form of the two-results race: B commits while A's commit is in flight."""
    first, second = tool_call("editor.openFile", {"path": "a"}), tool_call("git.status", {})
    conductor.script.push(message(first, second), message("Both."))
    conn = conductor.connect()
    conductor.say(conn, "both")
    store = runtime.store()
    commit = store.commit
    event_id = "8c3f8a52-3a2b-4b8e-9d7c-0e5f1a2b3c4d"
    interleaved: list[bool] = []

    def racing_commit(state: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("claim_event_id") == event_id and not interleaved:
            interleaved.append(True)
            conductor.answer(conn, second.tool_use_id, '{"clean":true}')  # another Lambda, same session
        return commit(state, *args, **kwargs)

    monkeypatch.setattr(store, "commit", racing_commit)
    body = frame("toolResult", {"callId": first.tool_use_id, "result": '{"opened":true}', "error": None}, event_id)
    assert conductor.send_raw(conn, body) == OK
    assert conflicts.conflicts >= 1
    assert len(conductor.script.requests) == 2
    results = conductor.script.requests[1].body["messages"][-1]["content"]
    assert [(b["toolResult"]["toolUseId"], b["toolResult"]["content"][0]["text"]) for b in results] == [
        (first.tool_use_id, '{"opened":true}'),
        (second.tool_use_id, '{"clean":true}'),
    ]
    conductor.finish_turn(conn)
    assert_next_turn_succeeds(conductor, conn)


def test_a_dynamodb_error_mid_stream_ends_the_turn_cleanly(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is written per delta: mid-stream, DynamoDB is the read that checks the stream
    before each partial. It fails before the third partial: the text so far is finalized."""
    conductor.script.push(message(SENTENCE))
    conn = conductor.connect()
    conductor.start_session(conn)
    store = runtime.store()
    load = store.load
    loads: list[int] = []

    def failing_load(session_id: str) -> Any:
        loads.append(1)
        if len(loads) == 3:  # $default's read beside the history, the check before partial 2, then this
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "GetItem"
            )
        return load(session_id)

    monkeypatch.setattr(store, "load", failing_load)
    conductor.say(conn, "count")
    summary = summarize(non_partial(conductor.events(conn)))
    assert summary == [THINKING, ("final", "one two three"), *failed_aloud("conductor_error", FailureCause.CONDUCTOR)]
    partials = [e.payload.text for e in conductor.events(conn) if e.kind_name == "assistantSpeechPartial"]
    assert partials == ["one", "one two"]  # none for a stream that was not checked
    assert conductor.history(conn.session_id)[-1]["content"] == [{"text": f"one two three {ERROR_MARKER}"}]
    monkeypatch.setattr(store, "load", load)
    assert_next_turn_succeeds(conductor, conn)


def test_a_session_that_keeps_changing_is_answered_conductor_error(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixed in dfdc19c (ConductorBusy escaped as handler_error)."""
    conn = conductor.connect()
    store = runtime.store()
    commit = store.commit
    busy = [True]

    def contended_commit(state: Any, *args: Any, **kwargs: Any) -> Any:
        if busy[0] and kwargs.get("claim_event_id"):
            bump_version_behind_its_back(store, state.session_id)
        return commit(state, *args, **kwargs)

    monkeypatch.setattr(store, "commit", contended_commit)
    conductor.say(conn, "hello")  # asserts the handler returned 200
    assert errors(conductor.events(conn)) == ["conductor_error"]
    assert conductor.script.requests == []
    assert conductor.history(conn.session_id) == []  # nothing half-written
    busy[0] = False
    assert_next_turn_succeeds(conductor, conn)


def test_a_catch_up_that_keeps_losing_races_gives_way_and_the_next_session_start_succeeds(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new connection's catch-up cannot commit the live mark: the app is told to say
    sessionStart again, and the claim is released so that it works at once."""
    conductor.script.push(message("Kept for you."))
    first = conductor.connect()
    conductor.start_session(first)
    conductor.say(first, "hello")
    conductor.disconnect(first)
    second = conductor.connect(first.session_id)
    store = runtime.store()
    commit = store.commit
    busy = [True]

    def contended_commit(state: Any, *args: Any, **kwargs: Any) -> Any:
        if busy[0] and state.connection_live:  # the live mark
            bump_version_behind_its_back(store, state.session_id)
        return commit(state, *args, **kwargs)

    monkeypatch.setattr(store, "commit", contended_commit)
    start_again = {"sessionId": second.session_id, "lastSeq": 0}
    conductor.send(second, "sessionStart", start_again)
    assert errors(conductor.events(second)) == ["conductor_error"]
    state = store.load(first.session_id)
    assert state is not None and not state.connection_live and state.catch_up_owner is None
    busy[0] = False
    conductor.send(second, "sessionStart", start_again)  # a new event id: a fresh try
    kept = seqs(non_partial(conductor.events(first)))
    events = conductor.events(second)
    gave_way = next(i for i, e in enumerate(events) if e.kind_name == "error")
    assert seqs(events[:gave_way]) == kept  # the first try had posted them (the app dedupes by seq)
    assert seqs(events[gave_way + 1 :]) == kept  # the second posts them again, in order, and goes live
    conductor.finish_turn(second)
    assert_next_turn_succeeds(conductor, second)


# ---- reconnects in the middle of a tool call -------------------------------------------------------


def test_a_reconnect_in_the_middle_of_a_tool_call(conductor: Harness) -> None:
    use = tool_call("project.listFiles", {"target": "unit"})
    conductor.script.push(message("Running them.", use), message("All green."))
    first = conductor.connect()
    conductor.say(first, "run the tests")
    conductor.disconnect(first)
    second = conductor.connect(first.session_id)
    conductor.start_session(second)
    assert [e.payload.call_id for e in model_calls(conductor.events(second))] == [use.tool_use_id]
    conductor.answer(second, use.tool_use_id, '{"passed":12}')
    assert ("final", "All green.") in conductor.summary(second)
    conductor.finish_turn(second)
    assert_next_turn_succeeds(conductor, second)


def test_a_result_sent_on_the_old_connection_after_the_reconnect_still_counts(conductor: Harness) -> None:
    """The app answered on its old socket just before switching: the result is the session's."""
    use = tool_call("project.listFiles", {})
    conductor.script.push(message(use), message("All green."))
    first = conductor.connect()
    conductor.say(first, "run the tests")
    second = conductor.connect(first.session_id)  # the old socket is not closed yet
    conductor.answer(first, use.tool_use_id, '{"passed":12}')
    assert len(conductor.script.requests) == 2
    conductor.start_session(second)  # the app's sessionStart on its new socket catches it up
    assert ("final", "All green.") in conductor.summary(second)  # replies go to the current connection
    assert not [e for e in conductor.events(first) if e.kind_name == "assistantSpeechFinal"]
    conductor.disconnect(first)  # a late $disconnect of the old socket does not unbind the session
    conductor.finish_turn(second)
    assert_next_turn_succeeds(conductor, second)


def test_a_reconnect_mid_tool_call_with_the_reply_lost(conductor: Harness) -> None:
    """410 while the calls go out: the new connection's sessionStart(lastSeq) brings them back."""
    gate = threading.Event()
    use = tool_call("project.search", {"query": "x"})
    conductor.script.push(gated(message("Searching now.", use), gate, after_deltas=1), message("Found."))
    first = conductor.connect()
    talking = say_in_background(conductor, first, "search")
    wait_partials(conductor, first, 1)
    conductor.management.gone.add(first.connection_id)
    gate.set()
    assert talking.result() == OK
    second = conductor.connect(first.session_id)
    conductor.send(
        second, "sessionStart", {"sessionId": second.session_id, "lastSeq": max(seqs(conductor.events(first)))}
    )
    assert [e.payload.call_id for e in model_calls(conductor.events(second))] == [use.tool_use_id]
    conductor.answer(second, use.tool_use_id)
    assert ("final", "Found.") in conductor.summary(second)
    conductor.finish_turn(second)
    assert_next_turn_succeeds(conductor, second)


def test_a_tiny_history_window_never_cuts_a_tool_round(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model sees a window of the history; it must start at a plain user message, so a
    toolResult never reaches Bedrock without its toolUse (the local Bedrock refuses that)."""
    monkeypatch.setenv("CONDUCTOR_HISTORY_WINDOW", "2")
    runtime.reset()
    conn = conductor.connect()
    for turn in range(3):
        first, second = tool_call("git.status", {}), tool_call("project.search", {})
        conductor.script.push(message(first), message(second), message(f"Turn {turn} done."))
        conductor.say(conn, f"turn {turn}")
        conductor.answer(conn, first.tool_use_id)
        conductor.answer(conn, second.tool_use_id)
        assert ("final", f"Turn {turn} done.") in conductor.summary(conn)
        conductor.finish_turn(conn)
    assert errors(conductor.events(conn)) == []
    for request in conductor.script.requests:
        assert_valid_history(request.body["messages"])
    assert_next_turn_succeeds(conductor, conn)
