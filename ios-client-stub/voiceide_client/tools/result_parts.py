"""A tool result too big for one WebSocket frame, cut into ``toolResult`` parts as the protocol says.

API Gateway closes the connection on a frame over 32 KB, and the apps the stub stands in for (a
browser, ``URLSessionWebSocketTask``) cannot split one message into several frames: so a result
goes as events of ``part`` 0 to ``parts`` - 1, each one frame, whose texts joined are the result.
"""

from __future__ import annotations

from shared.wire.protocol import ToolResult, make_event
from shared.wire.protocol_tools import MAX_RESULT_PARTS

NUMBERING_SLACK = 8  # bytes: a piece is measured as part 0 of 2; "part":63,"parts":64 takes 2 more


class ResultTooLarge(ValueError):
    """The result needs more than the protocol's 64 parts."""


def fits(result: ToolResult, max_frame_bytes: int) -> bool:
    return len(make_event(result).to_json().encode("utf-8")) <= max_frame_bytes


def split_result(result: ToolResult, max_frame_bytes: int) -> list[ToolResult]:
    """``result`` as parts whose events each fit ``max_frame_bytes`` (one part: it fits as it is).

    Each piece is as long as fits: its event is measured as sent (JSON escaping included) and the
    piece shortened until it fits, so a text full of quotes or newlines still makes whole frames."""
    if fits(result, max_frame_bytes):
        return [result]
    field = "result" if result.result is not None else "error"
    text = result.result if result.result is not None else (result.error or "")
    pieces: list[str] = []
    start = 0
    budget = max_frame_bytes - NUMBERING_SLACK
    while start < len(text):
        size = min(budget, len(text) - start)
        while size > 1 and not fits(_part(result.call_id, field, text[start : start + size], 0, 2), budget):
            size = size * 9 // 10
        pieces.append(text[start : start + size])
        start += size
    if len(pieces) > MAX_RESULT_PARTS:
        raise ResultTooLarge(f"the result of {result.call_id} needs {len(pieces)} parts, more than {MAX_RESULT_PARTS}")
    return [_part(result.call_id, field, piece, index, len(pieces)) for index, piece in enumerate(pieces)]


def _part(call_id: str, field: str, piece: str, index: int, count: int) -> ToolResult:
    return ToolResult.model_validate({"callId": call_id, field: piece, "part": index, "parts": count})
