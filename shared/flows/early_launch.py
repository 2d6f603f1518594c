"""A turn's model stream started alongside the write of the decision that starts it.

A transcript (or a tool round's last result) is decided on the state and the history window read
together; the turn runner is then invoked with the state as it will be written, the window and
the decision's events while the write goes out, so the person waits for one DynamoDB round trip
before the model is asked, not two. The runner claims its stream in the model's shadow with a
write conditional on that exact state (its version and write id), which waits for this write to
land (``Committer`` with a newer hint): nothing is said for a decision that was not stored. It
then posts the decision's events before anything of the stream, so the app hears them in order.
If the write loses a race, the decision is made again and launched after its write, as usual:
the early runner finds its stream gone and posts nothing (its numbers went to the new decision),
and its model request was wasted: the runner counts what it spent (``EarlyLaunchLost*Tokens``),
settles its reservation of the person's ceiling at that, and adds it to the session's dropped
requests' tokens, which the turn that answers reports in its ``turnUsage``. So a turn is not
launched early while the state read announces a write of its own session within moments (a turn
runner's memory write after its turn, ``SessionState.memory_writes``): it is launched after its
write, one round trip later.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Future

from shared.adapters.turn_launcher import PAYLOAD_BUDGET, TurnTask
from shared.core.decision import Outcome
from shared.core.messages import Message
from shared.core.state import SessionState
from shared.flows.commit import Committed, Metrics
from shared.flows.delivery import Request

EARLY_LAUNCHES_METRIC = "EarlyLaunches"  # turns launched alongside the write that starts them
# Turns launched after their write, as an announced memory write of the session would race it.
EARLY_LAUNCHES_HELD_METRIC = "EarlyLaunchesHeld"
# Early launches whose write lost its race: their runner finds the stream gone (``EarlyLaunchesLost``).
EARLY_WRITES_LOST_METRIC = "EarlyLaunchWritesLost"


class EarlyLaunch:
    """One frame's turn, launched before its decision's write lands (when it can be)."""

    def __init__(
        self,
        request: Request,
        bases: list[SessionState],
        *,
        now: float,
        metrics: Metrics,
        window: Callable[[SessionState, Outcome], list[Message] | None],
        launch: Callable[[TurnTask], Future[None]],
        failed: Callable[[TurnTask, Committed], None],
    ) -> None:
        self.endpoint = request.endpoint
        self.connection_id = request.connection_id
        self.bases = bases  # the states decided on, the latest last
        # Taken before the state was read: an announcement live then covers every write landing after the read.
        self.now = now
        self.metrics = metrics
        self._window = window
        self._launch = launch
        self._failed = failed
        self._task: TurnTask | None = None
        self._sent: Future[None] | None = None

    def before_write(self, outcome: Outcome, prepared: SessionState, kept: list[tuple[int, str]]) -> None:
        """The first decision, about to be written: launch its stream now if it starts one."""
        stream = prepared.turn.stream if prepared.turn is not None else None
        if not outcome.run_model or not self.bases or stream is None or stream.stream_id != outcome.run_model:
            return
        if prepared.connection_id != self.connection_id or not prepared.connection_live:
            return  # the connection is caught up first: the runner starts from the state that made it live
        if self.bases[-1].listening is not None:
            return  # partials came before: a watcher writes meanwhile (and speculation hides the wait)
        if len(outcome.events) != len(kept):
            return  # partials among the events: they go out from the frame's invocation, as usual
        window = self._window(self.bases[-1], outcome)
        if window is None:
            return  # the runner would read history this write has not stored yet: launch after it
        if self.bases[-1].memory_write_due(self.now):
            self.metrics.count(EARLY_LAUNCHES_HELD_METRIC)
            return  # a runner writes the session's memory within moments: this write would race it
        # Marked in the state written: whoever ends the stream before a runner claims it posts them.
        stream.unposted = (kept[0][0], kept[-1][0]) if kept else None
        task = TurnTask.for_stream(prepared, outcome.run_model, self.endpoint, window)
        task = task.model_copy(update={"frames": json.dumps(kept, ensure_ascii=False)})
        if task.state is None or task.history is None or task.payload_bytes() > PAYLOAD_BUDGET:
            stream.unposted = None
            return
        self._task = task
        self._sent = self._launch(task)
        self.metrics.count(EARLY_LAUNCHES_METRIC)

    def carries(self, committed: Committed) -> bool:
        """Whether the committed decision is the one launched: its runner posts its events (else
        they are posted, and the turn launched, as usual; a launch that lost its race is counted)."""
        task = self._task
        if task is None or self._sent is None:
            return False
        launched = task.session_state()
        if committed.run_model != task.stream_id or launched is None or committed.state.write_id != launched.write_id:
            self.metrics.count(EARLY_WRITES_LOST_METRIC)
            return False
        return True

    def confirm(self, committed: Committed) -> None:
        """Wait for the launch; one that failed is handed to ``failed``."""
        task, sent = self._task, self._sent
        assert task is not None and sent is not None
        try:
            sent.result()
        except Exception:
            self._failed(task, committed)
