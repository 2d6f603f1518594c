"""Checks a conductor URL before connecting, so a typo gets one clear line instead of a traceback."""

from __future__ import annotations

import uuid
from urllib.parse import parse_qsl, urlsplit

WEBSOCKET_SCHEMES = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}
"""The WebSocket scheme to use for each scheme a person may type."""


def check_url(url: str) -> str | None:
    """What is wrong with ``url`` as a conductor WebSocket URL (with the fix to try), or None."""
    if "://" not in url:
        return f"{url!r} has no scheme: use ws://{url} (wss:// for a deployed stage)"
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"{url!r} is not a URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        fixed = f"{WEBSOCKET_SCHEMES[scheme]}://{url.split('://', 1)[1]}"
        return f"{url!r} is an HTTP URL: the conductor speaks WebSocket, use {fixed}"
    if scheme not in WEBSOCKET_SCHEMES:
        return f"{url!r}: the scheme must be ws:// or wss://"
    if not parts.hostname:
        return f"{url!r} has no host: e.g. ws://127.0.0.1:8080"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        shown = parts.netloc.rsplit(":", 1)[-1]
        return f"{url!r}: port {shown} is not in the range 1-65535"
    session_id = dict(parse_qsl(parts.query)).get("sessionId")
    if session_id is not None and not _is_uuid4(session_id):
        return f"{url!r}: sessionId must be a UUID v4 (or leave it out: --session, or a new one)"
    return None


def _is_uuid4(value: str) -> bool:
    try:
        return uuid.UUID(value).version == 4
    except ValueError:
        return False
