"""How each kind of frame the app sends is decided, one row a route (``ROUTES``).

A row names the payload it takes (and, where one kind has several routes, which of them), the
core decision it gets, built from the frame, and how ``$default`` treats it: whether it counts
against the session's events a second (``limited``), whether it is idempotent by itself (then its
event id is not claimed as taken), whether the history window is read beside the state (a decision
that may start the model), whether its turn may be launched alongside its write
(``launches_early``), and who may send it (``sent_by``: ``shared.core.roles``). The conductor
service (``shared.flows.conductor_service``) reads the row and does the rest the same way for every
kind. A kind with no row needs no action (the conductor's own kinds, sent back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared.core import change_preview, conductor, confirming, progress, result_parts, speculation, workspace_context
from shared.core.decision import is_unrecorded_own_call, may_resume_the_model
from shared.core.from_device import Decide
from shared.core.roles import CALL_DEVICE, Action, SentBy
from shared.flows.commit import Metrics
from shared.flows.config import Settings
from shared.wire.protocol import (
    ConfirmChange,
    ErrorCode,
    ErrorPayload,
    Event,
    SessionStart,
    ToolProgress,
    ToolResult,
    UserAudioTranscriptFinal,
    UserAudioTranscriptPartial,
)
from shared.wire.wire_formats import timestamp_seconds
from shared.wire.workspace import WorkspaceContext, WorkspaceNames

P = TypeVar("P")


@dataclass(frozen=True)
class Frame:
    """One frame being decided: what a route's decision is built from."""

    event: Event
    connection_id: str
    settings: Settings
    now: float
    over_budget: Callable[[], bool]  # whether the person has spent the daily ceiling (read when asked)
    metrics: Metrics
    log: Any

    @property
    def said_at(self) -> float | None:
        return timestamp_seconds(self.event.timestamp)


@dataclass(frozen=True)
class Refusal:
    """The frame is answered with this error and nothing is decided."""

    code: ErrorCode
    message: str


Ruling = Decide | Refusal | None
"""A route's answer to a frame: the decision to commit, a refusal, or None (nothing to decide)."""


def _always(_payload: object) -> bool:
    return True


@dataclass(frozen=True)
class FrameRoute(Generic[P]):
    """One row: a kind of frame (``kind``, narrowed by ``when``) and how it is decided."""

    kind: type[P]
    decision: Callable[[P, Frame], Ruling]
    when: Callable[[P], bool] = _always
    sent_by: SentBy = None
    limited: bool = True
    idempotent: bool | Callable[[P], bool] = False
    loads_history: bool | Callable[[P], bool] = False
    launches_early: bool = False

    def takes(self, payload: object) -> bool:
        return isinstance(payload, self.kind) and self.when(payload)

    def is_idempotent(self, payload: P) -> bool:
        return self.idempotent(payload) if callable(self.idempotent) else self.idempotent

    def reads_history(self, payload: P) -> bool:
        return self.loads_history(payload) if callable(self.loads_history) else self.loads_history


# ---- the decisions, built from the frame ----------------------------------------------------------


def _transcript(final: UserAudioTranscriptFinal, frame: Frame) -> Ruling:
    limit = frame.settings.max_transcript_chars
    if len(final.text) > limit:
        return Refusal(ErrorCode.TRANSCRIPT_TOO_LONG, f"transcripts are limited to {limit} characters")
    text, now, settings = final.text, frame.now, frame.settings.core
    frame.log.debug("transcript", extra={"text": text, "event_id": str(frame.event.id)})
    if frame.over_budget():
        return lambda state: conductor.refuse_over_budget(state, now=now)
    frame.metrics.count("Turns")
    return lambda state: conductor.handle_transcript(state, text, now=now, settings=settings)


def _partial(partial: UserAudioTranscriptPartial, frame: Frame) -> Ruling:
    settings = frame.settings
    if not settings.speculation or len(partial.text) > settings.max_transcript_chars:
        return None  # nothing to decide: the final starts the turn (and says what is wrong with it)
    heard, now, said_at, speculating = partial.text, frame.now, frame.said_at, settings.speculating
    return lambda state: speculation.handle_partial(state, heard, now=now, settings=speculating, said_at=said_at)


def _barge_in(interrupted: ErrorPayload, _frame: Frame) -> Ruling:
    heard = interrupted.heard_text
    return lambda state: conductor.handle_barge_in(state, heard)


def _preview(result: ToolResult, _frame: Frame) -> Ruling:
    return lambda state: change_preview.handle_preview(state, result)


def _result_part(part: ToolResult, frame: Frame) -> Ruling:
    now, settings = frame.now, frame.settings.core
    return lambda state: result_parts.handle_tool_result_part(state, part, settings, now=now)


def _result(result: ToolResult, frame: Frame) -> Ruling:
    now, settings = frame.now, frame.settings.core
    return lambda state: conductor.handle_tool_result(state, result, settings, now=now)


def _progress(progressed: ToolProgress, frame: Frame) -> Ruling:
    now, said_at = frame.now, frame.said_at
    return lambda state: progress.handle_tool_progress(state, progressed, now=now, said_at=said_at)


def _session_start(start: SessionStart, frame: Frame) -> Ruling:
    connection_id, now, settings = frame.connection_id, frame.now, frame.settings.core
    return lambda state: conductor.handle_session_start(state, start, connection_id, settings, now=now)


def _tap(tap: ConfirmChange, frame: Frame) -> Ruling:
    approve, now, settings = tap.approve, frame.now, frame.settings.core
    return lambda state: confirming.handle_tap(state, approve, settings, now=now)


def _workspace(context: WorkspaceContext, frame: Frame) -> Ruling:
    connection_id = frame.connection_id
    return lambda state: workspace_context.handle_context(state, connection_id, context)


def _names(part: WorkspaceNames, frame: Frame) -> Ruling:
    connection_id = frame.connection_id
    return lambda state: workspace_context.handle_names(state, connection_id, part)


# ---- which results are which --------------------------------------------------------------------


def _is_barge_in(error: ErrorPayload) -> bool:
    return error.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED


def _is_preview(result: ToolResult) -> bool:
    return change_preview.is_preview(result.call_id)


def _is_part(result: ToolResult) -> bool:
    return result.part is not None


def _own_call(answer: ToolResult) -> bool:
    """A result of the conductor's own call: acknowledging it again finds it gone (idempotent)."""
    return not may_resume_the_model(answer.call_id)


# ---- the table ----------------------------------------------------------------------------------

ROUTES: tuple[FrameRoute[Any], ...] = (
    FrameRoute(UserAudioTranscriptFinal, _transcript, sent_by=Action.SPEAK, loads_history=True, launches_early=True),
    # Partials are limited where they are decided (one kept at most every so often), and one that
    # repeats the last changes nothing (the same words decide the same: a read, not a write).
    FrameRoute(UserAudioTranscriptPartial, _partial, sent_by=Action.SPEAK, limited=False, idempotent=True),
    FrameRoute(ErrorPayload, _barge_in, when=_is_barge_in, sent_by=Action.SPEAK),
    FrameRoute(ToolResult, _preview, when=_is_preview, sent_by=CALL_DEVICE, idempotent=_own_call),
    FrameRoute(ToolResult, _result_part, when=_is_part, sent_by=CALL_DEVICE, idempotent=_own_call),
    # A result for the model's call may complete the round and start the model: the history is read
    # beside the state. One for the conductor's own call finds it gone when acknowledged again.
    FrameRoute(
        ToolResult,
        _result,
        sent_by=CALL_DEVICE,
        idempotent=_own_call,
        loads_history=lambda result: may_resume_the_model(result.call_id),
    ),
    # A progress report says the same again: nothing is claimed.
    FrameRoute(ToolProgress, _progress, sent_by=CALL_DEVICE, idempotent=True),
    FrameRoute(SessionStart, _session_start),
    FrameRoute(ConfirmChange, _tap, sent_by=Action.CONFIRM),
    # The latest context replaces the one before; a part sent again is stored again: nothing claimed.
    FrameRoute(WorkspaceContext, _workspace, idempotent=True),
    FrameRoute(WorkspaceNames, _names, idempotent=True),
)


def route_of(payload: object) -> FrameRoute[Any] | None:
    """The route a payload takes (None: it needs no action)."""
    return next((route for route in ROUTES if route.takes(payload)), None)


def own_call_acknowledged(payload: object) -> str | None:
    """The call id when ``payload`` acknowledges one of the conductor's own calls that change
    nothing (the app played our setState or a sentence): taken before any route, it is not decided,
    and nothing is read or written for it, not even the connection's session."""
    if isinstance(payload, ToolResult) and is_unrecorded_own_call(payload.call_id):
        return payload.call_id
    return None
