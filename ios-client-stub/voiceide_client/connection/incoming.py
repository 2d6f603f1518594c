"""What a received frame is, before it is dispatched: API Gateway's own notices, ``seq``s of
kinds this client does not know, the error codes that mean a transcript started no turn, those
that mean the conductor is about to close the session's connection for good, and those after
which this connection is done at once."""

from __future__ import annotations

import json
from typing import Any

from shared.wire.protocol import ErrorCode

TRANSCRIPT_REFUSED = frozenset(
    {str(ErrorCode.EMPTY_TRANSCRIPT), str(ErrorCode.TRANSCRIPT_TOO_LONG), str(ErrorCode.RATE_LIMITED)}
)
"""Error codes answering a transcript that started no turn (no thinking, no idle follow)."""
SESSION_CLOSING = frozenset({str(ErrorCode.SESSION_ENDED), str(ErrorCode.SESSION_ERASED)})
"""Error codes telling that the session was ended or erased (sessions API): the connection closes
next, and the app must not reconnect on its own."""
STOPPING = frozenset({str(ErrorCode.TAKEN_OVER), str(ErrorCode.TOO_MANY_DEVICES)})
"""Error codes after which this connection is done: the app says so once and stops, without
reconnecting (a taken-over connection is closed by the conductor; a refused device's is left open,
and the client closes it)."""


def gateway_frame(frame: str | bytes) -> dict[str, Any] | None:
    """The frame as a JSON object if it is not a protocol event (no ``kind``), e.g. API Gateway's
    own ``{"message": "Internal server error", "connectionId": ..., "requestId": ...}``."""
    try:
        value = json.loads(frame)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) and "kind" not in value else None


def raw_seq(frame: str | bytes) -> int | None:
    """The envelope's ``seq`` of a frame that parsed as an unknown kind."""
    try:
        seq = json.loads(frame).get("seq")
    except (ValueError, AttributeError):
        return None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None
