"""The turn state machine, driven directly: no moto, no network, no threads."""

from __future__ import annotations

import json

import pytest

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome, StreamSuperseded
from shared.core.history_ops import AppendMessage, ExtendMessage
from shared.core.messages import INTERRUPTED_MARKER, Message
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta, ToolUseRequest
from shared.core.state import SessionState
from shared.core.stream import (
    STALL_FALLBACK_LINE,
    StreamReport,
    stream_failed,
    stream_finished,
    stream_speak,
    stream_tool_started,
)
from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorPayload,
    SessionStart,
    ToolCall,
    ToolResult,
)
from tests.history_check import assert_valid_history

SETTINGS = CoreSettings(
    catalog_names=frozenset({"editor.openFile", "project.search"}), max_tool_rounds=2, max_turns_per_minute=5
)
SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"


class Session:
    """Applies outcomes the way the store does, keeping the history in memory."""

    def __init__(self) -> None:
        self.state = SessionState(session_id=SESSION, connection_id="conn-1")
        self.history: list[Message] = []
        self.sent: list[object] = []
        self.clock = 1_000.0

    def apply(self, outcome: Outcome) -> Outcome:
        for op in outcome.history:
            if isinstance(op, AppendMessage):
                assert op.seq == len(self.history)
                self.history.append({"role": op.role, "content": list(op.content)})
            elif isinstance(op, ExtendMessage):
                assert op.seq == len(self.history) - 1
                self.history[op.seq]["content"].extend(op.content)
        self.state = outcome.state
        self.sent.extend(outcome.events)
        return outcome

    def say(self, text: str) -> Outcome:
        self.clock += 1
        return self.apply(conductor.handle_transcript(self.state, text, now=self.clock, settings=SETTINGS))

    def answer(self, call_id: str, result: str | None = '{"ok":true}', error: str | None = None) -> Outcome:
        return self.apply(
            conductor.handle_tool_result(self.state, ToolResult(callId=call_id, result=result, error=error))
        )

    def stream(self, stream_id: str, *items: object) -> Outcome:
        message = ModelMessage()
        text = ""  # the runner's segment text, handed over at each commit
        for item in items:
            message.add(item)  # type: ignore[arg-type]
            if isinstance(item, TextDelta):
                text += item.text
            elif isinstance(item, ToolUseRequest):
                self.apply(stream_tool_started(self.state, stream_id, text=text))
                text = ""
        message.add(MessageEnd("tool_use" if message.tool_uses else "end_turn"))
        return self.apply(stream_finished(self.state, StreamReport(stream_id, message, text=text), SETTINGS))


def wrapper_use(tool_use_id: str, name: str, arguments: object, call_id: str | None = None) -> ToolUseRequest:
    tool_input: dict[str, object] = {"name": name, "arguments": arguments}
    if call_id:
        tool_input["call_id"] = call_id
    return ToolUseRequest(tool_use_id, "tool_call", tool_input)


def calls(events: list[object]) -> list[ToolCall]:
    return [event for event in events if isinstance(event, ToolCall)]


def test_spoken_turn_follows_the_protocol_flow() -> None:
    session = Session()
    started = session.say("Hello")
    assert started.run_model
    assert [(c.name, json.loads(c.arguments)) for c in calls(started.events)] == [
        ("convo.setState", {"state": "thinking"})
    ]
    finished = session.stream(started.run_model, TextDelta("Hi"), TextDelta(" there"), TextDelta("!"))
    assert not [e for e in session.sent if isinstance(e, AssistantSpeechPartial)]  # the runner posts those
    assert isinstance(finished.events[0], AssistantSpeechFinal) and finished.events[0].text == "Hi there!"
    speak = calls(finished.events)[0]
    assert (speak.name, json.loads(speak.arguments)) == ("tts.speak", {"text": "Hi there!"})
    assert session.state.turn is not None  # waiting for the app to speak
    idle = session.answer(speak.call_id, '{"spoken":true}')
    assert [(c.name, json.loads(c.arguments)) for c in calls(idle.events)] == [("convo.setState", {"state": "idle"})]
    assert session.state.turn is None
    assert session.history == [
        {"role": "user", "content": [{"text": "Hello"}]},
        {"role": "assistant", "content": [{"text": "Hi there!"}]},
    ]
    # the thinking/idle acknowledgements never reach the model
    for own in calls(started.events) + calls(idle.events):
        assert session.answer(own.call_id).events == []
    assert_valid_history(session.history)


def test_blank_transcript_is_rejected_and_changes_nothing() -> None:
    session = Session()
    outcome = session.say("   ")
    assert [(e.code) for e in outcome.events if isinstance(e, ErrorPayload)] == ["empty_transcript"]
    assert outcome.run_model is None and session.history == []


def test_two_tool_calls_answered_in_reverse_order_resume_once() -> None:
    session = Session()
    stream_id = session.say("open two files").run_model
    assert stream_id
    out = session.stream(
        stream_id,
        TextDelta("Opening both."),
        wrapper_use("tu-1", "editor.openFile", {"path": "a.swift"}, call_id="call-a"),
        wrapper_use("tu-2", "editor.openFile", '{"path": "b.swift"}'),
    )
    model_calls = [c for c in calls(session.sent) if c.name == "editor.openFile"]
    assert [(c.call_id, json.loads(c.arguments)) for c in model_calls] == [
        ("call-a", {"path": "a.swift"}),
        ("tu-2", {"path": "b.swift"}),
    ]
    speech_final = [e.text for e in session.sent if isinstance(e, AssistantSpeechFinal)]
    assert speech_final == ["Opening both."]
    assert out.run_model is None
    first = session.answer("tu-2", '{"opened":"b"}')
    assert first.run_model is None and first.history == []
    second = session.answer("call-a", None, error="file not found")
    assert second.run_model  # every call answered: the model resumes
    assert session.history[-2]["role"] == "assistant"
    results = [block["toolResult"] for block in session.history[-1]["content"]]
    assert [(r["toolUseId"], r["status"], r["content"][0]["text"]) for r in results] == [
        ("tu-1", "error", "file not found"),
        ("tu-2", "success", '{"opened":"b"}'),
    ]
    assert_valid_history(session.history)


def test_malformed_wrapper_is_reported_and_answered_to_the_model() -> None:
    session = Session()
    stream_id = session.say("do it").run_model
    assert stream_id
    out = session.stream(
        stream_id,
        wrapper_use("tu-1", "shell.exec", {"cmd": "rm -rf /"}),
        ToolUseRequest("tu-2", "read_file", {"path": "x"}),
        wrapper_use("tu-3", "editor.openFile", [1, 2]),
        ToolUseRequest("tu-4", "tool_call", {"arguments": {}}),
        ToolUseRequest("tu-5", "tool_call", None),  # the input was "{not json",
    )
    errors = [e for e in out.events if isinstance(e, ErrorPayload)]
    assert [e.code for e in errors] == ["invalid_tool_call"] * 5
    assert out.run_model  # all rejected: the model sees why, right away
    results = [block["toolResult"] for block in session.history[-1]["content"]]
    assert [r["status"] for r in results] == ["error"] * 5
    assert not [c for c in calls(out.events) if c.name not in ("convo.setState", "tts.speak")]
    assert_valid_history(session.history)


def test_unknown_call_id_gets_no_pending_tool_call() -> None:
    session = Session()
    out = session.answer("nope")
    assert [e.code for e in out.events if isinstance(e, ErrorPayload)] == ["no_pending_tool_call"]


def test_barge_in_mid_stream_keeps_text_marked_interrupted_and_stops_the_stream() -> None:
    session = Session()
    stream_id = session.say("count").run_model
    assert stream_id
    spoken = session.apply(stream_speak(session.state, stream_id, "One, two. Three", len("One, two. ")))
    assert [json.loads(c.arguments) for c in calls(spoken.events)] == [{"text": "One, two."}]
    out = session.apply(conductor.handle_barge_in(session.state))
    assert [json.loads(c.arguments) for c in calls(out.events)] == [{"state": "idle"}]
    # what the app was asked to speak is kept; "Three" was written but never heard
    assert session.history[-1] == {"role": "assistant", "content": [{"text": f"One, two. {INTERRUPTED_MARKER}"}]}
    with pytest.raises(StreamSuperseded):
        stream_speak(session.state, stream_id, "One, two. Three, four", 0)
    nxt = session.say("next")
    assert nxt.run_model
    assert_valid_history(session.history)


def test_new_transcript_while_calls_pending_cancels_them_and_merges_the_utterance() -> None:
    session = Session()
    stream_id = session.say("search").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", "project.search", {"query": "foo"}))
    out = session.say("never mind, open main")
    assert out.run_model
    last = session.history[-1]
    assert last["role"] == "user"
    assert last["content"][0]["toolResult"]["status"] == "error"
    assert last["content"][0]["toolResult"]["content"][0]["text"].startswith("cancelled:")
    assert last["content"][1] == {"text": "never mind, open main"}
    # the stale result is answered as unknown
    late = session.answer("tu-1")
    assert [e.code for e in late.events if isinstance(e, ErrorPayload)] == ["no_pending_tool_call"]
    assert_valid_history(session.history)


def test_tool_round_cap_ends_runaway_loops() -> None:
    session = Session()
    stream_id = session.say("loop").run_model
    for round_ in range(3):
        assert stream_id
        last = session.stream(stream_id, wrapper_use(f"tu-{round_}", "project.search", {"query": "x"}))
        if round_ == 2:
            break  # the third round is over the cap: its call never reaches the app
        stream_id = session.answer(f"tu-{round_}").run_model
    assert "tu-2" not in [c.call_id for c in calls(session.sent)]
    errors = [e for e in session.sent if isinstance(e, ErrorPayload)]
    assert [e.code for e in errors] == ["conductor_error"]
    assert session.state.turn is None and last.run_model is None
    assert_valid_history(session.history)


def test_failed_stream_keeps_partial_text_and_the_next_turn_works() -> None:
    session = Session()
    stream_id = session.say("fail").run_model
    assert stream_id
    out = session.apply(
        stream_failed(session.state, stream_id, "bedrock_error", "boom", text="Working on")  # type: ignore[arg-type]
    )
    assert [e.code for e in out.events if isinstance(e, ErrorPayload)] == ["bedrock_error"]
    assert session.history[-1]["content"][0]["text"].startswith("Working on")
    assert session.say("again").run_model
    assert_valid_history(session.history)


def test_failure_before_any_output_is_answered_so_the_next_utterance_stands_alone() -> None:
    """A failed turn leaves an assistant message: the next utterance starts a new user message
    instead of growing the failed one (which, if it was too long, would fail every later turn)."""
    session = Session()
    stream_id = session.say("first").run_model
    assert stream_id
    session.apply(stream_failed(session.state, stream_id, "bedrock_error", "throttled"))  # type: ignore[arg-type]
    session.say("second")
    assert session.history == [
        {"role": "user", "content": [{"text": "first"}]},
        {"role": "assistant", "content": [{"text": "[no answer: throttled]"}]},
        {"role": "user", "content": [{"text": "second"}]},
    ]
    assert_valid_history(session.history)


def test_session_start_resends_pending_model_calls() -> None:
    session = Session()
    stream_id = session.say("search").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", "project.search", {"query": "x"}, call_id="c-1"))
    session.state.connection_id = "conn-after-reconnect"
    out = session.apply(
        conductor.handle_session_start(session.state, SessionStart(sessionId=SESSION.upper()), "conn-after-reconnect")
    )
    assert [(c.call_id, c.name) for c in calls(out.events)] == [("c-1", "project.search")]
    wrong = conductor.handle_session_start(
        session.state, SessionStart(sessionId="someone-else"), "conn-after-reconnect"
    )
    assert [e.code for e in wrong.events if isinstance(e, ErrorPayload)] == ["invalid_event"]


def test_call_id_reused_from_an_earlier_call_falls_back_to_tool_use_id() -> None:
    session = Session()
    stream_id = session.say("one").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", "project.search", {"query": "x"}, call_id="dup"))
    stream_id = session.answer("dup").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-2", "project.search", {"query": "y"}, call_id="dup"))
    assert [c.call_id for c in calls(session.sent) if c.name == "project.search"] == ["dup", "tu-2"]


@pytest.mark.parametrize("taken", ["conductor-say-0123456789abcdef", "conductor-state-1", "conductor-x"])
def test_a_model_call_id_in_the_conductors_own_namespace_falls_back_to_tool_use_id(taken: str) -> None:
    """The app's result for it would otherwise be taken for an acknowledgement of the conductor's
    own call and dropped, leaving the model's round waiting for its deadline."""
    session = Session()
    stream_id = session.say("one").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", "project.search", {"query": "x"}, call_id=taken))
    assert [c.call_id for c in calls(session.sent) if c.name == "project.search"] == ["tu-1"]
    assert session.answer("tu-1").run_model  # the result resumes the model


def test_events_are_numbered_in_order_across_decisions() -> None:
    session = Session()
    first = session.say("hi")
    assert first.numbered_events()[0][0] == 1
    assert first.run_model
    second = session.apply(stream_speak(session.state, first.run_model, "Yo. And", len("Yo. ")))
    assert second.numbered_events()[0][0] == 1 + len(first.events)


def test_turns_per_minute_are_limited_per_session() -> None:
    session = Session()
    for _ in range(5):
        assert session.say("hi").run_model
    limited = session.say("one more")
    assert [e.code for e in limited.events if isinstance(e, ErrorPayload)] == ["rate_limited"]
    assert limited.run_model is None
    session.clock += 61
    assert session.say("later").run_model


def test_stalled_stream_speaks_a_fallback_line_then_goes_idle() -> None:
    session = Session()
    stream_id = session.say("hello").run_model
    assert stream_id
    out = session.apply(
        stream_failed(session.state, stream_id, "bedrock_error", "stalled", fallback_line=STALL_FALLBACK_LINE)  # type: ignore[arg-type]
    )
    speak = [c for c in calls(out.events) if c.name == "tts.speak"]
    assert [json.loads(c.arguments)["text"] for c in speak] == [STALL_FALLBACK_LINE]
    idle = session.answer(speak[0].call_id, '{"spoken":true}')
    assert [json.loads(c.arguments) for c in calls(idle.events)] == [{"state": "idle"}]
    assert_valid_history(session.history)


def test_session_start_with_last_seq_leaves_pending_calls_to_the_replay() -> None:
    session = Session()
    stream_id = session.say("search").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", "project.search", {"query": "x"}))
    out = conductor.handle_session_start(session.state, SessionStart(sessionId=SESSION, lastSeq=2), "conn-1")
    assert out.events == []


def test_session_start_does_not_resend_a_call_already_sent_to_this_connection() -> None:
    session = Session()
    stream_id = session.say("search").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", "project.search", {"query": "x"}))
    same_connection = conductor.handle_session_start(session.state, SessionStart(sessionId=SESSION), "conn-1")
    assert calls(same_connection.events) == []
    session.state.connection_id = "conn-2"
    stale = conductor.handle_session_start(session.state, SessionStart(sessionId=SESSION), "conn-1")
    assert calls(stale.events) == []  # the session already moved on from conn-1
    moved = session.apply(conductor.handle_session_start(session.state, SessionStart(sessionId=SESSION), "conn-2"))
    assert [c.call_id for c in calls(moved.events)] == ["tu-1"]
    again = conductor.handle_session_start(session.state, SessionStart(sessionId=SESSION), "conn-2")
    assert calls(again.events) == []
