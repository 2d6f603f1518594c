"""Which connection hears the session's events, and when.

A connection is *bound* at ``$connect``; from then on the session's events are kept in the outbox
but not posted to it. Its first event makes one invocation the *catcher-up*: it posts the kept
events the app missed, in seq order, and only then marks the connection *live*. So an app that
reconnects in the middle of a turn never hears a live event before the ones it missed.
"""

from __future__ import annotations

from shared.core import devices
from shared.core.decision import Outcome
from shared.core.state import SessionState
from shared.wire.protocol import DEFAULT_DEVICE_ID, SessionReady, SessionStart

# A catcher-up that has not finished in this time (its invocation died) may be replaced.
CATCH_UP_TAKEOVER_S = 10.0


class SessionOwnedElsewhere(Exception):
    """The session belongs to another principal."""


def bind(state: SessionState, connection_id: str, principal: str | None, *, now: float = 0.0) -> Outcome:
    """``$connect``: the session's events now go to this connection, once it is caught up. An
    ended session is resumed."""
    if state.principal and state.principal != principal:
        raise SessionOwnedElsewhere(state.session_id)
    return Outcome(
        state.model_copy(
            update={
                "created_at": state.created_at or now,
                "last_active_at": max(state.last_active_at, now),
                "ended_at": None,
                "connection_id": connection_id,
                "device_connected_at": now,
                "connection_start_seq": state.next_seq,
                "connection_live": False,
                "catch_up_owner": None,
                "catch_up_since": None,
                "principal": state.principal or principal,
            }
        )
    )


def arrive(state: SessionState, connection_id: str, principal: str | None, *, now: float = 0.0) -> Outcome:
    """``$connect``: the connection is bound (``bind``: it takes the session over), unless the
    session's live connection is a device that said which it is (``sessionStart.device``): then
    the new one may be another device, or the same one back, and its first event says which
    (``shared.core.device_decisions``): it joins beside the live one or takes the session over.
    An app that does not know devices reconnects exactly as it always did."""
    if state.principal and state.principal != principal:
        raise SessionOwnedElsewhere(state.session_id)
    others_live = state.connection_id not in (None, connection_id) and state.connection_live
    if others_live and state.device_id != DEFAULT_DEVICE_ID:
        return Outcome(state)
    return bind(state, connection_id, principal, now=now)


def unbind(state: SessionState, connection_id: str) -> Outcome:
    """``$disconnect``: only the session's current connection is forgotten, not an older one."""
    if state.connection_id != connection_id:
        return Outcome(state)
    left = state.model_copy(update={"connection_id": None, "catch_up_owner": None, "catch_up_since": None})
    outcome = Outcome(left)
    if left.devices:  # the others hear that the session's own device left
        outcome.unnumbered.append(devices.changed(left, left=state.device_id))
    return outcome


def needs_catch_up(state: SessionState, connection_id: str) -> bool:
    return state.connection_id == connection_id and not state.connection_live


def catch_up_after(state: SessionState, last_seq: int | None) -> int:
    """The last seq the app has: its ``lastSeq``, else the last one made before it connected.
    Never beyond what exists, so events made while catching up are not skipped."""
    after = state.connection_start_seq - 1 if last_seq is None else last_seq
    return min(after, state.next_seq - 1)


def claim_catch_up(state: SessionState, connection_id: str, owner: str, *, now: float) -> Outcome:
    """Make ``owner`` the one invocation that catches this connection up, unless another one is
    already doing it (and has not been at it for longer than ``CATCH_UP_TAKEOVER_S``)."""
    if not needs_catch_up(state, connection_id) or state.catch_up_owner == owner:
        return Outcome(state)
    if state.catch_up_owner is not None and now - (state.catch_up_since or 0.0) < CATCH_UP_TAKEOVER_S:
        return Outcome(state)
    return Outcome(state.model_copy(update={"catch_up_owner": owner, "catch_up_since": now}))


def catching_up(state: SessionState, connection_id: str, owner: str) -> bool:
    return needs_catch_up(state, connection_id) and state.catch_up_owner == owner


def release_catch_up(state: SessionState, connection_id: str, owner: str) -> Outcome:
    """The catcher-up gave up (the session kept changing): the next event may try at once."""
    if not catching_up(state, connection_id, owner):
        return Outcome(state)
    return Outcome(state.model_copy(update={"catch_up_owner": None, "catch_up_since": None}))


def mark_live(state: SessionState) -> SessionState:
    """Everything kept before ``next_seq`` has been posted: later events go live."""
    return state.model_copy(
        update={
            "connection_live": True,
            "connection_start_seq": state.next_seq,
            "catch_up_owner": None,
            "catch_up_since": None,
        }
    )


def session_ready(
    before: SessionState, after: SessionState, start: SessionStart, connection_id: str
) -> SessionReady | None:
    """The answer to a ``sessionStart`` once its catch-up is through: whether the session had a
    conversation before it, its title, the newest seq and the capabilities taken. None when the
    start was refused (another session's id) or the session has moved on to a newer connection."""
    if start.session_id.lower() != after.session_id or after.connection_id != connection_id:
        return None
    return SessionReady(
        resumed=bool(before.history_len or before.summary or (before.turn is not None and not before.turn.speculative)),
        title=after.title,
        last_seq=after.next_seq - 1,
        capabilities=tuple(after.capabilities),
        devices=devices.seen(after, after.device_id) if after.devices else None,
    )
