"""One model message, streamed to the app: coalesced partials, sentence speech, tool starts.

Nothing is written per model delta. The runner's text of the current speech segment lives here;
it is committed only when the stream is claimed (in the background, as soon as the model's
request has gone out: the model request never waits for the claim),
when completed sentences go to tts.speak (apps that announced ``sentenceSpeech``), when a tool
use starts and when the message ends (by the caller). Before each coalesced partial that no
commit has just checked, the session state is read once (consistent GetItem) to see whether the
stream is still the session's, so no partial goes out for a stream that was stopped. Between
partials (which grow further apart as the answer grows) the stream is read at least every
``stop_check_s`` (a commit counts) until something was shown or said, then every
``barge_in_check_s``, between the model's deltas: a barge-in or a new turn stops the model (its
stream closed, no more tokens spent) within that time plus one read and one model delta.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from shared.adapters.store import SessionStore
from shared.adapters.turn_launcher import TurnTask
from shared.core.decision import Outcome, StreamSuperseded
from shared.core.model_output import ModelMessage, StreamItem, TextDelta, ToolUseStarted
from shared.core.speech import SegmentText
from shared.core.state import SessionState
from shared.core.stream import RunnerClaim, check_stream, claim_stream, stream_speak, stream_tool_started
from shared.flows.commit import Committed, Committer
from shared.flows.delivery import Delivery
from shared.wire.protocol import SENTENCE_SPEECH, AssistantSpeechPartial, make_event

STOP_CHECK_S = 1.0
"""How often, at least, a running stream reads whether it was stopped (``stop_check_ms``)."""
BARGE_IN_CHECK_S = 0.15
"""As often once the answer is shown or heard (``barge_in_check_ms``)."""


class OutOfTime(Exception):
    pass


@dataclass
class TurnFigures:
    """What one runner invocation measured (milliseconds from the stream's launch, epoch based)."""

    first_partial_ms: float | None = None
    first_speak_ms: float | None = None
    model_first_token_ms: float | None = None
    usage: dict[str, int] = field(default_factory=dict)
    # Epoch seconds of the invocation's first partial and first tts.speak (the turn's timings).
    first_partial_at: float | None = None
    first_speak_at: float | None = None


class MessageStream:
    """Streams one model message of ``task``'s stream, starting from ``state``."""

    def __init__(
        self,
        *,
        task: TurnTask,
        state: SessionState,
        claim: RunnerClaim,
        segment: SegmentText,
        store: SessionStore,
        committer: Committer,
        delivery: Delivery,
        figures: TurnFigures,
        out_of_time: Callable[[], bool],
        clock: Callable[[], float] = time.time,
        decision_frames: list[tuple[int, str]] | None = None,
        stop_check_s: float = STOP_CHECK_S,
        barge_in_check_s: float = BARGE_IN_CHECK_S,
        confirmed: bool = False,
    ) -> None:
        self.task = task
        self.state = state
        self.claim = claim
        self.segment = segment
        self.store = store
        self.committer = committer
        self.delivery = delivery
        self.figures = figures
        self.out_of_time = out_of_time
        self.clock = clock
        self.stop_check_s = stop_check_s
        self.barge_in_check_s = barge_in_check_s
        # The events of the decision that launched this stream alongside its write (posted here,
        # first, once the claim shows the write landed); emptied when posted.
        self.decision_frames = decision_frames if decision_frames is not None else []
        stream = state.turn.stream if state.turn is not None else None
        self._launched_at = stream.launched_at if stream is not None else 0.0
        self._claiming: Future[Committed | None] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._model_requested = False
        self._checked = confirmed  # a commit or read since the last partial confirmed the stream
        self._last_partial = ""
        self._checked_at = clock()

    @property
    def stream_id(self) -> str:
        return self.task.stream_id

    def run(self, items: Iterable[StreamItem], message: ModelMessage, brain_started: float) -> SessionState:
        """Feed the model's items until the message ends; returns the latest committed state.

        Raises ``StreamSuperseded`` / ``StreamTaken`` when the stream is no longer this runner's.
        """
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="claim") as pool:
            self._pool = pool
            if self._model_requested:
                self.model_requested()
            try:
                for item in items:
                    if self.out_of_time():
                        raise OutOfTime
                    message.add(item)
                    if isinstance(item, TextDelta):
                        if self.figures.model_first_token_ms is None:
                            self.figures.model_first_token_ms = (time.monotonic() - brain_started) * 1000
                        self.segment.add(item.text)
                        if self.segment.partial_due(self.clock()) or self._first_sentence_ready():
                            self._flush()
                        elif self._stop_check_due():
                            self._check()
                    elif isinstance(item, ToolUseStarted):
                        self._tool_started()
            finally:
                self._pool = None
                self._claim_finished()  # never leave the claim running behind the caller's back
        return self.state

    def model_requested(self) -> None:
        """The model's request is going out: claim the stream now, in the model's shadow."""
        self._model_requested = True
        if self._pool is not None and self._claiming is None and not self._holds(self.state):
            self._claiming = self._pool.submit(self._claim_and_announce)

    def claimed(self) -> None:
        """Make sure the stream is this runner's before anything is said: wait for the background
        claim (raising what it raised), or claim now if none was started."""
        if self._claiming is None and not self._holds(self.state):
            self._took(self._claim())
        self._claim_finished()

    def _claim_finished(self) -> None:
        """Wait for a claim that was started (raising what it raised)."""
        if self._claiming is not None:
            claiming, self._claiming = self._claiming, None
            self._took(claiming.result())

    def _took(self, committed: Committed | None) -> None:
        if committed is None:  # the session is gone
            raise StreamSuperseded(self.stream_id)
        self._checked = True
        self._checked_at = self.clock()
        self.state = committed.state
        if self.decision_frames:
            frames = [frame for _seq, frame in self.decision_frames]
            self.decision_frames.clear()
            self.delivery.post_to_session(self.task.endpoint, committed.state, frames)
        self.delivery.deliver(self.task.endpoint, committed)

    # ---- pieces ------------------------------------------------------------------------------

    def _holds(self, state: SessionState) -> bool:
        stream = state.turn.stream if state.turn is not None else None
        return stream is not None and stream.stream_id == self.stream_id and stream.runner == self.claim.runner

    def _claim_and_announce(self) -> Committed | None:
        """The claim, then the decision's own events posted, both while the model works: the first
        text waits for this (``claimed``), so they still reach the app before anything of the stream."""
        committed = self._claim()
        if committed is not None and self.decision_frames:
            frames = [frame for _seq, frame in self.decision_frames]
            self.decision_frames.clear()
            self.delivery.post_to_session(self.task.endpoint, committed.state, frames)
        return committed

    def _claim(self) -> Committed | None:
        claim = self.claim
        return self.committer.apply(
            self.task.session_id,
            lambda fresh: claim_stream(fresh, self.stream_id, claim.runner, deadline=claim.deadline),
            hint=self.state,
        )

    def _flush(self) -> None:
        """A partial (and, for sentence speech, the completed sentences) goes out, after a commit
        or one read confirmed the stream is still this runner's. Nothing new to show (a block still
        being written) costs nothing; until something is shown, the first visible text goes at once."""
        self.claimed()
        now = self.clock()
        speaks = self._speaks_sentences() and self.segment.speak_due(now)
        speak_until = self.segment.speakable_until(self.state.capabilities) if speaks else self.segment.spoken
        text = self.segment.partial
        shows = bool(text) and text != self._last_partial
        spoken: Committed | None = None
        if speak_until > self.segment.spoken:
            spoken = self._commit(
                lambda fresh: stream_speak(fresh, self.stream_id, self.segment.text, speak_until, self.claim)
            )
            self.segment.spoke(speak_until, now)
        elif (shows and not self._checked) or self._stop_check_due():
            self._check()
        if shows:
            self._post_partial(text)
            self._checked = False
        self.segment.shown_now(self.clock(), posted=shows)
        if spoken is not None:
            self.delivery.deliver(self.task.endpoint, spoken)
            if spoken.frames and self.figures.first_speak_ms is None:
                self.figures.first_speak_ms = self._since_launch()
                self.figures.first_speak_at = time.time()
            self._checked = False

    def _stop_check_due(self) -> bool:
        """Whether the stream has gone ``stop_check_s`` (``barge_in_check_s`` once something was
        shown or said) without a read or commit confirming it (once claimed: until then the claim
        itself is the check)."""
        heard = bool(self._last_partial) or self.segment.spoken > 0 or self.figures.first_speak_ms is not None
        interval = self.barge_in_check_s if heard else self.stop_check_s
        return self._claiming is None and self._holds(self.state) and self.clock() - self._checked_at >= interval

    def _check(self) -> None:
        """One consistent read: raises StreamSuperseded/StreamTaken when the stream was stopped."""
        fresh = self.store.load(self.task.session_id)
        if fresh is None:
            raise StreamSuperseded(self.stream_id)
        check_stream(fresh, self.stream_id, self.claim)
        self.state = fresh
        self._checked_at = self.clock()

    def _tool_started(self) -> None:
        self.claimed()
        committed = self._commit(
            lambda fresh: stream_tool_started(fresh, self.stream_id, self.claim, text=self.segment.text)
        )
        self.delivery.deliver(self.task.endpoint, committed)
        if committed.frames and self.figures.first_speak_ms is None:
            self.figures.first_speak_ms = self._since_launch()
            self.figures.first_speak_at = time.time()
        self.segment.next_segment()

    def _commit(self, decide: Callable[[SessionState], Outcome]) -> Committed:
        committed = self.committer.apply(self.task.session_id, decide, hint=self.state)
        if committed is None:
            raise StreamSuperseded(self.stream_id)
        self.state = committed.state
        self._checked = True
        self._checked_at = self.clock()
        return committed

    def _post_partial(self, text: str) -> None:
        """Partials are not kept (the next one or the final supersedes each), so they are posted
        straight away, unnumbered, to the devices the latest state knows that show them."""
        self._last_partial = text
        frame = make_event(AssistantSpeechPartial(text=text)).to_json()
        if not self.delivery.post_partial(self.task.endpoint, self.state, frame):
            return
        if self.figures.first_partial_ms is None:
            self.figures.first_partial_ms = self._since_launch()
            self.figures.first_partial_at = time.time()

    def _first_sentence_ready(self) -> bool:
        """The segment's first sentence is complete: the app starts speaking at once (the rest
        goes on the partials' cadence)."""
        first = self.segment.spoken == 0 and self._speaks_sentences()
        return first and self.segment.speakable_until(self.state.capabilities) > 0

    def _speaks_sentences(self) -> bool:
        return SENTENCE_SPEECH in self.state.capabilities

    def _since_launch(self) -> float:
        """Milliseconds since the stream was launched (the transcript or last tool result committed)."""
        return max(0.0, (self.clock() - self._launched_at) * 1000) if self._launched_at else 0.0
