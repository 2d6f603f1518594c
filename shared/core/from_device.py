"""Which decision a frame gets, given the device it came from (``shared.core.devices``).

A frame from the session's own connection is decided as it always was. One from another device
present is decided the same way where that device may act, and answered as the protocol says
where it may not. Who may send a frame (``sent_by``: its frame route's) is data: the action its
roles must allow (``shared.core.roles``), or the device the call went to. A connection the session
does not know yet (a device connected while another was live) either joins beside it (its
``sessionStart`` names another device) or takes the session over, as a reconnect of the session's
own device does.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.core import connection, devices
from shared.core.decision import CoreSettings, Decision, Outcome, error_payload
from shared.core.roles import CALL_DEVICE, REFUSALS, Action, SentBy
from shared.core.state import SessionState
from shared.wire.protocol import (
    ErrorCode,
    Payload,
    SessionStart,
    ToolProgress,
    ToolResult,
    UserAudioTranscriptFinal,
)

Decide = Callable[[SessionState], Outcome]


def deciding(
    state: SessionState,
    connection_id: str,
    payload: Payload,
    decide: Decide,
    settings: CoreSettings,
    *,
    sent_by: SentBy,
    principal: str | None,
    now: float,
    arrived_seq: int | None = None,
) -> Outcome:
    """The decision on ``payload`` from ``connection_id``, which ``sent_by`` may send
    (``arrived_seq``: the next seq when it connected beside a live connection). Raises
    ``devices.TooManyDevices``, ``devices.NotPermitted``."""
    device = devices.device_of(state, connection_id)
    if device is None and connection_id in state.refused_connections:
        raise devices.TooManyDevices(state.session_id)  # refused once: nothing of the session for it
    if device is None and arrived_seq is None:
        return decide(_spoken_here(state, payload, None))  # an older connection of the session's own device
    taken_over: str | None = None
    if device is None:  # it connected beside a live device: its first event says what it is
        if isinstance(payload, SessionStart) and devices.is_joining(state, connection_id, payload):
            return devices.join(state, connection_id, payload, settings, now=now)
        taken_over = state.connection_id
        state = connection.bind(state, connection_id, principal, now=now).state  # it takes the session over
        state.connection_start_seq = min(arrived_seq or state.next_seq, state.connection_start_seq)
        device = state.device_id
    if device != state.device_id:
        return _from_other_device(state, connection_id, device, payload, decide, settings, sent_by=sent_by, now=now)
    if (refused := _refused_to(state, connection_id, payload, sent_by)) is not None:
        return refused
    outcome = decide(_spoken_here(state, payload, None))
    if isinstance(payload, SessionStart) and payload.session_id.lower() == state.session_id:
        _own_device(outcome.state, payload)
    if taken_over is not None and taken_over != connection_id:
        outcome.taken_over.append(taken_over)
    return outcome


def _refused_to(state: SessionState, connection_id: str, payload: Payload, sent_by: SentBy) -> Outcome | None:
    """The answer to what this device may not send (None: it may): answer or report progress on a
    call sent to another device, or do what its roles do not allow and ``REFUSALS`` answers (a tap
    on a held change it does not show)."""
    if sent_by is CALL_DEVICE:
        assert isinstance(payload, ToolResult | ToolProgress)
        if devices.may_answer(state, connection_id, payload.call_id):
            return None
        decision = Decision(state)
        decision.send(error_payload(ErrorCode.NO_PENDING_TOOL_CALL, f"no pending tool call {payload.call_id!r}"))
        return decision.outcome()
    if sent_by is None or sent_by not in REFUSALS:
        return None
    if devices.device_may(state, devices.device_of(state, connection_id), sent_by):
        return None
    raise devices.NotPermitted(REFUSALS[sent_by])


def _from_other_device(
    state: SessionState,
    connection_id: str,
    device: str,
    payload: Payload,
    decide: Decide,
    settings: CoreSettings,
    *,
    sent_by: SentBy,
    now: float,
) -> Outcome:
    if isinstance(payload, SessionStart):
        if payload.device is None or payload.device.id != device:
            return _refused(state, "this connection is already another device of the session")
        return devices.join(state, connection_id, payload, settings, now=now)  # sent again: caught up again
    if (refused := _refused_to(state, connection_id, payload, sent_by)) is not None:
        return refused
    if isinstance(sent_by, Action) and not devices.device_may(state, device, sent_by):
        return Outcome(state)  # a device that does not speak: nothing it says is taken
    return decide(_spoken_here(state, payload, device))


def _spoken_here(state: SessionState, payload: Payload, device: str | None) -> SessionState:
    """A final transcript makes its device the one the turn speaks to."""
    if not isinstance(payload, UserAudioTranscriptFinal) or state.voice_device == device:
        return state
    return state.model_copy(update={"voice_device": device})


def _own_device(state: SessionState, start: SessionStart) -> None:
    """The session's own connection says which device it is (none: the app, with every role)."""
    if start.device is not None:
        state.device_id, state.device_name = start.device.id, start.device.name
        state.device_roles = list(start.device.roles)
    if state.devices and start.tools is not None:
        state.device_tools = state.tools
        state.tools = devices.merged_tools(state)


def _refused(state: SessionState, message: str) -> Outcome:
    decision = Decision(state)
    decision.send(error_payload(ErrorCode.INVALID_EVENT, message))
    return decision.outcome()
