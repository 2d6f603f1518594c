"""Speculative turns in the pure core: the model starts on a stable partial transcript, and the
final's commit promotes the speculation when it reads the same or drops it. Nothing of a
speculation reaches the app before the final confirms it: no event, no history, no seq."""

from __future__ import annotations

import string

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from shared.core import conductor, connection, session_index, speculation
from shared.core.background_report import REPORT_MARKER
from shared.core.decision import CoreSettings, Outcome, StreamSuperseded
from shared.core.history_ops import AppendMessage
from shared.core.messages import Message
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta
from shared.core.speculation import Leave, Speculate, SpeculationSettings, Wait, WatchStep
from shared.core.state import BackgroundJob, Turn
from shared.core.stream import (
    StreamReport,
    claim_stream,
    stream_failed,
    stream_finished,
    stream_speak,
    stream_tool_started,
)
from shared.wire.protocol import ErrorCode, SessionStart, ToolCall, ToolResult
from tests.core.test_stop_reasons import SETTINGS, Session, heard
from tests.history_check import assert_valid_history

SPEC = SpeculationSettings(enabled=True)
RUNNER = "runner-w"
LIFE_S = 900.0  # the watcher invocation's time
THINKING = ("toolCall", "convo.setState", {"state": "thinking"})
PARTIAL = "what time is it"


class Speech(Session):
    """A session the person speaks to: partials, the watcher's steps and the final, applied in order."""

    def __init__(self, core: CoreSettings = SETTINGS, spec: SpeculationSettings = SPEC) -> None:
        super().__init__(core)
        self.spec = spec
        self.watcher: str | None = None

    def hear(self, text: str, said_at: float | None = None) -> Outcome:
        outcome = self.apply(
            speculation.handle_partial(self.state, text, now=self.clock, settings=self.spec, said_at=said_at)
        )
        if outcome.watch is not None:
            self.watcher = outcome.watch
        return outcome

    def final(self, text: str) -> Outcome:
        return self.apply(conductor.handle_transcript(self.state, text, now=self.clock, settings=self.settings))

    def take(self, runner: str = RUNNER) -> Outcome:
        assert self.watcher is not None
        return self.apply(speculation.take_watch(self.state, self.watcher, runner, deadline=self.clock + LIFE_S))

    def step(self, runner: str = RUNNER) -> WatchStep:
        assert self.watcher is not None
        return speculation.watch_step(self.state, self.watcher, runner, now=self.clock, settings=self.spec)

    def start(self, key: str, runner: str = RUNNER) -> Outcome:
        assert self.watcher is not None
        return self.apply(
            speculation.start_speculation(
                self.state,
                self.watcher,
                runner,
                key,
                now=self.clock,
                deadline=self.clock + LIFE_S,
                settings=self.spec,
            )
        )

    def speculate(self) -> str:
        """The watcher's next step is to speculate: it does; returns the speculation's stream id."""
        step = self.step()
        assert isinstance(step, Speculate), step
        self.start(step.key)
        return self.stream_id

    @property
    def stream_id(self) -> str:
        turn = self.state.turn
        assert turn is not None and turn.stream is not None
        return turn.stream.stream_id

    @property
    def deadline(self) -> float:
        turn = self.state.turn
        assert turn is not None and turn.stream is not None and turn.stream.deadline is not None
        return turn.stream.deadline


def speculating(text: str = PARTIAL, **kwargs: object) -> Speech:
    """A session whose watcher started the model on ``text`` once it stayed the same."""
    session = Speech(**kwargs)  # type: ignore[arg-type]
    assert session.hear(text).watch is not None
    session.take()
    session.clock += session.spec.stable_s
    session.speculate()
    return session


def nothing_sent(outcome: Outcome) -> bool:
    return outcome.events == [] and outcome.history == []


# ---- normalized --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "final"),
    [
        ("what time is it", "What time is it?"),
        ("  open the READ me  ", "Open the read me."),
        ("it's fine", "its fine"),
        ("\uff26\uff35\uff2c\uff2c width", "full width"),  # compatibility forms fold to the plain letters
        ("STRASSE", "straße"),
        ("new\nline\ttab", "new line tab"),
        ("open main.swift", "Open main swift"),
        ("zero\u200bwidth", "zerowidth"),
    ],
)
def test_case_punctuation_and_whitespace_do_not_count(said: str, final: str) -> None:
    assert speculation.normalized(said) == speculation.normalized(final)


@pytest.mark.parametrize(
    ("said", "final"),
    [("open the readme", "open the read me file"), ("ten", "tan"), ("the rapist", "therapist"), ("a way", "away")],
)
def test_different_words_read_differently(said: str, final: str) -> None:
    assert speculation.normalized(said) != speculation.normalized(final)


def test_nothing_but_punctuation_is_nothing() -> None:
    assert speculation.normalized(" ... ?! ") == ""


GAPS = st.sampled_from([" ", "  ", ", ", ". ", "? ", "! ", " - ", "… ", "\u00a0", "\t", "\n", "; "])
JOINERS = st.sampled_from(["'", "\u2019", "\u200b"])


@st.composite
def dressed(draw: st.DrawFn) -> tuple[str, str]:
    """Plain words, and the same words with their case changed, punctuation and spaces between
    them, and apostrophes or zero-width marks inside them."""
    words = draw(st.lists(st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1), min_size=1))
    plain = " ".join(words)
    out = [draw(GAPS) if draw(st.booleans()) else ""]
    for index, word in enumerate(words):
        if index:
            out.append(draw(GAPS))
        for char in word:
            out.append(char.upper() if draw(st.booleans()) else char)
            if draw(st.integers(0, 5)) == 0:
                out.append(draw(JOINERS))
    out.append(draw(GAPS) if draw(st.booleans()) else "")
    return plain, "".join(out)


@settings(max_examples=300, deadline=None)
@given(dressed())
def test_dressing_words_up_never_changes_how_they_read(pair: tuple[str, str]) -> None:
    plain, dressed_up = pair
    assert speculation.normalized(dressed_up) == speculation.normalized(plain)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1),
    st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1),
)
def test_different_letters_never_read_the_same(one: str, other: str) -> None:
    if one != other:
        assert speculation.normalized(one) != speculation.normalized(other)


# ---- handle_partial ----------------------------------------------------------------------------


def test_partials_change_nothing_when_speculation_is_off() -> None:
    session = Speech(spec=SpeculationSettings(enabled=False))
    before = session.state
    outcome = session.hear(PARTIAL)
    assert outcome.state == before and outcome.watch is None and nothing_sent(outcome)


def test_the_first_partial_is_kept_and_launches_one_watcher() -> None:
    session = Speech()
    outcome = session.hear("  What time is it  ")
    assert nothing_sent(outcome)
    listening = session.state.listening
    assert listening is not None and outcome.watch == listening.watcher
    assert (listening.text, listening.key, listening.heard_at) == ("What time is it", "what time is it", session.clock)
    assert listening.watcher_until == session.clock + SPEC.watcher_start_s
    assert session.state.next_seq == 1 and session.state.turn is None  # no event was numbered


def test_newer_partials_are_kept_and_launch_no_second_watcher_while_one_is_coming() -> None:
    session = Speech()
    first = session.hear("what")
    session.clock += 1
    second = session.hear("what time")
    assert second.watch is None and nothing_sent(second)
    listening = session.state.listening
    assert listening is not None
    assert (listening.text, listening.heard_at, listening.watcher) == ("what time", session.clock, first.watch)


def test_a_partial_once_the_watcher_took_the_watch_launches_none() -> None:
    session = Speech()
    session.hear("what")
    session.take()
    session.clock += SPEC.watcher_start_s + 60  # within the watcher's invocation
    outcome = session.hear("what time")
    listening = session.state.listening
    assert outcome.watch is None and listening is not None
    assert (listening.watcher, listening.watcher_runner) == (session.watcher, RUNNER)


def test_a_watcher_that_never_started_is_replaced_by_the_next_partial() -> None:
    session = Speech()
    first = session.hear("what").watch
    session.clock += SPEC.watcher_start_s + 0.1
    second = session.hear("what time").watch
    assert second is not None and second != first
    listening = session.state.listening
    assert listening is not None and listening.watcher == second and listening.watcher_runner is None
    with pytest.raises(StreamSuperseded):  # the late one finds the watch gone
        speculation.take_watch(session.state, str(first), "late", deadline=session.clock + LIFE_S)


def test_a_watcher_past_its_invocations_end_is_replaced_by_the_next_partial() -> None:
    session = Speech()
    first = session.hear("what").watch
    session.take()
    session.clock += LIFE_S + 1
    second = session.hear("what time").watch
    assert second is not None and second != first


@pytest.mark.parametrize("again", [PARTIAL, "What time is it?", "  what time, is it  "])
def test_the_same_words_again_change_nothing(again: str) -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.clock += 0.2
    before = session.state
    outcome = session.hear(again)
    assert outcome.state == before and outcome.watch is None and nothing_sent(outcome)  # nothing to write


@pytest.mark.parametrize("blank", ["", "   ", "…?!"])
def test_a_blank_partial_changes_nothing(blank: str) -> None:
    session = Speech()
    before = session.state
    assert session.hear(blank).state == before


def test_a_differing_partial_drops_the_speculation_without_a_word() -> None:
    session = speculating()
    session.clock += 0.1
    outcome = session.hear("what time is it in Paris")
    assert nothing_sent(outcome) and outcome.watch is None
    assert session.state.turn is None and session.state.next_seq == 1
    listening = session.state.listening
    assert listening is not None and listening.key == "what time is it in paris"
    assert (listening.speculations, listening.speculated, listening.watcher_runner) == (1, "what time is it", RUNNER)
    assert session.sent == [] and session.history == []


def test_the_same_words_leave_the_speculation_running() -> None:
    session = speculating()
    turn = session.state.turn
    session.clock += 0.1
    assert session.hear("What time is it").state.turn == turn


def test_partials_while_a_turn_runs_change_nothing() -> None:
    session = Speech()
    session.final("open the readme")
    before = session.state
    assert before.turn is not None
    outcome = session.hear("and then")
    assert outcome.state == before and outcome.watch is None and nothing_sent(outcome)


def test_partials_of_an_ended_session_change_nothing() -> None:
    session = Speech()
    session.state = session_index.end_session(session.state, session.clock).state
    before = session.state
    assert session.hear(PARTIAL).state == before


def test_an_utterance_has_at_most_its_speculations() -> None:
    session = speculating(spec=SpeculationSettings(enabled=True, max_per_utterance=2))
    session.clock += 0.1
    assert session.hear("what time is it in").state.turn is None  # the first is dropped
    session.clock += SPEC.stable_s
    session.speculate()
    session.clock += 0.1
    assert session.hear("what time is it in Paris").state.turn is None  # and the second
    session.clock += SPEC.stable_s
    listening = session.state.listening
    assert listening is not None and listening.speculations == 2
    step = session.step()
    assert isinstance(step, Leave) and "speculations" in step.reason
    with pytest.raises(StreamSuperseded):
        session.start(listening.key)
    # The person goes on: nothing more is kept, launched or started for this utterance.
    for words in ("what time is it in Paris now", "what time is it in Paris now please"):
        session.clock += 0.1
        outcome = session.hear(words)
        assert outcome.watch is None and nothing_sent(outcome) and session.state.listening == listening
    started = session.final("What time is it in Paris now, please?")
    assert started.run_model is not None  # the final starts the turn as without speculation
    assert session.state.listening is None


def test_the_cap_holds_after_the_watcher_leaves() -> None:
    """The watcher that leaves because the utterance had its speculations keeps the utterance
    known: its next partials launch no other watcher and start nothing."""
    session = speculating(spec=SpeculationSettings(enabled=True, max_per_utterance=1))
    session.clock += 0.1
    session.hear("what time is it in Paris")
    step = session.step()
    assert isinstance(step, Leave) and not step.release
    for words in ("what time is it in Paris now", "what time is it in Paris now please"):
        session.clock += SPEC.watcher_start_s + 1  # even once the watcher is long gone
        outcome = session.hear(words)
        assert outcome.watch is None and nothing_sent(outcome)
    listening = session.state.listening
    assert listening is not None and listening.speculations == 1
    session.final("What time is it in Paris now, please?")
    assert session.state.listening is None
    session.state = session.state.model_copy(update={"turn": None})  # its answer was spoken
    assert session.hear("thanks").watch is not None  # the next utterance has its own


# ---- watch_step --------------------------------------------------------------------------------


def test_the_watcher_waits_until_the_partial_is_stable_then_speculates() -> None:
    session = Speech()
    session.hear(PARTIAL)
    heard_at = session.clock
    session.take()
    assert session.step() == Wait(heard_at + SPEC.stable_s)
    session.clock += SPEC.stable_s * 0.9
    assert session.step() == Wait(heard_at + SPEC.stable_s)
    session.clock = heard_at + SPEC.stable_s
    assert session.step() == Speculate(PARTIAL, "what time is it")


def test_a_newer_partial_restarts_the_wait() -> None:
    session = Speech()
    session.hear("what")
    session.take()
    session.clock += SPEC.stable_s * 0.9
    session.hear("what time")
    assert session.step() == Wait(session.clock + SPEC.stable_s)


def test_the_watcher_never_speculates_twice_on_the_same_words() -> None:
    session = speculating()
    session.apply(conductor.handle_barge_in(session.state))
    assert session.state.turn is None
    for later in (0.0, SPEC.stable_s, 5.0):
        session.clock += later
        step = session.step()
        assert isinstance(step, Wait) and step.until > session.clock


def test_the_watcher_waits_while_its_speculation_runs() -> None:
    session = speculating()
    assert session.step() == Wait(session.clock + SPEC.stable_s)


def test_the_watcher_leaves_once_the_final_came() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.final("What time is it?")
    step = session.step()
    assert isinstance(step, Leave) and not step.release


def test_the_watcher_leaves_a_watch_another_invocation_holds() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    assert isinstance(session.step(runner="other"), Leave)
    with pytest.raises(StreamSuperseded):
        session.take(runner="other")
    mine = session.step()
    assert not isinstance(mine, Leave)


def test_an_older_watcher_leaves_once_a_newer_one_was_launched() -> None:
    session = Speech()
    first = session.hear("what").watch
    session.clock += SPEC.watcher_start_s + 1
    session.hear("what time")
    step = speculation.watch_step(session.state, str(first), RUNNER, now=session.clock, settings=SPEC)
    assert isinstance(step, Leave) and not step.release


def test_the_watcher_gives_the_watch_up_when_a_turn_runs() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.state = session.state.model_copy(update={"turn": Turn(turn_id="turn-report")})  # a report turn
    step = session.step()
    assert isinstance(step, Leave) and step.release
    released = session.apply(speculation.release_watch(session.state, str(session.watcher), RUNNER, now=session.clock))
    assert nothing_sent(released) and session.state.listening is None
    assert session.state.turn is not None and session.state.turn.turn_id == "turn-report"  # it runs on
    session.state = session.state.model_copy(update={"turn": None})  # the report turn ended
    assert session.hear("what time").watch is not None


def test_the_watcher_leaves_after_silence_and_says_so() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    session.speculate()
    session.apply(conductor.handle_barge_in(session.state))
    session.clock += SPEC.idle_s
    step = session.step()
    assert isinstance(step, Leave) and step.release


def test_the_watcher_leaves_an_ended_session_and_says_so() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.state = session.state.model_copy(update={"ended_at": session.clock})
    step = session.step()
    assert isinstance(step, Leave) and step.release


# ---- start_speculation -------------------------------------------------------------------------


def test_a_speculation_is_a_turn_held_by_the_watcher_and_says_nothing() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    before = session.state
    step = session.step()
    assert isinstance(step, Speculate)
    outcome = session.start(step.key)
    assert nothing_sent(outcome) and outcome.run_model is None and outcome.watch is None
    turn = session.state.turn
    assert turn is not None and turn.speculative == "what time is it" and turn.tools is None
    assert turn.stream is not None
    assert (turn.stream.runner, turn.stream.deadline, turn.stream.launched_at) == (
        RUNNER,
        session.clock + LIFE_S,
        session.clock,
    )
    assert session.state.next_seq == before.next_seq and session.state.history_len == 0
    assert session.state.turn_count == before.turn_count and session.state.last_utterance is None
    listening = session.state.listening
    assert listening is not None and (listening.speculations, listening.speculated) == (1, "what time is it")
    assert speculation.status(session.state, session.stream_id, RUNNER) == "speculating"


def test_a_speculation_on_a_partial_that_changed_meanwhile_is_refused() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    step = session.step()
    assert isinstance(step, Speculate)
    session.hear("what time is it in Paris")
    with pytest.raises(StreamSuperseded):
        session.start(step.key)


def test_a_speculation_while_a_turn_exists_is_refused() -> None:
    session = speculating()
    with pytest.raises(StreamSuperseded):
        session.start("what time is it")


def test_a_final_that_came_before_the_speculation_wins() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    step = session.step()
    assert isinstance(step, Speculate)
    started = session.final("What time is it?")
    assert started.run_model is not None and session.state.listening is None
    with pytest.raises(StreamSuperseded):
        session.start(step.key)


def test_only_the_watcher_holding_the_watch_starts_a_speculation() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    with pytest.raises(StreamSuperseded):
        session.start("what time is it", runner="other")


# ---- the final's commit ------------------------------------------------------------------------


def test_a_final_that_reads_the_same_promotes_the_speculation() -> None:
    session = speculating()
    before = session.state
    assert before.turn is not None
    turn_id, stream_id = before.turn.turn_id, session.stream_id
    session.clock += 0.7
    outcome = session.final("What time is it?")
    assert outcome.run_model is None  # its runner lets the answer out: nothing to launch
    assert heard(outcome.events) == [THINKING]
    assert [(op.role, op.content) for op in outcome.history if isinstance(op, AppendMessage)] == [
        ("user", [{"text": "What time is it?"}])  # the final's words, not the partial's
    ]
    turn = session.state.turn
    assert turn is not None and turn.stream is not None
    assert (turn.turn_id, turn.stream.stream_id, turn.speculative) == (turn_id, stream_id, None)
    assert (turn.stream.runner, turn.stream.launched_at) == (RUNNER, session.clock)
    assert session.state.listening is None and session.state.turn_count == 1
    assert speculation.status(session.state, stream_id, RUNNER) == "promoted"
    assert speculation.final_figures(before, session.state) == (True, True)


def test_a_promoted_speculation_goes_on_as_any_turn() -> None:
    session = speculating()
    session.clock += 0.5
    session.final("What time is it?")
    stream_id = session.stream_id
    outcome = session.stream(stream_id, [TextDelta("It is "), TextDelta("noon.")], "end_turn")
    assert heard(outcome.events)[:2] == [("final", "It is noon."), ("toolCall", "tts.speak", {"text": "It is noon."})]
    assert session.history == [
        {"role": "user", "content": [{"text": "What time is it?"}]},
        {"role": "assistant", "content": [{"text": "It is noon."}]},
    ]
    assert_valid_history(session.history)


def test_a_final_that_differs_drops_the_speculation_and_starts_the_turn() -> None:
    session = speculating()
    before = session.state
    assert before.turn is not None
    session.clock += 0.7
    outcome = session.final("What time is it in Paris?")
    assert outcome.run_model is not None
    assert heard(outcome.events) == [THINKING]  # nothing about the dropped speculation
    turn = session.state.turn
    assert turn is not None and turn.speculative is None and turn.turn_id != before.turn.turn_id
    assert turn.stream is not None and turn.stream.stream_id == outcome.run_model and turn.stream.runner is None
    assert session.history == [{"role": "user", "content": [{"text": "What time is it in Paris?"}]}]
    assert speculation.status(session.state, session.stream_id, RUNNER) == "dropped"
    assert speculation.final_figures(before, session.state) == (True, False)


def test_a_final_without_a_speculation_counts_as_none() -> None:
    session = Speech()
    before = session.state
    session.final("hello")
    assert speculation.final_figures(before, session.state) == (False, False)


def test_a_refused_final_drops_the_speculation() -> None:
    session = Speech(core=CoreSettings(catalog_names=SETTINGS.catalog_names, max_turns_per_minute=1))
    session.state = session.state.model_copy(update={"turn_starts": [session.clock - 1]})
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    stream_id = session.speculate()
    outcome = session.final("What time is it?")
    assert heard(outcome.events) == [("error", ErrorCode.RATE_LIMITED)]
    assert session.state.turn is None and session.state.listening is None
    assert speculation.status(session.state, stream_id, RUNNER) == "dropped"


def test_a_final_after_the_runners_end_drops_the_speculation() -> None:
    session = speculating()
    stale = session.stream_id
    session.clock = session.deadline + 1
    outcome = session.final("What time is it?")
    assert outcome.run_model is not None and outcome.run_model != stale
    assert heard(outcome.events) == [THINKING]
    turn = session.state.turn
    assert turn is not None and turn.speculative is None
    assert speculation.status(session.state, stale, RUNNER) == "dropped"


# ---- races -------------------------------------------------------------------------------------


def test_a_differing_partial_after_the_promotion_changes_nothing() -> None:
    session = speculating()
    session.final("What time is it?")
    before = session.state
    outcome = session.hear("and in Paris")
    assert outcome.state == before and nothing_sent(outcome)


def test_a_barge_in_during_a_speculation_sends_nothing_and_forgets_it() -> None:
    session = speculating()
    stream_id = session.stream_id
    outcome = session.apply(conductor.handle_barge_in(session.state, "what"))
    assert nothing_sent(outcome) and outcome.run_model is None
    assert session.state.turn is None and session.state.next_seq == 1
    assert speculation.status(session.state, stream_id, RUNNER) == "dropped"
    assert session.state.listening is not None  # the person is still speaking


def test_a_speculation_whose_runner_is_gone_ends_silently_on_the_next_event() -> None:
    session = speculating()
    start = SessionStart(sessionId=session.state.session_id)
    outcome = session.apply(
        conductor.handle_session_start(session.state, start, "conn-1", SETTINGS, now=session.deadline + 1)
    )
    assert nothing_sent(outcome) and session.state.turn is None


def test_a_speculation_whose_runner_is_gone_ends_silently_on_an_acknowledgement() -> None:
    session = Speech()
    session.final("hello")  # a turn whose thinking the app acknowledges late
    thinking = next(e for e in session.sent if isinstance(e, ToolCall)).call_id
    session.stream(session.stream_id, [TextDelta("Hi.")], "end_turn")
    speak = [e for e in session.sent if isinstance(e, ToolCall) and e.name == "tts.speak"][-1].call_id
    session.answer(speak, '{"spoken":true}')
    assert session.state.turn is None
    mark = len(session.sent)
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    session.speculate()
    session.clock = session.deadline + 1
    outcome = session.apply(conductor.handle_tool_result(session.state, ToolResult(callId=thinking), now=session.clock))
    assert outcome.events == [] and session.state.turn is None and session.sent[mark:] == []


def test_a_speculation_within_its_runners_time_is_left_alone_by_other_events() -> None:
    session = speculating()
    start = SessionStart(sessionId=session.state.session_id)
    outcome = session.apply(
        conductor.handle_session_start(session.state, start, "conn-1", SETTINGS, now=session.deadline - 1)
    )
    assert nothing_sent(outcome) and session.state.turn is not None and session.state.turn.speculative


def test_nothing_is_said_of_a_speculation_before_its_promotion() -> None:
    session = speculating()
    stream_id = session.stream_id
    message = ModelMessage()
    message.add(TextDelta("It is noon."))
    message.add(MessageEnd("end_turn"))
    decisions = [
        lambda: stream_speak(session.state, stream_id, "It is noon.", 11),
        lambda: stream_tool_started(session.state, stream_id, text="It is"),
        lambda: stream_finished(session.state, StreamReport(stream_id, message, text="It is noon."), SETTINGS),
        lambda: stream_failed(session.state, stream_id, ErrorCode.BEDROCK_ERROR, "the model failed"),
        lambda: claim_stream(session.state, stream_id, RUNNER, deadline=session.deadline),
    ]
    for decide in decisions:
        with pytest.raises(StreamSuperseded):
            decide()


def test_a_session_with_only_a_speculation_did_not_resume() -> None:
    session = speculating()
    start = SessionStart(sessionId=session.state.session_id)
    ready = connection.session_ready(session.state, session.state, start, "conn-1")
    assert ready is not None and ready.resumed is False
    session.final("What time is it?")
    ready = connection.session_ready(session.state, session.state, start, "conn-1")
    assert ready is not None and ready.resumed is True


def test_ending_the_session_forgets_what_was_heard() -> None:
    session = speculating()
    ended = session_index.end_session(session.state, session.clock).state
    assert ended.listening is None
    assert isinstance(
        speculation.watch_step(ended, str(session.watcher), RUNNER, now=session.clock, settings=SPEC), Leave
    )


# ---- the runner gives up, the watcher leaves or dies -------------------------------------------


def test_status_and_hold_follow_the_speculation() -> None:
    session = speculating()
    stream_id = session.stream_id
    assert speculation.status(session.state, stream_id, "other") == "dropped"
    assert speculation.status(session.state, "another-stream", RUNNER) == "dropped"
    started = session.clock
    assert not speculation.hold_expired(session.state, stream_id, now=started + SPEC.hold_s - 0.01, settings=SPEC)
    assert speculation.hold_expired(session.state, stream_id, now=started + SPEC.hold_s, settings=SPEC)
    session.final("What time is it?")
    assert not speculation.hold_expired(session.state, stream_id, now=started + 60, settings=SPEC)


def test_a_runner_drops_its_speculation_without_a_word() -> None:
    session = speculating()
    stream_id = session.stream_id
    session.clock += SPEC.hold_s
    outcome = session.apply(speculation.drop_speculation(session.state, stream_id, "no final", now=session.clock))
    assert nothing_sent(outcome) and outcome.run_model is None and session.state.turn is None
    with pytest.raises(StreamSuperseded):
        speculation.drop_speculation(session.state, stream_id, "again", now=session.clock)


def test_a_promoted_speculation_is_no_longer_the_runners_to_drop() -> None:
    session = speculating()
    stream_id = session.stream_id
    session.final("What time is it?")
    with pytest.raises(StreamSuperseded):
        speculation.drop_speculation(session.state, stream_id, "too late", now=session.clock)


BUILD = CoreSettings(
    catalog_names=frozenset({"build.run", "tts.speak"}),
    background_tools=frozenset({"build.run"}),
    tool_deadlines=(("build.run", 600.0),),
)


def speculating_with_a_build_result_waiting() -> Speech:
    session = Speech(core=BUILD)
    job = BackgroundJob(call_id="b1", name="build.run", arguments="{}", started_at=session.clock - 30, deadline=0.0)
    session.state = session.state.model_copy(update={"background": [job]})
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    session.speculate()
    session.clock += 0.1
    result = ToolResult(callId="b1", result='{"ok":true}')
    waiting = session.apply(conductor.handle_tool_result(session.state, result, BUILD, now=session.clock))
    assert nothing_sent(waiting) and waiting.run_model is None  # it waits for the person's turn
    assert [report.call_id for report in session.state.background_reports] == ["b1"]
    return session


def assert_report_turn_started(session: Speech, outcome: Outcome) -> None:
    assert outcome.run_model is not None and session.state.background_reports == []
    turn = session.state.turn
    assert turn is not None and turn.speculative is None
    assert heard(outcome.events) == [THINKING]
    assert session.history[-1]["content"][0]["text"].startswith(REPORT_MARKER)


def test_a_dropped_speculation_leaves_a_waiting_report_until_the_person_is_silent() -> None:
    session = speculating_with_a_build_result_waiting()
    session.clock += SPEC.hold_s
    dropped = session.apply(
        speculation.drop_speculation(session.state, session.stream_id, "no final", now=session.clock)
    )
    assert nothing_sent(dropped) and dropped.run_model is None  # the person may still be speaking
    assert session.state.turn is None and [report.call_id for report in session.state.background_reports] == ["b1"]
    released = speculation.release_watch(session.state, str(session.watcher), RUNNER, now=session.clock)
    assert_report_turn_started(session, session.apply(released))


def test_a_leaving_watcher_lets_a_waiting_background_report_start() -> None:
    session = speculating_with_a_build_result_waiting()
    released = speculation.release_watch(session.state, str(session.watcher), RUNNER, now=session.clock)
    assert_report_turn_started(session, session.apply(released))
    assert session.state.listening is None


def test_a_promoted_speculation_reports_the_waiting_outcome_after_it() -> None:
    session = speculating_with_a_build_result_waiting()
    session.final("What time is it?")
    assert [report.call_id for report in session.state.background_reports] == ["b1"]
    session.stream(session.stream_id, [TextDelta("Noon.")], "end_turn")
    speak = [e for e in session.sent if isinstance(e, ToolCall) and e.name == "tts.speak"][-1].call_id
    session.answer(speak, '{"spoken":true}')
    assert session.state.background_reports == [] and session.state.turn is not None  # the report turn


def test_a_leaving_watcher_forgets_the_utterance() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    outcome = session.apply(speculation.release_watch(session.state, str(session.watcher), RUNNER, now=session.clock))
    assert nothing_sent(outcome) and session.state.listening is None
    assert session.hear("what time").watch is not None  # the next partial launches another


def test_only_the_holder_releases_the_watch() -> None:
    session = speculating()
    before = session.state
    assert speculation.release_watch(before, str(session.watcher), "other", now=session.clock).state == before
    assert speculation.release_watch(before, "watch-other", RUNNER, now=session.clock).state == before


def test_a_dead_watcher_is_forgotten_with_its_speculation() -> None:
    session = speculating()
    outcome = session.apply(speculation.abandon_watch(session.state, str(session.watcher)))
    assert nothing_sent(outcome) and session.state.turn is None and session.state.listening is None
    promoted = session.final("What time is it?")
    assert promoted.run_model is not None  # nothing left to promote: the turn starts as without one


def test_a_dead_watcher_that_never_speculated_is_forgotten() -> None:
    session = Speech()
    session.hear(PARTIAL)
    outcome = session.apply(speculation.abandon_watch(session.state, str(session.watcher)))
    assert nothing_sent(outcome) and session.state.listening is None


def test_an_unknown_watchers_death_changes_nothing() -> None:
    session = speculating()
    before = session.state
    assert speculation.abandon_watch(before, "watch-other").state == before
    session.final("What time is it?")
    after = session.state
    assert speculation.abandon_watch(after, str(session.watcher)).state == after  # the promoted turn runs on


# ---- the model's request -----------------------------------------------------------------------


def test_the_request_holds_the_partial_as_the_persons_newest_words() -> None:
    history: list[Message] = [
        {"role": "user", "content": [{"text": "hello"}]},
        {"role": "assistant", "content": [{"text": "Hi."}]},
    ]
    assert speculation.request_window(history, " what time is it ") == [
        *history,
        {"role": "user", "content": [{"text": "what time is it"}]},
    ]
    unanswered: list[Message] = [*history, {"role": "user", "content": [{"text": "one more thing"}]}]
    window = speculation.request_window(unanswered, "what time is it")
    assert window[-1] == {"role": "user", "content": [{"text": "one more thing"}, {"text": "what time is it"}]}
    assert unanswered[-1] == {"role": "user", "content": [{"text": "one more thing"}]}  # the history is not changed
    assert speculation.request_window([], "hi") == [{"role": "user", "content": [{"text": "hi"}]}]


# ---- any order of what the person and the app do -----------------------------------------------

WORDS = ["what time", "what time is it", "What time is it?", "what time is it in Paris"]
Action = tuple[str, float]
actions = st.lists(
    st.one_of(
        st.tuples(st.just("partial"), st.integers(0, len(WORDS) - 1)),
        st.tuples(st.just("wait"), st.sampled_from([0.0, 0.1, 0.3, 1.0, 5.0, 20.0, 1000.0])),
        st.tuples(st.just("watch"), st.integers(0, 2)),
        st.tuples(st.just("pause"), st.integers(0, 2)),  # the person pauses for the stable time; a watcher acts
        st.tuples(st.just("runner"), st.just(0)),
        st.tuples(st.just("barge"), st.just(0)),
        st.tuples(st.just("start"), st.just(0)),
    ),
    max_size=40,
)


class Watchers:
    """The watchers launched so far, each with its own invocation (runner id)."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def act(self, session: Speech, index: int, record: list[Outcome]) -> None:
        if not self.launched:
            return
        watcher = self.launched[index % len(self.launched)]
        runner = f"runner-{watcher}"
        listening = session.state.listening
        if listening is not None and listening.watcher == watcher and listening.watcher_runner is None:
            record.append(
                session.apply(speculation.take_watch(session.state, watcher, runner, deadline=session.clock + LIFE_S))
            )
        step = speculation.watch_step(session.state, watcher, runner, now=session.clock, settings=SPEC)
        if isinstance(step, Speculate):
            outcome = speculation.start_speculation(
                session.state,
                watcher,
                runner,
                step.key,
                now=session.clock,
                deadline=session.clock + LIFE_S,
                settings=SPEC,
            )
            record.append(session.apply(outcome))
        elif isinstance(step, Leave) and step.release:
            record.append(session.apply(speculation.release_watch(session.state, watcher, runner, now=session.clock)))


@settings(max_examples=400, deadline=None)
@given(actions, st.sampled_from(WORDS))
def test_nothing_is_heard_before_the_final_and_the_final_starts_one_turn(script: list[Action], final: str) -> None:
    session = Speech()
    watchers = Watchers()
    before_final: list[Outcome] = []
    for kind, value in script:
        if kind == "partial":
            outcome = session.hear(WORDS[int(value)])
            before_final.append(outcome)
            if outcome.watch is not None:
                watchers.launched.append(outcome.watch)
        elif kind == "wait":
            session.clock += value
        elif kind == "watch":
            watchers.act(session, int(value), before_final)
        elif kind == "pause":
            session.clock += SPEC.stable_s
            watchers.act(session, int(value), before_final)
        elif kind == "runner" and speculation.is_speculating(session.state):
            if speculation.hold_expired(session.state, session.stream_id, now=session.clock, settings=SPEC):
                before_final.append(
                    session.apply(
                        speculation.drop_speculation(session.state, session.stream_id, "no final", now=session.clock)
                    )
                )
        elif kind == "barge":
            before_final.append(session.apply(conductor.handle_barge_in(session.state)))
        elif kind == "start":
            start = SessionStart(sessionId=session.state.session_id)
            before_final.append(
                session.apply(
                    conductor.handle_session_start(session.state, start, "conn-1", SETTINGS, now=session.clock)
                )
            )
        assert session.state.turn is None or session.state.turn.speculative is not None
    assert all(nothing_sent(outcome) and outcome.run_model is None for outcome in before_final)
    assert session.sent == [] and session.state.next_seq == 1

    speculated = session.state.turn
    alive = speculated is not None and speculated.stream is not None and session.clock <= session.deadline
    outcome = session.final(final)
    turn = session.state.turn
    assert turn is not None and turn.speculative is None and session.state.listening is None
    assert heard(outcome.events) == [THINKING]
    assert session.history == [{"role": "user", "content": [{"text": final}]}]
    if alive and speculated is not None and speculated.speculative == speculation.normalized(final):
        assert outcome.run_model is None and turn.turn_id == speculated.turn_id  # promoted
        event("the final promoted a speculation")
    else:
        event("the final dropped a speculation" if speculated is not None else "no speculation ran")
        assert outcome.run_model is not None and turn.stream is not None
        assert turn.stream.stream_id == outcome.run_model and turn.stream.runner is None
        assert speculated is None or turn.turn_id != speculated.turn_id
    # The person goes on speaking over the answer: nothing changes.
    assert session.hear("and one more thing").state == session.state
    assert_valid_history(session.history)


def test_a_partial_the_app_made_before_the_one_kept_is_older_news() -> None:
    session = Speech()
    session.hear("what time", said_at=100.2)
    session.clock += 0.1
    late = session.hear("what", said_at=100.1)  # handled after the newer one
    assert nothing_sent(late) and late.state == session.state
    listening = session.state.listening
    assert listening is not None and listening.text == "what time" and listening.said_at == 100.2
    session.clock += SPEC.min_interval_s
    session.hear("what time is it", said_at=100.3)
    assert session.state.listening is not None and session.state.listening.text == "what time is it"


def test_partials_without_an_ordering_timestamp_are_taken_as_they_come() -> None:
    session = Speech()
    session.hear("what time", said_at=100.0)
    session.clock += SPEC.min_interval_s
    session.hear("what", said_at=100.0)  # the same second: no order to tell (whole-second clocks)
    session.clock += SPEC.min_interval_s
    session.hear("what is", said_at=None)
    assert session.state.listening is not None and session.state.listening.text == "what is"


# ---- fair sharing: a partial sooner than the minimum interval is dropped ------------------------


def test_a_partial_sooner_than_the_interval_is_dropped_and_the_next_one_carries_its_words() -> None:
    session = Speech()
    session.hear("what")
    kept = session.state
    session.clock += SPEC.min_interval_s / 2
    dropped = session.hear("what time")
    assert dropped.state is kept and dropped.watch is None and nothing_sent(dropped)  # nothing to write
    session.clock += SPEC.min_interval_s / 2
    session.hear("what time is it")  # cumulative: nothing of the dropped one is lost
    listening = session.state.listening
    assert listening is not None and (listening.text, listening.heard_at) == ("what time is it", session.clock)


def test_partials_at_the_recommended_rate_are_all_kept() -> None:
    session = Speech()
    words = ["please", "open", "the", "main", "file", "and", "run", "the", "tests"]
    for count in range(1, len(words) + 1):
        session.hear(" ".join(words[:count]))
        listening = session.state.listening
        assert listening is not None and listening.text == " ".join(words[:count])
        session.clock += 0.25  # four a second


def test_a_partial_that_differs_from_a_running_speculation_is_never_held_back() -> None:
    session = Speech()
    session.hear(PARTIAL)
    session.take()
    session.clock += SPEC.stable_s
    session.start(PARTIAL)
    assert speculation.is_speculating(session.state)
    session.hear(PARTIAL + " now")  # at once: the speculation on the old words is dropped
    assert not speculation.is_speculating(session.state)


def test_the_minimum_interval_is_a_setting() -> None:
    session = Speech(spec=SpeculationSettings(enabled=True, min_interval_s=0))
    session.hear("what")
    session.hear("what time")
    assert session.state.listening is not None and session.state.listening.text == "what time"
