"""Binding, catching up and going live, as pure decisions: no moto, no network."""

from __future__ import annotations

import pytest

from shared.core import connection
from shared.core.connection import CATCH_UP_TAKEOVER_S, SessionOwnedElsewhere
from shared.core.state import SessionState

SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"


def bound(connection_id: str = "conn-b", *, next_seq: int = 7) -> SessionState:
    live_on_a = SessionState(session_id=SESSION, connection_id="conn-a", next_seq=next_seq, principal="alice")
    return connection.bind(live_on_a, connection_id, "alice").state


def test_a_bound_connection_is_not_live_until_caught_up_from_the_bind_seq() -> None:
    state = bound()
    assert (state.connection_id, state.connection_live, state.connection_start_seq) == ("conn-b", False, 7)
    assert connection.needs_catch_up(state, "conn-b")
    assert not connection.needs_catch_up(state, "conn-a")  # the old socket is not the session's any more


def test_binding_someone_else_s_session_is_refused_and_a_new_session_takes_the_principal() -> None:
    with pytest.raises(SessionOwnedElsewhere):
        connection.bind(bound(), "conn-c", "mallory")
    fresh = connection.bind(SessionState(session_id=SESSION), "conn-a", "bob").state
    assert fresh.principal == "bob"


def test_one_catcher_up_at_a_time_until_it_has_been_silent_too_long() -> None:
    claimed = connection.claim_catch_up(bound(), "conn-b", "first", now=100.0).state
    assert connection.catching_up(claimed, "conn-b", "first")
    second = connection.claim_catch_up(claimed, "conn-b", "second", now=100.0 + CATCH_UP_TAKEOVER_S - 1).state
    assert second == claimed  # unchanged: nothing to commit, the first one goes on
    taken = connection.claim_catch_up(claimed, "conn-b", "second", now=100.0 + CATCH_UP_TAKEOVER_S + 1).state
    assert connection.catching_up(taken, "conn-b", "second") and not connection.catching_up(taken, "conn-b", "first")


def test_no_catch_up_for_a_live_connection_or_one_the_session_has_left() -> None:
    live = connection.mark_live(connection.claim_catch_up(bound(), "conn-b", "me", now=0.0).state)
    assert connection.claim_catch_up(live, "conn-b", "again", now=0.0).state == live
    assert connection.claim_catch_up(bound(), "conn-a", "stale", now=0.0).state.catch_up_owner is None


def test_going_live_starts_live_delivery_at_next_seq_and_forgets_the_catcher_up() -> None:
    claimed = connection.claim_catch_up(bound(next_seq=7), "conn-b", "me", now=0.0).state
    moved_on = claimed.model_copy(update={"next_seq": 11})  # events 7..10 were kept meanwhile
    live = connection.mark_live(moved_on)
    assert (live.connection_live, live.connection_start_seq, live.catch_up_owner) == (True, 11, None)


def test_a_late_disconnect_of_the_old_socket_keeps_the_new_binding() -> None:
    state = bound()
    assert connection.unbind(state, "conn-a").state == state
    assert connection.unbind(state, "conn-b").state.connection_id is None


def test_only_the_catcher_up_itself_can_give_way() -> None:
    claimed = connection.claim_catch_up(bound(), "conn-b", "me", now=0.0).state
    assert connection.release_catch_up(claimed, "conn-b", "someone-else").state == claimed
    released = connection.release_catch_up(claimed, "conn-b", "me").state
    assert released.catch_up_owner is None and not released.connection_live
    reclaimed = connection.claim_catch_up(released, "conn-b", "next", now=1.0).state
    assert connection.catching_up(reclaimed, "conn-b", "next")


def test_the_catch_up_starts_after_last_seq_or_else_after_the_last_event_before_the_bind() -> None:
    state = bound(next_seq=7)  # events 1..6 were made before this connection
    assert connection.catch_up_after(state, None) == 6
    assert connection.catch_up_after(state, 2) == 2
    assert connection.catch_up_after(state, 10_000) == 6  # a lastSeq from the future skips nothing made later
