"""One TCP connection to the local API Gateway: a WebSocket (frames in, close status out),
management API requests on the same port (kept alive between them), answered as API Gateway's
management API does, or one request to the HTTP API (``/sessions…``, ``apigw_http``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal, Protocol

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Event

from conductor_local.gateway import management
from conductor_local.gateway.http_api import is_http_api_request_line


class Gateway(Protocol):
    """What a connection asks of the gateway that accepted it (``LocalApiGateway``)."""

    _tcp: set[GatewayConnection]

    async def _http_api_reply(self, request: management.ManagementRequest, conn: GatewayConnection) -> bytes: ...

    async def _management_reply(self, request: management.ManagementRequest) -> bytes: ...

    def _log(self, line: str) -> None: ...


_DEFAULT_DISCONNECT_REASONS = {
    1005: "Client-side close frame status not set",
    1006: "Connection closed abnormally",
}


class GatewayConnection(ServerConnection):
    """One TCP connection to the gateway: a WebSocket, or management API requests one after another."""

    def __init__(self, *args: Any, gateway: Gateway, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gateway = gateway
        self.route: Literal["websocket", "management", "http"] | None = None
        self._head = bytearray()
        self._reader: management.RequestReader | None = None
        self._reply_task: asyncio.Task[None] | None = None
        self._unread = bytearray()  # management bytes not yet read into a request
        self._client_done = False  # the client sent EOF: close once the pending replies are out
        self._close_task: asyncio.Task[None] | None = None
        self._refused = False
        # Set once the handshake reaches $connect (the authorizer's context once it allowed it).
        self.connection_id = ""
        self.connected_at = 0.0
        self.last_active_at = 0.0
        self.source_ip = ""
        self.user_agent: str | None = None
        self.authorizer: dict[str, Any] | None = None

    def data_received(self, data: bytes) -> None:
        if self.route == "websocket":
            super().data_received(data)
        elif self.route in ("management", "http"):
            self._read_management(data)
        else:
            self._head += data
            line_end = self._head.find(b"\r\n")
            if line_end < 0 and len(self._head) < management.MAX_HEAD_BYTES:
                return
            head, self._head = bytes(self._head), bytearray()
            if management.is_management_request_line(head[: max(line_end, 0)]):
                self.route = "management"
                self._reader = management.RequestReader()
                self._read_management(head)
            elif is_http_api_request_line(head[: max(line_end, 0)]):
                self.route = "http"  # requests with bodies, which the websockets parser refuses
                self._reader = management.RequestReader()
                self._read_management(head)
            else:
                self.route = "websocket"
                super().data_received(head)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.gateway._tcp.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.gateway._tcp.discard(self)

    def eof_received(self) -> bool | None:
        if self.route in ("management", "http"):
            self._client_done = True
            if self._reply_task is None:
                self.transport.close()
            return True  # keep the transport open to send a pending reply
        return super().eof_received()

    def close_when_answered(self) -> None:
        """A management connection closes after its pending reply (at once when none is pending)."""
        self._client_done = True
        self._unread.clear()
        if self._reply_task is None and not self.transport.is_closing():
            self.transport.close()

    def _read_management(self, data: bytes) -> None:
        self._unread += data
        self._serve_next()

    def _serve_next(self) -> None:
        """Read the next request once the previous one is answered (replies go out in order)."""
        if self._reader is None or self._reply_task is not None or not self._unread:
            return
        data, self._unread = bytes(self._unread), bytearray()
        try:
            request = self._reader.feed(data)
        except management.BadRequest as exc:
            self._reader = None
            self._reply(management.error_response(400, "BadRequestException", str(exc), close=True), close=True)
            return
        if request is not None:
            self._unread += self._reader.rest
            self._reader = management.RequestReader()
            self._reply_task = self.loop.create_task(self._answer(request))

    async def _answer(self, request: management.ManagementRequest) -> None:
        if self.route == "http":
            answer = await self.gateway._http_api_reply(request, self)
        else:
            answer = await self.gateway._management_reply(request)
        # an HTTP API answer closes its connection (``Connection: close``)
        close = self.route == "http" or management.wants_close(request) or (self._client_done and not self._unread)
        self._reply(management.closing(answer) if close else answer, close=close)
        self._reply_task = None
        if close:
            self._reader = None
            return
        self._serve_next()

    def _reply(self, data: bytes, *, close: bool) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)
            if close:
                self.transport.close()

    def close_in_background(self, code: int = 1000) -> None:
        self._close_task = self.loop.create_task(self.close(code))

    def process_event(self, event: Event) -> None:
        """Frames as API Gateway takes them: a binary frame closes the connection with 1003
        (text only), and nothing after it is read. Frame and message sizes are bounded by the
        protocol's ``max_size`` (see ``LocalApiGateway._serve``)."""
        if isinstance(event, Frame):
            if self._refused:
                return
            if event.opcode is Opcode.BINARY:
                self._refused = True
                self.gateway._log(f"x conn {self.connection_id} binary frame refused")
                self._close_task = self.loop.create_task(
                    self._fail(CloseCode.UNSUPPORTED_DATA, "Binary frames are not supported")
                )
                return
        super().process_event(event)

    async def _fail(self, code: CloseCode, reason: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            async with self.send_context():
                self.protocol.fail(code, reason)

    def close_status(self) -> tuple[int, str]:
        """The close code and reason of a closed connection: the peer's, or else the one this end
        sent when it failed the connection (1003, 1009), or 1006 when none was exchanged."""
        close = self.protocol.close_rcvd or self.protocol.close_sent
        if close is None:
            return 1006, _DEFAULT_DISCONNECT_REASONS[1006]
        return close.code, close.reason or _DEFAULT_DISCONNECT_REASONS.get(close.code, "")
