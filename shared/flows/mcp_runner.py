"""Calls of tools on MCP servers, made by the conductor in a turn-runner invocation of their own.

A call the core dispatched (``Outcome.mcp_calls``: at once for a tool that only reads, after the
person's yes for one that may change things) is launched as a task of the turn function. Here each
call is:

1. **recorded before it is made** (``shared.core.mcp_tools.start``, one conditional commit): MCP has
   no idempotency, so a second delivery of the task, or a call answered or cancelled meanwhile, makes
   nothing;
2. **made**, its progress notifications kept on the call like a device's ``toolProgress`` (at most one
   commit a second: shown on the devices, said in the "still running" line), while a watcher reads the
   session every second: a call cancelled by voice (``conductor.cancel``) or ended with its turn is
   cancelled on the server too (MCP's ``notifications/cancelled``); a foreground call still running
   after ``Settings.mcp_foreground_s`` goes on in the background (the model hears it started, the turn goes
   on, the outcome is reported later);
3. **answered** like a device's ``toolResult``, inside an envelope that marks it as the tool's output
   (``shared.core.mcp_tools.result_text``). When that answer completes the round, the model's stream
   goes on in this same invocation.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.adapters.mcp.session import McpUnavailable
from shared.adapters.mcp_client import McpCancelled
from shared.adapters.store import SessionStore
from shared.adapters.turn_launcher import TurnTask
from shared.core import background, conductor, mcp_tools, progress
from shared.core.decision import Outcome
from shared.core.mcp_tools import McpResult, Offered
from shared.core.state import SessionState
from shared.flows.commit import Committer
from shared.flows.config import Settings
from shared.flows.delivery import Delivery
from shared.flows.mcp_registry import McpRegistry
from shared.wire.protocol import ToolProgress, ToolResult

BACKGROUND_LIMIT_S = 600.0  # how long a call may run in all (the turn function's timeout bounds it too)
RESERVE_S = 20.0  # left of the invocation to answer the call and go on with the model
WATCH_EVERY_S = 1.0
CALLS_METRIC = "McpCalls"
FAILURES_METRIC = "McpCallFailures"
CANCELLED_METRIC = "McpCallsCancelled"
MOVED_METRIC = "McpCallsMovedToBackground"

RemainingMs = Callable[[], int]
ContinueStream = Callable[[TurnTask, RemainingMs], object]


class Calls(Protocol):
    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        on_progress: Callable[[float | None, str], None],
        cancelled: Callable[[], bool],
        timeout_s: float,
    ) -> McpResult: ...


class Counter(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...


class _NotToMake(Exception):
    """The call was made already, or is no longer waiting for its result."""


@dataclass
class _Watch:
    """What the watcher of one call shares with it."""

    started: float
    cancelled: threading.Event
    done: threading.Event
    progress: tuple[float | None, str] | None = None
    progress_said: tuple[float | None, str] | None = None
    foreground: bool = True


def name_of(state: SessionState, call_id: str) -> str | None:
    call = state.model_call(call_id)
    if call is not None:
        return call.name
    job = background.job_of(state, call_id)
    return job.name if job is not None else None


def arguments_of(state: SessionState, call_id: str) -> dict[str, Any]:
    call = state.model_call(call_id)
    job = background.job_of(state, call_id)
    text = call.arguments if call is not None else job.arguments if job is not None else "{}"
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class McpRunner:
    def __init__(
        self,
        *,
        store: SessionStore,
        committer: Committer,
        delivery: Delivery,
        registry: McpRegistry,
        clients: Calls,
        settings: Settings,
        logger: Any,
        metrics: Counter,
        continue_stream: ContinueStream,
    ) -> None:
        self.store = store
        self.committer = committer
        self.delivery = delivery
        self.registry = registry
        self.clients = clients
        self.settings = settings
        self.log = logger
        self.metrics = metrics
        self.continue_stream = continue_stream

    def run(self, task: TurnTask, remaining_ms: RemainingMs) -> None:
        """Make the task's calls, at once (each in its own thread), and go on with the model after them."""
        threads = [
            threading.Thread(target=self._one, args=(task, call_id, remaining_ms), name=f"mcp-{index}")
            for index, call_id in enumerate(task.mcp_calls)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _one(self, task: TurnTask, call_id: str, remaining_ms: RemainingMs) -> None:
        try:
            self._make(task, call_id, remaining_ms)
        except Exception:  # the call is answered whatever broke: the turn must not wait for its deadline
            self.log.exception("MCP call failed", extra={"session_id": task.session_id, "call_id": call_id})
            self.metrics.count(FAILURES_METRIC)
            self._answer(task, call_id, McpResult("the conductor failed while making the call", is_error=True), None)

    def _make(self, task: TurnTask, call_id: str, remaining_ms: RemainingMs) -> None:
        state = self.store.load(task.session_id)
        name = name_of(state, call_id) if state is not None else None
        if state is None or name is None:
            return
        offered = self.registry.find(name)
        if offered is None:
            self._answer(task, call_id, McpResult(f"{name} is not offered by any MCP server now", is_error=True), None)
            return

        def starting(fresh: SessionState) -> Outcome:
            outcome = mcp_tools.start(fresh, call_id)
            if outcome is None:
                raise _NotToMake
            return outcome

        try:
            self.committer.apply(task.session_id, starting, hint=state)
        except _NotToMake:
            self.log.info("MCP call not made again", extra={"session_id": task.session_id, "call_id": call_id})
            return
        self.metrics.count(CALLS_METRIC)
        watch = _Watch(started=time.monotonic(), cancelled=threading.Event(), done=threading.Event())
        watcher = threading.Thread(target=self._watch, args=(task, call_id, offered, watch, remaining_ms), daemon=True)
        watcher.start()
        timeout = max(1.0, min(BACKGROUND_LIMIT_S, remaining_ms() / 1000 - RESERVE_S))
        try:
            result = self.clients.call(
                offered.tool.server,
                offered.tool.name,
                arguments_of(state, call_id),
                on_progress=lambda fraction, message: setattr(watch, "progress", (fraction, message)),
                cancelled=watch.cancelled.is_set,
                timeout_s=timeout,
            )
        except McpCancelled:
            self.metrics.count(CANCELLED_METRIC)
            self.log.info("MCP call cancelled on its server", extra={"session_id": task.session_id, "call_id": call_id})
            return
        except TimeoutError:
            result = McpResult(f"{name} took longer than {timeout:.0f} s and was stopped", is_error=True)
        except McpUnavailable as error:
            self.registry.failed(offered.tool.server)
            self.metrics.count(FAILURES_METRIC)
            self.log.warning("MCP server gone mid-call", extra={"server": offered.tool.server, "why": str(error)[:200]})
            result = McpResult(mcp_tools.unreachable_line([offered.tool.server]), is_error=True)
        finally:
            watch.done.set()
            watcher.join(timeout=WATCH_EVERY_S * 3)
        self._answer(task, call_id, result, offered, remaining_ms)

    def _answer(
        self,
        task: TurnTask,
        call_id: str,
        result: McpResult,
        offered: Offered | None,
        remaining_ms: RemainingMs | None = None,
    ) -> None:
        """The call's result, decided like a device's; the model goes on here when it completed the round."""
        text = result.text if offered is None else mcp_tools.result_text(offered.tool.server, offered.tool.name, result)
        answer = (
            ToolResult(call_id=call_id, error=text) if result.is_error else ToolResult(call_id=call_id, result=text)
        )
        settings = self.settings.core
        committed = self.committer.apply(
            task.session_id, lambda fresh: conductor.handle_tool_result(fresh, answer, settings, now=time.time())
        )
        if committed is None:
            return
        self.delivery.deliver(task.endpoint, committed)
        if committed.run_model and remaining_ms is not None:
            self.continue_stream(TurnTask.for_stream(committed.state, committed.run_model, task.endpoint), remaining_ms)

    # ---- the watcher --------------------------------------------------------------------------

    def _watch(self, task: TurnTask, call_id: str, offered: Offered, watch: _Watch, remaining_ms: RemainingMs) -> None:
        """Every second while the call runs: its progress kept, a cancel seen, a long call moved to the background."""
        streams: list[threading.Thread] = []
        while not watch.done.wait(WATCH_EVERY_S):
            try:
                state = self.store.load(task.session_id)
                if state is None or not mcp_tools.pending(state, call_id):
                    watch.cancelled.set()  # cancelled by voice, or its turn ended: stop it on the server
                    continue
                if watch.progress is not None and watch.progress != watch.progress_said:
                    watch.progress_said = watch.progress
                    self._progress(task, call_id, offered, watch.progress)
                if watch.foreground and time.monotonic() - watch.started > self.settings.mcp_foreground_s:
                    watch.foreground = False
                    stream = self._to_background(task, call_id, remaining_ms)
                    if stream is not None:
                        streams.append(stream)
            except Exception:  # a watch that fails leaves the call running to its result
                self.log.exception("MCP call watch failed", extra={"session_id": task.session_id})
        for stream in streams:
            stream.join()

    def _progress(self, task: TurnTask, call_id: str, offered: Offered, said: tuple[float | None, str]) -> None:
        fraction, message = said
        fraction = None if fraction is None else min(1.0, max(0.0, fraction))
        report = ToolProgress(call_id=call_id, name=offered.model_name[:64], fraction=fraction, message=message[:200])
        committed = self.committer.apply(
            task.session_id, lambda fresh: progress.handle_tool_progress(fresh, report, now=time.time())
        )
        if committed is not None:
            self.delivery.deliver(task.endpoint, committed)

    def _to_background(self, task: TurnTask, call_id: str, remaining_ms: RemainingMs) -> threading.Thread | None:
        now = time.time()
        committed = self.committer.apply(
            task.session_id,
            lambda fresh: background.move_to_background(fresh, call_id, now=now, deadline=now + BACKGROUND_LIMIT_S),
        )
        if committed is None:
            return None
        self.metrics.count(MOVED_METRIC)
        self.delivery.deliver(task.endpoint, committed)
        if not committed.run_model:
            return None
        resumed = TurnTask.for_stream(committed.state, committed.run_model, task.endpoint)
        stream = threading.Thread(target=self.continue_stream, args=(resumed, remaining_ms), name="mcp-stream")
        stream.start()  # the model goes on while the call runs
        return stream
