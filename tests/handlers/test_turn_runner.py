"""The turn runner: the model stream in its own invocation, launched by ``$default``.

Only one invocation ever runs a stream (a second delivery of the same task stops at its first
commit), a turn that cannot be launched or whose runner breaks or dies ends cleanly, and the
runner starts from the state ``$default`` committed instead of reading it again.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest

from conductor_local.bedrock.server import Text, message, tool_call
from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.lambda_runtime.turn_functions import TURN_FUNCTION, TURN_TIMEOUT_S
from lambdas import message as message_lambda
from lambdas import runtime, turn, turn_abandoned
from shared.adapters.turn_launcher import TurnTask
from shared.core.failure_lines import FAILURE_LINES, FailureCause
from shared.core.messages import ERROR_MARKER
from shared.core.stream import RUNNER_LOST_LINE
from shared.wire.protocol import parse_event
from tests.handlers.conftest import Connection, Harness, summarize
from tests.reliability.support import (
    IDLE,
    THINKING,
    Background,
    count_partials,
    errors,
    frame,
    gated,
    run_in_threads,
)

ANSWER = "Alpha beta gamma delta"
PARTIALS = [("partial", "Alpha"), ("partial", "Alpha beta"), ("partial", "Alpha beta gamma"), ("partial", ANSWER)]


def turn_context() -> LocalLambdaContext:
    return LocalLambdaContext(function_name=TURN_FUNCTION, timeout_seconds=TURN_TIMEOUT_S)


def send_without_waiting(harness: Harness, conn: Connection, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``$default`` alone: returns when its invocation does, whatever turn it launched."""
    context = harness._context(conn.connection_id, "$default", "MESSAGE")
    context["messageId"] = uuid.uuid4().hex[:16]
    event = {"requestContext": context, "body": frame(kind, payload), "isBase64Encoded": False}
    return message_lambda.handler(event, LocalLambdaContext(function_name="message", timeout_seconds=29))


@contextmanager
def launches_held(harness: Harness) -> Iterator[list[dict[str, Any]]]:
    """Turn tasks ``$default`` launches are collected, not run: the test delivers them itself."""
    functions = harness.lambdas.functions
    original = functions[TURN_FUNCTION]
    tasks: list[dict[str, Any]] = []
    functions[TURN_FUNCTION] = dataclasses.replace(original, handler=lambda event, _context: tasks.append(event))
    try:
        yield tasks
    finally:
        functions[TURN_FUNCTION] = original


def named(conn: Connection) -> None:
    """Give the session a title, so no title is made after its first answer (tests counting the
    turn's own requests; test_the_title_is_made_after_the_first_answers_last_write checks it)."""
    store = runtime.store()
    state = store.load(conn.session_id)
    assert state is not None
    store.commit(state.model_copy(update={"title": "A session with a name"}))


def launched_turn(harness: Harness, text: str = "hello", *, titled: bool = True) -> tuple[Connection, dict[str, Any]]:
    """A connected session whose turn was decided and launched, but whose runner has not run."""
    conn = harness.connect()
    harness.start_session(conn)
    if titled:
        named(conn)
    with launches_held(harness) as tasks:
        harness.say(conn, text)
    assert len(tasks) == 1
    # Launched alongside its write: the runner posts the decision's events as it claims the stream.
    assert harness.summary(conn) == []
    assert summarize([parse_event(frame) for _seq, frame in json.loads(tasks[0]["frames"])]) == [THINKING]
    return conn, tasks[0]


def kinds_said(harness: Harness, conn: Connection) -> list[tuple[Any, ...]]:
    return [item for item in harness.summary(conn) if item[0] in ("partial", "final")]


# ---- the stream runs in its own invocation -------------------------------------------------------


def test_default_returns_while_the_model_stream_is_still_open(conductor: Harness) -> None:
    gate = threading.Event()
    conductor.script.push(gated(message(ANSWER), gate, after_deltas=1))
    conn = conductor.connect()
    conductor.start_session(conn)
    mark = conductor.lambdas.started
    try:
        assert send_without_waiting(conductor, conn, "userAudioTranscriptFinal", {"text": "hello"}) == {
            "statusCode": 200
        }
        assert conductor.lambdas.started == mark + 1  # the turn went to the turn runner
        conductor.wait_for(conn, lambda events: count_partials(events) == 1)
        assert not conductor.lambdas.wait_idle(0.05, since=mark)  # the runner holds the open stream
        assert "final" not in {item[0] for item in conductor.summary(conn)}
    finally:
        gate.set()
    conductor.wait_for_turns(since=mark)
    assert kinds_said(conductor, conn) == [*PARTIALS, ("final", ANSWER)]


def test_the_task_carries_the_committed_state(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    stored = runtime.store().load(conn.session_id)
    assert stored is not None and stored.turn is not None and stored.turn.stream is not None
    assert task["sessionId"] == conn.session_id.lower()
    assert task["streamId"] == stored.turn.stream.stream_id
    assert task["endpoint"] == f"http://{conductor.management.domain}/test"
    snapshot = json.loads(task["state"])
    assert snapshot["version"] == stored.version
    assert snapshot["turn"]["stream"]["runner"] is None  # not claimed until the runner's first commit


# ---- one stream, one runner --------------------------------------------------------------------


def test_a_second_delivery_of_a_running_stream_stops_at_its_first_commit(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    gate = threading.Event()
    conductor.script.push(gated(message(ANSWER), gate, after_deltas=1), message(ANSWER))
    first = Background(lambda: turn.handler(task, turn_context()))
    try:
        conductor.wait_for(conn, lambda events: count_partials(events) == 1)
        second = Background(lambda: turn.handler(task, turn_context()))
        assert second.result() == {"ran": True}  # it returned while the first still holds the stream
        assert len(conductor.script.requests) == 2
        assert kinds_said(conductor, conn) == PARTIALS[:1]
    finally:
        gate.set()
    assert first.result() == {"ran": True}
    assert kinds_said(conductor, conn) == [*PARTIALS, ("final", ANSWER)]
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE
    assert conductor.history(conn.session_id)[1:] == [{"role": "assistant", "content": [{"text": ANSWER}]}]


def test_two_deliveries_at_the_same_instant_stream_to_the_app_once(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    conductor.script.push(message(ANSWER), message(ANSWER))
    results = run_in_threads(lambda: turn.handler(task, turn_context()), lambda: turn.handler(task, turn_context()))
    assert results == [{"ran": True}, {"ran": True}]
    said = kinds_said(conductor, conn)
    assert said == [*PARTIALS, ("final", ANSWER)], said
    speaks = [item for item in conductor.summary(conn) if item[:2] == ("toolCall", "tts.speak")]
    assert speaks == [("toolCall", "tts.speak", {"text": ANSWER})]
    kept = [e for e in conductor.events(conn) if e.kind_name not in ("assistantSpeechPartial", "sessionReady")]
    assert [event.seq for event in kept] == list(range(1, len(kept) + 1))
    assert conductor.history(conn.session_id)[1:] == [{"role": "assistant", "content": [{"text": ANSWER}]}]


def test_a_delivery_after_the_stream_finished_does_nothing(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    conductor.script.push(message(ANSWER), message("Something else entirely."))
    assert turn.handler(task, turn_context()) == {"ran": True}
    before = conductor.summary(conn)
    assert turn.handler(task, turn_context()) == {"ran": True}
    assert conductor.summary(conn) == before


# ---- launches Lambda refuses, runners that break or die -----------------------------------------


def test_a_launch_lambda_refuses_ends_the_turn_at_once(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_TURN_FUNCTION", "voiceide-conductor-no-such-function")
    runtime.reset()
    conn = conductor.connect()
    conductor.start_session(conn)
    mark = conductor.lambdas.started
    conductor.say(conn, "hello")
    assert conductor.lambdas.started == mark  # Lambda answered 404: nothing was queued
    line = FAILURE_LINES[FailureCause.CONDUCTOR]
    assert conductor.summary(conn) == [
        THINKING,
        ("error", "conductor_error"),
        ("toolCall", "tts.speak", {"text": line}),
    ]
    error = next(event.payload for event in conductor.events(conn) if event.kind_name == "error")
    assert "could not be started" in error.message
    assert conductor.script.requests == []
    assert conductor.history(conn.session_id)[-1]["role"] == "assistant"

    monkeypatch.setenv("CONDUCTOR_TURN_FUNCTION", TURN_FUNCTION)
    runtime.reset()
    conductor.script.push(message("Back again."))
    conductor.say(conn, "hello?")
    assert ("final", "Back again.") in conductor.summary(conn)
    assert [m["role"] for m in conductor.script.requests[0].body["messages"]] == ["user", "assistant", "user"]


class BreakingBrain:
    """The real brain, with a bug that raises after ``after`` stream items."""

    def __init__(self, brain: Any, after: int) -> None:
        self.brain = brain
        self.after = after

    def stream(self, messages: list[dict[str, Any]], **_: Any) -> Iterator[Any]:
        """(Never says when its request goes out: the runner claims before it speaks.)"""
        if self.after == 0:
            raise TypeError("the adapter broke before asking the model")
        items = self.brain.stream(messages)
        try:
            for number, item in enumerate(items, start=1):
                yield item
                if number == self.after:
                    raise KeyError("contentBlockIndex")
        finally:
            items.close()


@pytest.mark.parametrize("after", [0, 2], ids=["before-the-stream", "mid-stream"])
def test_a_brain_raising_an_unexpected_error_ends_the_turn_cleanly(conductor: Harness, after: int) -> None:
    runner = runtime.turn_runner()
    runner.brain = BreakingBrain(runner.brain, after)
    if after:
        conductor.script.push(message(ANSWER))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "hello")
    summary = conductor.summary(conn)
    said = PARTIALS[:after] + ([("final", "Alpha beta")] if after else [])
    line = FAILURE_LINES[FailureCause.CONDUCTOR]  # nothing was spoken: the person hears why it stopped
    spoken = [("toolCall", "tts.speak", {"text": line})]
    assert summary == [THINKING, *said, ("error", "conductor_error"), *spoken]
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE
    assert conductor.history(conn.session_id)[-1] == {
        "role": "assistant",
        "content": [{"text": f"Alpha beta {ERROR_MARKER}" if after else "[no answer: the conductor failed mid-turn]"}],
    }
    runner.brain = runner.brain.brain
    conductor.script.push(message("Fine now."))
    conductor.say(conn, "again")
    assert ("final", "Fine now.") in conductor.summary(conn)


def abandoned_summary() -> list[tuple[Any, ...]]:
    return [
        ("error", "conductor_error"),
        ("final", RUNNER_LOST_LINE),
        ("toolCall", "tts.speak", {"text": RUNNER_LOST_LINE}),
    ]


def test_a_runner_that_dies_reaches_the_destination_which_ends_the_turn(conductor: Harness) -> None:
    functions = conductor.lambdas.functions
    original = functions[TURN_FUNCTION]

    def crash(event: Any, context: Any) -> Any:
        raise MemoryError("Runtime exited with error: signal: killed")

    functions[TURN_FUNCTION] = dataclasses.replace(original, handler=crash)
    failures_before = len(conductor.lambdas.failures)
    try:
        conn = conductor.connect()
        conductor.start_session(conn)
        conductor.say(conn, "hello")
    finally:
        functions[TURN_FUNCTION] = original
    (record,) = conductor.lambdas.failures[failures_before:]
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 1  # the runner's retries are off
    assert record["requestContext"]["functionArn"].endswith(f":function:{TURN_FUNCTION}:$LATEST")
    assert record["requestPayload"]["sessionId"] == conn.session_id.lower()
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert record["responsePayload"]["errorType"] == "MemoryError"
    assert conductor.script.requests == []
    assert conductor.summary(conn) == [THINKING, *abandoned_summary()]
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE
    assert conductor.history(conn.session_id)[-1]["role"] == "assistant"
    conductor.script.push(message("I am here."))
    conductor.say(conn, "hello again")
    assert ("final", "I am here.") in conductor.summary(conn)


def test_a_task_with_an_unreadable_state_snapshot_still_ends_the_turn(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    broken = {**task, "state": '{"session_id": "not a state'}
    conductor.script.push(message(ANSWER))
    mark = conductor.lambdas.started
    client = boto3.client("lambda")
    assert (
        client.invoke(FunctionName=TURN_FUNCTION, InvocationType="Event", Payload=json.dumps(broken))["StatusCode"]
        == 202
    )
    conductor.wait_for_turns(since=mark)
    finals = {item[1] for item in conductor.summary(conn) if item[0] == "final"}
    assert finals & {ANSWER, RUNNER_LOST_LINE}, conductor.summary(conn)  # answered, or ended with the apology
    stored = runtime.store().load(conn.session_id)
    assert stored is not None and (stored.turn is None or stored.turn.stream is None)  # not left thinking


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"requestPayload": None},
        {"requestPayload": "not a turn task"},
        {"requestPayload": [1, 2, 3]},
        {"requestPayload": {"sessionId": "", "streamId": "s", "endpoint": "e"}},
        {"requestPayload": {"sessionId": "x" * 500, "streamId": "s", "endpoint": "e"}},
        {"requestContext": None, "responsePayload": None, "requestPayload": {"streamId": "s"}},
        {"requestContext": "RetriesExhausted", "requestPayload": {}},
        {"requestContext": ["EventAgeExceeded"], "responsePayload": "Task timed out after 600.00 seconds"},
    ],
    ids=[
        "empty",
        "null-payload",
        "string-payload",
        "list-payload",
        "blank-session",
        "long-session",
        "nulls",
        "string-context",
        "list-context",
    ],
)
def test_a_malformed_destination_record_is_handled_without_crashing(conductor: Harness, record: dict[str, Any]) -> None:
    result = turn_abandoned.handler(record, LocalLambdaContext(function_name="turn-abandoned"))
    assert result == {"ended": False}


def test_a_destination_record_for_an_unknown_session_or_a_finished_stream_changes_nothing(
    conductor: Harness,
) -> None:
    unknown = {
        "requestContext": {"condition": "EventAgeExceeded", "approximateInvokeCount": 0},
        "requestPayload": {"sessionId": str(uuid.uuid4()), "streamId": "turn-x.0.abc", "endpoint": "http://x/test"},
        "responsePayload": "not a dict",
    }
    assert turn_abandoned.handler(unknown, LocalLambdaContext(function_name="turn-abandoned")) == {"ended": True}

    conn, task = launched_turn(conductor)
    conductor.script.push(message(ANSWER))
    turn.handler(task, turn_context())
    before = conductor.summary(conn)
    late = {"requestContext": {"condition": "EventAgeExceeded"}, "requestPayload": task}
    assert turn_abandoned.handler(late, LocalLambdaContext(function_name="turn-abandoned")) == {"ended": True}
    assert conductor.summary(conn) == before  # that stream already ended: nothing to say


def test_a_record_whose_event_expired_before_running_ends_the_waiting_turn(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    record = {
        "version": "1.0",
        "requestContext": {"condition": "EventAgeExceeded", "approximateInvokeCount": 0},
        "requestPayload": task,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
    }
    assert turn_abandoned.handler(record, LocalLambdaContext(function_name="turn-abandoned")) == {"ended": True}
    assert conductor.summary(conn) == [THINKING, *abandoned_summary()]
    conductor.script.push(message(ANSWER))
    assert turn.handler(task, turn_context()) == {"ran": True}  # the event arrives after all: too late
    assert conductor.summary(conn) == [THINKING, *abandoned_summary()]


# ---- the state snapshot ------------------------------------------------------------------------


@contextmanager
def dynamodb_calls(log: list[str]) -> Iterator[None]:
    """Each DynamoDB operation of the handlers' store, and each event posted, in order."""
    client = runtime.store()._client
    gateway = runtime.gateway()

    def on_call(model: Any, **_: Any) -> None:
        log.append(model.name)

    post = gateway.post

    def logged_post(endpoint: str, connection_id: str, frame_text: str) -> bool:
        log.append("post:" + next(iter(json.loads(frame_text)["kind"])))
        return post(endpoint, connection_id, frame_text)

    client.meta.events.register("before-call.dynamodb", on_call, unique_id="test-turn-runner-calls")
    gateway.post = logged_post  # type: ignore[method-assign]
    try:
        yield
    finally:
        client.meta.events.unregister("before-call.dynamodb", unique_id="test-turn-runner-calls")
        del gateway.post


def before_first_partial(log: list[str]) -> list[str]:
    return log[: log.index("post:assistantSpeechPartial")]


def test_the_runner_starts_from_the_tasks_state_without_reading_it(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    conductor.script.push(message(ANSWER))
    log: list[str] = []
    with dynamodb_calls(log):
        assert turn.handler(task, turn_context()) == {"ran": True}
    # the claiming commit (the history came with the task), then the decision's events it carried
    assert before_first_partial(log) == ["PutItem", "post:toolCall"], log
    # nothing is written per delta: one read checks the stream before each later partial (here
    # one partial per delta), and the message's end is the only other write
    assert log.count("GetItem") == len(PARTIALS) - 1, log
    assert [call for call in log if call in ("PutItem", "TransactWriteItems", "UpdateItem")] == [
        "PutItem",
        "TransactWriteItems",
    ], log
    assert kinds_said(conductor, conn) == [*PARTIALS, ("final", ANSWER)]


def test_default_reads_the_history_window_beside_the_state_and_hands_it_over(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(message("First answer."))
    conductor.say(conn, "first")
    conductor.finish_turn(conn)
    with launches_held(conductor) as tasks:
        conductor.say(conn, "second")
    carried = TurnTask.model_validate(tasks[0]).history_window()
    assert carried == runtime.store().history(conn.session_id, 80)  # exactly what the runner would read
    assert carried is not None and carried[-1] == {"role": "user", "content": [{"text": "second"}]}


def test_the_last_tool_result_of_a_round_hands_the_history_window_over_too(conductor: Harness) -> None:
    """The result that resumes the model is read beside the history, as a transcript is: the
    runner starts without a Query of its own (one round trip less before the answer's first word)."""
    conn = conductor.connect()
    conductor.start_session(conn)
    use = tool_call("editor.openFile", {"path": "Sources/App/main.swift"})
    conductor.script.push(message(use))
    conductor.say(conn, "open main")
    with launches_held(conductor) as tasks:
        conductor.answer(conn, use.tool_use_id, '{"opened":true}')
    (task,) = tasks
    carried = TurnTask.model_validate(task).history_window()
    assert carried == runtime.store().history(conn.session_id, 80)  # exactly what the runner would read
    assert carried is not None and "toolResult" in carried[-1]["content"][0]
    conductor.script.push(message(ANSWER))
    log: list[str] = []
    with dynamodb_calls(log):
        assert turn.handler(task, turn_context()) == {"ran": True}
    assert before_first_partial(log) == ["PutItem"], log  # the claim only: no history Query (no events carried)
    assert ("final", ANSWER) in kinds_said(conductor, conn)


def test_without_a_carried_history_the_runner_reads_it(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    task = {key: value for key, value in task.items() if key != "history"}
    conductor.script.push(message(ANSWER))
    log: list[str] = []
    with dynamodb_calls(log):
        assert turn.handler(task, turn_context()) == {"ran": True}
    assert before_first_partial(log) == ["Query", "PutItem", "post:toolCall"], log
    assert kinds_said(conductor, conn) == [*PARTIALS, ("final", ANSWER)]
    assert conductor.script.requests[-1].body["messages"] == [{"role": "user", "content": [{"text": "hello"}]}]


def test_a_stale_snapshot_loses_its_race_and_decides_again(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    # the app announces a capability meanwhile: the stored state moves on
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "capabilities": ["sentenceSpeech"]})
    stored = runtime.store().load(conn.session_id)
    assert stored is not None and stored.version > json.loads(task["state"])["version"]

    conductor.script.push(message(ANSWER))
    log: list[str] = []
    with dynamodb_calls(log):
        assert turn.handler(task, turn_context()) == {"ran": True}
    assert before_first_partial(log).count("GetItem") == 1, log  # the lost race, decided again on fresh state
    assert kinds_said(conductor, conn)[-1] == ("final", ANSWER)
    after = runtime.store().load(conn.session_id)
    assert after is not None and after.capabilities == ["sentenceSpeech"]  # not undone by the stale copy
    conductor.finish_turn(conn)
    assert conductor.summary(conn)[-1] == IDLE


def test_a_snapshot_of_a_superseded_stream_says_nothing(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    conductor.barge_in(conn)
    stopped = [THINKING, ("final", ""), IDLE]  # the stopped segment ended (nothing was heard), then idle
    assert conductor.summary(conn) == stopped
    conductor.script.push(message(ANSWER))
    assert turn.handler(task, turn_context()) == {"ran": True}
    assert conductor.summary(conn) == stopped
    assert errors(conductor.events(conn)) == []


def test_a_paced_answer_gets_coalesced_partials_and_no_write_per_delta(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_PARTIAL_FLUSH_MS", "120")
    monkeypatch.setenv("CONDUCTOR_PARTIAL_GROWTH", "0.25")
    runtime.reset()
    words = " ".join(f"word{n}" for n in range(100))
    conductor.script.push(message(Text(words, pause=0.01)))  # 100 deltas over about a second
    conn = conductor.connect()
    conductor.start_session(conn)
    named(conn)
    log: list[str] = []
    started = time.monotonic()
    with dynamodb_calls(log):
        conductor.say(conn, "talk")
    streamed_s = time.monotonic() - started
    partials = [item[1] for item in conductor.summary(conn) if item[0] == "partial"]
    assert 2 <= len(partials) <= 30, partials  # coalesced, not one per delta
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(partials))
    assert ("final", words) in conductor.summary(conn)
    writes = [call for call in log if call in ("PutItem", "TransactWriteItems", "UpdateItem")]
    assert len(writes) == 3, log  # the transcript's commit, the claim, the message's end
    # at most one check per partial, and one per barge-in check interval once the answer shows
    checks = len(partials) + math.ceil(streamed_s / (runtime.settings().barge_in_check_ms / 1000))
    assert log.count("GetItem") <= checks, log


def test_the_title_is_made_after_the_first_answers_last_write(conductor: Harness) -> None:
    conn, task = launched_turn(conductor, "fix the login test please", titled=False)
    conductor.script.push(message(ANSWER))
    log: list[str] = []
    with dynamodb_calls(log):
        assert turn.handler(task, turn_context()) == {"ran": True}
    writes = [call for call in log if call in ("PutItem", "TransactWriteItems", "UpdateItem")]
    assert writes == ["PutItem", "TransactWriteItems", "PutItem"], log  # claim, message end, then the title
    after_end = log[log.index("TransactWriteItems") :]
    assert "Query" in after_end and after_end.index("Query") > after_end.index("post:assistantSpeechFinal"), log
    stored = runtime.store().load(conn.session_id)
    assert stored is not None and stored.title == "Fix the login test please"
    conductor.finish_turn(conn)
    conductor.script.push(message("Again."))
    conductor.say(conn, "and again")
    again = runtime.store().load(conn.session_id)
    assert again is not None and again.title == "Fix the login test please"  # made once


def test_the_measured_characters_per_token_ride_on_the_commit_that_ends_the_message(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    before = runtime.store().load(conn.session_id)
    assert before is not None and before.chars_per_token == 4.0
    # Bedrock counts far more tokens than 4 characters each: the conversation is dense
    conductor.script.push(message(ANSWER, input_tokens=5000))
    log: list[str] = []
    with dynamodb_calls(log):
        assert turn.handler(task, turn_context()) == {"ran": True}
    writes = [call for call in log if call in ("PutItem", "TransactWriteItems", "UpdateItem")]
    assert writes == ["PutItem", "TransactWriteItems"], log  # the claim and the message's end: nothing after
    after = runtime.store().load(conn.session_id)
    assert after is not None and after.chars_per_token < 4.0
    assert after.turn is not None and after.turn.stream is None  # stored by the commit that ended the message


def test_the_model_request_goes_out_before_the_claiming_write(conductor: Harness) -> None:
    conn, task = launched_turn(conductor)
    conductor.script.push(message(ANSWER))
    log: list[str] = []
    events = runtime.turn_runner().brain._client.meta.events
    unique_id = "test-model-request-first"

    def model_request_sent(**_: Any) -> None:
        log.append("ConverseStream")

    events.register_first("before-send.bedrock-runtime.ConverseStream", model_request_sent, unique_id=unique_id)
    try:
        with dynamodb_calls(log):
            assert turn.handler(task, turn_context()) == {"ran": True}
    finally:
        events.unregister("before-send.bedrock-runtime.ConverseStream", unique_id=unique_id)
    # the claim, in the model's shadow, then the events of the decision that launched the stream
    assert before_first_partial(log) == ["ConverseStream", "PutItem", "post:toolCall"], log
    assert kinds_said(conductor, conn) == [*PARTIALS, ("final", ANSWER)]


# ---- the task's size, in the bytes Lambda counts --------------------------------------------------


def _sized_task(state_chars: int, history_chars: int, char: str = "語", history_char: str | None = None) -> TurnTask:
    from shared.core.state import SessionState

    state = SessionState(session_id=str(uuid.uuid4()), summary=char * state_chars)
    history = [{"role": "user", "content": [{"text": (history_char or char) * history_chars}]}]
    return TurnTask.for_stream(state, "turn-a.0.abc", "https://example.test/stage", history)


def test_the_task_is_measured_in_utf8_bytes_not_characters() -> None:
    from shared.adapters.turn_launcher import ASYNC_PAYLOAD_LIMIT

    # 200,000 CJK characters of history and 250,000 of state: 1.35 MB of UTF-8, although each is
    # under the character counts a task used to be cut at (512 Ki and 256 Ki characters).
    task = _sized_task(250_000, 200_000)
    assert task.payload_bytes() <= ASYNC_PAYLOAD_LIMIT
    assert task.history is None and task.session_state() is not None  # the runner reads the window
    small = _sized_task(100, 100)
    assert small.history_window() is not None and small.session_state() is not None
    # neither fits: both are left to the runner's reads, and the task still launches
    neither = _sized_task(400_000, 400_000)
    assert neither.state is None and neither.history is None and neither.payload_bytes() < 1024


def test_a_task_keeps_text_in_any_script_as_its_bytes_and_parses_back() -> None:
    task = _sized_task(10, 10, char="😀")
    payload = task.to_payload()
    assert "😀".encode() in payload  # not six-byte escapes
    parsed = TurnTask.model_validate(json.loads(payload))
    window = parsed.history_window()
    assert window is not None and window[0]["content"][0]["text"] == "😀" * 10
    lone = _sized_task(1, 1, history_char="\ud800")  # a lone surrogate UTF-8 cannot hold: its escape, no crash
    assert b"\\ud800" in lone.to_payload()


def test_a_large_cjk_history_still_launches_the_turn_through_lambda(conductor: Harness) -> None:
    """The local Lambda refuses an Event payload over 1 MB as Lambda does: the task fits anyway."""
    conn = conductor.connect()
    conductor.start_session(conn)
    named(conn)
    long_question = "語" * 7000  # under the transcript limit, 21 KB of UTF-8 a turn
    for _ in range(3):
        conductor.script.push(message("Noted."))
        conductor.say(conn, long_question)
        conductor.finish_turn(conn)
    conductor.script.push(message(ANSWER))
    conductor.say(conn, "and now?")
    assert ("final", ANSWER) in kinds_said(conductor, conn)


# ---- failure records: turns and watchers counted apart ------------------------------------------------


def test_a_failed_watcher_is_counted_as_a_watcher_failure_not_an_abandoned_turn(
    conductor: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.handlers.test_metrics import emitted

    conn, task = launched_turn(conductor)
    capsys.readouterr()
    watch = {**task, "streamId": "watch-abc", "watch": True}
    record = {"requestContext": {"condition": "RetriesExhausted"}, "requestPayload": watch}
    assert turn_abandoned.handler(record, LocalLambdaContext(function_name="turn-abandoned")) == {"ended": True}
    figures = emitted(capsys)
    assert figures.total("WatcherFailures") == 1 and figures.total("TurnsAbandoned") == 0
    assert conductor.summary(conn) == []  # the turn itself is untouched (its runner would post THINKING)

    record = {"requestContext": {"condition": "RetriesExhausted"}, "requestPayload": task}
    assert turn_abandoned.handler(record, LocalLambdaContext(function_name="turn-abandoned")) == {"ended": True}
    figures = emitted(capsys)
    assert figures.total("TurnsAbandoned") == 1 and figures.total("WatcherFailures") == 0
