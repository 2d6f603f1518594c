"""The turn runner: streams the model for one launched turn, in its own invocation.

``$default`` decides and commits a turn, then launches it (``shared.adapters.turn_launcher``); the runner
claims the stream (only one invocation ever runs it), streams the model, commits each piece the
core decides on and posts its events, and resumes as long as the core asks. Whatever breaks, the
turn ends cleanly (``conductor_error`` or ``bedrock_error``, then idle): a session never stays
"thinking".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.adapters.brain import BrainError
from shared.adapters.model_prefetch import Prefetch
from shared.adapters.store import SessionStore
from shared.adapters.turn_launcher import TurnTask
from shared.core import conductor, mcp_tools
from shared.core.decision import Outcome, StreamSuperseded
from shared.core.failure_lines import FailureCause, bedrock_cause
from shared.core.mcp_tools import Offered
from shared.core.memory import message_chars
from shared.core.messages import Message, shrink_window
from shared.core.model_output import ModelMessage
from shared.core.speculation import count_dropped
from shared.core.speech import Pacing, SegmentText
from shared.core.state import SessionState
from shared.core.stream import (
    CONTEXT_FULL_STOP,
    STALL_FALLBACK_LINE,
    RunnerClaim,
    StreamReport,
    StreamTaken,
    stream_failed,
    stream_finished,
)
from shared.core.usage import budget_line, dropped_tokens, estimated_usage, usage_of
from shared.core.wrapper import ClientTool
from shared.flows.commit import Committer, ConductorBusy, Metrics
from shared.flows.config import Settings
from shared.flows.delivery import Delivery
from shared.flows.mcp_registry import McpTurns
from shared.flows.memory_keeper import Fitted, MemoryKeeper
from shared.flows.memory_recall import MemoryRecall
from shared.flows.memory_tools import MemoryTools
from shared.flows.message_stream import MessageStream, OutOfTime, TurnFigures
from shared.flows.request_context import RequestContext
from shared.flows.spend_guard import OverBudget, Reservation, SpendGuard
from shared.wire.protocol import ErrorCode
from shared.wire.protocol_tools import RESERVED_TOOL_NAMES

RemainingMs = Callable[[], int]
# Per runner invocation, from the stream's launch (transcript or last tool result committed).
FIRST_PARTIAL_METRIC = "FirstPartialMs"
FIRST_SPEAK_METRIC = "FirstSpeakMs"
MODEL_FIRST_TOKEN_METRIC = "ModelFirstTokenMs"  # from the request to the model to its first text
# A turn launched alongside its write whose write lost its race (its model request was wasted).
EARLY_LAUNCH_LOST_METRIC = "EarlyLaunchesLost"
# What their model requests spent for nothing (``shared.core.usage.dropped_tokens``).
EARLY_LAUNCH_LOST_INPUT_METRIC = "EarlyLaunchLostInputTokens"
EARLY_LAUNCH_LOST_OUTPUT_METRIC = "EarlyLaunchLostOutputTokens"
OVER_BUDGET_METRIC = "RequestsOverBudget"  # model requests not sent: the person's ceiling would pass
BUDGET_MESSAGE = "today's spending limit is reached: the model was not asked"
TOKEN_METRICS = {
    "InputTokens": "inputTokens",
    "OutputTokens": "outputTokens",
    "CacheReadInputTokens": "cacheReadInputTokens",
    "CacheWriteInputTokens": "cacheWriteInputTokens",
}


class DeadlineAlarms(Protocol):
    def set_alarm(self, session_id: str, endpoint: str, due_at: float) -> None:
        """Have ``ConductorService.expire_tool_calls`` run for the session at ``due_at`` (epoch seconds)."""
        ...


class Brain(Protocol):
    def stream(
        self,
        messages: list[Message],
        *,
        summary: str | None = None,
        tools: Sequence[ClientTool] | None = None,
        on_sent: Callable[[], None] | None = None,
        context: Sequence[str] = (),
    ) -> Any: ...


class _ContextOverflow(Exception):
    """Even the smallest window (the last user message alone) does not fit the model."""


@dataclass
class _Run:
    """One invocation's run: its task (the current stream), claim, clock and live segment text."""

    task: TurnTask
    claim: RunnerClaim
    remaining_ms: RemainingMs
    segment: SegmentText
    figures: TurnFigures
    carried: list[Message] | None = None  # the first stream's history window, read by ``$default``
    fitted: Fitted | None = None  # the last request's window, as the memory budget cut it
    state: SessionState | None = None  # the last state this run committed
    prefetched: Prefetch | None = None  # the first message, already streaming (a promoted speculation)
    # The events of the decision that launched the task alongside its write, until posted.
    decision_frames: list[tuple[int, str]] = field(default_factory=list)
    window: list[Message] | None = None  # the last request's messages
    offered: dict[str, Offered] | None = None  # the MCP tools the last request offered (None: not asked)
    final_text: str | None = None  # the text of the message that ended the turn (None: it did not end here)
    lost_usage: dict[str, int] | None = None  # what the request spent, when its early launch lost its race


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
        alarms: DeadlineAlarms | None = None,
        memory: MemoryKeeper | None = None,
        memory_tools: MemoryTools | None = None,
        recall: MemoryRecall | None = None,
        mcp: McpTurns | None = None,
    ) -> None:
        self.alarms = alarms
        self.memory = memory
        self.memory_tools = memory_tools
        self.recall = recall
        self.mcp = mcp  # the MCP servers' tools: offered, and their calls launched
        self.store = store
        self.brain = brain
        self.committer = committer
        self.delivery = delivery
        self.settings = settings
        self.log = logger
        self.metrics = metrics
        self.clock: Callable[[], float] = time.time  # the streams' clock (partials, stop checks)
        self.request_context = RequestContext(store, logger)
        self.spend_guard = SpendGuard(
            committer.spend,
            ceiling_usd=settings.daily_budget_usd,
            prices=settings.prices,
            max_tokens=settings.max_tokens,
            model_id=settings.model_id,
        )

    def run(self, task: TurnTask, remaining_ms: RemainingMs) -> TurnFigures | None:
        """Run the model for the task's stream, resuming as long as the core asks.

        The first commit claims the stream for this invocation and every later one checks it still
        holds it, so a second delivery of the same task stops at its first commit. Returns what the
        invocation measured (None when the session is gone).
        """
        state = task.session_state() or self.store.load(task.session_id)
        if state is None:
            return None
        claim = RunnerClaim(uuid.uuid4().hex, time.time() + remaining_ms() / 1000)
        run = _Run(task, claim, remaining_ms, SegmentText(self._pacing()), TurnFigures(), task.history_window())
        run.decision_frames = task.decision_frames()
        return self._run(run, state)

    def run_promoted(
        self,
        task: TurnTask,
        state: SessionState,
        claim: RunnerClaim,
        remaining_ms: RemainingMs,
        first: Prefetch | None,
        window: list[Message] | None,
    ) -> TurnFigures:
        """A speculation the final transcript confirmed (``state``, just read): its stream, which
        ``claim`` holds, goes on from what the model already wrote (``first``, asked with ``window``;
        None: the model is asked now, on the stored history)."""
        segment = SegmentText(self._pacing())
        run = _Run(task, claim, remaining_ms, segment, TurnFigures(), carried=window, prefetched=first)
        return self._run(run, state)

    def _run(self, run: _Run, state: SessionState) -> TurnFigures:
        self._run_model(run, state)
        if self.memory is not None:  # after the turn's events went out: off the hot path
            self.memory.after_turn(run.task.session_id, run.state, run.fitted, run.claim.runner)
        if self.recall is not None:
            self.recall.after_turn(run.state, run.window, run.final_text, time.time())
        self._record(run.figures)
        return run.figures

    def _pacing(self) -> Pacing:
        return Pacing(
            flush_ms=self.settings.partial_flush_ms,
            growth=self.settings.partial_growth,
            speak_interval_ms=self.settings.speak_interval_ms,
        )

    def _record(self, figures: TurnFigures) -> None:
        """The invocation's figures as metrics (one record per runner invocation)."""
        for name, value in (
            (FIRST_PARTIAL_METRIC, figures.first_partial_ms),
            (FIRST_SPEAK_METRIC, figures.first_speak_ms),
            (MODEL_FIRST_TOKEN_METRIC, figures.model_first_token_ms),
        ):
            if value is not None:
                self.metrics.timing(name, value)
        for metric, key in TOKEN_METRICS.items():
            self.metrics.count(metric, figures.usage.get(key, 0))

    def fail(
        self,
        task: TurnTask,
        code: ErrorCode,
        message: str,
        *,
        fallback_line: str | None = None,
        claim: RunnerClaim | None = None,
        text: str | None = None,
        cause: FailureCause | None = None,
    ) -> None:
        """End the task's stream with an error (if it is still the session's), keeping what was said.

        A runner passes its ``claim``: a duplicate delivery that failed must not end the stream the
        other invocation is streaming; and ``text``, the segment's text it holds (never written
        per delta).
        """
        try:
            committed = self.committer.apply(
                task.session_id,
                lambda fresh: stream_failed(
                    fresh,
                    task.stream_id,
                    code,
                    message,
                    fallback_line=fallback_line,
                    claim=claim,
                    text=text,
                    cause=cause,
                ),
            )
        except (StreamSuperseded, StreamTaken):
            return
        if committed is not None:
            self.delivery.deliver(task.endpoint, committed)

    # ---- the model ---------------------------------------------------------------------------

    def _run_model(self, run: _Run, state: SessionState) -> None:
        task, claim = run.task, run.claim
        stream_id: str | None = task.stream_id
        while stream_id:
            current = task.model_copy(update={"stream_id": stream_id})
            run.task = current

            def fail(
                code: ErrorCode,
                message: str,
                fallback_line: str | None = None,
                cause: FailureCause | None = None,
                current: TurnTask = current,
            ) -> None:
                self.fail(
                    current,
                    code,
                    message,
                    fallback_line=fallback_line,
                    claim=claim,
                    text=run.segment.text,
                    cause=cause,
                )

            if run.remaining_ms() < self.settings.turn_reserve_ms:
                fail(ErrorCode.CONDUCTOR_ERROR, "out of time", cause=FailureCause.OUT_OF_TIME)
                return
            try:
                stream_id, state = self._stream_fitting(run, state)
                run.state = state
            except StreamSuperseded:
                self.log.info("model stream stopped: superseded", extra={"session_id": task.session_id})
                if run.decision_frames:  # launched alongside a write that lost its race: asked for nothing
                    self._count_lost(run)
                return
            except StreamTaken:
                self.log.warning(
                    "model stream stopped: another invocation holds it", extra={"session_id": task.session_id}
                )
                return
            except ConductorBusy:
                fail(ErrorCode.CONDUCTOR_ERROR, "the session kept changing; the turn stopped", cause=FailureCause.BUSY)
                return
            except OverBudget:
                self.metrics.count(OVER_BUDGET_METRIC)
                fail(ErrorCode.BUDGET_EXCEEDED, BUDGET_MESSAGE, budget_line(time.time()))
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
                fail(
                    ErrorCode.BEDROCK_ERROR,
                    "the model stopped responding" if stalled else f"the model failed: {error.code}",
                    STALL_FALLBACK_LINE if stalled else None,
                    bedrock_cause(error.code, during_stream=error.during_stream),
                )
                return
            except _ContextOverflow:
                self.metrics.count("BedrockErrors")
                fail(
                    ErrorCode.BEDROCK_ERROR,
                    "the request is too long for the model, even alone",
                    cause=FailureCause.TOO_LONG,
                )
                return
            except OutOfTime:
                fail(ErrorCode.CONDUCTOR_ERROR, "the turn ran out of time", cause=FailureCause.OUT_OF_TIME)
                return
            except Exception:  # the turn must end cleanly whatever broke, or the session stays busy
                self.log.exception("turn failed", extra={"session_id": task.session_id})
                fail(ErrorCode.CONDUCTOR_ERROR, "the conductor failed mid-turn")
                return

    def _count_lost(self, run: _Run) -> None:
        """An early launch whose write lost its race: what its request spent goes to the metrics and,
        for the turn that answers (its ``turnUsage``), to the session's dropped requests' tokens, as a
        dropped speculation's do (one write, in this case only)."""
        self.metrics.count(EARLY_LAUNCH_LOST_METRIC)
        spent_input, spent_output = dropped_tokens(run.lost_usage or {})
        self.metrics.count(EARLY_LAUNCH_LOST_INPUT_METRIC, spent_input)
        self.metrics.count(EARLY_LAUNCH_LOST_OUTPUT_METRIC, spent_output)
        session_id = run.task.session_id
        try:
            self.committer.apply(session_id, lambda fresh: count_dropped(fresh, spent_input, spent_output))
        except Exception:  # the metrics and the person's spend count it all the same
            self.log.warning("lost early launch's tokens not in the session", extra={"session_id": session_id})

    def _stream_fitting(self, run: _Run, state: SessionState) -> tuple[str | None, SessionState]:
        """One model message, on a history window that fits the model's context.

        Bedrock refuses a request longer than the model's context window before streaming; the
        window then shrinks (never splitting a tool use from its results, always starting at a
        plain user message) until it fits, and the next requests start from the smaller size.
        """
        task = run.task
        window = min(self.settings.history_window, state.window_cap or self.settings.history_window)
        carried, run.carried = run.carried, None
        messages = (
            carried
            if carried is not None
            else self.store.history(task.session_id, window, max_chars=self.settings.history_read_chars)
        )
        if self.memory is not None:
            run.fitted = self.memory.fit(state, messages)
            messages = run.fitted.messages
        window_cap: int | None = None
        while True:
            message = ModelMessage()
            try:
                state = self._stream_message(run, state, messages, message)
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
        text = run.segment.text
        ratio = None if self.memory is None else self.memory.calibration(state, run.fitted, message.usage)
        run.window = messages
        run.final_text = None
        mcp_offered = run.offered  # a promoted speculation's first message asked none: listed now
        if mcp_offered is None:
            mcp_offered = self.mcp.offered()[0] if self.mcp is not None else {}
        memory_answers = (
            self.memory_tools.answers(state, message.tool_uses, time.time())
            if self.memory_tools is not None and message.stop_reason == "tool_use"
            else {}
        )

        def finished(fresh: SessionState) -> Outcome:
            now = time.time()
            report = StreamReport(
                task.stream_id,
                message,
                claim=run.claim,
                text=text,
                now=now,
                window_cap=window_cap,
                chars_per_token=ratio,
                usage=usage_of(message.usage, self.settings.model_id) if message.usage else None,
                first_partial_at=run.figures.first_partial_at,
                first_speak_at=run.figures.first_speak_at,
                memory_answers=memory_answers,
                mcp_tools=mcp_offered,
            )
            outcome = stream_finished(fresh, report, self.settings.core)
            if self.memory is not None and outcome.run_model is None:  # the run's last commit
                outcome.state = self.memory.announce(outcome.state, run.fitted, run.claim, now)
            return outcome

        committed = self.committer.apply(task.session_id, finished, hint=state)
        assert committed is not None
        if not message.tool_uses and committed.run_model is None and message.stop_reason in ("end_turn", ""):
            run.final_text = " ".join(block["text"] for block in message.history_content() if "text" in block)
        run.segment.next_segment()
        self.metrics.count("ToolCalls", len(message.tool_uses))
        self.delivery.deliver(task.endpoint, committed)
        self._arm_deadline(task, committed.state)
        if self.mcp is not None:
            self.mcp.launch(committed.outcome.mcp_calls, committed.state, task.endpoint)
        return committed.run_model, committed.state

    def _arm_deadline(self, task: TurnTask, state: SessionState) -> None:
        """The app now runs the model's tools: past the first deadline, the calls time out."""
        due_at = conductor.next_tool_deadline(state, self.settings.core)
        if due_at is None or self.alarms is None:
            return
        try:
            self.alarms.set_alarm(task.session_id, task.endpoint, due_at)
        except Exception:  # the turn goes on; only a tool that never answers would then hang
            self.log.exception("tool deadline not armed", extra={"session_id": task.session_id})
            self.metrics.count("DeadlineAlarmFailures")

    def session_tools(self, state: SessionState, offered: dict[str, Offered] | None = None) -> list[ClientTool] | None:
        """The app's declared tools and the catalog's protocol calls (None: the whole catalog), with the
        MCP servers' tools ``offered`` (``shared.core.mcp_tools.shown``)."""
        extra = mcp_tools.shown(list(offered.values())) if offered else []
        if state.tools is None:
            return [*self.settings.catalog, *extra] if extra else None
        own = (tool for tool in self.settings.catalog if tool.name in RESERVED_TOOL_NAMES)
        return [*state.tools, *own, *extra]

    def _stream_message(
        self, run: _Run, state: SessionState, messages: list[Message], message: ModelMessage
    ) -> SessionState:
        streamer = MessageStream(
            task=run.task,
            state=state,
            claim=run.claim,
            segment=run.segment,
            store=self.store,
            committer=self.committer,
            delivery=self.delivery,
            figures=run.figures,
            out_of_time=lambda: run.remaining_ms() < self.settings.turn_reserve_ms,
            stop_check_s=self.settings.stop_check_ms / 1000,
            barge_in_check_s=self.settings.barge_in_check_ms / 1000,
            clock=self.clock,
            confirmed=run.prefetched is not None,  # its runner read the state that promoted it
            decision_frames=run.decision_frames,
        )
        prefetched, run.prefetched = run.prefetched, None
        if prefetched is not None:  # its watcher held its cost of the ceiling
            held = prefetched.reservation if isinstance(prefetched.reservation, Reservation) else None
            requested, items = prefetched.requested_at, prefetched.items()
        else:
            held = self.spend_guard.reserve(state, messages)  # raises OverBudget: nothing is sent
            offered: dict[str, Offered] = {}
            if self.mcp is not None:
                offered, state = self.mcp.offered_telling(run.task, state)
            run.offered = offered  # what the message's tool calls are decided against
            requested = time.monotonic()
            tools = self.session_tools(state, offered)
            context, names_heard = self.request_context.for_request(state, messages)

            def sent() -> None:  # in the model's shadow: the stream's claim, then what was heard
                streamer.model_requested()
                if names_heard is not None:
                    self.delivery.post_unnumbered(run.task.endpoint, state, names_heard)

            items = self.brain.stream(messages, summary=state.summary, tools=tools, on_sent=sent, context=context)
        lost = False
        try:
            return streamer.run(items, message, requested)
        except StreamSuperseded:
            lost = bool(run.decision_frames)  # an early launch whose write lost its race: spent for nothing
            raise
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            spent = message.usage
            if lost:  # closed before its ``metadata``, as a rule: its spend is estimated
                spent = run.lost_usage = message.usage or self._estimated(run, state, messages, message)
            self.spend_guard.settle(held, spent)
            for key, value in ({} if lost else message.usage).items():
                run.figures.usage[key] = run.figures.usage.get(key, 0) + value

    @staticmethod
    def _estimated(run: _Run, state: SessionState, messages: list[Message], message: ModelMessage) -> dict[str, int]:
        """A request closed before its ``metadata``: what it read (all of it, system prompt and tools
        included, as the memory budget counts it; else its messages and summary), what it wrote."""
        fitted = run.fitted
        if fitted is not None and fitted.messages is messages:
            read = fitted.chars
        else:
            read = sum(map(message_chars, messages)) + len(state.summary or "")
        wrote = sum(len(block.get("text", "")) for block in message.content)
        wrote += sum(len(str(use.input)) for use in message.tool_uses)
        return estimated_usage(read, state.chars_per_token, wrote)
