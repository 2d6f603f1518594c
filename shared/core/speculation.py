"""Speculative turns: the model starts on a stable partial transcript, before the final one.

While the person speaks the app sends partial transcripts, and the last one usually reads as the
final will. ``handle_partial`` keeps the latest (``Listening``) and asks for a *watcher* (a
turn-runner invocation) when none is watching. When the partial has stayed the same for the stable
time and no turn runs, the watcher starts a *speculative turn* (``start_speculation``): a turn
marked ``speculative`` whose stream the watcher holds, as a runner holds a turn's stream. It streams
the model but posts, speaks and commits nothing of it.

The commit that takes the final decides (``take_final``, from ``handle_transcript``): a final that
reads as the speculated text (ignoring case, punctuation and whitespace) *promotes* it: it becomes
the turn, and the runner lets out what the model already wrote. Any other final drops it and starts
the turn as before. A newer partial that differs, a barge-in, a runner that is gone or a final that
never comes drop it too. Dropping sends nothing: the app never hears of a speculation it did not
confirm, and no event of one is ever numbered.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from shared.core.decision import Decision, Outcome, StreamSuperseded, new_id
from shared.core.messages import Message, text_block
from shared.core.state import ActiveStream, Listening, SessionState, Turn

# Marks that join a word's letters (apostrophes, format characters such as zero-width spaces) are
# dropped; every other punctuation mark, separator or control separates words. So "it's" reads as
# "its" and "main.swift" as "main swift", but "therapist" never reads as "the rapist".
_JOINERS = frozenset("'\u2019\u02bc\u2018")
_SEPARATING = ("P", "Z", "Cc")


@dataclass(frozen=True)
class SpeculationSettings:
    enabled: bool = False
    stable_s: float = 0.3  # how long a partial must stay the same before the model starts on it
    max_per_utterance: int = 3  # speculations one utterance may start (the cost bound of a long pause-y one)
    hold_s: float = 4.0  # a speculation whose final has not come this long after it started is dropped
    idle_s: float = 15.0  # a watcher that heard nothing new this long leaves
    watcher_start_s: float = 10.0  # a launched watcher that has not started by then is taken as lost
    # A partial with new words sooner than this after the last one kept is dropped (the next one
    # carries all its words): one session's partials cost at most one write per interval.
    min_interval_s: float = 0.15


@dataclass(frozen=True)
class Wait:
    """Nothing to start yet: look again at ``until`` (epoch seconds)."""

    until: float


@dataclass(frozen=True)
class Speculate:
    """Start the model on this partial now."""

    text: str
    key: str


@dataclass(frozen=True)
class Leave:
    """The watcher's work is over (a final came, a turn runs, another watcher took over, silence)."""

    reason: str
    release: bool = False  # the watcher must say it left (so the next partial launches another)


WatchStep = Wait | Speculate | Leave
SpeculationStatus = Literal["speculating", "promoted", "dropped"]


def normalized(text: str) -> str:
    """The text as speculation compares it, its words in order: case, punctuation and the amount
    of whitespace between words do not count."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = []
    for char in folded:
        category = unicodedata.category(char)
        if char in _JOINERS or category == "Cf":
            continue
        kept.append(" " if category.startswith(_SEPARATING) else char)
    return " ".join("".join(kept).split())


def handle_partial(
    state: SessionState, text: str, *, now: float, settings: SpeculationSettings, said_at: float | None = None
) -> Outcome:
    """A partial transcript: keep it while no turn runs; one that differs from the speculated text
    drops the speculation; launch a watcher (``Outcome.watch``) when none is watching.

    ``said_at``: the app's timestamp of the partial. The app's events may be handled out of order
    (each in its own invocation): a partial the app made before the one kept is older news."""
    key = normalized(text)
    turn, listening = state.turn, state.listening
    if not settings.enabled or not key or state.ended_at is not None:
        return Outcome(state)
    if listening is not None and said_at is not None and listening.said_at is not None and said_at < listening.said_at:
        return Outcome(state)
    if turn is not None and turn.speculative is None:
        return Outcome(state)  # a turn runs: its answer is not interrupted by what the person says next
    if listening is not None and listening.key == key:
        return Outcome(state)  # the same words: they have been stable since ``heard_at``
    if listening is not None and turn is None and now - listening.heard_at < settings.min_interval_s:
        return Outcome(state)  # too soon after the last one kept: the next partial carries these words
    if listening is not None and listening.speculations >= settings.max_per_utterance and turn is None:
        return Outcome(state)  # no more speculation in this utterance: nothing to keep
    decision = Decision(state)
    if turn is not None:
        drop(decision, "the person went on speaking")
    heard = Listening(text=text.strip(), key=key, heard_at=now, said_at=said_at)
    if listening is not None:
        heard.speculations, heard.speculated = listening.speculations, listening.speculated
        if listening.watcher is not None and now < listening.watcher_until:
            heard.watcher, heard.watcher_runner = listening.watcher, listening.watcher_runner
            heard.watcher_until = listening.watcher_until
    launch = heard.watcher is None
    if launch:
        heard.watcher, heard.watcher_until = new_id("watch"), now + settings.watcher_start_s
    decision.state.listening = heard
    outcome = decision.outcome()
    outcome.watch = heard.watcher if launch else None
    return outcome


def _watching(state: SessionState, watcher: str, runner: str) -> Listening | None:
    listening = state.listening
    if listening is None or listening.watcher != watcher or listening.watcher_runner not in (None, runner):
        return None
    return listening


def take_watch(state: SessionState, watcher: str, runner: str, *, deadline: float) -> Outcome:
    """The launched watcher starts: it holds the watch until ``deadline`` (its invocation's end).
    Raises ``StreamSuperseded`` when the watch is over or another invocation holds it."""
    listening = _watching(state, watcher, runner)
    if listening is None:
        raise StreamSuperseded(watcher)
    decision = Decision(state)
    held = decision.state.listening
    assert held is not None
    held.watcher_runner, held.watcher_until = runner, deadline
    return decision.outcome()


def watch_step(
    state: SessionState, watcher: str, runner: str, *, now: float, settings: SpeculationSettings
) -> WatchStep:
    """What the watcher does next, on the state it just read."""
    listening = _watching(state, watcher, runner)
    if listening is None:
        return Leave("the watch is over")
    if state.ended_at is not None:
        return Leave("the session was ended", release=True)
    if state.turn is not None:
        # A turn runs (a background tool's report): the utterance is forgotten, so that the next
        # partial, once the turn is over, launches a watcher again.
        return Leave("a turn runs", release=True) if state.turn.speculative is None else Wait(now + settings.stable_s)
    due = listening.heard_at + settings.stable_s
    if now - listening.heard_at >= settings.idle_s:
        return Leave("nothing new was heard", release=True)
    if listening.speculations >= settings.max_per_utterance:
        # Not released: the utterance stays known with its count, so its next partials launch no
        # other watcher (``handle_partial`` keeps nothing more of it) until the final forgets it.
        return Leave("this utterance has had its speculations")
    if listening.speculated == listening.key or now < due:
        return Wait(max(due, now + settings.stable_s / 2) if listening.speculated == listening.key else due)
    return Speculate(listening.text, listening.key)


def start_speculation(
    state: SessionState,
    watcher: str,
    runner: str,
    key: str,
    *,
    now: float,
    deadline: float,
    settings: SpeculationSettings,
) -> Outcome:
    """A speculative turn on the partial ``key``, its stream held by the watcher: no event, no
    history. Raises ``StreamSuperseded`` when the partial changed, a turn started or the watch is over
    (a final that came while the speculation was being launched wins)."""
    listening = _watching(state, watcher, runner)
    if (
        listening is None
        or listening.key != key
        or state.turn is not None
        or state.ended_at is not None
        or listening.speculations >= settings.max_per_utterance
    ):
        raise StreamSuperseded(watcher)
    decision = Decision(state)
    held = decision.state.listening
    assert held is not None
    held.speculations += 1
    held.speculated = key
    turn = Turn(turn_id=new_id("turn"), speculative=key, started_at=now)
    turn.stream = ActiveStream(
        stream_id=f"{turn.turn_id}.0.{new_id('s')[-8:]}", launched_at=now, runner=runner, deadline=deadline
    )
    decision.state.turn = turn
    decision.notes.append(f"speculative turn {turn.turn_id} started on the partial transcript")
    return decision.outcome()


def status(state: SessionState, stream_id: str, runner: str) -> SpeculationStatus:
    """Where a speculation stands, as its runner reads it: still speculating, promoted by the final
    (now the turn), or dropped (or held by another invocation)."""
    turn = state.turn
    stream = turn.stream if turn is not None else None
    if turn is None or stream is None or stream.stream_id != stream_id or stream.runner != runner:
        return "dropped"
    return "speculating" if turn.speculative is not None else "promoted"


def hold_expired(state: SessionState, stream_id: str, *, now: float, settings: SpeculationSettings) -> bool:
    """The speculation has waited for its final as long as a recognizer ever takes: give up."""
    turn = state.turn
    stream = turn.stream if turn is not None else None
    if turn is None or stream is None or stream.stream_id != stream_id or turn.speculative is None:
        return False
    return now - stream.launched_at >= settings.hold_s


def drop_speculation(state: SessionState, stream_id: str, reason: str, *, now: float) -> Outcome:
    """The runner gives the speculation up (no final came in time, or the model failed before it was
    confirmed): nothing is sent, and a background tool's outcome that waited for the session to be
    idle is reported now (``run_model``). Raises ``StreamSuperseded`` when it is no longer the session's."""
    turn = state.turn
    if turn is None or turn.speculative is None or turn.stream is None or turn.stream.stream_id != stream_id:
        raise StreamSuperseded(stream_id)
    decision = Decision(state)
    drop(decision, reason)
    _report_waiting(decision, now)
    return decision.outcome()


def release_watch(state: SessionState, watcher: str, runner: str, *, now: float) -> Outcome:
    """The watcher leaves: the utterance is forgotten, and the next partial launches a new one."""
    if _watching(state, watcher, runner) is None:
        return Outcome(state)
    decision = Decision(state)
    decision.state.listening = None
    drop(decision, "its watcher left")
    _report_waiting(decision, now)
    return decision.outcome()


def abandon_watch(state: SessionState, watcher: str) -> Outcome:
    """The watcher's invocation died (its failure record came): forget the utterance and its
    speculation, so a final never promotes a speculation nobody streams."""
    listening = state.listening
    if listening is None or listening.watcher != watcher:
        return Outcome(state)
    decision = Decision(state)
    decision.state.listening = None
    turn = decision.state.turn
    if turn is not None and turn.stream is not None and turn.stream.runner == listening.watcher_runner:
        drop(decision, "its watcher died")
    return decision.outcome()


def request_window(messages: list[Message], text: str) -> list[Message]:
    """The model's request for a speculation: the history window and the partial transcript as the
    person's newest words (joining a last user message, as the final's commit will)."""
    said = text_block(text.strip())
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        return [*messages[:-1], {"role": "user", "content": [*last["content"], said]}]
    return [*messages, {"role": "user", "content": [said]}]


def _report_waiting(decision: Decision, now: float) -> None:
    """A background tool's outcome waits for no turn to run: it is reported once the person is
    silent and no speculation runs."""
    if decision.state.turn is None and decision.state.listening is None and decision.state.background_reports:
        decision.start_background_report(now)


def drop(decision: Decision, reason: str) -> None:
    """Forget the speculative turn: nothing of it was said, so nothing is sent or kept."""
    turn = decision.state.turn
    if turn is None or turn.speculative is None:
        return
    decision.state.turn = None
    decision.notes.append(f"speculative turn {turn.turn_id} dropped: {reason}")


def take_final(decision: Decision, text: str, now: float) -> Turn | None:
    """The final transcript's commit: the speculative turn it confirms (now a turn of its own,
    its figures counted from the final), or None (any speculation is dropped). The person has
    finished speaking: the utterance is forgotten either way."""
    decision.state.listening = None
    turn = decision.state.turn
    if turn is None or turn.speculative is None:
        return None
    stream = turn.stream
    alive = stream is not None and (stream.deadline is None or now <= stream.deadline)
    if not alive or turn.speculative != normalized(text):
        drop(decision, "the final transcript differs" if alive else "its runner is gone")
        return None
    assert stream is not None
    turn.speculative = None
    stream.launched_at = now
    decision.notes.append(f"speculative turn {turn.turn_id} promoted by the final transcript")
    return turn


def is_speculating(state: SessionState) -> bool:
    return state.turn is not None and state.turn.speculative is not None


def final_figures(before: SessionState, after: SessionState) -> tuple[bool, bool]:
    """For a final's commit: whether a speculation was running, and whether the final promoted it."""
    if not is_speculating(before):
        return False, False
    assert before.turn is not None
    promoted = after.turn is not None and after.turn.turn_id == before.turn.turn_id and after.turn.speculative is None
    return True, promoted


def count_dropped(state: SessionState, input_tokens: int, output_tokens: int) -> Outcome:
    """What model requests dropped before anyone heard them spent (speculations dropped, a turn
    launched alongside a write that lost its race), kept until a turn ends: that turn's
    ``turnUsage`` carries it (``speculationInputTokens`` / ``speculationOutputTokens``) and the
    session's totals add it."""
    if input_tokens <= 0 and output_tokens <= 0:
        return Outcome(state)
    decision = Decision(state)
    decision.state.speculation_input_pending += max(0, input_tokens)
    decision.state.speculation_output_pending += max(0, output_tokens)
    return decision.outcome()
