"""The client's WebSocket link to the conductor: opening it, keeping it, and giving it up.

The first connection may be retried (``connect(retries=...)``) with progress told to the user.
When a connection drops, the supervisor reconnects with the spec's backoff (1, 2, 4, 8, 16 s;
5 attempts) and a new ``sessionStart`` carrying the same sessionId, the highest ``seq`` seen and
the client's capabilities (the latest ``sessionStart`` sets them). A handoff goes in the first
connection's ``sessionStart`` only.
If every attempt fails, ``reconnect_failed`` is reported and a LocalConductorStub answers
instead. A connection the conductor closes after ``session_ended`` or ``session_erased`` is not
reconnected: the client closes. Headers for each handshake are asked for just before it (e.g. a
fresh ``Authorization``).

As on API Gateway, no frame is larger than 32 KB: a longer event goes out as one message in
several frames (``frames_of``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from shared.wire.protocol import Device, ErrorCode, Event, Handoff, SessionStart, make_event
from shared.wire.protocol_tools import DeclaredTool

from .errors import explain, is_local
from .local_stub import LocalConductorStub

logger = logging.getLogger(__name__)

DEFAULT_BACKOFF: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)
DEFAULT_MAX_ATTEMPTS = 5
MAX_FRAME_BYTES = 32 * 1024
"""API Gateway's WebSocket frame quota: a larger frame closes the connection (1009)."""
TOO_BIG = 1009
"""The close code of a frame or message over the peer's limit."""
_CONNECT_ERRORS = (OSError, WebSocketException, TimeoutError)

Sleep = Callable[[float], Awaitable[None]]
Progress = Callable[[str], None]
"""Told, in a sentence for a person, how the connection is doing (retrying, offline, back)."""
HandshakeHeaders = Callable[[], Awaitable[Mapping[str, str]]]
"""Headers for the next WebSocket handshake, asked for before each one (e.g. a fresh ``Authorization``)."""


def scaled_backoff(scale: float, base: Sequence[float] = DEFAULT_BACKOFF) -> tuple[float, ...]:
    """The spec's backoff sequence multiplied by ``scale`` (tests use e.g. 0.01)."""
    return tuple(delay * scale for delay in base)


def session_url(url: str, session_id: str) -> str:
    """``url`` with its ``sessionId`` query parameter set to ``session_id``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "sessionId"]
    query.append(("sessionId", session_id))
    return urlunsplit(parts._replace(query=urlencode(query)))


def without_session(url: str) -> str:
    """``url`` without its ``sessionId`` query parameter (for messages to the user)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "sessionId"]
    return urlunsplit(parts._replace(query=urlencode(query)))


def url_session_id(url: str) -> str | None:
    """The ``sessionId`` query parameter of ``url``, if it has one."""
    return dict(parse_qsl(urlsplit(url).query)).get("sessionId")


def frames_of(text: str, max_frame_bytes: int = MAX_FRAME_BYTES) -> str | list[str]:
    """``text`` as one frame, or, when longer than ``max_frame_bytes`` in UTF-8, as fragments of
    at most that many bytes each (cut between characters) to send as one fragmented message."""
    data = text.encode("utf-8")
    if len(data) <= max_frame_bytes:
        return text
    fragments: list[str] = []
    start = 0
    while len(data) - start > max_frame_bytes:
        end = start + max_frame_bytes
        while data[end] & 0xC0 == 0x80:  # a UTF-8 continuation byte: back off to the character's start
            end -= 1
        fragments.append(data[start:end].decode("utf-8"))
        start = end
    fragments.append(data[start:].decode("utf-8"))
    return fragments


class ClientClosed(RuntimeError):
    """The client was closed; nothing more can be sent."""


class ConductorUnavailable(ConnectionError):
    """The first connection could not be made (``ws_connect_failed`` was recorded); ``status`` is
    the HTTP status of a refused handshake (401: the conductor wants a signed-in user)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Link(StrEnum):
    NEW = "new"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    OFFLINE = "offline"
    CLOSED = "closed"


READY_LINKS = (Link.CONNECTED, Link.OFFLINE, Link.CLOSED)
"""Links on which a send need not wait: it goes out, to the stub, or fails at once."""


class ConnectionLifecycle:
    """The connection half of ConductorClient: opening (with retries), supervising, reconnecting
    with backoff, going offline, and the link state that sending waits on.

    The client sets the attributes below in its ``__init__`` and provides the hooks declared
    under ``TYPE_CHECKING`` (reporting errors, recording sent events, handling frames).
    """

    url: str
    session_id: str
    capabilities: tuple[str, ...]
    handoff: Handoff | None
    declared_tools: tuple[DeclaredTool, ...] | None  # sent in every sessionStart (None: the catalog)
    device: Device | None  # which device this is, in every sessionStart (None: the app's one device)
    last_seq: int | None
    backoff: tuple[float, ...]
    max_attempts: int
    open_timeout: float
    close_timeout: float
    offline_reply: str
    max_frame_bytes: int
    connections: int
    reconnect_attempts: int
    stub: LocalConductorStub | None
    closed_by_server: str | None
    _sleep: Sleep
    _handshake_headers: HandshakeHeaders | None
    _on_progress: Progress | None
    _link: Link
    _ready: asyncio.Event
    _session_ready: asyncio.Event  # the latest sessionStart was answered
    _ws: ClientConnection | None

    if TYPE_CHECKING:

        async def _client_error(self, code: ErrorCode, message: str) -> None: ...

        def _record_sent(self, event: Event) -> None: ...

        def _notify(self) -> None: ...

        async def _on_frame(self, frame: str | bytes) -> None: ...

        async def _dispatch(self, event: Event) -> None: ...

        async def _closed_by_server(self) -> None: ...

        async def _shut(self, ws: ClientConnection) -> None: ...

    async def _open_first(self, retries: int) -> ClientConnection:
        """Open the first connection, retrying what waiting can mend; raises ConductorUnavailable."""
        where = without_session(self.url)
        attempt = 0
        while True:
            try:
                ws = await self._open()
                break
            except _CONNECT_ERRORS as exc:
                failure = explain(exc, self.url)
                if not failure.retryable or attempt >= retries:
                    tried = f" after {attempt + 1} attempts" if attempt else ""
                    message = f"conductor not reachable at {where}{tried}: {failure.reason}"
                    self._set_link(Link.CLOSED)
                    await self._client_error(ErrorCode.WS_CONNECT_FAILED, message)
                    raise ConductorUnavailable(message, failure.status) from exc
                attempt += 1
                delay = self._delay(attempt - 1)
                hint = "; is `make run` running?" if is_local(self.url) else ";"
                self._progress(
                    f"conductor not reachable at {where}: {failure.reason}{hint} "
                    f"retrying in {delay:g} s ({attempt}/{retries})"
                )
                await self._sleep(delay)
        if attempt:
            self._progress(f"connected to {where}")
        return ws

    async def _open(self) -> ClientConnection:
        headers = await self._handshake_headers() if self._handshake_headers is not None else None
        ws = await connect(
            self.url, additional_headers=headers, open_timeout=self.open_timeout, close_timeout=self.close_timeout
        )
        start = make_event(
            SessionStart(
                session_id=self.session_id,
                last_seq=self.last_seq,
                capabilities=self.capabilities or None,
                handoff=self.handoff if self.connections == 0 else None,  # it seeds a new session only
                tools=self.declared_tools,
                device=self.device,
            )
        )
        self._session_ready.clear()
        try:
            await ws.send(frames_of(start.to_json(), self.max_frame_bytes))
        except ConnectionClosed:
            ws.transport.abort()
            raise
        self._ws = ws
        self.connections += 1
        self._record_sent(start)
        self._set_link(Link.CONNECTED)
        return ws

    async def _supervise(self, ws: ClientConnection) -> None:
        while True:
            reason = await self._receive(ws)
            if self._link is Link.CLOSED:
                if self.closed_by_server is not None:  # stopped by the conductor (taken over, refused)
                    await self._shut(ws)
                return
            if self.closed_by_server is not None:  # ended or erased: the app must not reconnect
                await self._closed_by_server()
                return
            self._mark_down(ws)
            await self._client_error(ErrorCode.WS_ERROR, f"connection lost: {reason}")
            reconnected = await self._reconnect()
            if reconnected is None:
                self._go_offline()
                return
            ws = reconnected

    async def _receive(self, ws: ClientConnection) -> str:
        try:
            async for frame in ws:
                try:
                    await self._on_frame(frame)
                except Exception:
                    logger.exception("handling a frame failed")
                if self._link is Link.CLOSED:  # closed, or stopped by the conductor: read no more
                    return "closed"
        except ConnectionClosed as exc:
            if ws.close_code == TOO_BIG:
                return "an event was larger than the conductor takes (1009 message too big)"
            return str(exc)
        return f"closed by the server (code {ws.close_code}, reason {ws.close_reason!r})"

    def _delay(self, attempt: int) -> float:
        """The backoff before retry number ``attempt + 1`` (the last delay repeats)."""
        return self.backoff[min(attempt, len(self.backoff) - 1)] if self.backoff else 0.0

    async def _reconnect(self) -> ClientConnection | None:
        last_error = last_reason = "no attempt made"
        for attempt in range(self.max_attempts):
            delay = self._delay(attempt)
            if attempt == 0:
                self._progress(f"connection to the conductor lost; reconnecting in {delay:g} s (1/{self.max_attempts})")
            else:
                self._progress(
                    f"reconnect failed ({last_reason}); retrying in {delay:g} s ({attempt + 1}/{self.max_attempts})"
                )
            await self._sleep(delay)
            if self._link is Link.CLOSED:
                return None
            self.reconnect_attempts += 1
            try:
                ws = await self._open()
            except _CONNECT_ERRORS as exc:
                last_error, last_reason = f"{type(exc).__name__}: {exc}", explain(exc, self.url).reason
                logger.info("reconnect attempt %d failed: %s", attempt + 1, last_error)
                continue
            self._progress(f"the conductor is back (reconnected on attempt {attempt + 1}/{self.max_attempts})")
            return ws
        self._progress(
            f"conductor unreachable after {self.max_attempts} attempts: the offline stub answers from now on"
        )
        await self._client_error(
            ErrorCode.RECONNECT_FAILED, f"gave up after {self.max_attempts} attempts ({last_error})"
        )
        return None

    def _go_offline(self) -> None:
        self.stub = LocalConductorStub(self._dispatch, self.offline_reply)
        self._set_link(Link.OFFLINE)

    def _mark_down(self, ws: ClientConnection) -> None:
        if self._ws is ws:
            self._ws = None
            self._set_link(Link.RECONNECTING)

    def _set_link(self, link: Link) -> None:
        self._link = link
        if link in READY_LINKS:
            self._ready.set()
        else:
            self._ready.clear()
        self._notify()

    def _progress(self, message: str) -> None:
        logger.info("%s", message)
        if self._on_progress is not None:
            try:
                self._on_progress(message)
            except Exception:
                logger.exception("on_progress callback failed")
