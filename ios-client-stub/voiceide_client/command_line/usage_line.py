"""``--usage``: one line per turn saying what it cost, from the conductor's ``turnUsage``."""

from __future__ import annotations

from shared.wire.protocol import TurnUsage

USAGE_WAIT_S = 3.0
"""How long the client waits, before it closes, for the ``turnUsage`` of the turns it ended."""
USAGE_GRACE_S = 1.0
"""How long the client waits after a turn's idle for its ``turnUsage`` before it takes the next line
(the conductor sends it right after the idle; one that sends none holds each line this long at most)."""


def usage_line(usage: TurnUsage) -> str:
    """E.g. ``[usage] 1,234 in / 56 out tokens, ~$0.0012, first partial 420 ms, first speech 510 ms``.

    Cache reads and writes, dropped speculations and the model requests (when more than one) are
    named only when there were any; the cost only when the conductor priced the turn."""
    parts = [f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens"]
    if usage.cache_read_tokens or usage.cache_write_tokens:
        parts.append(f"cache {usage.cache_read_tokens:,} read / {usage.cache_write_tokens:,} written")
    if usage.speculation_input_tokens or usage.speculation_output_tokens:
        parts.append(
            f"dropped speculations {usage.speculation_input_tokens:,} in / {usage.speculation_output_tokens:,} out"
        )
    if usage.requests > 1:
        parts.append(f"{usage.requests} model requests")
    if usage.cost_usd is not None:
        parts.append(f"~${usage.cost_usd:.4f}")
    if usage.first_partial_ms is not None:
        parts.append(f"first partial {usage.first_partial_ms:,} ms")
    if usage.first_speak_ms is not None:
        parts.append(f"first speech {usage.first_speak_ms:,} ms")
    parts.append(f"end {usage.end_ms:,} ms")
    return "[usage] " + ", ".join(parts)
