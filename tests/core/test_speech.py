"""Coalesced partials and sentence speech, decided in the pure core with a hand-held clock."""

from __future__ import annotations

import json
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome
from shared.core.messages import INTERRUPTED_MARKER
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta
from shared.core.speakable import split_answer
from shared.core.speech import Pacing, SegmentText
from shared.core.state import SessionState
from shared.core.stream import StreamReport, stream_finished, stream_speak
from shared.wire.protocol import AssistantSpeechFinal, SessionStart, ToolCall, ToolResult

SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"
SETTINGS = CoreSettings(catalog_names=frozenset({"editor.openFile"}))


def partials(deltas: list[str], pacing: Pacing, gap_s: float) -> list[str]:
    """The partials a runner posts for deltas arriving ``gap_s`` apart."""
    segment, out, now = SegmentText(pacing), [], 0.0
    for delta in deltas:
        segment.add(delta)
        if segment.partial_due(now):
            out.append(segment.partial)
            segment.shown_now(now)
        now += gap_s
    return out


def words(count: int) -> list[str]:
    return [f"word{n} " for n in range(count)]


def test_the_first_text_goes_out_at_once() -> None:
    assert partials(["Hello"], Pacing(), gap_s=0.001) == ["Hello"]


def test_a_blank_first_delta_waits_for_text() -> None:
    assert partials(["  ", " Hi"], Pacing(), gap_s=0.001) == ["Hi"]


def test_partials_are_coalesced_to_the_flush_window() -> None:
    fast = partials(words(100), Pacing(flush_ms=120, growth=0), gap_s=0.012)
    assert 8 <= len(fast) <= 12  # ~1.2 s of deltas in 120 ms windows, instead of 100 partials


def test_a_clause_end_flushes_before_the_window() -> None:
    out = partials(["Sure", ",", " one", " two"], Pacing(flush_ms=10_000, growth=0), gap_s=0.001)
    assert out == ["Sure", "Sure,"]


def test_zero_window_and_growth_give_a_partial_per_delta() -> None:
    assert partials(["a", " b", " c"], Pacing(flush_ms=0, growth=0), gap_s=0.0) == ["a", "a b", "a b c"]


@given(st.integers(min_value=50, max_value=2000))
def test_bytes_posted_stay_linear_in_the_answer(count: int) -> None:
    deltas = words(count)
    text_bytes = len("".join(deltas))
    posted = sum(len(p) for p in partials(deltas, Pacing(flush_ms=120, growth=0.25), gap_s=0.012))
    assert posted <= 6 * text_bytes  # 1/growth + 1, whatever the length (cumulative would be ~n²)


def test_every_partial_is_a_prefix_of_the_next() -> None:
    out = partials(words(300), Pacing(), gap_s=0.01)
    assert all(later.startswith(earlier) for earlier, later in pairwise(out))


def test_a_sentence_is_speakable_once_text_follows_it() -> None:
    segment = SegmentText(Pacing())
    segment.add("It builds.")
    assert segment.speakable_until() == 0  # the answer may end here: the final speaks it
    segment.add(" Two tests")
    assert segment.text[: segment.speakable_until()] == "It builds. "


def test_file_names_decimals_and_versions_do_not_end_sentences() -> None:
    segment = SegmentText(Pacing())
    segment.add("Open main.swift at line 3.5 of version 1.2 now")
    assert segment.speakable_until() == 0


def test_a_question_in_quotes_and_a_blank_line_end_sentences() -> None:
    segment = SegmentText(Pacing())
    segment.add('He asked "why?" Then\n\nNext')
    assert segment.text[: segment.speakable_until()] == 'He asked "why?" Then\n\n'


# ---- the decisions ----------------------------------------------------------------------------


def started(capable: bool) -> tuple[SessionState, str]:
    state = SessionState(session_id=SESSION, connection_id="conn-1")
    if capable:
        start = SessionStart(sessionId=SESSION, capabilities=("sentenceSpeech", "somethingNew"))
        state = conductor.handle_session_start(state, start, "conn-1", SETTINGS, now=1.0).state
        assert state.capabilities == ["sentenceSpeech"]  # unknown names are ignored
    outcome = conductor.handle_transcript(state, "explain", now=2.0, settings=SETTINGS)
    assert outcome.run_model
    return outcome.state, outcome.run_model


def speak_texts(events: list[object]) -> list[str]:
    return [json.loads(e.arguments)["text"] for e in events if isinstance(e, ToolCall) and e.name == "tts.speak"]


def finished(state: SessionState, stream_id: str, text: str) -> Outcome:
    message = ModelMessage()
    message.add(TextDelta(text))
    message.add(MessageEnd("end_turn"))
    return stream_finished(state, StreamReport(stream_id, message, text=text), SETTINGS)


def test_sentences_are_spoken_while_the_model_writes_and_the_final_has_everything() -> None:
    state, stream_id = started(capable=True)
    text = "First. Second. Third"
    first = stream_speak(state, stream_id, text, len("First. Second. "))
    assert speak_texts(first.events) == ["First. Second."]
    assert not [e for e in first.events if isinstance(e, AssistantSpeechFinal)]
    end = finished(first.state, stream_id, "First. Second. Third and last.")
    assert [e.text for e in end.events if isinstance(e, AssistantSpeechFinal)] == ["First. Second. Third and last."]
    assert speak_texts(end.events) == ["Third and last."]
    last = [e for e in end.events if isinstance(e, ToolCall)][-1]
    assert end.state.turn is not None  # idle waits for the last tts.speak's result
    sentence_call = next(e for e in first.events if isinstance(e, ToolCall))
    early = conductor.handle_tool_result(end.state, ToolResult(callId=sentence_call.call_id, result="{}"))
    assert early.events == [] and early.state.turn is not None  # a sentence's result changes nothing
    done = conductor.handle_tool_result(end.state, ToolResult(callId=last.call_id, result="{}"))
    assert [json.loads(e.arguments) for e in done.events if isinstance(e, ToolCall)] == [{"state": "idle"}]
    assert done.state.turn is None


def test_a_barge_in_keeps_only_the_spoken_sentences() -> None:
    state, stream_id = started(capable=True)
    spoke = stream_speak(state, stream_id, "Yes. I will check the", len("Yes. "))
    out = conductor.handle_barge_in(spoke.state)
    assert out.history[-1].content == [{"text": f"Yes. {INTERRUPTED_MARKER}"}]  # type: ignore[attr-defined]


def test_an_app_without_the_capability_gets_one_speak_after_the_final() -> None:
    state, stream_id = started(capable=False)
    end = finished(state, stream_id, "First. Second.")
    assert speak_texts(end.events) == ["First. Second."]


def test_only_the_turns_last_speak_is_recorded() -> None:
    state, stream_id = started(capable=True)
    spoke = stream_speak(state, stream_id, "A. B. C", len("A. B. "))
    end = finished(spoke.state, stream_id, "A. B. C.")
    own_ids = [call.call_id for call in end.state.own_calls]
    assert len(own_ids) == 1 and own_ids[0] == [e for e in end.events if isinstance(e, ToolCall)][-1].call_id


def test_after_the_first_speak_sentences_go_out_together_at_most_once_per_interval() -> None:
    segment = SegmentText(Pacing(speak_interval_ms=1000))
    assert segment.speak_due(0.0)
    segment.add("One. Two")
    segment.spoke(segment.speakable_until(), 0.0)
    segment.add(". Three. Four")
    assert not segment.speak_due(0.5)  # the app is still playing "One."
    assert segment.speak_due(1.0)
    assert segment.text[segment.spoken : segment.speakable_until()] == "Two. Three. "


# ---- inline reasoning and formulas --------------------------------------------------------------


def test_sentences_are_never_cut_inside_inline_reasoning() -> None:
    segment = SegmentText(Pacing())
    segment.add("Sure. <thinking>Plan it. Then build. Then")
    assert segment.text[: segment.speakable_until()] == "Sure. "  # the open region is not looked into
    segment.add(" test.</thinking> I'll build it. Then")
    until = segment.speakable_until()
    assert segment.text[:until] == "Sure. <thinking>Plan it. Then build. Then test.</thinking> I'll build it. "
    assert split_answer(segment.text[segment.spoken : until]).speech == "Sure. I'll build it."


def test_a_sentence_before_a_region_is_spoken_once_text_follows_the_region() -> None:
    segment = SegmentText(Pacing())
    segment.add("Done. <thinking>x. y.</thinking>")
    assert segment.speakable_until() == 0  # nothing follows yet: the answer may end here
    segment.add("Next")
    until = segment.speakable_until()
    assert segment.text[until:] == "Next" and split_answer(segment.text[:until]).speech == "Done."


def test_a_formula_is_never_cut_into_sentences() -> None:
    segment = SegmentText(Pacing())
    segment.add(r"So $n! \cdot 2$ grows. And")
    assert segment.text[: segment.speakable_until()] == r"So $n! \cdot 2$ grows. "
    segment = SegmentText(Pacing())
    segment.add("Then:\n$$\nx = 1. y = 2\n$$\nDone. Next")
    assert segment.text[: segment.speakable_until()] == "Then:\n$$\nx = 1. y = 2\n$$\nDone. "


def test_sentence_speech_reads_inline_math_as_words() -> None:
    state, stream_id = started(capable=True)
    text = r"It holds when $10^6 \mid n!$ is true. Then"
    spoke = stream_speak(state, stream_id, text, len(text) - len("Then"))
    assert speak_texts(spoke.events) == ["It holds when 10 to the power of 6 divides n factorial is true."]
