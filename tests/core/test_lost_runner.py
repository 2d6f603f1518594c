"""The stream's runner, through the pure core: one claim per stream, and a turn whose runner is
gone ends on the app's next event instead of staying "thinking". Also what the model sees of a
large tool result."""

from __future__ import annotations

import pytest

from shared.core import conductor
from shared.core.decision import CoreSettings, StreamSuperseded
from shared.core.messages import cap_tool_result
from shared.core.model_output import TextDelta
from shared.core.stream import RUNNER_LOST_LINE, StreamTaken, claim_stream, stream_speak
from shared.wire.protocol import ErrorPayload, SessionStart, ToolCall
from tests.core.test_stop_reasons import SETTINGS, Session, heard, speak_call_id, wrapper_use
from tests.history_check import assert_valid_history

THINKING = ("toolCall", "convo.setState", {"state": "thinking"})
IDLE = ("toolCall", "convo.setState", {"state": "idle"})
START_TIMEOUT_S = SETTINGS.stream_start_timeout_s
STOPPED = "the turn stopped unexpectedly"
NEVER_STARTED = "the turn never started"


def started_turn(text: str = "hello") -> tuple[Session, str]:
    session = Session()
    outcome = session.say(text)
    assert outcome.run_model
    return session, outcome.run_model


def thinking_call_id(session: Session) -> str:
    calls = [e for e in session.sent if isinstance(e, ToolCall) and e.name == "convo.setState"]
    return calls[-1].call_id


def claim(session: Session, stream_id: str, runner: str, deadline: float) -> None:
    session.apply(claim_stream(session.state, stream_id, runner, deadline=deadline))


def session_start(session: Session, now: float) -> list[object]:
    start = SessionStart(sessionId=session.state.session_id)
    outcome = session.apply(conductor.handle_session_start(session.state, start, "conn-1", SETTINGS, now=now))
    return outcome.events


# ---- claim_stream --------------------------------------------------------------------------


def test_the_first_runner_claims_the_stream_and_a_second_is_refused() -> None:
    session, stream_id = started_turn()
    claim(session, stream_id, "runner-a", deadline=session.clock + 900)
    assert session.state.turn and session.state.turn.stream
    assert (session.state.turn.stream.runner, session.state.turn.stream.deadline) == ("runner-a", session.clock + 900)
    with pytest.raises(StreamTaken):
        claim_stream(session.state, stream_id, "runner-b", deadline=session.clock + 900)
    again = claim_stream(session.state, stream_id, "runner-a", deadline=session.clock + 900)
    assert again.events == [] and again.history == []


def test_claiming_sends_nothing_and_writes_no_history() -> None:
    session, stream_id = started_turn()
    outcome = claim_stream(session.state, stream_id, "runner-a", deadline=1.0)
    assert outcome.events == [] and outcome.history == [] and outcome.run_model is None


def test_a_stream_superseded_by_a_barge_in_cannot_be_claimed() -> None:
    session, stream_id = started_turn()
    session.apply(conductor.handle_barge_in(session.state))
    with pytest.raises(StreamSuperseded):
        claim_stream(session.state, stream_id, "runner-a", deadline=session.clock + 900)


def test_a_stream_superseded_by_a_new_transcript_cannot_be_claimed_but_the_new_one_can() -> None:
    session, first = started_turn()
    second = session.say("no, something else").run_model
    assert second and second != first
    with pytest.raises(StreamSuperseded):
        claim_stream(session.state, first, "runner-a", deadline=session.clock + 900)
    claim(session, second, "runner-b", deadline=session.clock + 900)
    assert session.state.turn and session.state.turn.stream and session.state.turn.stream.runner == "runner-b"


def test_a_claimed_stream_superseded_mid_stream_stops_its_runner() -> None:
    session, stream_id = started_turn()
    claim(session, stream_id, "runner-a", deadline=session.clock + 900)
    session.apply(stream_speak(session.state, stream_id, "Half", 0))
    session.say("stop, new question")
    with pytest.raises(StreamSuperseded):
        stream_speak(session.state, stream_id, " more", 0)
    with pytest.raises(StreamSuperseded):
        claim_stream(session.state, stream_id, "runner-a", deadline=session.clock + 900)


# ---- a runner that is gone -----------------------------------------------------------------


def assert_turn_ended_by_lost_runner(session: Session, events: list[object], reason: str, said: str = "") -> None:
    assert heard(events) == [
        *([("final", said)] if said else []),
        ("error", "conductor_error"),
        ("final", RUNNER_LOST_LINE),
        ("toolCall", "tts.speak", {"text": RUNNER_LOST_LINE}),
    ]
    assert [e.message for e in events if isinstance(e, ErrorPayload)] == [reason]
    assert session.state.turn is not None and session.state.turn.stream is None
    idle = session.answer(speak_call_id(session.sent))
    assert heard(idle.events) == [IDLE]
    assert session.state.turn is None
    assert session.history[-1]["role"] == "assistant"
    assert_valid_history(session.history)
    nxt = session.say("again")
    assert nxt.run_model and heard(nxt.events) == [THINKING]


def test_a_claimed_stream_held_past_its_deadline_ends_on_session_start() -> None:
    session, stream_id = started_turn()
    deadline = session.clock + 900
    claim(session, stream_id, "runner-a", deadline=deadline)
    session.apply(stream_speak(session.state, stream_id, "I was saying", 0))
    events = session_start(session, now=deadline + 1)
    assert session.history[1]["content"][0]["text"].startswith("I was saying")  # kept, marked
    assert_turn_ended_by_lost_runner(session, events, STOPPED, said="I was saying")


def test_a_claimed_stream_held_past_its_deadline_ends_on_an_own_call_result() -> None:
    session, stream_id = started_turn()
    deadline = session.clock + 900
    claim(session, stream_id, "runner-a", deadline=deadline)
    session.clock = deadline + 1
    outcome = session.answer(thinking_call_id(session))  # the app acknowledges "thinking" late
    assert_turn_ended_by_lost_runner(session, outcome.events, STOPPED)
    with pytest.raises(StreamSuperseded):  # a runner that was only slow stops at its next delta
        stream_speak(session.state, stream_id, "late", 0)


def test_an_unclaimed_stream_older_than_the_start_timeout_ends_on_session_start() -> None:
    session, stream_id = started_turn()
    launched = session.clock
    events = session_start(session, now=launched + START_TIMEOUT_S + 1)
    assert_turn_ended_by_lost_runner(session, events, NEVER_STARTED)
    with pytest.raises(StreamSuperseded):  # a runner delivered after all finds nothing to run
        claim_stream(session.state, stream_id, "runner-late", deadline=launched + 2000)


def test_an_unclaimed_stream_older_than_the_start_timeout_ends_on_an_own_call_result() -> None:
    session, _ = started_turn()
    session.clock += START_TIMEOUT_S + 1
    outcome = session.answer(thinking_call_id(session))
    assert_turn_ended_by_lost_runner(session, outcome.events, NEVER_STARTED)


def test_the_start_timeout_is_a_setting() -> None:
    session, _ = started_turn()
    quick = CoreSettings(catalog_names=SETTINGS.catalog_names, stream_start_timeout_s=5)
    start = SessionStart(sessionId=session.state.session_id)
    outcome = conductor.handle_session_start(session.state, start, "conn-1", quick, now=session.clock + 6)
    assert ("error", "conductor_error") in heard(outcome.events)


@pytest.mark.parametrize("age", [0.0, 1.0, START_TIMEOUT_S - 1])
def test_a_fresh_unclaimed_stream_is_left_alone(age: float) -> None:
    session, stream_id = started_turn()
    before = session.state
    events = session_start(session, now=session.clock + age)
    assert events == [] and session.state.turn == before.turn
    claim(session, stream_id, "runner-a", deadline=session.clock + 900)


def test_a_claimed_stream_within_its_deadline_is_left_alone_even_long_after_launch() -> None:
    session, stream_id = started_turn()
    claim(session, stream_id, "runner-a", deadline=session.clock + 900)
    session.clock += START_TIMEOUT_S + 300  # a long answer, still within the runner's time
    outcome = session.answer(thinking_call_id(session))
    assert outcome.events == []
    session.apply(stream_speak(session.state, stream_id, "still going", 0))
    assert session_start(session, now=session.clock) == []


def test_a_session_start_without_a_clock_ends_nothing() -> None:
    session, _ = started_turn()
    start = SessionStart(sessionId=session.state.session_id)
    assert conductor.handle_session_start(session.state, start, "conn-1", SETTINGS).events == []


def test_a_stream_the_runner_resumes_itself_stays_its_own() -> None:
    """Every tool use malformed: the core hands the same runner a new stream at once (the runner
    goes on without being launched again). That stream must not look lost while its runner, well
    within its deadline, is still streaming it: an own-call result then must not end the turn."""
    session, stream_id = started_turn()
    deadline = session.clock + 900
    claim(session, stream_id, "runner-a", deadline=deadline)
    session.clock += 120  # the first reply was long; the runner has most of its time left
    retry = session.stream(stream_id, [TextDelta("Let me try."), *wrapper_use("tu-1", {"arguments": {}})], "tool_use")
    assert retry.run_model
    session.clock += 1
    outcome = session.answer(speak_call_id(session.sent))  # the app spoke "Let me try."
    assert heard(outcome.events) == []
    session.apply(stream_speak(session.state, retry.run_model, "Done.", 0))


def test_a_model_call_result_never_ends_a_turn_waiting_for_results() -> None:
    session, stream_id = started_turn()
    claim(session, stream_id, "runner-a", deadline=session.clock + 10)
    use = wrapper_use("tu-1", {"name": "project.search", "arguments": {"q": "x"}})
    session.stream(stream_id, use, "tool_use")
    session.clock += 3600  # the build took an hour: no stream is in flight, nothing is lost
    outcome = session.answer("tu-1", '{"matches":0}')
    assert outcome.run_model and heard(outcome.events) == []


# ---- what the model sees of a tool result --------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 15_999, 16_000])
def test_a_result_up_to_the_cap_is_unchanged(size: int) -> None:
    text = "x" * size
    assert cap_tool_result(text, 16_000) == text


@pytest.mark.parametrize("size", [16_001, 40_000, 1_234_567])
def test_a_result_over_the_cap_is_cut_visibly_with_its_original_size(size: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    capped = cap_tool_result(text, 16_000)
    assert capped.startswith(text[:16_000])
    marker = capped[16_000:]
    assert marker.startswith("\n[truncated:") and f"{size:,} characters" in marker and "16,000" in marker
    assert len(marker) < 200


def test_the_cap_counts_characters_not_bytes() -> None:
    text = "é" * 10_000  # 20,000 bytes in UTF-8
    assert cap_tool_result(text, 16_000) == text


def _one_call_round(settings: CoreSettings) -> Session:
    session = Session(settings)
    stream_id = session.say("read it").run_model
    assert stream_id
    session.stream(stream_id, wrapper_use("tu-1", {"name": "project.search", "arguments": {}}), "tool_use")
    return session


@pytest.mark.parametrize("failed", [False, True], ids=["result", "error"])
def test_handle_tool_result_caps_what_goes_to_the_model(failed: bool) -> None:
    session = _one_call_round(SETTINGS)
    big = "r" * 40_000
    if failed:
        session.answer("tu-1", None, error=big)
    else:
        session.answer("tu-1", big)
    block = session.history[-1]["content"][0]["toolResult"]
    text = block["content"][0]["text"]
    assert block["status"] == ("error" if failed else "success")
    assert text.startswith("r" * 16_000) and not text.startswith("r" * 16_001)
    assert "40,000 characters" in text
    assert_valid_history(session.history)


def test_handle_tool_result_uses_the_configured_cap() -> None:
    settings = CoreSettings(catalog_names=SETTINGS.catalog_names, max_tool_result_chars=500)
    session = _one_call_round(settings)
    session.answer("tu-1", "z" * 501)
    text = session.history[-1]["content"][0]["toolResult"]["content"][0]["text"]
    assert text.startswith("z" * 500) and not text.startswith("z" * 501) and "501 characters" in text
    small = _one_call_round(settings)
    small.answer("tu-1", "z" * 500)
    assert small.history[-1]["content"][0]["toolResult"]["content"][0]["text"] == "z" * 500
