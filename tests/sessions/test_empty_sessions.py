"""A session in which nothing was ever said (every first request refused, or a connection that
only opened) is not listed: its state item carries no ``owner``, so the ``by-owner`` index, a
sparse one, never holds it. It can still be read by its id, ended and erased; its first turn, or
a handoff's conversation, lists it."""

from __future__ import annotations

from shared.core.messages import text_block
from tests.sessions.conftest import Api


def _listed(api: Api) -> list[str]:
    status, body = api.call("GET", "/sessions")
    assert status == 200
    return [session["id"] for session in body["sessions"]]


def test_an_empty_session_is_not_listed_but_can_be_read(api: Api) -> None:
    empty = api.seed(turn_count=0, last_active=1_790_000_009.0)
    spoken = api.seed(turn_count=1, last_utterance="hello", last_active=1_790_000_001.0)

    assert _listed(api) == [spoken.session_id]
    status, body = api.call("GET", f"/sessions/{empty.session_id}")
    assert status == 200 and body["session"]["turns"] == 0 and body["transcript"] == []
    (item,) = [i for i in api.items(empty.session_id) if i["sk"]["S"] == "STATE"]
    assert "owner" not in item  # not in the sparse index at all: no page is spent on it


def test_its_first_turn_lists_it(api: Api) -> None:
    state = api.seed(turn_count=0)
    assert _listed(api) == []
    state.turn_count, state.last_utterance = 1, "now I say something"
    api.store.commit(state, [])
    assert _listed(api) == [state.session_id]


def test_a_handoff_with_its_conversation_is_listed_before_a_turn(api: Api) -> None:
    state = api.seed(turn_count=0, origin="handoff", messages=[("user", [text_block("from chat")])])
    summary_only = api.seed(turn_count=0, origin="handoff", summary="we talked about the parser", last_active=1.0)
    assert _listed(api) == [state.session_id, summary_only.session_id]
