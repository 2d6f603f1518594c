"""What a turn cost: tokens from Bedrock's ``metadata`` of each model request, an estimate at list
prices, and the turn's timings; the session's totals; the person's daily ceiling. Pure.

The runner adds each model request's usage to its turn (``Turn.usage``) in the commit that ends
the request's message; when the turn ends (``Decision.end_turn``) the ``turnUsage`` event is made,
unnumbered, posted after the turn's last events, and the turn's figures join the session's totals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypedDict, cast

from shared.core.state import SessionState, Turn, Usage
from shared.wire.protocol import TurnUsage

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    """List prices in US dollars per million tokens of the stage's model, and the day they were read."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    as_of: str = ""

    def cost(self, usage: Usage) -> float:
        spent = (
            (usage.input_tokens + usage.speculation_input_tokens) * self.input
            + (usage.output_tokens + usage.speculation_output_tokens) * self.output
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
        )
        return spent / PER_MILLION


def usage_of(reported: dict[str, int], model_id: str) -> Usage:
    """One model request's usage, as Bedrock's ``metadata`` reported it."""
    return Usage(
        requests=1,
        input_tokens=reported.get("inputTokens", 0),
        output_tokens=reported.get("outputTokens", 0),
        cache_read_tokens=reported.get("cacheReadInputTokens", 0),
        cache_write_tokens=reported.get("cacheWriteInputTokens", 0),
        models=[model_id] if model_id else [],
    )


OUTPUT_CHARS_PER_TOKEN = 4.0  # a message cut short has no usage figures: its output is estimated from its text


def estimated_usage(input_chars: int, chars_per_token: float, output_chars: int) -> dict[str, int]:
    """What a model request closed before Bedrock's ``metadata`` spent, in its usage's terms: its
    input at the conversation's measured characters per token, its output from the text it wrote."""
    return {
        "inputTokens": math.ceil(input_chars / max(chars_per_token, 1.0)),
        "outputTokens": math.ceil(output_chars / OUTPUT_CHARS_PER_TOKEN),
    }


def dropped_tokens(reported: dict[str, int]) -> tuple[int, int]:
    """A dropped request's (input, output) tokens as a turn's ``speculation*Tokens`` count them:
    all the input it read (cache reads and writes included), and its output."""
    read = sum(reported.get(key, 0) for key in ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"))
    return read, reported.get("outputTokens", 0)


def _ms(since: float, at: float | None) -> int | None:
    if at is None or not since:
        return None
    return max(0, round((at - since) * 1000))


def finish_turn(state: SessionState, turn: Turn, now: float | None) -> TurnUsage:
    """The turn's ``turnUsage``, its cost not yet priced (``priced``); its figures join the
    session's totals (and the dropped speculations not yet counted join the turn)."""
    usage = turn.usage.model_copy(deep=True)
    usage.speculation_input_tokens += state.speculation_input_pending
    usage.speculation_output_tokens += state.speculation_output_pending
    state.speculation_input_pending = state.speculation_output_pending = 0
    state.usage_total.add(usage)
    return TurnUsage(
        turn_id=turn.turn_id,
        models=tuple(usage.models),
        **counts_of(usage),
        first_partial_ms=_ms(turn.started_at, turn.first_partial_at),
        first_speak_ms=_ms(turn.started_at, turn.first_speak_at),
        end_ms=_ms(turn.started_at, now) or 0,
    )


def priced(event: TurnUsage, prices: Prices | None) -> TurnUsage:
    """The event with its estimated cost at ``prices`` (unchanged without prices)."""
    if prices is None:
        return event
    cost = round(prices.cost(usage_in(event)), 8)
    return event.model_copy(update={"cost_usd": cost, "prices_as_of": prices.as_of or None})


def usage_in(event: TurnUsage) -> Usage:
    """The figures of a ``turnUsage``."""
    return Usage(**counts_of(event))


class Counts(TypedDict):
    """The counted figures (``Usage.COUNTS``), by name."""

    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    speculation_input_tokens: int
    speculation_output_tokens: int


def counts_of(figures: Usage | TurnUsage) -> Counts:
    """The counted figures (``Usage.COUNTS``) of a ``Usage`` or a ``turnUsage``, by name."""
    return cast(Counts, {name: getattr(figures, name) for name in Usage.COUNTS})


# ---- the person's daily ceiling ----------------------------------------------------------------


def spender(principal: str | None, session_id: str) -> str:
    """Whose daily spend a turn counts against: the signed-in person, else (no sign-in) the session."""
    return principal or session_id


def day_of(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def resets_at(now: float) -> datetime:
    """Midnight UTC after ``now``: when a day's spend starts again from zero."""
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


# What a request sends beside its messages (system prompt, tool specs), in tokens, at most; a
# reservation counts it on top of the messages' own estimate.
REQUEST_OVERHEAD_TOKENS = 4_000


def reservation_usd(prices: Prices, message_chars: int, chars_per_token: float, max_tokens: int) -> float:
    """The most one model request may cost, reserved before it is sent: its messages at the
    conversation's measured characters per token (three quarters of it: a ratio measured on a
    conversation may run high), the system prompt and tools, all of it written to the prompt cache
    if that costs more, and every output token it may write."""
    input_tokens = message_chars / max(0.75 * chars_per_token, 1.0) + REQUEST_OVERHEAD_TOKENS
    return (input_tokens * max(prices.input, prices.cache_write) + max_tokens * prices.output) / PER_MILLION


def over_budget(spent_today_usd: float, ceiling_usd: float) -> bool:
    return ceiling_usd > 0 and spent_today_usd >= ceiling_usd


def budget_line(now: float) -> str:
    """The sentence the person hears when a turn is refused for the ceiling."""
    hours = max(1, round((resets_at(now).timestamp() - now) / 3600))
    when = "in about an hour" if hours == 1 else f"in about {hours} hours"
    return f"You've reached today's spending limit, so I can't answer now. It resets at midnight UTC, {when}."
