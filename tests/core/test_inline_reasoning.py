"""Reasoning written inline (Amazon Nova's ``<thinking>…</thinking>``): never shown nor spoken, however
the stream splits it, while the history keeps the model's words as written."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome
from shared.core.inline_reasoning import find_reasoning, pending_tag, reasoning_words, visible, without_reasoning
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta, ToolUseRequest, ToolUseStarted
from shared.core.speakable import split_answer, unfinished_block_start
from shared.core.speech import Pacing, SegmentText
from shared.core.state import SessionState
from shared.core.stream import CUT_OFF_LINE, StreamReport, stream_finished, stream_speak, stream_tool_started
from shared.wire.protocol import AssistantSpeechFinal, SessionStart, ToolCall

SESSION = "3d1f6a2b-7c4e-4f5a-9b8c-0a1b2c3d4e5f"
SETTINGS = CoreSettings(catalog_names=frozenset({"build.run"}))
NOVA = "<thinking>The user wants the build run. I should call build.run.</thinking>I'll run the build."


# ---- the scanner's first stage ------------------------------------------------------------------


def test_a_region_is_cut_out_wherever_it_sits() -> None:
    assert without_reasoning(NOVA) == "I'll run the build."
    assert without_reasoning("Sure. <thinking>hmm</thinking>Done.") == "Sure. Done."
    assert without_reasoning("<thinking>a</thinking>\n\nOne.<thinking>b. c.</thinking> Two.") == "\n\nOne. Two."


def test_an_unclosed_region_hides_everything_after_it() -> None:
    assert without_reasoning("Hi. <thinking>still going. More") == "Hi. "
    assert find_reasoning("Hi. <thinking>x").open_at == 4


def test_a_stray_closing_tag_is_not_shown() -> None:
    assert without_reasoning("Done.</thinking> Next.") == "Done. Next."


def test_a_tag_in_code_is_the_answer_talking_about_it() -> None:
    fenced = 'Strip it:\n```python\nre.sub(r"<thinking>.*?</thinking>", "", text)\n```\nDone.'
    assert without_reasoning(fenced) == fenced
    inline = "Nova wraps its reasoning in `<thinking>` tags. Strip them."
    assert without_reasoning(inline) == inline


def test_offsets_map_between_the_visible_and_the_written_text() -> None:
    text = "A. <thinking>x</thinking>B. <thinking>y</thinking>C."
    shown = visible(text)
    assert shown.text == "A. B. C."
    assert text[shown.raw(3) :] == "B. <thinking>y</thinking>C."  # a region right at the offset is before it
    assert shown.offset(text.index("B")) == 3 and shown.offset(text.index("C")) == 6


def test_a_tag_still_arriving_is_held_back() -> None:
    for cut in range(1, len("<thinking>")):
        assert pending_tag("Sure. " + "<thinking>"[:cut]) == 6
        assert unfinished_block_start("Sure. " + "<thinking>"[:cut]) == 6
    assert pending_tag("a < b") is None and pending_tag("x <") == 2
    assert unfinished_block_start("Sure. <thinking>The user") == 6
    assert unfinished_block_start("<thinking>a</thinking>Done.") is None


def test_the_display_and_speech_of_a_complete_answer_leave_it_out() -> None:
    answer = split_answer("<thinking>Use a code block.\n- one\n```swift\nlet x\n```</thinking>Here it is.")
    assert (answer.display, answer.speech, answer.cards) == ("Here it is.", "Here it is.", [])


# ---- through the core, as the runner streams -----------------------------------------------------


@dataclass
class Seen:
    partials: list[str] = field(default_factory=list)
    finals: list[str] = field(default_factory=list)
    speaks: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)

    def everything(self) -> list[str]:
        return [*self.partials, *self.finals, *self.speaks]


def stream(deltas: list[str], *, sentence_speech: bool = True, tool: bool = False, stop: str = "") -> Seen:
    """One model message through SegmentText and the core's decisions, a partial per delta."""
    state = SessionState(session_id=SESSION, connection_id="conn-1")
    if sentence_speech:
        start = SessionStart(sessionId=SESSION, capabilities=("sentenceSpeech",))
        state = conductor.handle_session_start(state, start, "conn-1", SETTINGS, now=1.0).state
    started = conductor.handle_transcript(state, "run the build", now=2.0, settings=SETTINGS)
    state, stream_id = started.state, started.run_model
    assert stream_id
    seen = Seen()

    def apply(outcome: Outcome) -> None:
        nonlocal state
        state = outcome.state
        for event in outcome.events:
            if isinstance(event, AssistantSpeechFinal):
                seen.finals.append(event.text)
            elif isinstance(event, ToolCall) and event.name == "tts.speak":
                seen.speaks.append(json.loads(event.arguments)["text"])
        seen.history += [block["text"] for op in outcome.history for block in op.content if "text" in block]

    segment = SegmentText(Pacing(flush_ms=0, growth=0, speak_interval_ms=0))
    message = ModelMessage()
    for delta in deltas:
        message.add(TextDelta(delta))
        segment.add(delta)
        if segment.partial_due(0.0):
            if sentence_speech and (until := segment.speakable_until()) > segment.spoken:
                apply(stream_speak(state, stream_id, segment.text, until))
                segment.spoke(until, 0.0)
            if partial := segment.partial:
                seen.partials.append(partial)
            segment.shown_now(0.0)
    if tool:
        message.add(ToolUseStarted("tu-1", "tool_call"))
        apply(stream_tool_started(state, stream_id, text=segment.text))
        segment.next_segment()
        message.add(ToolUseRequest("tu-1", "tool_call", {"name": "build.run", "arguments": {}}))
    message.add(MessageEnd(stop or ("tool_use" if tool else "end_turn")))
    apply(stream_finished(state, StreamReport(stream_id, message, text=segment.text), SETTINGS))
    if state.turn is not None and state.turn.tools is not None:  # stored with the tool results
        seen.history += [block["text"] for block in state.turn.tools.assistant_content if "text" in block]
    return seen


def test_nova_thinking_then_text_then_a_tool_use_shows_and_speaks_only_the_text() -> None:
    for sentence_speech in (True, False):
        seen = stream([NOVA[i : i + 3] for i in range(0, len(NOVA), 3)], sentence_speech=sentence_speech, tool=True)
        assert seen.finals == ["I'll run the build."]
        assert " ".join(seen.speaks) == "I'll run the build."
        assert all("I'll run the build.".startswith(p) for p in seen.partials)
        assert NOVA in seen.history  # the model's words, as written


def test_a_message_of_only_thinking_and_a_tool_use_shows_the_plan_without_tags_and_says_nothing() -> None:
    thinking = "<thinking>The user wants the build run. I should call build.run.</thinking>\n"
    seen = stream([thinking[i : i + 4] for i in range(0, len(thinking), 4)], tool=True)
    assert seen.finals == ["The user wants the build run. I should call build.run."]
    assert seen.speaks == [] and seen.partials == []
    assert thinking.strip() in seen.history[0]


def test_a_message_of_only_thinking_that_ends_the_turn_shows_nothing() -> None:
    thinking = "<thinking>Nothing to add.</thinking>"
    seen = stream([thinking[i : i + 5] for i in range(0, len(thinking), 5)])
    assert seen.finals == [] and seen.speaks == [] and seen.partials == []


def test_an_unclosed_region_at_the_message_end_is_never_shown() -> None:
    seen = stream(["Sure. ", "<thinking>Now I ", "should. Check it. Yes"])
    assert seen.finals == ["Sure."] and seen.speaks == ["Sure."]


def test_a_cut_off_message_inside_its_thinking_speaks_only_what_came_before_and_the_line() -> None:
    seen = stream(["Right. ", "<thin", "king>The user asked"], stop="max_tokens")
    assert seen.finals == [f"Right.\n\n{CUT_OFF_LINE}"]
    assert " ".join(seen.speaks) == f"Right. {CUT_OFF_LINE}"


def test_the_thinking_split_at_every_position_never_shows_nor_speaks_any_of_it() -> None:
    text = "Sure. <thinking>Plan: build. Then test!</thinking>I'll build it. Then <thinking>x</thinking>test it."
    for sentence_speech in (True, False):
        for cut in range(1, len(text)):
            seen = stream([text[:cut], text[cut:]], sentence_speech=sentence_speech)
            assert seen.finals == ["Sure. I'll build it. Then test it."]
            assert not any(word in said for said in seen.everything() for word in ("Plan", "<", "thinking", " x"))
    one_by_one = stream(list(text))
    assert one_by_one.finals == ["Sure. I'll build it. Then test it."]
    assert " ".join(one_by_one.speaks) == "Sure. I'll build it. Then test it."


# Every word inside a region is one of these, and none is ever used outside one.
SECRET = st.sampled_from(
    ["Zorblat", "Quixvo", "Mibbet.", "Frozzle!", "Wuggen?", "- Yarrow", "```", "**Plink**", "\n\n"]
)
PROSE = st.sampled_from(
    [
        *("Sure.", "I'll run the build", "It passed!", "Two tests failed:", "- one", "\n\n", "ok,", "`x`"),
        *("\n```swift\nlet x\n```\n", "$x^2$ and $5", "1. a\n2. b\n"),
    ]
)
REGION = st.lists(SECRET, min_size=1, max_size=6).map(lambda words: "<thinking>" + " ".join(words) + "</thinking>")
UNCLOSED = st.lists(SECRET, max_size=4).map(lambda words: "<thinking>" + " ".join(words))


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.one_of(PROSE, REGION), min_size=1, max_size=8),
    unclosed=st.one_of(st.just(""), UNCLOSED),
    cuts=st.sets(st.integers(min_value=1, max_value=400), max_size=30),
    sentence_speech=st.booleans(),
    tool=st.booleans(),
)
def test_no_split_of_a_text_with_thinking_ever_shows_or_speaks_any_of_it(
    parts: list[str], unclosed: str, cuts: set[int], sentence_speech: bool, tool: bool
) -> None:
    text = " ".join(parts) + unclosed
    bounds = [0, *sorted(cut for cut in cuts if cut < len(text)), len(text)]
    deltas = [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    seen = stream(deltas, sentence_speech=sentence_speech, tool=tool)
    plan_only = tool and not without_reasoning(text).strip() and reasoning_words(text)
    shown = [final for final in seen.finals if not plan_only or final != reasoning_words(text)]
    for said in [*seen.speaks, *seen.partials, *shown]:
        for secret in ("Zorblat", "Quixvo", "Mibbet", "Frozzle", "Wuggen", "Yarrow", "Plink", "<", "thinking"):
            assert secret not in said, (secret, said, deltas)
    assert all("<" not in final and "thinking" not in final for final in seen.finals)
    assert not plan_only or seen.finals == [reasoning_words(text)]  # a plan alone is shown, never said
    assert text.strip() in " ".join(seen.history) or not text.strip()  # the history keeps it as written
