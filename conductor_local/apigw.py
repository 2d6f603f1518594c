"""A local API Gateway WebSocket API: the three routes and the management API on one port.

WebSocket clients connect to ``ws://HOST:PORT/?sessionId=...``; the gateway turns the handshake,
every frame and the close into API-Gateway-shaped Lambda proxy events for the ``$connect``,
``$default`` and ``$disconnect`` handlers. Every invocation runs in its own worker thread, as on
Lambda, so frames of one connection may be handled concurrently. Handlers answer clients
through the management API on the same port (``POST|GET|DELETE /{stage}/@connections/{id}``),
so the real ``apigatewaymanagementapi`` client works against it unchanged.

Plain HTTP requests for ``@connections`` are told apart from WebSocket handshakes by their
request line before the bytes reach the ``websockets`` protocol, because its HTTP parser
only understands bodiless handshake requests.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import secrets
import socket
import string
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, ConnectionClosedError
from websockets.http11 import Request, Response
from websockets.protocol import State

from conductor_local import management
from conductor_local.lambda_context import LocalLambdaContext

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]
"""A Lambda handler: ``(event, context) -> {"statusCode": int, ...}``."""

MAX_MESSAGE_BYTES = 128 * 1024
"""API Gateway's WebSocket message limit; a larger frame closes the connection with 1009."""
CONNECT_TIMEOUT_S = 29.0
"""API Gateway's integration timeout, which bounds the ``$connect`` handler."""

_DEFAULT_DISCONNECT_REASONS = {
    1005: "Client-side close frame status not set",
    1006: "Connection closed abnormally",
}
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_HOP_BY_HOP = {"connection", "upgrade"}


@dataclass(frozen=True)
class RouteHandlers:
    connect: Handler
    message: Handler
    disconnect: Handler


def default_context_factory(route_key: str) -> LocalLambdaContext:
    """A fresh context per invocation, named after the function serving the route."""
    function = {"$connect": "connect", "$disconnect": "disconnect"}.get(route_key, "message")
    return LocalLambdaContext(function_name=f"voiceide-conductor-{function}")


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


def _resolve(future: asyncio.Future[int], result: int) -> None:
    if not future.done():
        future.set_result(result)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _aws_id() -> str:
    """An id shaped like API Gateway's connection, request and message ids (16 chars, ``=``)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(11)).decode("ascii")


def _clf_time(epoch: float) -> str:
    t = time.gmtime(epoch)
    return f"{t.tm_mday:02d}/{_MONTHS[t.tm_mon - 1]}/{t.tm_year}:{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} +0000"


def _iso_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _multi_value(pairs: list[tuple[str, str]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """API Gateway's ``headers``/``multiValueHeaders`` pair: the last value wins in the former."""
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    return {name: values[-1] for name, values in multi.items()}, multi


class _GatewayConnection(ServerConnection):
    """One TCP connection to the gateway: a WebSocket, or a single management API request."""

    def __init__(self, *args: Any, gateway: LocalApiGateway, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gateway = gateway
        self.route: Literal["websocket", "management"] | None = None
        self._head = bytearray()
        self._reader: management.RequestReader | None = None
        self._reply_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Task[None] | None = None
        # Set once the handshake reaches $connect.
        self.connection_id = ""
        self.connected_at = 0.0
        self.last_active_at = 0.0
        self.source_ip = ""
        self.user_agent: str | None = None

    def data_received(self, data: bytes) -> None:
        if self.route == "websocket":
            super().data_received(data)
        elif self.route == "management":
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
        if self.route == "management":
            return True  # keep the transport open to send the reply
        return super().eof_received()

    def _read_management(self, data: bytes) -> None:
        if self._reader is None:
            return  # one request per connection; the reply closes it
        try:
            request = self._reader.feed(data)
        except management.BadRequest as exc:
            self._reader = None
            self._reply(management.error_response(400, "BadRequestException", str(exc)))
            return
        if request is not None:
            self._reader = None
            self._reply_task = self.loop.create_task(self._answer(request))

    async def _answer(self, request: management.ManagementRequest) -> None:
        self._reply(await self.gateway._management_reply(request))

    def _reply(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)
            self.transport.close()

    def close_in_background(self, code: int = 1000) -> None:
        self._close_task = self.loop.create_task(self.close(code))


class LocalApiGateway:
    """API Gateway's WebSocket API for the given route handlers, on one loopback port.

    ``start()``/``stop()`` are called from ordinary (sync) code; the server runs its own event
    loop in a thread. ``on_log`` receives one readable line per event in or out (None: quiet).
    """

    def __init__(
        self,
        handlers: RouteHandlers,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        stage: str = "local",
        context_factory: Callable[[str], Any] = default_context_factory,
        on_log: Callable[[str], None] | None = None,
        disconnect_timeout: float = 10.0,
    ) -> None:
        self.handlers = handlers
        self.host = host
        self.stage = stage
        self.api_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))
        self._requested_port = port
        self._context_factory = context_factory
        self._on_log = on_log
        self._disconnect_timeout = disconnect_timeout
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Server | None = None
        self._open: dict[str, _GatewayConnection] = {}
        self._tcp: set[_GatewayConnection] = set()

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> LocalApiGateway:
        if self._loop is not None:
            raise RuntimeError("the gateway is already started")
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="local-apigw", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=10)
        except BaseException:
            self._stop_loop()
            raise
        return self

    def stop(self) -> None:
        """Close every connection (each gets its ``$disconnect``) and stop listening."""
        if self._loop is None:
            return
        try:
            if self._server is not None:
                closing = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
                closing.result(timeout=self._disconnect_timeout + 10)
        finally:
            self._stop_loop()

    def __enter__(self) -> LocalApiGateway:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the gateway is not started")
        return self._port

    @property
    def domain_name(self) -> str:
        """``HOST:PORT`` as handlers see it in ``requestContext.domainName``; always reachable locally."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else "::1" if self.host == "::" else self.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"ws://{self.domain_name}/"

    @property
    def callback_url(self) -> str:
        """The management API endpoint, as given to ``apigatewaymanagementapi`` clients."""
        return f"http://{self.domain_name}/{self.stage}"

    async def _serve(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self._requested_port), family=family)
        self._server = await serve(
            self._session,
            sock=sock,
            create_connection=partial(_GatewayConnection, gateway=self),  # type: ignore[arg-type]
            process_response=self._connect,
            compression=None,
            ping_interval=None,
            open_timeout=CONNECT_TIMEOUT_S + 1,
            close_timeout=5,
            max_size=MAX_MESSAGE_BYTES,
        )
        self._port = sock.getsockname()[1]

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()  # closes open WebSockets with 1001 and waits for their sessions
        for conn in list(self._tcp):
            if conn.route is None or (conn.route == "websocket" and conn.request is None):
                conn.transport.abort()  # connected but never sent a request
        await self._server.wait_closed()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
        self._loop = self._thread = self._server = None
        self._open.clear()

    # ---- routes ---------------------------------------------------------------------------

    async def _connect(self, ws: ServerConnection, request: Request, response: Response) -> Response | None:
        """``process_response`` hook: a valid handshake is accepted only if ``$connect`` says so."""
        if response.status_code != 101:
            return None
        assert isinstance(ws, _GatewayConnection)
        ws.connection_id = _aws_id()
        ws.connected_at = ws.last_active_at = time.time()
        ws.source_ip = str(ws.remote_address[0])
        agents = request.headers.get_all("User-Agent")
        ws.user_agent = agents[-1] if agents else None
        status = await self._invoke(self.handlers.connect, self._connect_event(ws, request))
        self._log(f"+ conn {ws.connection_id} $connect {request.path} → {status}")
        if status < 400:
            return None
        try:
            return ws.respond(status, "Forbidden\n" if status == 403 else "Connection refused\n")
        except ValueError:  # not a registered HTTP status
            return ws.respond(500, "Internal server error\n")

    async def _session(self, ws: ServerConnection) -> None:
        """Runs while a WebSocket is open: each frame is a ``$default`` invocation."""
        assert isinstance(ws, _GatewayConnection)
        self._open[ws.connection_id] = ws
        try:
            async for frame in ws:
                if ws.connection_id in self._open:  # frames after a DELETE are dropped
                    self._on_frame(ws, frame)
        except ConnectionClosedError:
            pass
        finally:
            self._open.pop(ws.connection_id, None)
            await self._disconnect(ws)

    def _on_frame(self, ws: _GatewayConnection, frame: str | bytes) -> None:
        ws.last_active_at = time.time()
        if self._on_log is not None:
            self._log(f"→ conn {ws.connection_id} {summarize(frame)}")
        self._invoke(self.handlers.message, self._message_event(ws, frame))

    async def _disconnect(self, ws: _GatewayConnection) -> None:
        await ws.wait_closed()
        code = ws.close_code or 1006
        reason = ws.close_reason or _DEFAULT_DISCONNECT_REASONS.get(code, "")
        self._log(f"- conn {ws.connection_id} $disconnect {code} {reason}".rstrip())
        done = self._invoke(self.handlers.disconnect, self._disconnect_event(ws, code, reason))
        await asyncio.wait([done], timeout=self._disconnect_timeout)

    def _invoke(self, handler: Handler, event: dict[str, Any]) -> asyncio.Future[int]:
        """Run one invocation in its own worker thread; the future gets its HTTP status.

        Workers are daemon threads, not a pool, so an in-flight turn never holds up shutdown.
        """
        loop = asyncio.get_running_loop()
        status: asyncio.Future[int] = loop.create_future()

        def work() -> None:
            result = self._call(handler, event)
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for it
                loop.call_soon_threadsafe(_resolve, status, result)

        route = event["requestContext"]["routeKey"]
        threading.Thread(target=work, name=f"lambda {route}", daemon=True).start()
        return status

    def _call(self, handler: Handler, event: dict[str, Any]) -> int:
        context = event["requestContext"]
        try:
            result = handler(event, self._context_factory(context["routeKey"]))
            return int(result.get("statusCode", 200)) if isinstance(result, Mapping) else 200
        except Exception:
            logger.exception("%s handler failed for connection %s", context["routeKey"], context["connectionId"])
            return 500

    # ---- management API ---------------------------------------------------------------------

    async def _management_reply(self, request: management.ManagementRequest) -> bytes:
        try:
            return await self._manage(request)
        except Exception:
            logger.exception("management API request %s %s failed", request.method, request.target)
            return management.error_response(500, "InternalServerErrorException", "Internal server error")

    async def _manage(self, request: management.ManagementRequest) -> bytes:
        connection_id = management.connection_id_of(request.target, self.stage)
        if connection_id is None:
            return management.error_response(403, "ForbiddenException", "Forbidden")
        ws = self._open.get(connection_id)
        if ws is None or ws.state is not State.OPEN:
            return management.gone(connection_id)
        if request.method == "POST":
            if len(request.body) > management.MAX_BODY_BYTES:
                return management.error_response(413, "PayloadTooLargeException", "Message too long")
            try:
                frame: str | bytes = request.body.decode("utf-8")
            except UnicodeDecodeError:
                frame = request.body
            try:
                await ws.send(frame)
            except ConnectionClosed:
                return management.gone(connection_id)
            ws.last_active_at = time.time()
            if self._on_log is not None:
                self._log(f"← conn {connection_id} {summarize(frame)}")
            return management.response(200)
        if request.method == "GET":
            body = {
                "connectedAt": _iso_time(ws.connected_at),
                "identity": {"sourceIp": ws.source_ip, "userAgent": ws.user_agent or ""},
                "lastActiveAt": _iso_time(ws.last_active_at),
            }
            return management.response(200, json.dumps(body).encode())
        if request.method == "DELETE":
            del self._open[connection_id]
            ws.close_in_background()
            self._log(f"- conn {connection_id} deleted by the management API")
            return management.response(204)
        return management.error_response(403, "ForbiddenException", f"{request.method} is not supported")

    # ---- events -----------------------------------------------------------------------------

    def _request_context(self, ws: _GatewayConnection, route_key: str, event_type: str) -> dict[str, Any]:
        now = time.time()
        request_id = _aws_id()
        identity: dict[str, str] = {"sourceIp": ws.source_ip}
        if ws.user_agent is not None:
            identity["userAgent"] = ws.user_agent
        return {
            "routeKey": route_key,
            "eventType": event_type,
            "extendedRequestId": request_id,
            "requestTime": _clf_time(now),
            "messageDirection": "IN",
            "stage": self.stage,
            "connectedAt": int(ws.connected_at * 1000),
            "requestTimeEpoch": int(now * 1000),
            "identity": identity,
            "requestId": request_id,
            "domainName": self.domain_name,
            "connectionId": ws.connection_id,
            "apiId": self.api_id,
        }

    def _connect_event(self, ws: _GatewayConnection, request: Request) -> dict[str, Any]:
        pairs = [(name, value) for name, value in request.headers.raw_items() if name.lower() not in _HOP_BY_HOP]
        pairs += [
            ("X-Amzn-Trace-Id", f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)}"),
            ("X-Forwarded-For", ws.source_ip),
            ("X-Forwarded-Port", str(self.port)),
            ("X-Forwarded-Proto", "http"),
        ]
        headers, multi_value_headers = _multi_value(pairs)
        event: dict[str, Any] = {"headers": headers, "multiValueHeaders": multi_value_headers}
        query = parse_qsl(urlsplit(request.path).query, keep_blank_values=True)
        if query:
            event["queryStringParameters"], event["multiValueQueryStringParameters"] = _multi_value(query)
        event["requestContext"] = self._request_context(ws, "$connect", "CONNECT")
        event["isBase64Encoded"] = False
        return event

    def _message_event(self, ws: _GatewayConnection, frame: str | bytes) -> dict[str, Any]:
        context = self._request_context(ws, "$default", "MESSAGE")
        context["messageId"] = _aws_id()
        if isinstance(frame, bytes):
            return {"requestContext": context, "body": base64.b64encode(frame).decode(), "isBase64Encoded": True}
        return {"requestContext": context, "body": frame, "isBase64Encoded": False}

    def _disconnect_event(self, ws: _GatewayConnection, code: int, reason: str) -> dict[str, Any]:
        headers, multi_value_headers = _multi_value(
            [("Host", self.domain_name), ("x-api-key", ""), ("X-Forwarded-For", ""), ("x-restapi", "")]
        )
        context = self._request_context(ws, "$disconnect", "DISCONNECT")
        context["disconnectStatusCode"] = code
        context["disconnectReason"] = reason
        return {
            "headers": headers,
            "multiValueHeaders": multi_value_headers,
            "requestContext": context,
            "isBase64Encoded": False,
        }

    def _log(self, line: str) -> None:
        if self._on_log is not None:
            self._on_log(line)
