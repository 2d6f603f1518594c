"""Renaming and ending a session (pure rules)."""

from __future__ import annotations

import pytest

from shared.core.connection import bind
from shared.core.session_index import EmptyTitle, end_session, rename, status_of
from shared.core.state import SessionState


def test_rename_cleans_the_title() -> None:
    state = SessionState(session_id="s", title="Made title")
    renamed = rename(state, '  "Fixing   the login test."  ').state
    assert renamed.title == "Fixing the login test"
    assert state.title == "Made title"  # the input is not changed


def test_rename_refuses_a_title_with_nothing_left() -> None:
    with pytest.raises(EmptyTitle):
        rename(SessionState(session_id="s"), ' "." ')


def test_end_marks_ended_and_lets_go_of_the_connection() -> None:
    state = SessionState(session_id="s", connection_id="c-1", last_active_at=50.0)
    assert status_of(state) == "active"
    ended = end_session(state, 100.0).state
    assert (ended.ended_at, ended.connection_id, status_of(ended)) == (100.0, None, "ended")
    assert ended.last_active_at == 50.0  # ending is not activity: the list order stays


def test_ending_again_keeps_when_it_ended() -> None:
    ended = end_session(SessionState(session_id="s"), 100.0).state
    assert end_session(ended, 200.0).state.ended_at == 100.0


def test_a_later_connect_resumes_an_ended_session() -> None:
    ended = end_session(SessionState(session_id="s", principal="p"), 100.0).state
    resumed = bind(ended, "c-2", "p", now=300.0).state
    assert status_of(resumed) == "active" and resumed.ended_at is None


def test_titles_and_last_utterances_are_one_printable_line() -> None:
    from shared.core.session_index import clean_title, note_utterance
    from shared.core.state import SessionState

    assert clean_title('"Fixing\x1b the\nlogin test."') == "Fixing the login test"
    assert clean_title("\x00\x1b") is None
    state = SessionState(session_id="s")
    note_utterance(state, "run\tthe\x07 tests\n", 5.0)
    assert state.last_utterance == "run the tests" and state.turn_count == 1 and state.last_active_at == 5.0
