"""The conductor service: runs the pure core against the store, the brain and the gateway.

Every state change goes through ``_apply``: decide on the stored state, commit with a
conditional write on its version, and on a lost race decide again on fresh state. Events are
posted only after their decision is stored; what cannot be delivered goes to the outbox.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.brain import BrainError
from shared.config import Settings
from shared.core import conductor, connection
from shared.core.conductor import Outcome, StreamSuperseded
from shared.core.messages import Message
from shared.core.model_output import ModelMessage, StreamItem, TextDelta, ToolUseStarted
from shared.core.state import SessionState
from shared.protocol import (
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Event,
    IgnoredEvent,
    ProtocolError,
    SessionStart,
    ToolResult,
    UserAudioTranscriptFinal,
    error_event,
    make_event,
    parse_event,
)
from shared.store import DuplicateEvent, SessionStore, VersionConflict

COMMIT_ATTEMPTS = 12


class Brain(Protocol):
    def stream(self, messages: list[Message]) -> Any: ...


class Gateway(Protocol):
    def post(self, endpoint: str, connection_id: str, frame: str) -> bool: ...


class Metrics(Protocol):
    def count(self, name: str, value: int = 1) -> None: ...


class NullMetrics:
    def count(self, name: str, value: int = 1) -> None:
        return None


@dataclass
class Committed:
    """A stored decision and its events, numbered and serialized, ready to post."""

    outcome: Outcome
    frames: list[tuple[int, str]]

    @property
    def state(self) -> SessionState:
        return self.outcome.state

    @property
    def run_model(self) -> str | None:
        return self.outcome.run_model


class ConductorBusy(Exception):
    """A session's state kept changing under us; the request is answered with conductor_error."""


@dataclass(frozen=True)
class Request:
    """Where a frame came from and how long this invocation may run."""

    connection_id: str
    endpoint: str
    remaining_ms: Callable[[], int]
    principal: str | None = None


@dataclass(frozen=True)
class ConnectResult:
    status: int
    reason: str = ""


class ConductorService:
    def __init__(
        self,
        *,
        store: SessionStore,
        brain: Brain,
        gateway: Gateway,
        settings: Settings,
        logger: Any,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.brain = brain
        self.gateway = gateway
        self.settings = settings
        self.log = logger
        self.metrics = metrics or NullMetrics()

    # ---- $connect / $disconnect ---------------------------------------------------------

    def connect(self, connection_id: str, session_id: str, principal: str | None) -> ConnectResult:
        """Bind the connection to the session (creating it); a reconnect re-binds it."""
        if self.settings.require_principal and not principal:
            return ConnectResult(401, "an authenticated principal is required")

        try:
            self._apply(session_id, lambda state: connection.bind(state, connection_id, principal), create=True)
        except connection.SessionOwnedElsewhere:
            return ConnectResult(403, "this session belongs to another user")
        self.store.put_connection(connection_id, session_id, principal)
        return ConnectResult(200)

    def disconnect(self, connection_id: str) -> None:
        info = self.store.get_connection(connection_id)
        self.store.delete_connection(connection_id)
        if info is None:
            return

        self._apply(info.session_id, lambda state: connection.unbind(state, connection_id))

    # ---- $default -------------------------------------------------------------------------

    def handle_frame(self, request: Request, body: str | None, *, is_base64: bool = False) -> None:
        frame = self._decode_body(request, body, is_base64)
        if frame is None:
            return
        parsed = parse_event(frame)
        if isinstance(parsed, ProtocolError):
            self.log.info("rejected frame", extra={"code": parsed.code.value, "event_id": parsed.event_id})
            self._reply(request, parsed.code, parsed.message)
            return
        if isinstance(parsed, IgnoredEvent):
            self.log.info("ignored unknown event kind", extra={"kind": parsed.kind_name, "event_id": parsed.id})
            return
        connection = self.store.get_connection(request.connection_id)
        if connection is None or (request.principal and request.principal != connection.principal):
            self._reply(request, ErrorCode.NO_SESSION, "this connection has no session; reconnect with ?sessionId=")
            return
        keys = {"event_id": str(parsed.id), "session_id": connection.session_id}
        self.log.info("event received", extra={"kind": parsed.kind_name, **keys})
        try:
            self._dispatch(request, connection.session_id, parsed)
        except Exception:
            self.log.exception("event handling failed", extra=keys)
            raise

    def _decode_body(self, request: Request, body: str | None, is_base64: bool) -> str | bytes | None:
        if body is None:
            self._reply(request, ErrorCode.INVALID_JSON, "empty message body")
            return None
        limit = self.settings.max_frame_bytes
        frame: str | bytes = body
        if is_base64:
            if len(body) > (limit // 3 + 1) * 4:  # cannot decode to <= limit bytes
                return self._too_large(request)
            try:
                frame = base64.b64decode(body, validate=True)
            except (binascii.Error, ValueError):
                self._reply(request, ErrorCode.INVALID_JSON, "binary frame is not valid base64")
                return None
            size = len(frame)
        else:
            size = len(body) if len(body) > limit else len(body.encode("utf-8", errors="surrogatepass"))
        if size > limit:
            return self._too_large(request)
        return frame

    def _too_large(self, request: Request) -> None:
        self._reply(request, ErrorCode.FRAME_TOO_LARGE, f"frames are limited to {self.settings.max_frame_bytes} bytes")
        return None

    def _dispatch(self, request: Request, session_id: str, event: Event) -> None:
        payload = event.payload
        event_id = str(event.id)
        decide: Callable[[SessionState], Outcome]
        if isinstance(payload, UserAudioTranscriptFinal):
            if len(payload.text) > self.settings.max_transcript_chars:
                self._reply(
                    request,
                    ErrorCode.TRANSCRIPT_TOO_LONG,
                    f"transcripts are limited to {self.settings.max_transcript_chars} characters",
                )
                return
            text = payload.text
            self.log.debug("transcript", extra={"text": text, "event_id": event_id})
            now = time.time()
            decide = lambda state: conductor.handle_transcript(  # noqa: E731
                state, text, now=now, settings=self.settings.core
            )
            self.metrics.count("Turns")
        elif isinstance(payload, ToolResult):
            result = payload
            decide = lambda state: conductor.handle_tool_result(state, result)  # noqa: E731
        elif isinstance(payload, ErrorPayload) and payload.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED:
            decide = conductor.handle_barge_in
        elif isinstance(payload, SessionStart):
            start = payload
            decide = lambda state: conductor.handle_session_start(  # noqa: E731
                state, start, request.connection_id
            )
        else:
            self.log.info("event needs no action", extra={"kind": event.kind_name, "event_id": event_id})
            return
        try:
            committed = self._apply(session_id, decide, claim_event_id=event_id)
        except DuplicateEvent:
            self.log.info("duplicate event ignored", extra={"event_id": event_id, "session_id": session_id})
            stored = self.store.load(session_id)  # a retry after a reconnect still catches the app up
            if stored is not None and connection.needs_catch_up(stored, request.connection_id):
                self._catch_up(request, stored, last_seq=None)
            return
        except ConductorBusy:
            self.log.warning("session kept changing; event not applied", extra={"event_id": event_id})
            self._reply(request, ErrorCode.CONDUCTOR_ERROR, "the session is busy; send the event again")
            return
        if committed is None:
            self._reply(request, ErrorCode.NO_SESSION, "the session no longer exists; reconnect")
            return
        state = committed.state
        last_seq = (
            payload.last_seq if isinstance(payload, SessionStart) and payload.session_id.lower() == session_id else None
        )
        if state.connection_id != request.connection_id:
            self._deliver(request, committed)  # the session moved on to a newer connection
        elif connection.needs_catch_up(state, request.connection_id):
            state = self._catch_up(request, state, last_seq=last_seq) or state
        else:
            if last_seq is not None:
                self._replay(request, state, last_seq)
            self._deliver(request, committed)
        if committed.run_model:
            self._run_model(request, session_id, committed.run_model, state)

    # ---- the model ---------------------------------------------------------------------------

    def _run_model(self, request: Request, session_id: str, stream_id: str | None, state: SessionState) -> None:
        """Stream the model for the turn holding ``stream_id``, resuming as long as the core asks."""
        while stream_id:
            if request.remaining_ms() < self.settings.turn_reserve_ms:
                self._fail_stream(request, session_id, stream_id, ErrorCode.CONDUCTOR_ERROR, "out of time")
                return
            messages = self.store.history(session_id, self.settings.history_window)
            try:
                stream_id, state = self._stream_once(request, session_id, stream_id, state, messages)
            except StreamSuperseded:
                self.log.info("model stream stopped: superseded", extra={"session_id": session_id})
                return
            except BrainError as error:
                self.metrics.count("BedrockErrors")
                self.log.warning(
                    "model failed",
                    extra={"session_id": session_id, "bedrock_code": error.code, "during_stream": error.during_stream},
                )
                stalled = error.stalled
                self._fail_stream(
                    request,
                    session_id,
                    stream_id,
                    ErrorCode.BEDROCK_ERROR,
                    "the model stopped responding" if stalled else f"the model failed: {error.code}",
                    fallback_line=conductor.STALL_FALLBACK_LINE if stalled else None,
                )
                return
            except _OutOfTime:
                self._fail_stream(request, session_id, stream_id, ErrorCode.CONDUCTOR_ERROR, "the turn ran out of time")
                return
            except Exception:  # the turn must end cleanly whatever broke, or the session stays busy
                self.log.exception("turn failed", extra={"session_id": session_id})
                self._fail_stream(
                    request, session_id, stream_id, ErrorCode.CONDUCTOR_ERROR, "the conductor failed mid-turn"
                )
                return

    def _stream_once(
        self, request: Request, session_id: str, stream_id: str, state: SessionState, messages: list[Message]
    ) -> tuple[str | None, SessionState]:
        message = ModelMessage()
        items = self.brain.stream(messages)
        try:
            for item in items:
                if request.remaining_ms() < self.settings.turn_reserve_ms:
                    raise _OutOfTime
                state = self._on_stream_item(request, session_id, stream_id, state, item, message)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        committed = self._apply(
            session_id,
            lambda fresh: conductor.stream_finished(fresh, stream_id, message, self.settings.core),
            hint=state,
        )
        assert committed is not None
        self.metrics.count("ToolCalls", len(message.tool_uses))
        self._deliver(request, committed)
        return committed.run_model, committed.state

    def _on_stream_item(
        self,
        request: Request,
        session_id: str,
        stream_id: str,
        state: SessionState,
        item: StreamItem,
        message: ModelMessage,
    ) -> SessionState:
        message.add(item)
        if isinstance(item, TextDelta):
            decide: Callable[[SessionState], Outcome] = lambda fresh: conductor.stream_text(  # noqa: E731
                fresh, stream_id, item.text
            )
        elif isinstance(item, ToolUseStarted):
            decide = lambda fresh: conductor.stream_tool_started(fresh, stream_id)  # noqa: E731
        else:  # complete tool uses and the message end are decided once the stream is over
            return state
        committed = self._apply(session_id, decide, hint=state)
        assert committed is not None
        self._deliver(request, committed)
        return committed.state

    def _fail_stream(
        self,
        request: Request,
        session_id: str,
        stream_id: str,
        code: ErrorCode,
        message: str,
        *,
        fallback_line: str | None = None,
    ) -> None:
        try:
            committed = self._apply(
                session_id,
                lambda fresh: conductor.stream_failed(fresh, stream_id, code, message, fallback_line=fallback_line),
            )
        except StreamSuperseded:
            return
        if committed is not None:
            self._deliver(request, committed)

    # ---- state changes and delivery ----------------------------------------------------------

    def _apply(
        self,
        session_id: str,
        decide: Callable[[SessionState], Outcome],
        *,
        hint: SessionState | None = None,
        create: bool = False,
        claim_event_id: str | None = None,
    ) -> Committed | None:
        """Decide and commit with optimistic locking; a lost race decides again on fresh state.

        The decision's events are kept in the outbox in the same transaction, except partials:
        each partial carries the whole text so far, so the next one (or the final) supersedes it.
        """
        state = hint if hint is not None else self.store.load(session_id)
        for attempt in range(COMMIT_ATTEMPTS):
            if state is None:
                if not create:
                    return None
                state = SessionState(session_id=session_id)
            outcome = decide(state)
            frames = [(seq, make_event(payload, seq=seq).to_json()) for seq, payload in outcome.numbered_events()]
            if not frames and not outcome.history and outcome.state == state and claim_event_id is None:
                return Committed(outcome, frames)
            kept = [
                frame
                for frame, payload in zip(frames, outcome.events, strict=True)
                if not isinstance(payload, AssistantSpeechPartial)
            ]
            try:
                outcome.state = self.store.commit(
                    outcome.state,
                    outcome.history,
                    claim_event_id=claim_event_id,
                    claim_ttl_seconds=self.settings.session_ttl_seconds,
                    outbox=kept,
                    outbox_ttl_seconds=self.settings.outbox_ttl_seconds,
                )
                return Committed(outcome, frames)
            except VersionConflict:
                self.metrics.count("StateConflicts")
                time.sleep(random.uniform(0, 0.01 * (attempt + 1)))
                state = self.store.load(session_id)
        raise ConductorBusy(session_id)

    def _deliver(self, request: Request, committed: Committed) -> None:
        """Post the events to the session's current connection (the outbox already has them)."""
        connection_id = committed.state.connection_id
        if connection_id is None or not committed.state.connection_live:
            if committed.frames:
                self.log.debug(
                    "no live connection: nothing posted (the outbox keeps all but partials)",
                    extra={"session_id": committed.state.session_id},
                )
            return
        for _seq, frame in committed.frames:
            if not self.gateway.post(request.endpoint, connection_id, frame):
                self.log.info(
                    "connection gone: events kept for replay",
                    extra={"session_id": committed.state.session_id, "connection_id": connection_id},
                )
                return

    def _catch_up(self, request: Request, state: SessionState, *, last_seq: int | None) -> SessionState | None:
        """Post a newly bound connection the kept events it missed, then make it live.

        One invocation claims the catch-up, so concurrent first events don't post everything twice.
        The live mark is committed on the version whose outbox was just posted; if the session moved
        on meanwhile, only the newer kept events are posted and it is tried again. So the app hears
        every event in seq order: nothing goes live to it before the replay is through. Returns the
        live state, or None if another invocation is catching up, the connection is gone, or the
        session moved on to a newer connection.
        """
        owner = uuid.uuid4().hex
        now = time.time()
        try:
            claimed = self._apply(
                state.session_id,
                lambda fresh: connection.claim_catch_up(fresh, request.connection_id, owner, now=now),
                hint=state,
            )
        except ConductorBusy:
            return self._busy_catching_up(request, state)
        if claimed is None or not connection.catching_up(claimed.state, request.connection_id, owner):
            return None
        state = claimed.state
        posted_until = connection.catch_up_after(state, last_seq)
        for attempt in range(COMMIT_ATTEMPTS):
            if not self._post_kept(request, state.session_id, posted_until, state.next_seq):
                return None
            posted_until = state.next_seq - 1
            try:
                return self.store.commit(connection.mark_live(state))
            except VersionConflict:
                self.metrics.count("StateConflicts")
                time.sleep(random.uniform(0, 0.01 * (attempt + 1)))
                fresh = self.store.load(state.session_id)
                if fresh is None or not connection.catching_up(fresh, request.connection_id, owner):
                    return None
                state = fresh
        with contextlib.suppress(ConductorBusy):  # else the claim lapses after CATCH_UP_TAKEOVER_S
            self._apply(
                state.session_id, lambda fresh: connection.release_catch_up(fresh, request.connection_id, owner)
            )
        return self._busy_catching_up(request, state)

    def _busy_catching_up(self, request: Request, state: SessionState) -> None:
        self.log.warning("session kept changing; connection not caught up", extra={"session_id": state.session_id})
        self._reply(request, ErrorCode.CONDUCTOR_ERROR, "the session is busy; send sessionStart again to catch up")

    def _replay(self, request: Request, state: SessionState, last_seq: int) -> None:
        """Re-send, in order, the kept events after ``last_seq`` that came before this (live)
        connection's first live event."""
        self._post_kept(request, state.session_id, last_seq, state.connection_start_seq)

    def _post_kept(self, request: Request, session_id: str, after_seq: int, before_seq: int) -> bool:
        """Post the kept events with ``after_seq < seq < before_seq`` to the requesting connection."""
        for _seq, frame in self.store.outbox(session_id, after_seq=after_seq, before_seq=before_seq):
            if not self.gateway.post(request.endpoint, request.connection_id, frame):
                return False
        return True

    def _reply(self, request: Request, code: ErrorCode, message: str) -> None:
        """An error about the frame itself, to the connection that sent it."""
        self.gateway.post(request.endpoint, request.connection_id, error_event(code, message).to_json())


class _OutOfTime(Exception):
    pass
