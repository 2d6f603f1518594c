"""What API Gateway itself puts on the wire of a WebSocket: long messages cut into frames, its own
``{"message": ...}`` frames and handshake refusals, and the one-line summaries the local gateway logs."""

from __future__ import annotations

import email.utils
import http
import json

from websockets.datastructures import Headers
from websockets.http11 import Response

from conductor_local.gateway.events import aws_id
from shared.wire.log_safety import safe_text, safe_value

AUTHORIZER_ROUTE = "$connect authorizer"
"""The name under which the ``$connect`` authorizer's invocations are logged and given a context."""
TIMED_OUT = "Endpoint request timed out"
INTERNAL_ERROR = "Internal server error"
_READ_CHARS = 8192
"""How much of a frame's text a log line reads (it shows far less; secrets in it are redacted first)."""


def summarize(frame: str | bytes, limit: int = 120) -> str:
    """One readable line for a protocol event, e.g. ``toolCall tts.speak {"text":"Hi"}``; never raises.

    Whatever the client sent, the line is at most ``limit`` bytes, escaped and with secrets redacted
    (``shared.wire.log_safety``); a frame that is not a readable event (not JSON, nested past Python's
    recursion limit, huge numbers) is shown as its first characters, as sent."""
    if isinstance(frame, bytes | bytearray):
        return f"<{len(frame)} bytes binary>"
    try:
        ((kind, payload),) = json.loads(frame)["kind"].items()
        kind = str(kind)
    except Exception:  # not an event (RecursionError too): the frame as it came
        return safe_text(json.dumps(frame[:_READ_CHARS], ensure_ascii=False), limit)
    if not isinstance(payload, dict):
        return safe_text(kind, limit)
    if set(payload) == {"text"}:
        text = payload["text"]
        detail = (
            json.dumps(text[:_READ_CHARS], ensure_ascii=False) if isinstance(text, str) else safe_value(text, limit)
        )
    elif kind == "toolCall":
        name, arguments = safe_value(payload.get("name"), 64), safe_value(payload.get("arguments"), limit)
        detail = f"{name} {arguments} ({safe_value(payload.get('callId'), 64)})"
    else:
        detail = " ".join(
            f"{safe_text(str(key), 32)}={_plain(value, limit)}"
            for key, value in list(payload.items())[:16]
            if value is not None
        )
    return safe_text(f"{safe_text(kind, 64)} {detail}", limit)


def _plain(value: object, limit: int) -> str:
    """A payload member for ``key=value``: a string as it is (escaped), anything else as JSON-like."""
    return safe_text(value, limit) if isinstance(value, str) else safe_value(value, limit)


def split_frames(payload: str | bytes, max_frame_bytes: int) -> list[str] | list[bytes]:
    """``payload`` cut into fragments of at most ``max_frame_bytes`` bytes each, as API Gateway
    sends a long message; text is cut between characters, so every fragment is valid UTF-8."""
    if isinstance(payload, bytes):
        return [payload[i : i + max_frame_bytes] for i in range(0, len(payload), max_frame_bytes)] or [b""]
    data = payload.encode("utf-8")
    fragments: list[str] = []
    start = 0
    while len(data) - start > max_frame_bytes:
        end = start + max_frame_bytes
        while data[end] & 0xC0 == 0x80:  # never cut inside a character
            end -= 1
        fragments.append(data[start:end].decode("utf-8"))
        start = end
    fragments.append(data[start:].decode("utf-8"))
    return fragments


def gateway_message(message: str, connection_id: str, request_id: str) -> str:
    """The frame API Gateway itself sends a client when a route's integration fails, spelled as it does."""
    ids = f'"connectionId":{json.dumps(connection_id)}, "requestId":{json.dumps(request_id)}'
    return f'{{"message": {json.dumps(message)}, {ids}}}'


def handshake_refusal(status: int, message: str) -> Response:
    """An HTTP answer to a refused WebSocket handshake, with API Gateway's ``{"message": ...}`` body."""
    body = json.dumps({"message": message}, separators=(",", ":")).encode()
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", "application/json"),
            ("x-amzn-RequestId", aws_id()),
        ]
    )
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return Response(status, phrase, headers, body)
