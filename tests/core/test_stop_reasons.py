"""Every Bedrock stop reason, through the pure core: what the app hears, what the history keeps.

The reasons come from the installed botocore model (``StopReason`` of ``bedrock-runtime``), so a
reason a newer botocore adds shows up here as a case nobody has decided on yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import botocore.session
import pytest

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome
from shared.core.history_ops import AppendMessage, ExtendMessage
from shared.core.messages import Message, tool_use_ids
from shared.core.model_output import MessageEnd, ModelMessage, StreamItem, TextDelta, ToolUseRequest, ToolUseStarted
from shared.core.state import SessionState
from shared.core.stream import (
    CONTEXT_FULL_LINE,
    CONTEXT_FULL_MARKER,
    CONTEXT_FULL_STOP,
    CUT_OFF_LINE,
    CUT_OFF_MARKER,
    CUT_OFF_STOP,
    FILTERED_LINE,
    FILTERED_MARKER,
    FILTERED_STOPS,
    MALFORMED_LINE,
    MALFORMED_MARKER,
    MALFORMED_STOPS,
    NORMAL_STOPS,
    StreamReport,
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

SESSION = "0b7a3c1e-5d2f-4e6a-8b9c-112233445566"
SETTINGS = CoreSettings(catalog_names=frozenset({"editor.openFile", "project.search", "tts.speak"}))
UNKNOWN_STOP = "a_reason_bedrock_adds_later"
SAID = "Here is the start of it"


def botocore_stop_reasons() -> list[str]:
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return list(model.shape_for("StopReason").enum)


class Session:
    """Applies outcomes the way the store does: history in memory, every event kept in order."""

    def __init__(self, settings: CoreSettings = SETTINGS) -> None:
        self.settings = settings
        self.state = SessionState(session_id=SESSION, connection_id="conn-1")
        self.history: list[Message] = []
        self.sent: list[object] = []
        self.clock = 10_000.0

    def apply(self, outcome: Outcome) -> Outcome:
        for op in outcome.history:
            if isinstance(op, AppendMessage):
                assert op.seq == len(self.history)
                self.history.append({"role": op.role, "content": list(op.content)})
            else:
                assert isinstance(op, ExtendMessage) and op.seq == len(self.history) - 1
                self.history[op.seq]["content"].extend(op.content)
        self.state = outcome.state
        self.sent.extend(outcome.events)
        return outcome

    def say(self, text: str) -> Outcome:
        self.clock += 1
        return self.apply(conductor.handle_transcript(self.state, text, now=self.clock, settings=self.settings))

    def answer(self, call_id: str, result: str | None = '{"ok":true}', error: str | None = None) -> Outcome:
        self.clock += 1
        result_event = ToolResult(callId=call_id, result=result, error=error)
        return self.apply(conductor.handle_tool_result(self.state, result_event, self.settings, now=self.clock))

    def stream(self, stream_id: str, items: list[StreamItem], stop_reason: str) -> Outcome:
        """One model message, item by item as the runner decides them."""
        message = ModelMessage()
        text = ""  # the runner's segment text, handed over at each commit
        for item in [*items, MessageEnd(stop_reason)]:
            message.add(item)
            if isinstance(item, TextDelta):
                text += item.text
            elif isinstance(item, ToolUseStarted):
                self.apply(stream_tool_started(self.state, stream_id, text=text))
                text = ""
        return self.apply(stream_finished(self.state, StreamReport(stream_id, message, text=text), self.settings))

    def since(self, mark: int) -> list[object]:
        return self.sent[mark:]


def wrapper_use(tool_use_id: str, tool_input: dict[str, object] | None) -> list[StreamItem]:
    return [ToolUseStarted(tool_use_id, "tool_call"), ToolUseRequest(tool_use_id, "tool_call", tool_input)]


def heard(events: list[object]) -> list[tuple[object, ...]]:
    """Events as short tuples; partials left out (each final supersedes them)."""
    out: list[tuple[object, ...]] = []
    for event in events:
        if isinstance(event, ToolCall):
            out.append(("toolCall", event.name, json.loads(event.arguments)))
        elif isinstance(event, AssistantSpeechFinal):
            out.append(("final", event.text))
        elif isinstance(event, ErrorPayload):
            out.append(("error", event.code))
        elif not isinstance(event, AssistantSpeechPartial):
            out.append((type(event).__name__,))
    return out


def speak_call_id(events: list[object]) -> str:
    speaks = [event for event in events if isinstance(event, ToolCall) and event.name == "tts.speak"]
    return speaks[-1].call_id


@dataclass(frozen=True)
class Expected:
    """A text-only message stopped for one reason: the line the app speaks, the stored text, errors,
    and the final when it is not what is spoken (a note after cut text is a paragraph of its own)."""

    spoken: str
    stored: str
    errors: tuple[str, ...] = ()
    shown: str | None = None


EXPECTED: dict[str, Expected] = {
    "end_turn": Expected(SAID, SAID),
    "tool_use": Expected(SAID, SAID),
    "stop_sequence": Expected(SAID, SAID),
    "max_tokens": Expected(f"{SAID}… {CUT_OFF_LINE}", f"{SAID} {CUT_OFF_MARKER}", shown=f"{SAID}…\n\n{CUT_OFF_LINE}"),
    "content_filtered": Expected(FILTERED_LINE, FILTERED_MARKER),
    "guardrail_intervened": Expected(SAID, f"{SAID} {FILTERED_MARKER}"),
    "malformed_model_output": Expected(MALFORMED_LINE, MALFORMED_MARKER, ("bedrock_error",)),
    "malformed_tool_use": Expected(MALFORMED_LINE, MALFORMED_MARKER, ("bedrock_error",)),
    "model_context_window_exceeded": Expected(
        f"{SAID}… {CONTEXT_FULL_LINE}", f"{SAID} {CONTEXT_FULL_MARKER}", shown=f"{SAID}…\n\n{CONTEXT_FULL_LINE}"
    ),
    UNKNOWN_STOP: Expected(SAID, SAID),
}
ALL_REASONS = [*botocore_stop_reasons(), UNKNOWN_STOP]


def expected_for(reason: str) -> Expected:
    if reason not in EXPECTED:
        pytest.fail(f"Bedrock stop reason {reason!r} is new: decide how a turn ends on it (shared/core/conductor.py)")
    return EXPECTED[reason]


def test_botocore_still_lists_the_reasons_the_core_knows() -> None:
    """Guards the parametrization: if the model file moved, the cases below would silently shrink."""
    reasons = set(botocore_stop_reasons())
    known = {"end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filtered", "guardrail_intervened"}
    assert known <= reasons


@pytest.mark.parametrize("reason", botocore_stop_reasons())
def test_every_botocore_stop_reason_is_classified_by_the_core(reason: str) -> None:
    classified = NORMAL_STOPS | {CUT_OFF_STOP, CONTEXT_FULL_STOP} | FILTERED_STOPS | MALFORMED_STOPS
    assert reason in classified, f"stop reason {reason!r} falls to the core's unknown-reason branch"


@pytest.mark.parametrize("reason", ALL_REASONS)
def test_text_reply_stopped_for_each_reason_is_spoken_stored_and_ends_the_turn(reason: str) -> None:
    expected = expected_for(reason)
    session = Session()
    started = session.say("tell me")
    assert started.run_model
    mark = len(session.sent)
    finished = session.stream(started.run_model, [TextDelta("Here is "), TextDelta("the start of it")], reason)
    assert finished.run_model is None
    assert heard(session.since(mark)) == [
        *(("error", code) for code in expected.errors),
        ("final", expected.shown or expected.spoken),
        ("toolCall", "tts.speak", {"text": expected.spoken}),
    ]
    assert session.history[-1] == {"role": "assistant", "content": [{"text": expected.stored}]}
    assert_valid_history(session.history)
    assert session.state.turn is not None and session.state.turn.stream is None  # waiting for the app to speak
    idle = session.answer(speak_call_id(session.sent))
    assert heard(idle.events) == [("toolCall", "convo.setState", {"state": "idle"})]
    assert session.state.turn is None


@pytest.mark.parametrize("reason", ALL_REASONS)
def test_a_reply_stopped_without_any_text_still_leaves_a_spoken_line_and_an_answer(reason: str) -> None:
    expected_for(reason)
    session = Session()
    started = session.say("tell me")
    assert started.run_model
    mark = len(session.sent)
    session.stream(started.run_model, [], reason)
    assert_valid_history(session.history)
    if reason in NORMAL_STOPS:
        assert heard(session.since(mark)) == [("toolCall", "convo.setState", {"state": "idle"})]
        return
    spoken = heard(session.since(mark))[-1]
    assert spoken[:2] == ("toolCall", "tts.speak") and str(spoken[2]["text"]).strip()  # type: ignore[index]
    assert session.history[-1]["role"] == "assistant"


@pytest.mark.parametrize("reason", ALL_REASONS)
def test_tool_uses_of_an_abnormally_stopped_message_never_reach_the_app(reason: str) -> None:
    expected_for(reason)
    session = Session()
    started = session.say("open main")
    assert started.run_model
    mark = len(session.sent)
    uses = [
        *wrapper_use("tu-1", {"name": "editor.openFile", "arguments": {"path": "main.swift"}}),
        *wrapper_use("tu-2", None),  # an input cut off mid-JSON
    ]
    finished = session.stream(started.run_model, [TextDelta("Opening it."), *uses], reason)
    forwarded = [event for event in session.since(mark) if isinstance(event, ToolCall)]
    assert_valid_history(session.history)
    if reason in NORMAL_STOPS:
        assert [call.name for call in forwarded if call.name != "tts.speak"] == ["editor.openFile"]
        return
    assert [call.name for call in forwarded] == ["tts.speak", "tts.speak"]  # before the calls, then the end
    assert "invalid_tool_call" not in [e.code for e in session.since(mark) if isinstance(e, ErrorPayload)]
    assert finished.run_model is None
    assert session.state.turn is not None and session.state.turn.tools is None and session.state.turn.rounds == 0
    assert all(not tool_use_ids(message["content"]) for message in session.history)
    assert session.state.recent_call_ids == []


@pytest.mark.parametrize("reason", ALL_REASONS)
@pytest.mark.parametrize("app_confirms_speech", [True, False], ids=["spoken", "not-yet-spoken"])
def test_the_next_transcript_after_each_stop_reason_starts_a_normal_turn(
    reason: str, app_confirms_speech: bool
) -> None:
    expected_for(reason)
    session = Session()
    started = session.say("first")
    assert started.run_model
    session.stream(started.run_model, [TextDelta("Some words"), *wrapper_use("tu-1", None)], reason)
    if reason in NORMAL_STOPS:  # the malformed use went back to the model: answer that round normally
        assert session.state.turn is not None and session.state.turn.stream is not None
        session.stream(session.state.turn.stream.stream_id, [TextDelta("Done.")], "end_turn")
    if app_confirms_speech:
        session.answer(speak_call_id(session.sent))
    mark = len(session.sent)
    nxt = session.say("second")
    assert nxt.run_model
    assert heard(session.since(mark)) == [("toolCall", "convo.setState", {"state": "thinking"})]
    assert session.history[-1] == {"role": "user", "content": [{"text": "second"}]}
    session.stream(nxt.run_model, [TextDelta("Fine.")], "end_turn")
    assert session.history[-1] == {"role": "assistant", "content": [{"text": "Fine."}]}
    assert_valid_history(session.history)


def test_max_tokens_with_a_cut_off_tool_input_asks_the_model_once() -> None:
    """A cut-off tool input is dropped, never answered with an error for the model to retry: a
    reply that hits the output limit would hit it again, every round up to the round cap."""
    session = Session(CoreSettings(catalog_names=SETTINGS.catalog_names, max_tool_rounds=8))
    stream_id = session.say("write the whole file").run_model
    model_calls = 0
    while stream_id and model_calls < 20:
        model_calls += 1
        cut_off = [TextDelta("Writing it."), *wrapper_use(f"tu-{model_calls}", None)]
        stream_id = session.stream(stream_id, cut_off, CUT_OFF_STOP).run_model
    assert model_calls == 1
    assert [e.code for e in session.sent if isinstance(e, ErrorPayload)] == []
    assert heard(session.sent)[-2:] == [("final", CUT_OFF_LINE), ("toolCall", "tts.speak", {"text": CUT_OFF_LINE})]
    assert session.history[-1] == {"role": "assistant", "content": [{"text": f"Writing it. {CUT_OFF_MARKER}"}]}
    assert_valid_history(session.history)


def test_abnormal_stop_after_a_tool_round_keeps_the_round_and_the_text() -> None:
    session = Session()
    stream_id = session.say("search then explain").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", {"name": "project.search", "arguments": {"q": "x"}}), "tool_use")
    resumed = session.answer("tu-1", '{"matches":2}').run_model
    assert resumed
    session.stream(resumed, [TextDelta("Two matches, the first")], CUT_OFF_STOP)
    assert [m["role"] for m in session.history] == ["user", "assistant", "user", "assistant"]
    assert session.history[-1]["content"] == [{"text": f"Two matches, the first {CUT_OFF_MARKER}"}]
    assert_valid_history(session.history)


@pytest.mark.parametrize(
    ("written", "shown", "spoken"),
    [
        ("Qubits are", "Qubits are…", "Qubits are…"),
        ("Qubits are both 0 and 1,", "Qubits are both 0 and 1…", "Qubits are both 0 and 1…"),
        ("Qubits are both.", "Qubits are both.", "Qubits are both."),  # a whole sentence does not trail off
        ("Call it (a qubit)", "Call it (a qubit)", "Call it (a qubit)"),  # nor does a closed bracket
    ],
)
def test_the_cut_off_line_stands_apart_from_the_cut_text(written: str, shown: str, spoken: str) -> None:
    """The final reads "Qubits are…" then the line as its own paragraph, never "Qubits are That answer…"."""
    session = Session()
    stream_id = session.say("explain qubits").run_model
    assert stream_id
    mark = len(session.sent)
    session.stream(stream_id, [TextDelta(written)], CUT_OFF_STOP)
    assert heard(session.since(mark))[-2:] == [
        ("final", f"{shown}\n\n{CUT_OFF_LINE}"),
        ("toolCall", "tts.speak", {"text": f"{spoken} {CUT_OFF_LINE}"}),
    ]
    assert session.history[-1]["content"] == [{"text": f"{written} {CUT_OFF_MARKER}"}]  # the model's words as written


def test_sentences_already_spoken_are_not_repeated_before_the_cut_off_line() -> None:
    session = Session()
    session.apply(conductor.handle_session_start(session.state, _sentence_speech(), "conn-1", SETTINGS, now=1.0))
    stream_id = session.say("explain qubits").run_model
    assert stream_id
    text = "A qubit holds a superposition. Measuring it gives"
    session.apply(stream_speak(session.state, stream_id, text, len("A qubit holds a superposition. ")))
    message = ModelMessage()
    message.add(TextDelta(text))
    message.add(MessageEnd(CUT_OFF_STOP))
    mark = len(session.sent)
    session.apply(stream_finished(session.state, StreamReport(stream_id, message, text=text), SETTINGS))
    assert heard(session.since(mark)) == [
        ("final", f"{text}…\n\n{CUT_OFF_LINE}"),
        ("toolCall", "tts.speak", {"text": f"Measuring it gives… {CUT_OFF_LINE}"}),
    ]


def test_a_cut_off_reply_that_was_only_reasoning_speaks_only_the_line() -> None:
    session = Session()
    stream_id = session.say("explain qubits").run_model
    assert stream_id
    mark = len(session.sent)
    session.stream(stream_id, [TextDelta("<thinking>The user wants qubits explained. I should")], CUT_OFF_STOP)
    assert heard(session.since(mark)) == [("final", CUT_OFF_LINE), ("toolCall", "tts.speak", {"text": CUT_OFF_LINE})]
    assert session.history[-1]["content"] == [
        {"text": f"<thinking>The user wants qubits explained. I should {CUT_OFF_MARKER}"}
    ]


def _sentence_speech() -> SessionStart:
    return SessionStart(sessionId=SESSION, capabilities=("sentenceSpeech",))


def test_a_code_block_in_cut_off_text_reaches_the_screen_the_speech_points_to() -> None:
    session = Session()
    stream_id = session.say("show the fix").run_model
    assert stream_id
    mark = len(session.sent)
    written = "Here is the fix:\n\n```swift\nguard !input.isEmpty else { return [] }\n```\n\nThen run the"
    session.stream(stream_id, [TextDelta(written)], CUT_OFF_STOP)
    events = heard(session.since(mark))
    assert ("AssistantUIPatch",) in events
    spoken = [e[2]["text"] for e in events if e[:2] == ("toolCall", "tts.speak")][-1]
    assert "on screen" in spoken and spoken.endswith(CUT_OFF_LINE)
    assert events.index(("AssistantUIPatch",)) < events.index(next(e for e in events if e[0] == "final"))
