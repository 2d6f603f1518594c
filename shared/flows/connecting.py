"""A ``$connect`` checked before the service binds it: the session it names (``?sessionId=``, a
UUID v4, in lower case from here on) and, when its token was issued for one session (the
authorizer's ``sessionId``), that it is this one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.wire.wire_formats import is_uuid_v4


@dataclass(frozen=True)
class Refusal:
    """A ``$connect`` answered without binding: its status, the body it gets and the line logged."""

    status: int
    body: str
    log_line: str


NOT_A_SESSION_ID = Refusal(400, "sessionId must be a UUID v4", "connection refused: sessionId is not a UUID v4")
OTHER_SESSION = Refusal(
    403, "the token does not grant this session", "connection refused: token was issued for another session"
)


@dataclass(frozen=True)
class ConnectCheck:
    """The session a ``$connect`` asks for (None when it names none) and why it is refused, if it is."""

    session_id: str | None
    refusal: Refusal | None = None


def check_connect(requested: str | None, authorizer: Mapping[str, Any] | None) -> ConnectCheck:
    """The session ``requested`` names, checked against the one the authorizer's token grants."""
    if requested is None or not is_uuid_v4(requested):
        return ConnectCheck(None, NOT_A_SESSION_ID)
    session_id = requested.lower()
    granted = (authorizer or {}).get("sessionId")
    if granted and str(granted).lower() != session_id:
        return ConnectCheck(session_id, OTHER_SESSION)
    return ConnectCheck(session_id)
