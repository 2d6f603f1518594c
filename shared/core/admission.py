"""Fair sharing: how many of the app's events one session may have decided per second.

API Gateway's route throttle is one bucket for the whole stage, so one connection could use up
the stage's Lambda and DynamoDB budget. Each session therefore gets a budget of its own, kept in
its state, which every event beyond partial transcripts writes anyway (the commit that records its
id): it costs no request of its own. Partial transcripts are limited where they are decided
(``shared.core.speculation``: a partial sooner than the minimum interval after the last one kept
is dropped, as the next one carries all its words). Events over the budget are refused before
anything is decided or written, answered ``rate_limited`` without ``seq``: the app sends them again.
"""

from __future__ import annotations

from shared.core.state import SessionState

WINDOW_S = 1.0


class RateExceeded(Exception):
    """The session has had its events for this second; the app sends this one again."""

    def __init__(self, per_second: int) -> None:
        super().__init__(f"at most {per_second} events a second; send it again in a moment")
        self.per_second = per_second


def admit(state: SessionState, *, now: float, per_second: int) -> None:
    """Raise ``RateExceeded`` when the session's events this second have reached ``per_second``."""
    if now - state.events_window_at < WINDOW_S and state.events_in_window >= per_second:
        raise RateExceeded(per_second)


def counted(state: SessionState, *, now: float) -> SessionState:
    """``state`` (the decision's outcome) with one more event decided in the current second."""
    if now - state.events_window_at < WINDOW_S:
        return state.model_copy(update={"events_in_window": state.events_in_window + 1})
    return state.model_copy(update={"events_window_at": now, "events_in_window": 1})
