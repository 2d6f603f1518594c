"""A segment's first speech may be its first phrase: where a phrase ends, what never is one, the
``wholeSentences`` opt-out, and that speech in phrases says exactly what speech in sentences says."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta
from shared.core.speech import NEVER, NOT_YET, PHRASE_MAX_CHARS, Pacing, SegmentText, first_phrase_end
from shared.core.state import SessionState
from shared.core.stream import StreamReport, stream_finished, stream_speak
from shared.wire.protocol import SENTENCE_SPEECH, WHOLE_SENTENCES, AssistantSpeechFinal, SessionStart, ToolCall

SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"
SETTINGS = CoreSettings(catalog_names=frozenset({"editor.openFile"}))
PHRASES = (SENTENCE_SPEECH,)
SENTENCES = (SENTENCE_SPEECH, WHOLE_SENTENCES)


def phrase(text: str, min_words: int = 3) -> str | int:
    """The first phrase of ``text`` as ``first_phrase_end`` finds it, or its verdict."""
    end = first_phrase_end(text, min_words)
    return text[:end] if end >= 0 else end


# ---- where a phrase ends ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("If the build fails, check the signing settings", "If the build fails, "),
        ("This happens because the closure captures self; use a weak reference", None),
        ("Here's the fix: move the call into viewDidLoad", "Here's the fix: "),
        ("The test failed - the mock was never reset", "The test failed - "),
        ("The short answer is yes \u2014 you just add it", "The short answer is yes \u2014 "),
        ("The test failed \u2013 the mock was never reset", "The test failed \u2013 "),
        ("There are 1,204 warnings in the project, most of them old", "There are 1,204 warnings in the project, "),
        ("Yes, I can do that, but it takes a while", "Yes, I can do that, "),
        ("First, open the project, then build it", "First, open the project, "),
        ("Looking at the stack trace, the crash comes from", "Looking at the stack trace, "),
        ("  When it loads, the view asks for data", "  When it loads, "),  # a little indentation is prose
    ],
)
def test_a_phrase_ends_at_a_clause_boundary_after_enough_words(text: str, expected: str | None) -> None:
    if expected is None:
        expected = text[: text.index("; ") + 2]
    assert phrase(text) == expected


def test_fewer_words_than_the_minimum_are_no_phrase() -> None:
    assert phrase("Yes, it works and the tests pass") == NOT_YET  # "Yes," is one word: no boundary yet
    assert phrase("In short, it works and the tests pass") == NOT_YET
    assert phrase("If it fails, check the logs", min_words=4) == NOT_YET
    assert phrase("If the build fails, check the logs", min_words=4) == "If the build fails, "


def test_a_comma_waits_for_two_whole_words_after_it() -> None:
    assert phrase("If the build fails,") == NOT_YET
    assert phrase("If the build fails, ") == NOT_YET
    assert phrase("If the build fails, check") == NOT_YET  # "check" may go on: "checkout,"
    assert phrase("If the build fails, check the") == NOT_YET  # "the" may be "then,"
    assert phrase("If the build fails, check the ") == "If the build fails, "


@pytest.mark.parametrize(
    "text",
    [
        "It supports Swift, Kotlin, and Go out of the box.",
        "It supports Swift, Kotlin and Go out of the box.",
        "You can model this with a struct, a class, or an enum.",
        "You can model this with a struct, a class or an enum.",
        "Pick red, green, blue, or yellow for the theme.",
    ],
)
def test_a_list_being_built_is_never_cut(text: str) -> None:
    for end in range(len(text) + 1):
        assert phrase(text[:end]) in (NOT_YET, NEVER), text[:end]


@pytest.mark.parametrize(
    "text",
    [
        "Open the file at 3.5, then the other one later",  # a decimal
        "Version 2.3.1 of the package, which we use here, broke it",  # a version
        "Use e.g., a struct here, and then go on with it",  # an abbreviation
        "Open main.swift in the editor, then build it all",  # a file name
        "Edit Sources/App/Client in the editor, then build it all",  # a path
        "See https://example.com for the details, it has them all",  # a URL
        "Run `swift build` in the terminal, then run the tests",  # inline code
        "The value of $x_1$ is too large, so we divide it first",  # inline math
        r"The value of \(x\) is too large, so we divide it first",  # inline math
        "**Note** that the build is slow, so be patient with it",  # emphasis
        "The _real_ problem is the cache, so clear it first",  # emphasis
        "# Fixing the build, step by step and slowly",  # a heading
        "- Clean the build folder, then rebuild it all",  # a list item
        "1. Clean the build folder, then rebuild it all",  # a numbered item
        "> Clean the build folder, then rebuild it all",  # a quote
        "| name | value |, then rebuild it all",  # a table
        "    let answer = compute(value, other, more)",  # indented code
        "\tlet answer be the value, other and more",  # indented code
        "<thinking>The user wants the build, so run it</thinking>",  # inline reasoning
        'He said "the build is slow, so be patient" to me',  # a quotation
        "The helper (the one we wrote, not theirs) is slow",  # a parenthesis
        "Run it with --verbose on the server, then check the log",  # a flag
        "The result is x -1 for the inputs, then it is zero",  # a minus, not a dash
        "The build failed\u2014the key is missing and needs adding back",  # an unspaced dash
        "Done! The build passed, and the tests are green",  # a sentence ends first
        "Here are the steps:\n1. Clean the build folder, then rebuild",  # a list follows the colon
        "Here are the steps to take:\n\nClean the build folder, then rebuild",
        "The key is:value and the other, then more of it",  # no space after the colon
        "The counts were 1,2,3 in the first run, then zero",  # no space after the comma
    ],
)
def test_code_numbers_markup_and_lists_are_never_a_phrase(text: str) -> None:
    for end in range(len(text) + 1):
        assert phrase(text[:end]) in (NOT_YET, NEVER), text[:end]


def test_a_number_with_thousands_still_arriving_is_waited_for() -> None:
    assert phrase("There are about 1,") == NOT_YET
    assert phrase("There are about 1,0") == NOT_YET
    assert phrase("There are about 1,00") == NOT_YET
    assert phrase("There are about 1,000 files, so indexing takes long") == "There are about 1,000 files, "


def test_the_first_phrase_must_end_within_its_limit() -> None:
    long = " ".join(["word"] * (PHRASE_MAX_CHARS // 5 + 2))
    assert phrase(long + ", and then the rest") == NEVER
    assert phrase("word " * 3 + "more, then the rest of it") == "word word word more, "


# ---- the segment -------------------------------------------------------------------------------


def test_the_segment_offers_the_phrase_only_when_the_app_allows_it() -> None:
    segment = SegmentText(Pacing())
    segment.add("If the build fails, check the signing")
    assert segment.speakable_until() == 0  # no capabilities given: whole sentences, as before
    assert segment.speakable_until(SENTENCES) == 0
    assert segment.text[: segment.speakable_until(PHRASES)] == "If the build fails, "


def test_a_complete_sentence_goes_before_any_phrase() -> None:
    segment = SegmentText(Pacing())
    segment.add("Yes. If the build fails, check the signing")
    assert segment.text[: segment.speakable_until(PHRASES)] == "Yes. "


def test_only_the_first_speech_of_a_segment_is_a_phrase() -> None:
    segment = SegmentText(Pacing(speak_interval_ms=1000))
    segment.add("If the build fails, check the signing settings, then build")
    until = segment.speakable_until(PHRASES)
    segment.spoke(until, 0.0)
    assert segment.after_phrase
    assert segment.speak_due(0.01)  # the app has only the phrase: the rest goes when it is complete
    assert segment.speakable_until(PHRASES) == until  # no second phrase
    segment.add(" it again. And")
    rest = segment.speakable_until(PHRASES)
    assert segment.text[until:rest] == "check the signing settings, then build it again. "
    segment.spoke(rest, 0.02)
    assert not segment.after_phrase and not segment.speak_due(0.5)  # then once per interval again
    segment.next_segment()
    segment.add("When it loads, the view asks for")
    assert segment.text[: segment.speakable_until(PHRASES)] == "When it loads, "


def test_a_phrase_is_never_taken_inside_a_block_still_being_written() -> None:
    segment = SegmentText(Pacing())
    segment.add("<thin")  # a tag still arriving
    assert segment.speakable_until(PHRASES) == 0
    segment = SegmentText(Pacing(phrase_min_words=0))  # 0: never a phrase
    segment.add("If the build fails, check the signing")
    assert segment.speakable_until(PHRASES) == 0


# ---- the capability and the property -------------------------------------------------------------


def started(capabilities: tuple[str, ...]) -> tuple[SessionState, str]:
    state = SessionState(session_id=SESSION, connection_id="conn-1")
    start = SessionStart(sessionId=SESSION, capabilities=capabilities)
    state = conductor.handle_session_start(state, start, "conn-1", SETTINGS, now=1.0).state
    assert state.capabilities == sorted(capabilities)  # both are known
    outcome = conductor.handle_transcript(state, "explain", now=2.0, settings=SETTINGS)
    assert outcome.run_model
    return outcome.state, outcome.run_model


@dataclass
class Heard:
    speaks: list[str] = field(default_factory=list)
    cuts: list[int] = field(default_factory=list)  # where each tts.speak while streaming ended
    finals: list[str] = field(default_factory=list)


def stream(
    deltas: list[str], capabilities: tuple[str, ...], gaps_ms: list[int], pacing: Pacing, *, before: bool = False
) -> Heard:
    """One message as the message stream speaks it (``speakable_until(state.capabilities)`` on each
    flush; with ``before``, ``speakable_until()`` as it was called before phrases), ``gaps_ms``
    apart, through the core's decisions; then its final."""
    state, stream_id = started(capabilities)
    heard = Heard()
    segment = SegmentText(pacing)
    message = ModelMessage()
    now = 0.0

    def apply(outcome: Outcome) -> SessionState:
        for event in outcome.events:
            if isinstance(event, AssistantSpeechFinal):
                heard.finals.append(event.text)
            elif isinstance(event, ToolCall) and event.name == "tts.speak":
                heard.speaks.append(json.loads(event.arguments)["text"])
        return outcome.state

    caps: Collection[str] | None = None if before else state.capabilities
    for delta, gap in zip(deltas, gaps_ms, strict=True):
        now += gap / 1000
        message.add(TextDelta(delta))
        segment.add(delta)
        first_ready = segment.spoken == 0 and segment.speakable_until(caps) > 0
        if segment.partial_due(now) or first_ready:
            until = segment.speakable_until(caps) if segment.speak_due(now) else segment.spoken
            if until > segment.spoken:
                state = apply(stream_speak(state, stream_id, segment.text, until))
                segment.spoke(until, now)
                heard.cuts.append(until)
            segment.shown_now(now)
    message.add(MessageEnd("end_turn"))
    apply(stream_finished(state, StreamReport(stream_id, message, text=segment.text), SETTINGS))
    return heard


def test_an_app_that_sends_whole_sentences_hears_no_phrase() -> None:
    text = "If the build fails, check the signing settings. Then build it again."
    deltas = [text[i : i + 6] for i in range(0, len(text), 6)]
    gaps = [40] * len(deltas)
    phrases = stream(deltas, PHRASES, gaps, Pacing())
    sentences = stream(deltas, SENTENCES, gaps, Pacing())
    assert phrases.speaks[0] == "If the build fails,"
    assert sentences.speaks[0] == "If the build fails, check the signing settings."
    assert " ".join(phrases.speaks) == " ".join(sentences.speaks) == text
    assert phrases.finals == sentences.finals == [text]


_PLAIN = ["If", "the", "build", "fails", "check", "signing", "Swift", "Kotlin", "and", "or", "a", "struct",
          "I'll", "built-in", "1,000", "it", "runs", "then", "when", "we"]  # fmt: skip
_ODD = ["3.5", "v2.3.1", "e.g.", "main.swift", "`swift build`", "https://example.com/a", "Sources/App/main.swift",
        "**bold**", "_it_", "$x_1$", "(see", "this)", '"quoted', 'text"', "--flag", "-1", "<thinking>",
        "</thinking>", "#", "|"]  # fmt: skip
_MARKS = [", "] * 6 + [". ", "; ", ": ", " - ", " \u2014 ", "? ", ":\n", "\n\n", "\n- ", "\n1. ", ",\n", " "]


@st.composite
def answers(draw: st.DrawFn) -> str:
    """Clauses of one to seven words (some of them code, numbers, markup) between boundaries."""
    rnd = draw(st.randoms(use_true_random=False))
    odd = rnd.choice([0.0, 0.05, 0.2])
    parts = []
    for _ in range(rnd.randint(1, 8)):
        words = [rnd.choice(_ODD) if rnd.random() < odd else rnd.choice(_PLAIN) for _ in range(rnd.randint(1, 7))]
        parts.append(" ".join(words) + rnd.choice(_MARKS))
    if rnd.random() < 0.3:
        parts.insert(rnd.randint(0, len(parts)), "\n```swift\nlet a = 1, b = 2\n```\n")
    return "".join(parts) + rnd.choice(["", ".", " and"])


@st.composite
def streamed(draw: st.DrawFn) -> tuple[list[str], list[int]]:
    text = draw(answers())
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text) // 2)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if text[a:b]]
    gaps = draw(st.lists(st.sampled_from([0, 10, 37, 62, 150, 1200]), min_size=len(deltas), max_size=len(deltas)))
    return deltas, gaps


@settings(max_examples=300, deadline=None)
@given(streamed())
def test_speech_in_phrases_says_exactly_what_speech_in_sentences_says(case: tuple[list[str], list[int]]) -> None:
    deltas, gaps = case
    text = "".join(deltas)
    fast = Pacing(flush_ms=0, growth=0, speak_interval_ms=0)  # the same flushes in both: only the phrase differs
    phrases = stream(deltas, PHRASES, gaps, fast)
    sentences = stream(deltas, SENTENCES, gaps, fast)
    assert " ".join(phrases.speaks) == " ".join(sentences.speaks)  # nothing lost, nothing said twice
    assert phrases.finals == sentences.finals  # the final: the model's words, whatever was spoken
    assert phrases.cuts == sorted(set(phrases.cuts)) and all(0 < cut <= len(text) for cut in phrases.cuts)
    if phrases.cuts and phrases.cuts[0] not in sentences.cuts:  # a phrase went first: it ends at a boundary
        assert text[: phrases.cuts[0]].rstrip()[-1] in ",;:-\u2013\u2014"


@settings(max_examples=200, deadline=None)
@given(streamed())
def test_on_any_pacing_speech_in_phrases_covers_the_answer_once(case: tuple[list[str], list[int]]) -> None:
    deltas, gaps = case
    phrases = stream(deltas, PHRASES, gaps, Pacing())
    sentences = stream(deltas, SENTENCES, gaps, Pacing())
    # the same words; what may differ is a sentence's last mark before a card's pointer ("Then:"
    # or "Then. I've put the code on screen."), which depends on whether the pointer is in the
    # same tts.speak: as it does for whole sentences arriving at other times
    assert said(phrases.speaks) == said(sentences.speaks)
    assert phrases.finals == sentences.finals


def said(speaks: list[str]) -> list[str]:
    return [word.rstrip(".,;:!?") for word in " ".join(speaks).split()]


@settings(max_examples=200, deadline=None)
@given(streamed())
def test_whole_sentences_keeps_the_speech_of_before(case: tuple[list[str], list[int]]) -> None:
    deltas, gaps = case
    now = stream(deltas, SENTENCES, gaps, Pacing())
    before = stream(deltas, PHRASES, gaps, Pacing(), before=True)
    assert (now.speaks, now.cuts, now.finals) == (before.speaks, before.cuts, before.finals)


def test_a_list_items_number_on_a_later_line_never_ends_a_sentence() -> None:
    segment = SegmentText(Pacing())
    segment.add("Do these things\n1. Build it:\nThen wait")
    assert segment.speakable_until() == 0  # "1. " is the item's number, on the list's line
    segment.add(". Done")
    assert segment.text[: segment.speakable_until()] == "Do these things\n1. Build it:\nThen wait. "
