"""The person's daily ceiling, held before every model request (``shared.adapters.person_spend``).

A turn's request, a tool round's and a speculation's alike reserve what they may cost at most
(``shared.core.usage.reservation_usd``) in one conditional update that fails past the ceiling; the
request is sent only when it held. When the request ends, its real cost replaces the reservation
(a request dropped before anyone heard it and closed before Bedrock's ``metadata``, a speculation
or a lost early launch, at its estimate from what it read and wrote).
So requests started at once (six finals of one person, or a speculation beside a turn) can never
pass the ceiling together. A stage without a ceiling (or without prices) reserves nothing and
makes no call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.adapters.person_spend import PersonSpend
from shared.core.memory import message_chars
from shared.core.messages import Message
from shared.core.state import SessionState
from shared.core.usage import Prices, day_of, reservation_usd, spender, usage_of


class OverBudget(Exception):
    """The person's day's spend, with this request's most, would pass the ceiling: not sent."""


@dataclass(frozen=True)
class Reservation:
    person: str
    day: str
    usd: float


class SpendGuard:
    def __init__(
        self,
        spend: PersonSpend | None,
        *,
        ceiling_usd: float,
        prices: Prices | None,
        max_tokens: int,
        model_id: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._spend = spend if ceiling_usd > 0 and prices is not None else None
        self._ceiling = ceiling_usd
        self._prices = prices
        self._max_tokens = max_tokens
        self._model_id = model_id
        self._clock = clock

    def reserve(self, state: SessionState, messages: list[Message]) -> Reservation | None:
        """Hold what a request on ``messages`` may cost (None: the stage has no ceiling). Raises
        ``OverBudget``."""
        if self._spend is None or self._prices is None:
            return None
        chars = sum(map(message_chars, messages)) + len(state.summary or "")
        usd = reservation_usd(self._prices, chars, state.chars_per_token, self._max_tokens)
        held = Reservation(spender(state.principal, state.session_id), day_of(self._clock()), usd)
        if not self._spend.reserve(held.person, held.day, held.usd, self._ceiling):
            raise OverBudget(state.session_id)
        return held

    def settle(self, held: Reservation | None, reported: dict[str, int]) -> None:
        """The request ended: its real cost (Bedrock's ``metadata``; none when it failed before
        answering) replaces what it held."""
        if held is None or self._spend is None or self._prices is None:
            return
        cost = self._prices.cost(usage_of(reported, self._model_id)) if reported else 0.0
        self._spend.add(held.person, held.day, cost - held.usd)
