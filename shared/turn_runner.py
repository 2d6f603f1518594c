"""The turn runner: streams the model for one launched turn, in its own invocation.

``$default`` decides and commits a turn, then launches it (``shared.turn_launcher``); the runner
claims the stream (only one invocation ever runs it), streams the model, commits each piece the
core decides on and posts its events, and resumes as long as the core asks. Whatever breaks, the
turn ends cleanly (``conductor_error`` or ``bedrock_error``, then idle): a session never stays
"thinking".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from shared.brain import BrainError
from shared.commit import Committer, ConductorBusy, Metrics
from shared.config import Settings
from shared.core import conductor
from shared.core.conductor import CONTEXT_FULL_STOP, Outcome, StreamSuperseded, StreamTaken
from shared.core.messages import Message, shrink_window
from shared.core.model_output import ModelMessage, StreamItem, TextDelta, ToolUseStarted
from shared.core.state import SessionState
from shared.core.stream import RunnerClaim
from shared.delivery import Delivery
from shared.protocol import ErrorCode
from shared.store import SessionStore
from shared.turn_launcher import TurnTask

RemainingMs = Callable[[], int]
# From the request to the model to the first partial of its answer posted, per model message.
FIRST_PARTIAL_METRIC = "FirstPartialLatency"
TOKEN_METRICS = {"InputTokens": "inputTokens", "OutputTokens": "outputTokens"}


class Brain(Protocol):
    def stream(self, messages: list[Message]) -> Any: ...


class _OutOfTime(Exception):
    pass


class _ContextOverflow(Exception):
    """Even the smallest window (the last user message alone) does not fit the model."""


class TurnRunner:
    def __init__(
        self,
        *,
        store: SessionStore,
        brain: Brain,
        committer: Committer,
        delivery: Delivery,
        settings: Settings,
        logger: Any,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.brain = brain
        self.committer = committer
        self.delivery = delivery
        self.settings = settings
        self.log = logger
        self.metrics = metrics

    def run(self, task: TurnTask, remaining_ms: RemainingMs) -> None:
        """Run the model for the task's stream, resuming as long as the core asks.

        The first commit claims the stream for this invocation and every later one checks it still
        holds it, so a second delivery of the same task stops at its first commit.
        """
        state = task.session_state() or self.store.load(task.session_id)
        if state is None:
            return
        claim = RunnerClaim(uuid.uuid4().hex, time.time() + remaining_ms() / 1000)
        self._run_model(task, state, remaining_ms, claim)

    def fail(
        self,
        task: TurnTask,
        code: ErrorCode,
        message: str,
        *,
        fallback_line: str | None = None,
        claim: RunnerClaim | None = None,
    ) -> None:
        """End the task's stream with an error (if it is still the session's), keeping what was said.

        A runner passes its ``claim``: a duplicate delivery that failed must not end the stream the
        other invocation is streaming.
        """
        try:
            committed = self.committer.apply(
                task.session_id,
                lambda fresh: conductor.stream_failed(
                    fresh, task.stream_id, code, message, fallback_line=fallback_line, claim=claim
                ),
            )
        except (StreamSuperseded, StreamTaken):
            return
        if committed is not None:
            self.delivery.deliver(task.endpoint, committed)

    # ---- the model ---------------------------------------------------------------------------

    def _run_model(self, task: TurnTask, state: SessionState, remaining_ms: RemainingMs, claim: RunnerClaim) -> None:
        stream_id: str | None = task.stream_id
        while stream_id:
            current = task.model_copy(update={"stream_id": stream_id})
            if remaining_ms() < self.settings.turn_reserve_ms:
                self.fail(current, ErrorCode.CONDUCTOR_ERROR, "out of time", claim=claim)
                return
            try:
                stream_id, state = self._stream_fitting(current, state, remaining_ms, claim)
            except StreamSuperseded:
                self.log.info("model stream stopped: superseded", extra={"session_id": task.session_id})
                return
            except StreamTaken:
                self.log.warning(
                    "model stream stopped: another invocation holds it", extra={"session_id": task.session_id}
                )
                return
            except ConductorBusy:
                self.fail(
                    current, ErrorCode.CONDUCTOR_ERROR, "the session kept changing; the turn stopped", claim=claim
                )
                return
            except BrainError as error:
                self.metrics.count("BedrockErrors")
                self.log.warning(
                    "model failed",
                    extra={
                        "session_id": task.session_id,
                        "bedrock_code": error.code,
                        "during_stream": error.during_stream,
                    },
                )
                stalled = error.stalled
                self.fail(
                    current,
                    ErrorCode.BEDROCK_ERROR,
                    "the model stopped responding" if stalled else f"the model failed: {error.code}",
                    fallback_line=conductor.STALL_FALLBACK_LINE if stalled else None,
                    claim=claim,
                )
                return
            except _ContextOverflow:
                self.metrics.count("BedrockErrors")
                self.fail(
                    current, ErrorCode.BEDROCK_ERROR, "the request is too long for the model, even alone", claim=claim
                )
                return
            except _OutOfTime:
                self.fail(current, ErrorCode.CONDUCTOR_ERROR, "the turn ran out of time", claim=claim)
                return
            except Exception:  # the turn must end cleanly whatever broke, or the session stays busy
                self.log.exception("turn failed", extra={"session_id": task.session_id})
                self.fail(current, ErrorCode.CONDUCTOR_ERROR, "the conductor failed mid-turn", claim=claim)
                return

    def _stream_fitting(
        self, task: TurnTask, state: SessionState, remaining_ms: RemainingMs, claim: RunnerClaim
    ) -> tuple[str | None, SessionState]:
        """One model message, on a history window that fits the model's context.

        Bedrock refuses a request longer than the model's context window before streaming; the
        window then shrinks (never splitting a tool use from its results, always starting at a
        plain user message) until it fits, and the next requests start from the smaller size.
        """
        window = min(self.settings.history_window, state.window_cap or self.settings.history_window)
        messages = self.store.history(task.session_id, window)
        window_cap: int | None = None
        while True:
            message = ModelMessage()
            try:
                state = self._stream_message(task, state, messages, message, remaining_ms, claim)
            except BrainError as error:
                if not error.input_too_long or message.content:
                    raise
                message.stop_reason = CONTEXT_FULL_STOP
            if message.stop_reason == CONTEXT_FULL_STOP and not message.content:
                smaller = shrink_window(messages)
                if smaller is None:
                    raise _ContextOverflow
                self.log.info(
                    "history window shrunk to fit the model",
                    extra={"session_id": task.session_id, "messages": len(smaller), "was": len(messages)},
                )
                self.metrics.count("ContextOverflows")
                messages, window_cap = smaller, len(smaller)
                continue
            if message.stop_reason == CONTEXT_FULL_STOP:
                window_cap = max(2, len(messages) // 2)
            break
        committed = self.committer.apply(
            task.session_id,
            lambda fresh: conductor.stream_finished(
                fresh, task.stream_id, message, self.settings.core, window_cap=window_cap, claim=claim
            ),
            hint=state,
        )
        assert committed is not None
        self.metrics.count("ToolCalls", len(message.tool_uses))
        self.delivery.deliver(task.endpoint, committed)
        return committed.run_model, committed.state

    def _stream_message(
        self,
        task: TurnTask,
        state: SessionState,
        messages: list[Message],
        message: ModelMessage,
        remaining_ms: RemainingMs,
        claim: RunnerClaim,
    ) -> SessionState:
        requested = time.monotonic()
        spoke = False
        items = self.brain.stream(messages)
        try:
            for item in items:
                if remaining_ms() < self.settings.turn_reserve_ms:
                    raise _OutOfTime
                state = self._on_stream_item(task, state, item, message, claim)
                if not spoke and isinstance(item, TextDelta):
                    spoke = True
                    self.metrics.timing(FIRST_PARTIAL_METRIC, (time.monotonic() - requested) * 1000)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            self._count_usage(message)
        return state

    def _count_usage(self, message: ModelMessage) -> None:
        """Tokens Bedrock billed for the message (its stream's ``metadata.usage``)."""
        for metric, key in TOKEN_METRICS.items():
            self.metrics.count(metric, message.usage.get(key, 0))

    def _on_stream_item(
        self, task: TurnTask, state: SessionState, item: StreamItem, message: ModelMessage, claim: RunnerClaim
    ) -> SessionState:
        message.add(item)
        stream_id = task.stream_id
        if isinstance(item, TextDelta):
            decide: Callable[[SessionState], Outcome] = lambda fresh: conductor.stream_text(  # noqa: E731
                fresh, stream_id, item.text, claim
            )
        elif isinstance(item, ToolUseStarted):
            decide = lambda fresh: conductor.stream_tool_started(fresh, stream_id, claim)  # noqa: E731
        else:  # complete tool uses and the message end are decided once the stream is over
            return state
        committed = self.committer.apply(task.session_id, decide, hint=state)
        assert committed is not None
        self.delivery.deliver(task.endpoint, committed)
        return committed.state
