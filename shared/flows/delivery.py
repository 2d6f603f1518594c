"""Getting a session's events to the app: live posts, catch-up of a new connection, replay.

Events are posted only after their decision is stored; what cannot be delivered stays in the
outbox for a reconnecting app.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.adapters.store import SessionStore, VersionConflict
from shared.core import connection, devices
from shared.core.roles import Action, may
from shared.core.state import SessionState
from shared.flows.commit import (
    COMMIT_ATTEMPTS,
    Committed,
    Committer,
    ConductorBusy,
    Metrics,
    backoff,
    error_metric_name,
)
from shared.wire.protocol import DEFAULT_DEVICE_ID, DISPLAY, VOICE, ErrorCode, error_event
from shared.wire.protocol_tools import MCP_TOOL_PREFIX

TAKEN_OVER_MESSAGE = (
    "another connection took this session over: this one hears nothing more of it (do not reconnect on your own)"
)


class Gateway(Protocol):
    def post(self, endpoint: str, connection_id: str, frame: str) -> bool: ...


@dataclass(frozen=True)
class Request:
    """Where a frame came from and how long this invocation may run."""

    connection_id: str
    endpoint: str
    remaining_ms: Callable[[], int]
    principal: str | None = None


class Delivery:
    def __init__(
        self, *, store: SessionStore, gateway: Gateway, committer: Committer, logger: Any, metrics: Metrics
    ) -> None:
        self.store = store
        self.gateway = gateway
        self.committer = committer
        self.log = logger
        self.metrics = metrics

    def deliver(self, endpoint: str, committed: Committed, *, numbered: bool = True) -> None:
        """Post the events to the session's current connection (the outbox already has them);
        without ``numbered``, only the unnumbered ones (the turn runner posts the others)."""
        for frame in committed.after:  # one line a turn, for the dashboard's spend per person
            usage = json.loads(frame)["kind"].get("turnUsage")
            if usage is not None:
                person = committed.state.principal or ""
                self.log.info("turn usage", extra={"principal": person, "turn_usage": usage})
        state = committed.state
        present = devices.recipients(state)
        if not present:
            if committed.frames:
                self.log.debug(
                    "no live connection: nothing posted (the outbox keeps all but partials)",
                    extra={"session_id": state.session_id},
                )
            return
        targets = committed.targets or [None] * len(committed.frames)
        numbered_frames = list(zip(committed.frames, targets, strict=True)) if numbered else []
        after = [(frame, _about_other(frame, state)) for frame in committed.after]
        for recipient in present:
            frames = [
                *committed.before,
                *(frame for (_seq, frame), to in numbered_frames if devices.hears(recipient, to)),
                *(frame for frame, about in after if _hears_about(recipient, about)),
            ]
            for frame in frames:
                if not self.gateway.post(endpoint, recipient.connection_id, frame):
                    self.log.info(
                        "connection gone: events kept for replay",
                        extra={"session_id": state.session_id, "connection_id": recipient.connection_id},
                    )
                    break

    def post_unnumbered(self, endpoint: str, state: SessionState, frame: str) -> None:
        """An unnumbered, unkept frame to the devices present it is for (``_about_other``)."""
        about = _about_other(frame, state)
        for recipient in devices.recipients(state):
            if _hears_about(recipient, about):
                self.gateway.post(endpoint, recipient.connection_id, frame)

    def post_partial(self, endpoint: str, state: SessionState, frame: str) -> bool:
        """An unnumbered partial to the devices that show the answer; whether any got it."""
        posted = False
        for recipient in devices.recipients(state):
            if devices.shows_partials(state, recipient):
                posted = self.gateway.post(endpoint, recipient.connection_id, frame) or posted
        return posted

    def catch_up_device(
        self, request: Request, state: SessionState, device_id: str, last_seq: int | None
    ) -> SessionState:
        """A device that joined gets the kept events it missed (from its ``lastSeq``; none before
        it joined without one), then goes live: marked on the version whose events were posted,
        so nothing reaches it live before its catch-up is through."""
        posted_until = state.next_seq - 1 if last_seq is None else min(last_seq, state.next_seq - 1)
        for attempt in range(COMMIT_ATTEMPTS):
            for _seq, frame in self.store.outbox_for(
                state.session_id, device_id, after_seq=posted_until, before_seq=state.next_seq
            ):
                if not self.gateway.post(request.endpoint, request.connection_id, frame):
                    return state
            posted_until = state.next_seq - 1
            try:
                return self.store.commit(devices.mark_live(state, device_id))
            except VersionConflict:
                self.metrics.count("StateConflicts")
                backoff(attempt)
                fresh = self.store.load(state.session_id)
                if fresh is None or devices.entry_of(fresh, request.connection_id) is None:
                    return state
                state = fresh
        return state

    def post_to_session(self, endpoint: str, state: SessionState, frames: list[str]) -> None:
        """Post frames already stored (for every device) to the devices present (as ``deliver`` does)."""
        for recipient in devices.recipients(state):
            for frame in frames:
                if not self.gateway.post(endpoint, recipient.connection_id, frame):
                    break

    def tell_taken_over(self, endpoint: str, connection_ids: list[str]) -> None:
        """Tell each connection another one took its place: it hears nothing more of the session
        (a connection already gone is simply not told)."""
        for connection_id in connection_ids:
            self.metrics.count(error_metric_name(ErrorCode.TAKEN_OVER))
            frame = error_event(ErrorCode.TAKEN_OVER, TAKEN_OVER_MESSAGE).to_json()
            self.gateway.post(endpoint, connection_id, frame)

    def reply(self, request: Request, code: ErrorCode, message: str) -> None:
        """An error about the frame itself, to the connection that sent it."""
        self.metrics.count(error_metric_name(code))
        self.gateway.post(request.endpoint, request.connection_id, error_event(code, message).to_json())

    def catch_up(self, request: Request, state: SessionState, *, last_seq: int | None) -> SessionState | None:
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
            claimed = self.committer.apply(
                state.session_id,
                lambda fresh: connection.claim_catch_up(fresh, request.connection_id, owner, now=now),
                hint=state,
            )
        except ConductorBusy:
            self._busy_catching_up(request, state)
            return None
        if claimed is None or not connection.catching_up(claimed.state, request.connection_id, owner):
            return None
        state = claimed.state
        posted_until = connection.catch_up_after(state, last_seq)
        for attempt in range(COMMIT_ATTEMPTS):
            if not self._post_kept(request, state.session_id, posted_until, state.next_seq, state.device_id):
                return None
            posted_until = state.next_seq - 1
            try:
                return self.store.commit(connection.mark_live(state))
            except VersionConflict:
                self.metrics.count("StateConflicts")
                backoff(attempt)
                fresh = self.store.load(state.session_id)
                if fresh is None or not connection.catching_up(fresh, request.connection_id, owner):
                    return None
                state = fresh
        with contextlib.suppress(ConductorBusy):  # else the claim lapses after CATCH_UP_TAKEOVER_S
            self.committer.apply(
                state.session_id, lambda fresh: connection.release_catch_up(fresh, request.connection_id, owner)
            )
        self._busy_catching_up(request, state)
        return None

    def _busy_catching_up(self, request: Request, state: SessionState) -> None:
        self.log.warning("session kept changing; connection not caught up", extra={"session_id": state.session_id})
        self.reply(request, ErrorCode.CONDUCTOR_ERROR, "the session is busy; send sessionStart again to catch up")

    def replay(self, request: Request, state: SessionState, last_seq: int) -> None:
        """Re-send, in order, the kept events after ``last_seq`` that came before this (live)
        connection's first live event."""
        self._post_kept(request, state.session_id, last_seq, state.connection_start_seq, state.device_id)

    def _post_kept(
        self, request: Request, session_id: str, after_seq: int, before_seq: int, device_id: str = DEFAULT_DEVICE_ID
    ) -> bool:
        """Post the kept events with ``after_seq < seq < before_seq`` that the session's own device
        hears to the requesting connection."""
        for _seq, frame in self.store.outbox_for(session_id, device_id, after_seq=after_seq, before_seq=before_seq):
            if not self.gateway.post(request.endpoint, request.connection_id, frame):
                return False
        return True


_PROGRESS = "progress"  # an unnumbered frame for the devices that show or say progress
MCP_RUNNER = "conductor"  # who runs a call of a tool on an MCP server (no device)
_ROLES = "roles"  # an unnumbered frame for the devices whose roles allow an action
_FOR_ROLES = {
    "vocabulary": Action.HEAR_VOCABULARY,
    "namesHeard": Action.SEE_PROJECT,
    "workspaceContext": Action.SEE_PROJECT,
}


def _about_other(frame: str, state: SessionState) -> str | None:
    """Whom an unnumbered frame is not for: the device a ``devicesChanged`` announces as joined (it
    hears its own ``sessionReady``); for a forwarded ``toolProgress``, the device that runs the call
    (it sent it), prefixed ``_PROGRESS`` so only devices that display or speak get it."""
    if '"vocabulary"' in frame or '"namesHeard"' in frame or '"workspaceContext"' in frame:
        try:
            kind_name = next(iter(json.loads(frame)["kind"]))
        except (ValueError, KeyError, TypeError, StopIteration):
            kind_name = ""
        if kind_name in _FOR_ROLES:
            return f"{_ROLES}:{_FOR_ROLES[kind_name]}"
    if '"devicesChanged"' not in frame and '"toolProgress"' not in frame:
        return None
    try:
        kind = json.loads(frame)["kind"]
        if "toolProgress" in kind:
            call_id = kind["toolProgress"]["callId"]
            call = state.model_call(call_id)
            job = next((job for job in state.background if job.call_id == call_id), None)
            runner = call.device if call is not None else job.device if job is not None else None
            name = call.name if call is not None else job.name if job is not None else ""
            if name.startswith(MCP_TOOL_PREFIX):  # the conductor runs it: every device that shows progress
                return f"{_PROGRESS}:{MCP_RUNNER}"
            return f"{_PROGRESS}:{runner or state.device_id}"
        joined = kind["devicesChanged"].get("joined")
        return joined if isinstance(joined, str) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _hears_about(recipient: devices.Recipient, about: str | None) -> bool:
    if about is not None and about.startswith(f"{_ROLES}:"):
        return may(recipient.roles, Action(about.removeprefix(f"{_ROLES}:")))
    if about is not None and about.startswith(f"{_PROGRESS}:"):
        shows = DISPLAY in recipient.roles or VOICE in recipient.roles
        return shows and about != f"{_PROGRESS}:{recipient.device_id}"
    return about != recipient.device_id
