"""Fair sharing: a session's budget of events a second, kept in its state."""

from __future__ import annotations

import pytest

from shared.core import admission
from shared.core.state import SessionState


def decide_many(count: int, *, start: float, step: float, per_second: int) -> tuple[SessionState, int]:
    state, refused = SessionState(session_id="s"), 0
    for index in range(count):
        now = start + index * step
        try:
            admission.admit(state, now=now, per_second=per_second)
        except admission.RateExceeded:
            refused += 1
            continue
        state = admission.counted(state, now=now)
    return state, refused


def test_events_over_the_budget_in_one_second_are_refused() -> None:
    _, refused = decide_many(12, start=1000.0, step=0.01, per_second=10)
    assert refused == 2


def test_the_budget_is_new_each_second() -> None:
    _, refused = decide_many(40, start=1000.0, step=0.1, per_second=10)  # ten a second, never more
    assert refused == 0
    state, _ = decide_many(10, start=1000.0, step=0.01, per_second=10)
    with pytest.raises(admission.RateExceeded, match="at most 10 events a second"):
        admission.admit(state, now=1000.5, per_second=10)
    admission.admit(state, now=1001.0, per_second=10)  # a second later: admitted


def test_counting_does_not_touch_the_decided_state() -> None:
    state = SessionState(session_id="s")
    after = admission.counted(state, now=5.0)
    assert (state.events_window_at, state.events_in_window) == (0.0, 0)
    assert (after.events_window_at, after.events_in_window) == (5.0, 1)
