"""The answer to a ``sessionStart`` (``sessionReady``), posted once the connection is caught up,
unnumbered and never replayed; a voice device gets the workspace's phrases for its recognizer with it
(``vocabulary``, read from the first part of each device's names)."""

from __future__ import annotations

from typing import Protocol

from shared.core import connection, devices
from shared.core.state import SessionState
from shared.flows.delivery import Request
from shared.flows.request_context import PartsReader, vocabulary_frame
from shared.wire.protocol import SessionReady, SessionStart, make_event


class Poster(Protocol):
    def post(self, endpoint: str, connection_id: str, frame: str) -> bool: ...


def answer(
    gateway: Poster,
    parts: PartsReader,
    request: Request,
    before: SessionState,
    after: SessionState,
    start: SessionStart,
) -> None:
    """Answer the session's own connection's sessionStart, after the events it caught up."""
    ready = connection.session_ready(before, after, start, request.connection_id)
    if ready is not None:
        gateway.post(request.endpoint, request.connection_id, make_event(ready).to_json())
        _give_vocabulary(gateway, parts, request, after, after.device_id)


def answer_device(
    gateway: Poster, parts: PartsReader, request: Request, before: SessionState, after: SessionState, device_id: str
) -> None:
    """Answer a joining device's sessionStart once it is caught up, with the devices present."""
    ready = SessionReady(
        resumed=bool(before.history_len or before.summary),
        title=after.title,
        last_seq=after.next_seq - 1,
        capabilities=(),
        devices=devices.seen(after, device_id),
    )
    gateway.post(request.endpoint, request.connection_id, make_event(ready).to_json())
    _give_vocabulary(gateway, parts, request, after, device_id)


def _give_vocabulary(
    gateway: Poster, parts: PartsReader, request: Request, state: SessionState, device_id: str
) -> None:
    frame = vocabulary_frame(parts, state, device_id)
    if frame is not None:
        gateway.post(request.endpoint, request.connection_id, frame)
