"""The conductor service: the three routes' work against the pure core and the adapters.

``$connect`` binds, ``$disconnect`` unbinds, and ``$default`` parses each frame, decides and
commits (``shared.commit``), posts the decision's events (``shared.delivery``) and, when the core
asks for the model, launches the turn runner in its own invocation (``shared.turn_launcher``):
nothing here waits on the model, so a frame is handled well within API Gateway's 29 s.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.commit import ConductorBusy, Metrics, NullMetrics
from shared.config import Settings
from shared.core import conductor, connection
from shared.core.conductor import Outcome
from shared.core.state import SessionState
from shared.delivery import Gateway, Request
from shared.protocol import (
    ErrorCode,
    ErrorPayload,
    Event,
    IgnoredEvent,
    ProtocolError,
    SessionStart,
    ToolResult,
    UserAudioTranscriptFinal,
    parse_event,
)
from shared.store import DuplicateEvent, SessionStore
from shared.turn_launcher import TurnTask
from shared.turn_runner import TurnRunner

__all__ = ["ConductorBusy", "ConductorService", "ConnectResult", "Request"]


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

    # ---- $connect / $disconnect ---------------------------------------------------------

    def connect(self, connection_id: str, session_id: str, principal: str | None) -> ConnectResult:
        """Bind the connection to the session (creating it); a reconnect re-binds it."""
        if self.settings.require_principal and not principal:
            return ConnectResult(401, "an authenticated principal is required")

        try:
            self.committer.apply(
                session_id, lambda state: connection.bind(state, connection_id, principal), create=True
            )
        except connection.SessionOwnedElsewhere:
            return ConnectResult(403, "this session belongs to another user")
        self.store.put_connection(connection_id, session_id, principal)
        return ConnectResult(200)

    def disconnect(self, connection_id: str) -> None:
        info = self.store.get_connection(connection_id)
        self.store.delete_connection(connection_id)
        if info is None:
            return

        self.committer.apply(info.session_id, lambda state: connection.unbind(state, connection_id))

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
        connection = self.store.get_connection(request.connection_id)
        if connection is None or (request.principal and request.principal != connection.principal):
            self.delivery.reply(
                request, ErrorCode.NO_SESSION, "this connection has no session; reconnect with ?sessionId="
            )
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
            self.delivery.reply(request, ErrorCode.INVALID_JSON, "empty message body")
            return None
        limit = self.settings.max_frame_bytes
        frame: str | bytes = body
        if is_base64:
            if len(body) > (limit // 3 + 1) * 4:  # cannot decode to <= limit bytes
                return self._too_large(request)
            try:
                frame = base64.b64decode(body, validate=True)
            except (binascii.Error, ValueError):
                self.delivery.reply(request, ErrorCode.INVALID_JSON, "binary frame is not valid base64")
                return None
            size = len(frame)
        else:
            size = len(body) if len(body) > limit else len(body.encode("utf-8", errors="surrogatepass"))
        if size > limit:
            return self._too_large(request)
        return frame

    def _too_large(self, request: Request) -> None:
        self.delivery.reply(
            request, ErrorCode.FRAME_TOO_LARGE, f"frames are limited to {self.settings.max_frame_bytes} bytes"
        )
        return None

    def _dispatch(self, request: Request, session_id: str, event: Event) -> None:
        payload = event.payload
        event_id = str(event.id)
        decide: Callable[[SessionState], Outcome]
        now = time.time()
        if isinstance(payload, UserAudioTranscriptFinal):
            if len(payload.text) > self.settings.max_transcript_chars:
                self.delivery.reply(
                    request,
                    ErrorCode.TRANSCRIPT_TOO_LONG,
                    f"transcripts are limited to {self.settings.max_transcript_chars} characters",
                )
                return
            text = payload.text
            self.log.debug("transcript", extra={"text": text, "event_id": event_id})
            decide = lambda state: conductor.handle_transcript(  # noqa: E731
                state, text, now=now, settings=self.settings.core
            )
            self.metrics.count("Turns")
        elif isinstance(payload, ToolResult):
            result = payload
            decide = lambda state: conductor.handle_tool_result(  # noqa: E731
                state, result, self.settings.core, now=now
            )
        elif isinstance(payload, ErrorPayload) and payload.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED:
            decide = conductor.handle_barge_in
        elif isinstance(payload, SessionStart):
            start = payload
            decide = lambda state: conductor.handle_session_start(  # noqa: E731
                state, start, request.connection_id, self.settings.core, now=now
            )
        else:
            self.log.info("event needs no action", extra={"kind": event.kind_name, "event_id": event_id})
            return
        try:
            committed = self.committer.apply(session_id, decide, claim_event_id=event_id)
        except DuplicateEvent:
            self.log.info("duplicate event ignored", extra={"event_id": event_id, "session_id": session_id})
            stored = self.store.load(session_id)  # a retry after a reconnect still catches the app up
            if stored is not None and connection.needs_catch_up(stored, request.connection_id):
                self.delivery.catch_up(request, stored, last_seq=None)
            return
        except ConductorBusy:
            self.log.warning("session kept changing; event not applied", extra={"event_id": event_id})
            self.delivery.reply(request, ErrorCode.CONDUCTOR_ERROR, "the session is busy; send the event again")
            return
        if committed is None:
            self.delivery.reply(request, ErrorCode.NO_SESSION, "the session no longer exists; reconnect")
            return
        state = committed.state
        last_seq = (
            payload.last_seq if isinstance(payload, SessionStart) and payload.session_id.lower() == session_id else None
        )
        if state.connection_id != request.connection_id:
            self.delivery.deliver(request.endpoint, committed)  # the session moved on to a newer connection
        elif connection.needs_catch_up(state, request.connection_id):
            state = self.delivery.catch_up(request, state, last_seq=last_seq) or state
        else:
            if last_seq is not None:
                self.delivery.replay(request, state, last_seq)
            self.delivery.deliver(request.endpoint, committed)
        if committed.run_model:
            self._launch(TurnTask.for_stream(state, committed.run_model, request.endpoint))

    def _launch(self, task: TurnTask) -> None:
        """Hand the stream to the turn runner; if it cannot be launched, the turn ends at once."""
        try:
            self.launcher.launch(task)
        except Exception:
            self.log.exception("turn not launched", extra={"session_id": task.session_id})
            self.metrics.count("TurnLaunchFailures")
            self.runner.fail(task, ErrorCode.CONDUCTOR_ERROR, "the turn could not be started; please say that again")
