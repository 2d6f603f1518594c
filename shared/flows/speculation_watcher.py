"""The watcher of a person's speech: a turn-runner invocation that answers while they finish.

``$default`` launches it for an utterance's first partial transcript (``Outcome.watch``). It sleeps
until the latest partial has stayed the same for the stable time, then starts a speculative turn
on it (``shared.core.speculation``) and reads the model's answer ahead (``Prefetch``), reading the
session every poll: the final's commit either promotes the speculation (this invocation then runs
the turn, from what the model already wrote) or drops it (the model is stopped at its next delta
and the watcher goes back to watching). Nothing of a speculation is posted before its promotion.
The watcher leaves once the final came, a turn runs, the session ended or nothing new was heard.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.adapters.model_prefetch import Prefetch
from shared.adapters.turn_launcher import TurnTask
from shared.core.decision import StreamSuperseded
from shared.core.memory import message_chars
from shared.core.messages import Message
from shared.core.speculation import (
    Leave,
    Speculate,
    Wait,
    abandon_watch,
    count_dropped,
    drop_speculation,
    hold_expired,
    release_watch,
    request_window,
    start_speculation,
    status,
    take_watch,
    watch_step,
)
from shared.core.state import SessionState
from shared.core.stream import RUNNER_LOST_LINE, RunnerClaim, StreamTaken
from shared.flows.commit import Committed, ConductorBusy
from shared.flows.message_stream import TurnFigures
from shared.flows.spend_guard import OverBudget, Reservation
from shared.flows.turn_runner import OVER_BUDGET_METRIC, RemainingMs, TurnRunner
from shared.wire.protocol import ErrorCode

STOPPED_JOIN_S = 5.0  # how long a leaving watcher waits for the model streams it stopped to close

SPECULATIONS_METRIC = "Speculations"
DISCARDED_METRIC = "SpeculationsDiscarded"
DISCARDED_INPUT_METRIC = "SpeculationDiscardedInputTokens"
DISCARDED_OUTPUT_METRIC = "SpeculationDiscardedOutputTokens"


@dataclass
class _Watch:
    """One watcher invocation: its task and claim, the history window it read (a speculation's
    request needs it at once: no turn runs while the person speaks, so it stays the same) and the
    model streams of the speculations it dropped, closing."""

    task: TurnTask
    claim: RunnerClaim
    remaining_ms: RemainingMs
    history: tuple[int, int, list[Message]] | None = None  # (history_len, history_version, window)
    stopped: list[Prefetch] = field(default_factory=list)
    estimated_input: list[int] = field(default_factory=list)  # per stopped prefetch, before its metadata


class SpeculationWatcher:
    def __init__(
        self,
        runner: TurnRunner,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.runner = runner
        self.settings = runner.settings
        self.rules = runner.settings.speculating
        self.store = runner.store
        self.committer = runner.committer
        self.metrics = runner.metrics
        self.log = runner.log
        self.clock = clock
        self.sleep = sleep

    def watch(self, task: TurnTask, remaining_ms: RemainingMs) -> TurnFigures | None:
        """Watch the session's partial transcripts; returns the figures of the turn it ran (if a
        speculation was promoted), else None."""
        watcher = task.stream_id
        # The runner id names the watch: if this invocation dies, the turn it runs is known by it.
        claim = RunnerClaim(f"{watcher}.{uuid.uuid4().hex[:16]}", self.clock() + remaining_ms() / 1000)
        try:
            taken = self.committer.apply(
                task.session_id,
                lambda fresh: take_watch(fresh, watcher, claim.runner, deadline=claim.deadline),
                hint=task.session_state(),
            )
        except (StreamSuperseded, StreamTaken):
            return None
        state = taken.state if taken is not None else None
        watch = _Watch(task, claim, remaining_ms)
        try:
            if state is not None:
                self._history(watch, state)  # while the words settle: off the speculation's path
            while state is not None:
                if remaining_ms() < self.settings.turn_reserve_ms:
                    self._leave(watch)
                    return None
                step = watch_step(state, watcher, claim.runner, now=self.clock(), settings=self.rules)
                if isinstance(step, Leave):
                    self.log.info("watcher leaves", extra={"session_id": task.session_id, "reason": step.reason})
                    if step.release:
                        self._leave(watch)
                    return None
                if isinstance(step, Speculate):
                    try:
                        figures = self._speculate(watch, state, step)
                    except OverBudget:  # past the person's ceiling: the final is refused as usual
                        self.metrics.count(OVER_BUDGET_METRIC)
                        self._leave(watch)
                        return None
                    if figures is not None:
                        return figures
                elif isinstance(step, Wait):
                    self.sleep(max(0.0, step.until - self.clock()))
                state = self.store.load(task.session_id)
            return None
        finally:
            spent_output = 0
            for prefetch, estimated in zip(watch.stopped, watch.estimated_input, strict=True):
                prefetch.join(STOPPED_JOIN_S)  # what the dropped ones wrote until they were closed
                spent_output += prefetch.output_tokens()
                self.metrics.count(DISCARDED_OUTPUT_METRIC, prefetch.output_tokens())
                self._settle(prefetch, estimated)
            self._count_dropped(task.session_id, watch, spent_output)

    def abandoned(self, task: TurnTask) -> None:
        """The watcher's invocation died: its utterance and speculation are forgotten, and a turn
        it was running (a promoted speculation) ends as a lost runner's does: an error, a spoken
        apology, idle."""
        committed = self.committer.apply(task.session_id, lambda fresh: abandon_watch(fresh, task.stream_id))
        turn = committed.state.turn if committed is not None else None
        stream = turn.stream if turn is not None else None
        if stream is None or not (stream.runner or "").startswith(f"{task.stream_id}."):
            return
        held = TurnTask(session_id=task.session_id, stream_id=stream.stream_id, endpoint=task.endpoint)
        reason = "the turn could not run (its runner stopped)"
        self.runner.fail(held, ErrorCode.CONDUCTOR_ERROR, reason, fallback_line=RUNNER_LOST_LINE)

    # ---- one speculation -----------------------------------------------------------------------

    def _speculate(self, watch: _Watch, state: SessionState, step: Speculate) -> TurnFigures | None:
        """Start the model on the partial and hold its answer until the final decides. The request
        goes out first and the speculation is committed in its shadow (as a runner claims its
        stream): if the commit finds the words changed or the final come, the request is dropped."""
        task, claim = watch.task, watch.claim
        window = request_window(self._history(watch, state), step.text)
        messages, chars = window, sum(map(message_chars, window))
        if self.runner.memory is not None:  # the request's size as the memory budget counts it: all of it
            fitted = self.runner.memory.fit(state, window)
            messages, chars = fitted.messages, fitted.chars
        offered = self.runner.mcp.offered()[0] if self.runner.mcp is not None else {}
        tools = self.runner.session_tools(state, offered)
        held = self.runner.spend_guard.reserve(state, messages)  # raises OverBudget: nothing is sent
        context, _names_heard = self.runner.request_context.for_request(state, messages, words=step.text)
        prefetch = Prefetch(
            lambda: self.runner.brain.stream(messages, summary=state.summary, tools=tools, context=context)
        )
        prefetch.reservation = held
        self.metrics.count(SPECULATIONS_METRIC)
        spent = math.ceil(chars / max(state.chars_per_token, 1.0))  # input tokens, at the measured ratio
        try:
            started = self.committer.apply(
                task.session_id,
                lambda fresh: start_speculation(
                    fresh,
                    task.stream_id,
                    claim.runner,
                    step.key,
                    now=self.clock(),
                    deadline=claim.deadline,
                    settings=self.rules,
                ),
                hint=state,
            )
        except StreamSuperseded:  # the partial changed, or the final came first: it wins
            started = None
        if started is None or started.state.turn is None or started.state.turn.stream is None:
            self._discard(watch, prefetch, spent)
            return None
        stream_id = started.state.turn.stream.stream_id
        poll_s = self.settings.speculation_poll_ms / 1000
        while True:
            self.sleep(poll_s)
            fresh = self.store.load(task.session_id)
            where = "dropped" if fresh is None else status(fresh, stream_id, claim.runner)
            if where == "promoted" and fresh is not None:
                self.log.info("speculation promoted", extra={"session_id": task.session_id})
                stream = TurnTask(session_id=task.session_id, stream_id=stream_id, endpoint=task.endpoint)
                if prefetch.failed_early:  # the model failed before it wrote a word: ask it again, now
                    self.runner.spend_guard.settle(held, prefetch.usage)
                    return self.runner.run_promoted(stream, fresh, claim, watch.remaining_ms, None, None)
                return self.runner.run_promoted(stream, fresh, claim, watch.remaining_ms, prefetch, window)
            if where == "dropped" or fresh is None:
                self._discard(watch, prefetch, spent)
                return None
            reason = self._give_up_reason(fresh, stream_id, prefetch, watch.remaining_ms)
            if reason is not None:
                try:
                    committed = self._give_up(task, stream_id, reason, fresh)
                except StreamSuperseded:  # the final came meanwhile: read whether it promoted it
                    continue
                self._discard(watch, prefetch, spent)
                self._after_leaving(watch, committed)
                return None

    def _give_up_reason(
        self, state: SessionState, stream_id: str, prefetch: Prefetch, remaining_ms: RemainingMs
    ) -> str | None:
        if prefetch.failed_early:
            return "the model failed before the final came"
        if hold_expired(state, stream_id, now=self.clock(), settings=self.rules):
            return "no final transcript came"
        if state.ended_at is not None:
            return "the session was ended"
        if remaining_ms() < self.settings.turn_reserve_ms:
            return "the watcher ran out of time"
        return None

    def _history(self, watch: _Watch, state: SessionState) -> list[Message]:
        """The history window for a speculation's request: read once per watch, again only if the
        history changed since."""
        kept = watch.history
        if kept is not None and kept[:2] == (state.history_len, state.history_version):
            return kept[2]
        size = min(self.settings.history_window, state.window_cap or self.settings.history_window)
        window = self.store.history(state.session_id, size, max_chars=self.settings.history_read_chars)
        watch.history = (state.history_len, state.history_version, window)
        return window

    def _discard(self, watch: _Watch, prefetch: Prefetch, estimated_input: int) -> None:
        """Stop the model and count what the speculation spent for nothing (its output once the
        stream is closed, at the end of the watch)."""
        prefetch.stop()
        watch.stopped.append(prefetch)
        watch.estimated_input.append(estimated_input)
        self.metrics.count(DISCARDED_METRIC)
        self.metrics.count(DISCARDED_INPUT_METRIC, prefetch.usage.get("inputTokens", estimated_input))

    def _settle(self, prefetch: Prefetch, estimated_input: int) -> None:
        """A dropped speculation's real cost replaces what it held of the ceiling: Bedrock's counts
        when its ``metadata`` came before it was closed, else the estimates."""
        held = prefetch.reservation if isinstance(prefetch.reservation, Reservation) else None
        reported = prefetch.usage or {"inputTokens": estimated_input, "outputTokens": prefetch.output_tokens()}
        try:
            self.runner.spend_guard.settle(held, reported)
        except Exception:  # the reservation stays held: the person's day counts it, never less
            self.log.exception("speculation's spend not settled", extra={"reserved": getattr(held, "usd", 0)})

    def _count_dropped(self, session_id: str, watch: _Watch, spent_output: int) -> None:
        """The dropped speculations' tokens join the session's state, for the next turn's usage:
        Bedrock's own counts where its ``metadata`` came before the stream was closed, else the
        estimates the metrics use (input at the measured ratio, output from the text written).
        One write at the end of the watch, after any turn it ran has spoken."""
        spent_input = sum(
            prefetch.usage.get("inputTokens", estimated)
            for prefetch, estimated in zip(watch.stopped, watch.estimated_input, strict=True)
        )
        if spent_input <= 0 and spent_output <= 0:
            return
        try:
            self.committer.apply(session_id, lambda fresh: count_dropped(fresh, spent_input, spent_output))
        except ConductorBusy:
            self.log.warning(
                "dropped speculations not counted: the session kept changing", extra={"session_id": session_id}
            )

    # ---- leaving -------------------------------------------------------------------------------

    def _give_up(self, task: TurnTask, stream_id: str, reason: str, state: SessionState) -> Committed | None:
        """Drop the speculation. Raises ``StreamSuperseded`` when it is no longer one to drop: a
        final that came since the last read may have promoted it (then this invocation runs it)."""
        committed = self.committer.apply(
            task.session_id,
            lambda fresh: drop_speculation(fresh, stream_id, reason, now=self.clock()),
            hint=state,
        )
        self.log.info("speculation dropped", extra={"session_id": task.session_id, "reason": reason})
        return committed

    def _leave(self, watch: _Watch) -> None:
        task, claim = watch.task, watch.claim
        committed = self.committer.apply(
            task.session_id, lambda fresh: release_watch(fresh, task.stream_id, claim.runner, now=self.clock())
        )
        self._after_leaving(watch, committed)

    def _after_leaving(self, watch: _Watch, committed: Committed | None) -> None:
        """A background tool's outcome that waited for the person to be silent is reported now:
        its turn runs in this invocation."""
        if committed is None:
            return
        self.runner.delivery.deliver(watch.task.endpoint, committed)
        if committed.run_model:
            task = TurnTask.for_stream(committed.state, committed.run_model, watch.task.endpoint)
            self.runner.run(task, watch.remaining_ms)
