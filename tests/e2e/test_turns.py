"""Whole turns through the deployed handlers, over real WebSockets, with the offline brain."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from websockets.asyncio.client import connect

from conductor_local.stack import LocalStack
from shared.core.failure_lines import FAILURE_LINES, FailureCause
from shared.wire.protocol import (
    ErrorCode,
    Event,
    SessionStart,
    ToolCall,
    ToolResult,
    UserAudioTranscriptFinal,
    make_event,
)
from tests.e2e.conftest import (
    TURN_TIMEOUT_S,
    WAIT_S,
    RawApp,
    assert_cumulative,
    assert_seq_counts_up_by_one,
    async_test,
    brain_requests_for,
    caught_up,
    client_for,
    collapse_partials,
    event_processed,
    is_state,
    is_tool_call,
    label,
    poll_until,
    result_call_ids,
)
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.conversation.turn import TurnResult
from voiceide_client.tools.router import ToolError

pytestmark = pytest.mark.e2e

SPEC_TURN = ["thinking", "partial+", "final", "tool:tts.speak", "idle"]
"""What the app receives in a turn without tools (the spec's flow, plus streamed partials)."""


class AnsweredAt:
    """``on_event`` hook: for every received event, the callIds the client had answered by then."""

    def __init__(self) -> None:
        self.client: ConductorClient | None = None
        self.snapshots: list[tuple[Event, set[str]]] = []

    def __call__(self, event: Event) -> None:
        assert self.client is not None
        self.snapshots.append((event, result_call_ids(self.client.sent)))

    def answered_when(self, event: Event) -> set[str]:
        return next(answered for seen, answered in self.snapshots if seen is event)


def assert_spec_turn(turn: TurnResult, final: str, answered_at: AnsweredAt) -> None:
    assert turn.completed, f"turn {turn.transcript!r} did not complete"
    assert collapse_partials([label(e) for e in turn.events]) == SPEC_TURN
    assert_cumulative(turn.partials, final)
    assert turn.finals == [final]
    (speak,) = turn.calls("tts.speak")
    assert speak.args == {"text": final}
    assert turn.states == ["thinking", "idle"]
    assert all(call.finished and call.error is None for call in turn.tool_calls), turn.tool_calls
    assert turn.errors == []
    # The conductor said idle only once the app had answered tts.speak (and thinking).
    idle = next(e for e in turn.events if is_state(e, "idle"))
    thinking = next(e for e in turn.events if is_state(e, "thinking"))
    assert {speak.call_id, thinking.payload.call_id} <= answered_at.answered_when(idle)


@async_test
async def test_turns_follow_the_spec_flow_and_seq_counts_up_by_one_per_session(stack: LocalStack) -> None:
    watch_a, watch_b = AnsweredAt(), AnsweredAt()
    async with client_for(stack, on_event=watch_a) as a, client_for(stack, on_event=watch_b) as b:
        watch_a.client, watch_b.client = a, b
        # Partials go out once a new connection is caught up (its sessionStart's invocation makes
        # it live); partials the model streams before that are dropped by design (the final
        # carries the whole text), which would leave gaps in seq. This test is about the flow.
        for client in (a, b):
            await caught_up(stack, client)
        # Two sessions at once, then a second turn of the first one.
        first_a, first_b = await asyncio.gather(
            a.say("Hello there", timeout=TURN_TIMEOUT_S), b.say("Good morning", timeout=TURN_TIMEOUT_S)
        )
        second_a = await a.say("How are you", timeout=TURN_TIMEOUT_S)

        assert_spec_turn(first_a, "You said: Hello there", watch_a)
        assert_spec_turn(first_b, "You said: Good morning", watch_b)
        assert_spec_turn(second_a, "You said: How are you", watch_a)
        for client in (a, b):
            # The app opened with sessionStart for its session, then the transcript.
            start, transcript = client.sent[0].payload, client.sent[1].payload
            assert isinstance(start, SessionStart) and start.session_id == client.session_id
            assert isinstance(transcript, UserAudioTranscriptFinal)
            assert_seq_counts_up_by_one(client.events)
            assert client.duplicates == [] and client.ignored == [] and client.errors == []
        assert [e.kind_name for e in a.events[:1]] == ["sessionReady"]  # it came before the first transcript
        usages = [e for e in a.events if e.kind_name == "turnUsage"]  # after each turn, kept on its TurnResult
        assert len(a.events) == 1 + len(first_a.events) + len(second_a.events) + len(usages)


@async_test
async def test_a_tool_call_runs_on_the_app_and_the_model_reads_its_result_back(stack: LocalStack) -> None:
    received: list[dict[str, Any]] = []

    async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
        received.append(arguments)
        return {"opened": arguments["path"], "lines": 42}

    async with client_for(stack, tools={"editor.openFile": open_file}) as client:
        turn = await client.say('call editor.openFile {"path":"main.swift"}', timeout=TURN_TIMEOUT_S)

    assert turn.completed and turn.errors == []
    assert received == [{"path": "main.swift"}]
    (call,) = turn.calls("editor.openFile")
    assert call.args == {"path": "main.swift"} and call.error is None
    assert call.value == {"opened": "main.swift", "lines": 42}
    prefix = "editor.openFile returned "
    assert turn.final_text.startswith(prefix), turn.final_text
    assert json.loads(turn.final_text.removeprefix(prefix)) == {"opened": "main.swift", "lines": 42}
    labels = collapse_partials([label(e) for e in turn.events])
    assert labels == ["thinking", "tool:editor.openFile", "partial+", "final", "tool:tts.speak", "idle"]
    assert turn.states == ["thinking", "idle"]
    assert_seq_counts_up_by_one(client.events)


@async_test
async def test_two_tool_calls_of_one_model_message_arrive_before_either_is_answered(stack: LocalStack) -> None:
    both_running = asyncio.Event()
    running: list[str] = []

    async def meet(name: str) -> dict[str, Any]:
        # Returns only once the OTHER call is running too: with one call at a time, it never would.
        running.append(name)
        if len(running) == 2:
            both_running.set()
        try:
            await asyncio.wait_for(both_running.wait(), WAIT_S)
        except TimeoutError:
            raise ToolError(f"{name} never saw the other call") from None
        return {"tool": name}

    async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
        return await meet("editor.openFile")

    async def git_status(arguments: dict[str, Any]) -> dict[str, Any]:
        return await meet("git.status")

    tools = {"editor.openFile": open_file, "git.status": git_status}
    async with client_for(stack, tools=tools) as client:
        turn = await client.say('call editor.openFile {"path":"main.swift"} ; call git.status {}', timeout=10)

    assert turn.completed and turn.errors == []
    assert sorted(running) == ["editor.openFile", "git.status"]
    opened, status = turn.calls("editor.openFile"), turn.calls("git.status")
    assert len(opened) == 1 and len(status) == 1
    assert opened[0].error is None and status[0].error is None, (opened[0].error, status[0].error)
    # Both calls were sent back to back, before any of their results reached the conductor.
    labels = [label(e) for e in turn.events]
    assert labels[:3] == ["thinking", "tool:editor.openFile", "tool:git.status"]
    # The model resumed once, with both results: one reply reading back both.
    assert turn.finals == [
        'editor.openFile returned {"tool":"editor.openFile"}. git.status returned {"tool":"git.status"}'
    ]
    assert collapse_partials(labels[3:]) == ["partial+", "final", "tool:tts.speak", "idle"]


@async_test
async def test_a_tool_error_is_read_back_as_a_failure(stack: LocalStack) -> None:
    async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolError(f"no such file: {arguments['path']}")

    async with client_for(stack, tools={"editor.openFile": open_file}) as client:
        turn = await client.say('call editor.openFile {"path":"missing.swift"}', timeout=TURN_TIMEOUT_S)

    assert turn.completed and turn.errors == []
    (call,) = turn.calls("editor.openFile")
    assert call.result is None and call.error == "no such file: missing.swift"
    assert turn.final_text == "editor.openFile failed: no such file: missing.swift"
    assert turn.states == ["thinking", "idle"]


@async_test
async def test_a_broken_model_stream_reports_bedrock_error_and_the_next_turn_works(stack: LocalStack) -> None:
    async with client_for(stack) as client:
        failed = await client.say("fail", timeout=TURN_TIMEOUT_S)
        recovered = await client.say("are you back", timeout=TURN_TIMEOUT_S)

    assert failed.completed
    assert [error.code for error in failed.errors] == [ErrorCode.BEDROCK_ERROR]
    assert failed.states == ["thinking", "idle"]
    line = FAILURE_LINES[FailureCause.MODEL_FAILED]  # nothing was spoken: the person hears why it stopped
    assert failed.finals == ["Let me think about that and"], "the text streamed before the failure is kept"
    assert [call.args["text"] for call in failed.calls("tts.speak")] == [line]  # spoken, not shown
    labels = collapse_partials([label(e) for e in failed.events])
    assert labels[-4:] == ["final", "error:bedrock_error", "tool:tts.speak", "idle"]

    assert recovered.completed and recovered.errors == []
    assert recovered.final_text == "You said: are you back"
    assert recovered.states == ["thinking", "idle"]
    assert_seq_counts_up_by_one(client.events)


@async_test
async def test_a_transcript_delivered_twice_starts_one_turn(stack: LocalStack) -> None:
    transcript = "only once please"
    frame = make_event(UserAudioTranscriptFinal(text=transcript)).to_json()
    async with client_for(stack) as client:
        await client.send_raw(frame)
        await client.send_raw(frame)  # the identical frame: same event id
        await client.wait_for(lambda e: is_state(e, "idle"), WAIT_S)
        # Fence: a later turn completes; a second turn for the duplicate would have shown up by now.
        fence = await client.say("fence", timeout=TURN_TIMEOUT_S)

    assert fence.completed and fence.final_text == "You said: fence"
    finals = [e.payload.text for e in client.events if e.kind_name == "assistantSpeechFinal"]
    assert finals == [f"You said: {transcript}", "You said: fence"]
    assert sum(is_state(e, "thinking") for e in client.events) == 2
    assert sum(is_tool_call(e, "tts.speak") for e in client.events) == 2
    # The two copies may be decided at once: each launches its turn alongside its write, and the
    # copy whose write loses the race is found taken (its runner closes the model stream at its
    # claim, having said nothing). The model may so be asked twice; it answers once.
    assert brain_requests_for(stack, transcript) in (1, 2)
    assert [e for e in client.events if e.kind_name == "error"] == []
    assert client.duplicates == []
    assert_seq_counts_up_by_one(client.events)
    # Every call the conductor made was answered exactly once.
    calls = [e.payload.call_id for e in client.events if isinstance(e.payload, ToolCall)]
    answered = [e.payload.call_id for e in client.sent if e.kind_name == "toolResult"]
    assert sorted(calls) == sorted(answered)


@async_test
async def test_a_late_session_start_does_not_resend_a_call_the_app_already_has(stack: LocalStack) -> None:
    """The conductor handles a connection's frames concurrently (as Lambda does), so the app's
    sessionStart and its first transcript race. Here the race is decided the unlucky way on purpose:
    the sessionStart is handled after the model's call went out on this very connection. (Before
    the calls recorded where they were sent, it re-sent the call: the app ran the tool twice, and
    its second result got no_pending_tool_call; the client stub hit it in 1 of 8 such connections.)
    """
    session_id = str(uuid.uuid4())
    async with connect(stack.session_url(session_id)) as ws:
        app = RawApp(ws)
        await app.send(UserAudioTranscriptFinal(text='call editor.openFile {"path":"main.swift"}'))
        opened = await app.read_until(lambda e: is_tool_call(e, "editor.openFile"))
        start = await app.send(SessionStart(session_id=session_id))  # handled late
        await poll_until(lambda: event_processed(stack, session_id, str(start.id)))
        # Finish the turn: by its idle, the sessionStart has long been handled.
        await app.send(ToolResult(call_id=opened.payload.call_id, result='{"opened":true}', error=None))
        speak = await app.read_until(lambda e: is_tool_call(e, "tts.speak"))
        await app.send(ToolResult(call_id=speak.payload.call_id, result='{"spoken":true}', error=None))
        await app.read_until(lambda e: is_state(e, "idle"))

    calls = [e.payload.call_id for e in app.events if isinstance(e.payload, ToolCall)]
    assert calls.count(opened.payload.call_id) == 1, f"the call was sent {calls.count(opened.payload.call_id)} times"
