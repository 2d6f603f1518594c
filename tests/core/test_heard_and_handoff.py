"""The history holds what the user heard; a chat conversation hands its memory to a voice session."""

from __future__ import annotations

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome
from shared.core.history_ops import AppendMessage, ExtendMessage, ReplaceMessage
from shared.core.messages import INTERRUPTED_MARKER, Message
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta
from shared.core.state import SessionState
from shared.core.stream import StreamReport, stream_finished, stream_speak
from shared.wire.protocol import (
    AssistantSpeechFinal,
    Handoff,
    HandoffTurn,
    SessionStart,
    ToolCall,
    ToolResult,
    make_event,
)
from tests.history_check import assert_valid_history

SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"
SETTINGS = CoreSettings(catalog_names=frozenset())


class Session:
    def __init__(self) -> None:
        self.state = SessionState(session_id=SESSION, connection_id="conn-1")
        self.history: list[Message] = []
        self.events: list[object] = []

    def apply(self, outcome: Outcome) -> Outcome:
        for op in outcome.history:
            if isinstance(op, AppendMessage):
                self.history.append({"role": op.role, "content": list(op.content)})
            elif isinstance(op, ExtendMessage):
                self.history[op.seq]["content"].extend(op.content)
            elif isinstance(op, ReplaceMessage):
                self.history[op.seq]["content"] = list(op.content)
        self.state = outcome.state
        self.events.extend(outcome.events)
        return outcome

    def start(self, **fields: object) -> Outcome:
        start = SessionStart(sessionId=SESSION, **fields)  # type: ignore[arg-type]
        return self.apply(conductor.handle_session_start(self.state, start, "conn-1", SETTINGS, now=1.0))

    def say(self, text: str) -> str:
        stream = self.apply(conductor.handle_transcript(self.state, text, now=2.0, settings=SETTINGS)).run_model
        assert stream
        return stream

    def answered(self, text: str) -> ToolCall:
        """A whole answer streamed and finalized: returns its tts.speak call."""
        stream = self.say("question")
        message = ModelMessage()
        message.add(TextDelta(text))
        message.add(MessageEnd("end_turn"))
        out = self.apply(stream_finished(self.state, StreamReport(stream, message, text=text), SETTINGS))
        return [e for e in out.events if isinstance(e, ToolCall)][-1]


def test_a_barge_in_mid_stream_keeps_the_heard_text() -> None:
    session = Session()
    session.start(capabilities=("sentenceSpeech",))
    stream = session.say("explain")
    session.apply(stream_speak(session.state, stream, "One, two. Three four. Five", len("One, two. ")))
    session.apply(conductor.handle_barge_in(session.state, "One, two"))
    assert session.history[-1] == {"role": "assistant", "content": [{"text": f"One, two {INTERRUPTED_MARKER}"}]}
    assert_valid_history(session.history)


def test_nothing_heard_keeps_no_assistant_text() -> None:
    session = Session()
    stream = session.say("explain")
    session.apply(stream_speak(session.state, stream, "One. Two", len("One. ")))
    session.apply(conductor.handle_barge_in(session.state, ""))
    assert [m["role"] for m in session.history] == ["user"]


def test_a_barge_in_during_playback_marks_the_answer() -> None:
    session = Session()
    session.answered("It builds. Two tests fail.")
    session.apply(conductor.handle_barge_in(session.state))
    assert session.history[-1]["content"] == [{"text": "It builds. Two tests fail."}, {"text": INTERRUPTED_MARKER}]
    assert session.state.turn is None
    assert_valid_history(session.history)


def test_a_barge_in_during_playback_with_heard_text_cuts_the_answer_to_it() -> None:
    session = Session()
    session.answered("It builds. Two tests fail.")
    session.apply(conductor.handle_barge_in(session.state, "It builds. Two"))
    assert session.history[-1]["content"] == [{"text": f"It builds. Two {INTERRUPTED_MARKER}"}]


def test_a_speak_result_not_spoken_in_full_cuts_the_answer() -> None:
    session = Session()
    speak = session.answered("First sentence. Second sentence. Third.")
    result = ToolResult(callId=speak.call_id, result='{"spoken": false, "heardText": "First sentence. Second"}')
    out = session.apply(conductor.handle_tool_result(session.state, result, SETTINGS))
    assert session.history[-1]["content"] == [{"text": f"First sentence. Second {INTERRUPTED_MARKER}"}]
    assert session.state.turn is None and any(isinstance(e, ToolCall) for e in out.events)  # idle


def test_a_speak_result_spoken_in_full_changes_no_history() -> None:
    session = Session()
    speak = session.answered("All good.")
    result = ToolResult(callId=speak.call_id, result='{"spoken":true}')
    session.apply(conductor.handle_tool_result(session.state, result))
    assert session.history[-1]["content"] == [{"text": "All good."}]


HANDOFF = Handoff(
    summary="The user is adding login to the iOS app; the LoginView exists.",
    recentTurns=[
        HandoffTurn(role="assistant", text="Hi! What are we building?"),  # cannot start a history
        HandoffTurn(role="user", text="Add a password field."),
        HandoffTurn(role="assistant", text="Done: LoginView has a SecureField."),
    ],
)


def test_a_handoff_seeds_a_new_sessions_memory() -> None:
    session = Session()
    session.start(handoff=HANDOFF)
    assert session.state.summary == HANDOFF.summary
    assert session.history == [
        {"role": "user", "content": [{"text": "Add a password field."}]},
        {"role": "assistant", "content": [{"text": "Done: LoginView has a SecureField."}]},
    ]
    session.say("now validate it")
    assert session.history[-1] == {"role": "user", "content": [{"text": "now validate it"}]}
    assert_valid_history(session.history)


def test_a_handoff_is_never_merged_into_a_conversation() -> None:
    session = Session()
    session.answered("Hello.")
    before = list(session.history)
    out = session.start(handoff=HANDOFF)
    assert session.history == before and session.state.summary is None
    assert any("handoff ignored" in note for note in out.notes)
    session.start(handoff=HANDOFF)  # a second sessionStart with it changes nothing either
    assert session.history == before


# ---- the interrupted final: a stopped segment is ended on screen -------------------------------


def _finals(outcome: Outcome) -> list[AssistantSpeechFinal]:
    return [e for e in outcome.events if isinstance(e, AssistantSpeechFinal)]


def test_a_barge_in_mid_stream_ends_the_segment_with_the_heard_text_marked_interrupted() -> None:
    session = Session()
    session.start(capabilities=("sentenceSpeech",))
    stream = session.say("explain")
    session.apply(stream_speak(session.state, stream, "One, two. Three four. Five", len("One, two. ")))
    out = session.apply(conductor.handle_barge_in(session.state, "One, two"))
    assert _finals(out) == [AssistantSpeechFinal(text="One, two", interrupted=True)]
    kinds = [type(e).__name__ for e in out.events]
    assert kinds.index("AssistantSpeechFinal") < len(kinds) - 1  # before idle
    wire = make_event(_finals(out)[0]).to_wire()["kind"]
    assert wire == {"assistantSpeechFinal": {"text": "One, two", "interrupted": True}}


def test_without_heard_text_the_interrupted_final_holds_what_was_sent_to_speech() -> None:
    session = Session()
    stream = session.say("explain")
    session.apply(stream_speak(session.state, stream, "One. Two and", len("One. ")))
    out = session.apply(conductor.handle_barge_in(session.state))
    assert _finals(out) == [AssistantSpeechFinal(text="One.", interrupted=True)]


def test_nothing_heard_ends_the_segment_with_an_empty_interrupted_final() -> None:
    session = Session()
    session.say("explain")  # partials may be on screen; nothing was spoken
    out = session.apply(conductor.handle_barge_in(session.state, ""))
    assert _finals(out) == [AssistantSpeechFinal(text="", interrupted=True)]


def test_a_new_request_mid_stream_ends_the_segment_before_its_thinking() -> None:
    session = Session()
    stream = session.say("explain")
    session.apply(stream_speak(session.state, stream, "Sure. The", len("Sure. ")))
    out = session.apply(conductor.handle_transcript(session.state, "stop, do this", now=3.0, settings=SETTINGS))
    assert _finals(out) == [AssistantSpeechFinal(text="Sure.", interrupted=True)]
    assert isinstance(out.events[0], AssistantSpeechFinal)  # ended before the new turn's thinking


def test_a_barge_in_during_playback_sends_no_second_final() -> None:
    session = Session()
    session.answered("It builds. Two tests fail.")
    out = session.apply(conductor.handle_barge_in(session.state, "It builds."))
    assert _finals(out) == []  # the answer's final is already on screen


def test_finals_of_complete_segments_carry_no_mark() -> None:
    assert make_event(AssistantSpeechFinal(text="Done.")).to_wire()["kind"] == {
        "assistantSpeechFinal": {"text": "Done."}
    }
