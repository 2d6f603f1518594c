"""What API Gateway itself puts on the wire of a WebSocket: long messages cut into frames, its own
``{"message": ...}`` frames and handshake refusals, and the one-line summaries the local gateway logs."""

from __future__ import annotations

import email.utils
import http
import json

from websockets.datastructures import Headers
from websockets.http11 import Response

from conductor_local.apigw_events import aws_id

AUTHORIZER_ROUTE = "$connect authorizer"
"""The name under which the ``$connect`` authorizer's invocations are logged and given a context."""
TIMED_OUT = "Endpoint request timed out"
INTERNAL_ERROR = "Internal server error"


def summarize(frame: str | bytes, limit: int = 120) -> str:
    """One readable line for a protocol event, e.g. ``toolCall tts.speak {"text":"Hi"}``."""
    if isinstance(frame, bytes):
        return f"<{len(frame)} bytes binary>"
    try:
        ((kind, payload),) = json.loads(frame)["kind"].items()
    except (ValueError, KeyError, TypeError, AttributeError):
        return _clip(json.dumps(frame, ensure_ascii=False), limit)
    if not isinstance(payload, dict):
        return _clip(kind, limit)
    if set(payload) == {"text"}:
        detail = json.dumps(payload["text"], ensure_ascii=False)
    elif kind == "toolCall":
        detail = f"{payload.get('name')} {payload.get('arguments')} ({payload.get('callId')})"
    else:
        detail = " ".join(f"{key}={value}" for key, value in payload.items() if value is not None)
    return _clip(f"{kind} {detail}", limit)


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, always writable as UTF-8: a lone surrogate (valid in JSON,
    not in Unicode text) is shown as its escape, ``\\ud83d``."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
