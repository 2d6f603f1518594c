"""Why a WebSocket connection could not be opened, in a sentence, and whether trying again can help.

Nothing listening, a timeout or a 5xx may pass (the conductor is starting, a deploy is rolling):
worth the backoff. A refused handshake (4xx), a TLS mismatch or an unknown host will not change
by waiting: the caller is told at once.
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from websockets.exceptions import InvalidHandshake, InvalidMessage, InvalidStatus, InvalidURI

RETRIED_STATUSES = frozenset({408, 425, 429})
"""4xx answers that mean "not now" rather than "not like this"."""
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


def is_local(url: str) -> bool:
    """Whether ``url`` points at this machine (the local stack of ``make run``)."""
    return urlsplit(url).hostname in LOCAL_HOSTS


@dataclass(frozen=True)
class ConnectFailure:
    reason: str
    retryable: bool
    status: int | None = None  # the HTTP status of a refused handshake


def explain(exc: BaseException, url: str = "") -> ConnectFailure:
    """``exc`` (from opening a connection to ``url``) as a reason a person can act on."""
    if isinstance(exc, InvalidStatus):
        return _refused(exc)
    if isinstance(exc, ssl.SSLError):
        return ConnectFailure(
            f"TLS handshake failed ({exc.reason or exc}): if the server speaks plain WebSocket "
            "(the local stack does), use ws:// instead of wss://",
            retryable=False,
        )
    if isinstance(exc, InvalidMessage):
        return ConnectFailure(
            "the server did not answer with HTTP: not a WebSocket endpoint, or a TLS one reached with ws:// "
            "(then use wss://)",
            retryable=False,
        )
    if isinstance(exc, InvalidURI):
        return ConnectFailure(f"not a WebSocket URL: {exc}", retryable=False)
    if isinstance(exc, InvalidHandshake):
        return ConnectFailure(f"the WebSocket handshake failed: {exc}", retryable=False)
    if isinstance(exc, socket.gaierror):
        return ConnectFailure(f"cannot resolve the host name ({exc.strerror or exc})", retryable=False)
    if isinstance(exc, ConnectionRefusedError):
        return ConnectFailure("nothing is listening (connection refused)", retryable=True)
    if isinstance(exc, TimeoutError):
        if urlsplit(url).scheme == "wss":
            # a plain server waits for an HTTP request line that a TLS ClientHello never ends
            return ConnectFailure(
                "timed out opening the connection; if the server speaks plain WebSocket "
                "(the local stack does), use ws:// instead of wss://",
                retryable=not is_local(url),
            )
        return ConnectFailure("timed out opening the connection", retryable=True)
    return ConnectFailure(f"{type(exc).__name__}: {exc}", retryable=True)


def _refused(exc: InvalidStatus) -> ConnectFailure:
    response = exc.response
    status = response.status_code
    said = _body_message(response.body)
    reason = f"the server refused the connection: HTTP {status} {response.reason_phrase}".rstrip()
    if said and said != response.reason_phrase:
        reason += f" ({said})"
    if status == 400:
        reason += "; the conductor's $connect wants ?sessionId=<a UUID v4> in the URL"
    elif status == 401:
        reason += "; this conductor needs a signed-in user (--username, --client-id)"
    elif status in (403, 404):
        reason += "; check the URL (stage path) and the user's access"
    return ConnectFailure(reason, retryable=status >= 500 or status in RETRIED_STATUSES, status=status)


def _body_message(body: bytes | None) -> str:
    """API Gateway answers ``{"message": "..."}``; other servers a line of text."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return text[:200]
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return value["message"]
    return text[:200]
