"""The conductor service: the three routes' work against the pure core and the adapters.

``$connect`` binds, ``$disconnect`` unbinds, and ``$default`` parses each frame, decides and
commits (``shared.flows.commit``), posts the decision's events (``shared.flows.delivery``) and, when the core
asks for the model, launches the turn runner in its own invocation (``shared.adapters.turn_launcher``):
nothing here waits on the model, so a frame is handled well within API Gateway's 29 s.
"""

from __future__ import annotations

import base64
import binascii
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from shared.adapters.history_reads import RecentHistory
from shared.adapters.store import ConnectionInfo, DuplicateEvent, SessionStore
from shared.adapters.turn_launcher import TurnTask
from shared.core import (
    admission,
    conductor,
    connection,
    devices,
    from_device,
    result_parts,
    speculation,
    usage,
)
from shared.core.decision import Outcome
from shared.core.from_device import Decide
from shared.core.history_ops import history_after
from shared.core.messages import Message, fit_window
from shared.core.state import SessionState
from shared.flows import frame_routes, session_ready
from shared.flows.commit import Committed, ConductorBusy, Metrics, NullMetrics
from shared.flows.config import Settings
from shared.flows.delivery import Gateway, Request
from shared.flows.early_launch import EarlyLaunch
from shared.flows.frame_routes import Frame, FrameRoute, Refusal
from shared.flows.turn_runner import TurnRunner
from shared.wire.protocol import (
    MAX_DEVICES,
    ErrorCode,
    Event,
    IgnoredEvent,
    Payload,
    ProtocolError,
    SessionStart,
    UserAudioTranscriptFinal,
    parse_event,
)

__all__ = ["ConductorService", "ConnectResult"]

CONNECTIONS_CACHED = 10_000
TOOL_ROUND_TRIP_METRIC = "ToolRoundTripMs"
SPECULATED_METRIC = "TurnsSpeculated"  # per final: 1 when a speculation was running, else 0
PROMOTED_METRIC = "TurnsPromoted"  # per final: 1 when it promoted the speculation, else 0
RATE_LIMITED_METRIC = "EventsRateLimited"  # events refused over the session's budget a second


class Launcher(Protocol):
    def launch(self, task: TurnTask) -> None: ...


@dataclass(frozen=True)
class ConnectResult:
    status: int
    reason: str = ""


class ConductorService:
    def __init__(
        self,
        *,
        store: SessionStore,
        gateway: Gateway,
        launcher: Launcher,
        runner: TurnRunner,
        settings: Settings,
        logger: Any,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.gateway = gateway
        self.launcher = launcher
        self.runner = runner
        self.settings = settings
        self.log = logger
        self.metrics = metrics or NullMetrics()
        self.committer = runner.committer
        self.delivery = runner.delivery
        self._connections: dict[str, ConnectionInfo] = {}
        self._reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="read")
        self._launches = ThreadPoolExecutor(max_workers=2, thread_name_prefix="launch")

    # ---- $connect / $disconnect ---------------------------------------------------------

    def connect(self, connection_id: str, session_id: str, principal: str | None) -> ConnectResult:
        """Bind the connection to the session (creating it); a reconnect re-binds it."""
        if self.settings.require_principal and not principal:
            return ConnectResult(401, "an authenticated principal is required")

        before: list[SessionState] = []

        def arriving(state: SessionState) -> Outcome:
            before.append(state)
            return connection.arrive(state, connection_id, principal, now=time.time())

        try:
            committed = self.committer.apply(session_id, arriving, create=True)
        except connection.SessionOwnedElsewhere:
            return ConnectResult(403, "this session belongs to another user")
        beside = committed is not None and committed.state.connection_id != connection_id
        arrived = committed.state.next_seq if committed is not None and beside else None
        replaced = before[-1].connection_id if before and not beside and committed is not None else None
        self.store.put_connection(
            connection_id,
            session_id,
            principal,
            arrived_seq=arrived,
            replaces=replaced if replaced != connection_id else None,
        )
        return ConnectResult(200)

    def disconnect(self, connection_id: str, endpoint: str | None = None) -> None:
        """The connection closed: the session forgets it (a device of several leaves, and the
        others hear it; its calls that only read go to another device that runs the tool)."""
        info = self.store.get_connection(connection_id)
        self.store.delete_connection(connection_id)
        if info is None:
            return
        core = self.settings.core

        def leaving(state: SessionState) -> Outcome:
            if devices.entry_of(state, connection_id) is not None:
                return devices.leave(state, connection_id, core)
            return connection.unbind(state, connection_id)

        committed = self.committer.apply(info.session_id, leaving)
        if committed is not None and endpoint:
            self.delivery.deliver(endpoint, committed)

    # ---- tool deadlines ----------------------------------------------------------------------

    def expire_tool_calls(self, session_id: str, endpoint: str) -> float | None:
        """A deadline alarm went off: the calls the app has not answered in time get a timeout
        error and, once the round is complete, the model goes on. Returns the next deadline still
        pending (for another alarm), or None."""
        now = time.time()
        core = self.settings.core
        committed = self.committer.apply(
            session_id, lambda state: conductor.handle_tool_deadlines(state, now=now, settings=core)
        )
        if committed is None:
            return None
        self.delivery.deliver(endpoint, committed)
        if committed.run_model:
            self._launch(TurnTask.for_stream(committed.state, committed.run_model, endpoint))
        return conductor.next_tool_deadline(committed.state, core)

    # ---- $default -------------------------------------------------------------------------

    def handle_frame(self, request: Request, body: str | None, *, is_base64: bool = False) -> None:
        frame = self._decode_body(request, body, is_base64)
        if frame is None:
            return
        parsed = parse_event(frame)
        if isinstance(parsed, ProtocolError):
            self.log.info("rejected frame", extra={"code": parsed.code.value, "event_id": parsed.event_id})
            self.delivery.reply(request, parsed.code, parsed.message)
            return
        if isinstance(parsed, IgnoredEvent):
            self.log.info("ignored unknown event kind", extra={"kind": parsed.kind_name, "event_id": parsed.id})
            return
        if (acknowledged := frame_routes.own_call_acknowledged(parsed.payload)) is not None:
            self.log.debug("own call acknowledged", extra={"call_id": acknowledged})
            return
        connection = self._connection(request.connection_id)
        if connection is None or (request.principal and request.principal != connection.principal):
            self.delivery.reply(
                request, ErrorCode.NO_SESSION, "this connection has no session; reconnect with ?sessionId="
            )
            return
        keys = {"event_id": str(parsed.id), "session_id": connection.session_id}
        self.log.info("event received", extra={"kind": parsed.kind_name, **keys})
        try:
            self._dispatch(request, connection, parsed)
        except Exception:
            self.log.exception("event handling failed", extra=keys)
            raise

    def _connection(self, connection_id: str) -> ConnectionInfo | None:
        """The connection's session. A connection never changes session or principal, so a warm
        container asks DynamoDB once per connection, not once per frame."""
        known = self._connections.get(connection_id)
        if known is not None:
            return known
        found = self.store.get_connection(connection_id)
        if found is not None:
            if len(self._connections) >= CONNECTIONS_CACHED:
                self._connections.clear()
            self._connections[connection_id] = found
        return found

    def _decode_body(self, request: Request, body: str | None, is_base64: bool) -> str | bytes | None:
        if body is None:
            self.delivery.reply(request, ErrorCode.INVALID_JSON, "empty message body")
            return None
        limit = self.settings.max_frame_bytes
        frame: str | bytes = body
        if is_base64:
            if len(body) > (limit // 3 + 1) * 4:  # cannot decode to <= limit bytes
                self._too_large(request)
                return None
            try:
                frame = base64.b64decode(body, validate=True)
            except (binascii.Error, ValueError):
                self.delivery.reply(request, ErrorCode.INVALID_JSON, "binary frame is not valid base64")
                return None
            size = len(frame)
        else:
            size = len(body) if len(body) > limit else len(body.encode("utf-8", errors="surrogatepass"))
        if size > limit:
            self._too_large(request)
            return None
        return frame

    def _too_large(self, request: Request) -> None:
        self.delivery.reply(
            request, ErrorCode.FRAME_TOO_LARGE, f"frames are limited to {self.settings.max_frame_bytes} bytes"
        )
        return None

    def _dispatch(self, request: Request, info: ConnectionInfo, event: Event) -> None:
        """Decide on the frame by its route (``shared.flows.frame_routes``), commit, answer."""
        payload, now = event.payload, time.time()
        route = frame_routes.route_of(payload)
        if route is None:
            self.log.info("event needs no action", extra={"kind": event.kind_name, "event_id": str(event.id)})
            return
        frame = Frame(
            event,
            request.connection_id,
            self.settings,
            now,
            over_budget=lambda: self._over_budget(request, info.session_id, now),
            metrics=self.metrics,
            log=self.log,
        )
        ruling = route.decision(payload, frame)
        if ruling is None:
            return
        if isinstance(ruling, Refusal):
            self.delivery.reply(request, ruling.code, ruling.message)
            return
        self._decide(request, info, event, route, ruling, now)

    def _decide(
        self, request: Request, info: ConnectionInfo, event: Event, route: FrameRoute[Any], decide: Decide, now: float
    ) -> None:
        session_id, payload, event_id = info.session_id, event.payload, str(event.id)
        hint: SessionState | None = None
        recent: RecentHistory | None = None
        if route.reads_history(payload):
            hint, recent = self._state_and_history(session_id)
        decided_on: list[SessionState] = []
        remembered = self._remembered(request, payload)

        # Fair sharing: a limited route's events count against the session's budget a second, kept
        # in the state their own commit writes (partials are limited where they are decided).
        limited = route.limited
        per_second = self.settings.max_events_per_second
        core = self.settings.core

        def deciding(state: SessionState) -> Outcome:
            if limited:
                admission.admit(state, now=now, per_second=per_second)
            decided_on.append(state)
            outcome = from_device.deciding(
                state,
                request.connection_id,
                payload,
                decide,
                core,
                sent_by=route.sent_by,
                principal=request.principal,
                now=now,
                arrived_seq=info.arrived_seq,
            )
            if limited:
                outcome.state = admission.counted(outcome.state, now=now)
            if remembered is not None and outcome.state.remembered != remembered:
                outcome.state = outcome.state.model_copy(update={"remembered": remembered})
            return outcome

        # An event idempotent by itself is not recorded as taken (its route says which).
        claimed = None if route.is_idempotent(payload) else event_id
        early = (
            EarlyLaunch(
                request,
                decided_on,
                now=now,
                metrics=self.metrics,
                window=lambda base, outcome: self._window_for(recent, base, outcome),
                launch=lambda task: self._launches.submit(self.launcher.launch, task),
                failed=self._launch_failed,
            )
            if recent is not None and route.launches_early
            else None
        )
        try:
            committed = self.committer.apply(
                session_id,
                deciding,
                hint=hint,
                claim_event_id=claimed,
                before_write=early.before_write if early is not None else None,
            )
        except DuplicateEvent:
            self.log.info("duplicate event ignored", extra={"event_id": event_id, "session_id": session_id})
            stored = self.store.load(session_id)  # a retry after a reconnect still catches the app up
            if stored is not None and connection.needs_catch_up(stored, request.connection_id):
                stored = self.delivery.catch_up(request, stored, last_seq=None) or stored
            if stored is not None and isinstance(payload, SessionStart):
                session_ready.answer(
                    self.delivery.gateway, self.store, request, stored, stored, payload
                )  # the app resent it: it missed the answer
            return
        except devices.TooManyDevices:
            self._refuse_device(request, session_id)
            return
        except devices.NotPermitted as refused:
            self.delivery.reply(request, ErrorCode.INVALID_EVENT, str(refused))
            return
        except admission.RateExceeded as refused:
            self.log.warning("event over the session's rate; not applied", extra={"event_id": event_id})
            self.metrics.count(RATE_LIMITED_METRIC)
            self.delivery.reply(request, ErrorCode.RATE_LIMITED, str(refused))
            return
        except ConductorBusy:
            self.log.warning("session kept changing; event not applied", extra={"event_id": event_id})
            self.delivery.reply(request, ErrorCode.CONDUCTOR_ERROR, "the session is busy; send the event again")
            return
        if committed is None:
            self.delivery.reply(request, ErrorCode.NO_SESSION, "the session no longer exists; reconnect")
            return
        if (parts_due := result_parts.first_part_due(committed.outcome)) is not None:
            self._arm(session_id, request.endpoint, parts_due)
        for call_id in committed.outcome.parts_complete:  # the last part is in: decide on the whole
            committed = self._assembled(session_id, call_id, committed, now)
            decided_on.append(committed.state)
        self._answer(request, info, payload, committed, decided_on, now, recent, early)

    def _remembered(self, request: Request, payload: Payload) -> list[str] | None:
        """At a session's start: what is remembered of its person, read once (``MemoryRecall``)."""
        recall = self.runner.recall
        if recall is None or not isinstance(payload, SessionStart):
            return None
        return recall.block_lines(request.principal)

    def _answer(
        self,
        request: Request,
        info: ConnectionInfo,
        payload: Payload,
        committed: Committed,
        decided_on: list[SessionState],
        now: float,
        recent: RecentHistory | None,
        early: EarlyLaunch | None,
    ) -> None:
        """After the commit: post the decision's events (a joining device is caught up first, a
        sessionStart answered), launch the watcher or the turn."""
        session_id, state = info.session_id, committed.state
        self.delivery.tell_taken_over(request.endpoint, committed.outcome.taken_over)
        last_seq = (
            payload.last_seq if isinstance(payload, SessionStart) and payload.session_id.lower() == session_id else None
        )
        runner_posts = early is not None and early.carries(committed)
        joined = devices.entry_of(state, request.connection_id)
        if joined is not None and not joined.live and isinstance(payload, SessionStart):
            self.delivery.deliver(request.endpoint, committed)  # to the others: it is not live yet
            since = payload.last_seq
            if since is None and committed.frames:  # back without lastSeq: its unanswered calls again
                since = committed.frames[0][0] - 1
            state = self.delivery.catch_up_device(request, state, joined.device_id, since)
            session_ready.answer_device(
                self.delivery.gateway, self.store, request, decided_on[-1], state, joined.device_id
            )
            return
        if state.connection_id != request.connection_id:
            self.delivery.deliver(request.endpoint, committed)  # the session moved on to a newer connection
        elif connection.needs_catch_up(state, request.connection_id):
            if info.replaces:  # it took the session over at $connect
                self.delivery.tell_taken_over(request.endpoint, [info.replaces])
            state = self.delivery.catch_up(request, state, last_seq=last_seq) or state
        else:
            if last_seq is not None:
                self.delivery.replay(request, state, last_seq)
            self.delivery.deliver(request.endpoint, committed, numbered=not runner_posts)
        if isinstance(payload, SessionStart):
            session_ready.answer(self.delivery.gateway, self.store, request, decided_on[-1], state, payload)
        if isinstance(payload, UserAudioTranscriptFinal) and self.settings.speculation:
            self._count_speculation(decided_on[-1], committed.state)
        if committed.outcome.mcp_calls:  # the person said yes to calls of tools on MCP servers
            self._launch(TurnTask.for_mcp(state, committed.outcome.mcp_calls, request.endpoint))
        if committed.outcome.watch:
            self._launch_watcher(TurnTask.for_watch(state, committed.outcome.watch, request.endpoint))
        if committed.run_model:
            self._time_tool_round(decided_on[-1], now)
            if early is not None and runner_posts:
                early.confirm(committed)
                return
            window = self._window_after(recent, decided_on[-1], committed) if recent is not None else None
            self._launch(TurnTask.for_stream(state, committed.run_model, request.endpoint, window))

    def _refuse_device(self, request: Request, session_id: str) -> None:
        """A device too many: told so, and remembered, so nothing it sends later takes a place."""
        self.delivery.reply(request, ErrorCode.TOO_MANY_DEVICES, f"a session has at most {MAX_DEVICES} devices at once")
        try:
            self.committer.apply(session_id, lambda state: devices.refuse(state, request.connection_id))
        except ConductorBusy:
            self.log.warning("refused device not recorded", extra={"session_id": session_id})

    def _window_for(self, recent: RecentHistory, base: SessionState, outcome: Outcome) -> list[Message] | None:
        """The model's history window after ``outcome``, from the window read beside the state;
        None when that read did not see the same history as the state the decision was made on."""
        if recent.last_version != base.history_version:
            return None
        if recent.first_seq + len(recent.messages) != base.history_len:
            return None
        after = history_after(recent.messages, recent.first_seq, outcome.history)
        if after is None:
            return None
        cap = outcome.state.window_cap or self.settings.history_window
        return fit_window(after, min(self.settings.history_window, cap))

    def _over_budget(self, request: Request, session_id: str, now: float) -> bool:
        """Whether the person has spent the stage's daily ceiling (read only when there is one)."""
        ceiling = self.settings.daily_budget_usd
        if ceiling <= 0 or self.committer.spend is None:
            return False
        person = usage.spender(request.principal, session_id)
        return usage.over_budget(self.committer.spend.spent(person, usage.day_of(now)), ceiling)

    def _arm(self, session_id: str, endpoint: str, due_at: float) -> None:
        """A deadline alarm for ``due_at`` (a result in parts that must be whole by then)."""
        alarms = self.runner.alarms
        if alarms is None:
            return
        try:
            alarms.set_alarm(session_id, endpoint, due_at)
        except Exception:  # the call's own deadline alarm still ends it
            self.log.exception("parts deadline not armed", extra={"session_id": session_id})
            self.metrics.count("DeadlineAlarmFailures")

    def _assembled(self, session_id: str, call_id: str, recorded: Committed, now: float) -> Committed:
        """Answer a call whose result came in parts with their text, read from the store. The
        recorded part's events go out first (they are in the outbox, numbered before these)."""
        pieces = self.store.result_parts(session_id, call_id)
        assembled = self.committer.apply(
            session_id,
            lambda state: result_parts.handle_assembled_result(state, call_id, pieces, self.settings.core, now=now),
            hint=recorded.state,
        )
        if assembled is None:
            return recorded
        return Committed(assembled.outcome, [*recorded.frames, *assembled.frames])

    def _time_tool_round(self, base: SessionState, now: float) -> None:
        """A round of the model's tool calls is complete: from the calls sent to the last result."""
        tools = base.turn.tools if base.turn is not None else None
        if tools is not None and tools.sent_at:
            self.metrics.timing(TOOL_ROUND_TRIP_METRIC, max(0.0, now - tools.sent_at) * 1000)

    def _state_and_history(self, session_id: str) -> tuple[SessionState | None, RecentHistory]:
        """A transcript will start the model, and a result for the model's tool call may: read the
        history window beside the state (in parallel), so neither this invocation nor the runner
        waits for it separately."""
        history = self._reads.submit(
            self.store.recent_history,
            session_id,
            self.settings.history_window,
            max_chars=self.settings.history_read_chars,
        )
        state = self.store.load(session_id)
        return state, history.result()

    def _window_after(self, recent: RecentHistory, base: SessionState, committed: Committed) -> list[Message] | None:
        return self._window_for(recent, base, committed.outcome)

    def _count_speculation(self, before: SessionState, after: SessionState) -> None:
        """Per final transcript: whether a speculation was running, and whether the final promoted it."""
        speculated, promoted = speculation.final_figures(before, after)
        self.metrics.count(SPECULATED_METRIC, int(speculated))
        self.metrics.count(PROMOTED_METRIC, int(promoted))

    def _launch_watcher(self, task: TurnTask) -> None:
        """A watcher for the person's speech; if it cannot be launched, the final starts the turn as
        without one (and a partial after the watch's start time launches another)."""
        try:
            self.launcher.launch(task)
        except Exception:
            self.log.exception("watcher not launched", extra={"session_id": task.session_id})
            self.metrics.count("WatcherLaunchFailures")

    def _launch_failed(self, task: TurnTask, _committed: Committed) -> None:
        """A turn launched alongside its write could not be launched: the turn ends at once (the
        decision that ends it posts the launching decision's events first: no runner did)."""
        self.log.exception("turn not launched", extra={"session_id": task.session_id})
        self.metrics.count("TurnLaunchFailures")
        self.runner.fail(task, ErrorCode.CONDUCTOR_ERROR, "the turn could not be started; please say that again")

    def _launch(self, task: TurnTask) -> None:
        """Hand the stream to the turn runner; if it cannot be launched, the turn ends at once."""
        try:
            self.launcher.launch(task)
        except Exception:
            self.log.exception("turn not launched", extra={"session_id": task.session_id})
            self.metrics.count("TurnLaunchFailures")
            self.runner.fail(task, ErrorCode.CONDUCTOR_ERROR, "the turn could not be started; please say that again")
