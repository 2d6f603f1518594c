"""The turn function and its on-failure destination, as the local Lambda service runs them."""

from __future__ import annotations

import importlib
from typing import Any

HANDLER_TIMEOUT_S = 10.0
"""connect, disconnect, the authorizer and the turn's on-failure destination, as deployed."""
TURN_FUNCTION = "voiceide-conductor-turn"
TURN_ABANDONED_FUNCTION = "voiceide-conductor-turn-abandoned"
TURN_TIMEOUT_S = 600.0
"""The turn runner's timeout as deployed (infra/config.py)."""


def turn_functions() -> dict[str, Any]:
    """The turn runner and its on-failure destination, configured as deployed: no retries (a
    stream must never run twice), failures to the destination that ends the turn."""
    from conductor_local.lambda_runtime.server import LocalFunction

    def run_turn(event: Any, context: Any) -> Any:
        return importlib.import_module("lambdas.turn").handler(event, context)

    def end_abandoned_turn(event: Any, context: Any) -> Any:
        return importlib.import_module("lambdas.turn_abandoned").handler(event, context)

    return {
        TURN_FUNCTION: LocalFunction(
            run_turn, timeout_seconds=TURN_TIMEOUT_S, retry_attempts=0, on_failure=TURN_ABANDONED_FUNCTION
        ),
        TURN_ABANDONED_FUNCTION: LocalFunction(end_abandoned_turn, timeout_seconds=HANDLER_TIMEOUT_S),
    }
