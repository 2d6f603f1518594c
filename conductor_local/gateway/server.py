"""A local API Gateway WebSocket API: the three routes and the management API on one port.

WebSocket clients connect to ``ws://HOST:PORT/?sessionId=...``; the gateway turns the handshake,
every message and the close into API-Gateway-shaped Lambda proxy events for the ``$connect``,
``$default`` and ``$disconnect`` handlers (after an optional ``$connect`` REQUEST authorizer).
Every invocation runs in its own worker thread, as on Lambda, so messages of one connection may
be handled concurrently. Handlers answer clients through the management API on the same port
(``POST|GET|DELETE /{stage}/@connections/{id}``), so the real ``apigatewaymanagementapi``
client works against it unchanged.

It is as strict as API Gateway's documented WebSocket quotas: frames of at most 32 KB, messages
(text only) of at most 128 KB made of such frames, a 29 s integration timeout, the gateway's own
``{"message": ...}`` frames when ``$default`` times out or fails, and posted messages sent out
in frames of at most 32 KB.

Plain HTTP requests for ``@connections`` are told apart from WebSocket handshakes by their
request line before the bytes reach the ``websockets`` protocol, because its HTTP parser
only understands bodiless handshake requests.

Plain HTTP GETs on the same port get the voice console (``/console/``) when a console folder is
given, and every WebSocket handshake's ``Origin`` is checked first: no ``Origin`` (native apps) and
the console's own origin pass, any other is refused with 403 unless allowed (``apigw_console``).

Plain HTTP requests for ``/sessions…`` (any method) go to the HTTP API beside it: the sessions
API's routes, as payload-2.0 events for the sessions Lambda, behind an optional JWT authorizer
(``apigw_http``; ``http_api``).

The Lambda proxy events live in ``apigw_events`` and the ``$connect`` authorizer's identity
sources and policy evaluation in ``apigw_authorizer``; their public names are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
import string
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, ConnectionClosedError
from websockets.protocol import State

from conductor_local.gateway import management
from conductor_local.gateway.authorizer import (
    MAX_AUTHORIZER_RESULT_BYTES,
    AuthorizerError,
    authorizer_decision,
    policy_allows,
)
from conductor_local.gateway.connection import GatewayConnection
from conductor_local.gateway.console import (
    normalize_origin,
    own_origins,
)
from conductor_local.gateway.events import (
    Invocation,
    aws_id,
    disconnect_event,
    message_event,
)
from conductor_local.gateway.frames import (
    AUTHORIZER_ROUTE,
    INTERNAL_ERROR,
    TIMED_OUT,
    gateway_message,
    handshake_refusal,
    split_frames,
    summarize,
)
from conductor_local.gateway.handshake import Handshakes
from conductor_local.gateway.http_api import SESSIONS_PATH, HttpApi, gateway_answer
from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.local_server import LocalServer
from conductor_local.loopback_guard import LoopbackGuard
from shared.wire.log_safety import SafeRecords, safe_text

__all__ = [
    "AUTHORIZER_ROUTE",
    "INTEGRATION_TIMEOUT_S",
    "INTERNAL_ERROR",
    "MAX_AUTHORIZER_RESULT_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_MESSAGE_BYTES",
    "TIMED_OUT",
    "AuthorizerError",
    "Handler",
    "Invocation",
    "LocalApiGateway",
    "RouteHandlers",
    "authorizer_decision",
    "default_context_factory",
    "gateway_message",
    "handshake_refusal",
    "policy_allows",
    "split_frames",
    "summarize",
]

logger = logging.getLogger(__name__)
wire_logger = logging.getLogger(f"{__name__}.wire")
"""The ``websockets`` server's own log (request lines at DEBUG): written through ``SafeRecords``,
so a ``$connect`` query's ``token=`` is redacted there too."""
wire_logger.addFilter(SafeRecords())

Handler = Callable[[dict[str, Any], Any], Any]
"""A Lambda handler: ``(event, context) -> {"statusCode": int, ...}``."""

MAX_FRAME_BYTES = 32 * 1024
"""API Gateway's WebSocket frame size quota; a larger frame closes the connection with 1009."""
MAX_MESSAGE_BYTES = 128 * 1024
"""API Gateway's message payload quota (a message may span several frames); more closes with 1009."""
INTEGRATION_TIMEOUT_S = 29.0
"""API Gateway's integration timeout: how long it waits for a route's (or the authorizer's) Lambda."""


@dataclass(frozen=True)
class RouteHandlers:
    connect: Handler
    message: Handler
    disconnect: Handler
    authorizer: Handler | None = None
    """A ``$connect`` REQUEST authorizer: called before ``$connect`` with the authorizer event; it
    returns an IAM policy (``principalId``, ``policyDocument``, optional ``context``) or raises
    ``Exception("Unauthorized")``."""
    sessions: Handler | None = None
    """The sessions API's Lambda (HTTP API, payload format 2.0), served at ``/sessions``; None: no
    sessions API (its paths answer 404)."""


def default_context_factory(route_key: str) -> LocalLambdaContext:
    """A fresh context per invocation, named after the function serving the route."""
    function = {"$connect": "connect", "$disconnect": "disconnect", AUTHORIZER_ROUTE: "authorizer"}.get(
        route_key, "message"
    )
    return LocalLambdaContext(function_name=f"voiceide-conductor-{function}")


def _resolve(future: asyncio.Future[Invocation], result: Invocation) -> None:
    if not future.done():
        future.set_result(result)


def _iso_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LocalApiGateway(LocalServer, Handshakes):
    """API Gateway's WebSocket API for the given route handlers, on one loopback port.

    ``start()``/``stop()`` are called from ordinary (sync) code; the server runs its own event
    loop in a thread. ``on_log`` receives one readable line per event in or out (None: quiet).

    The limits default to API Gateway's: ``max_frame_bytes`` (32 KB) and ``max_message_bytes``
    (128 KB) for what clients send and what is posted to them, ``integration_timeout`` (29 s) for
    the authorizer and each route. ``authorizer_identity_source`` lists the identity sources of
    the authorizer (``route.request.querystring.token``, ``route.request.header.Auth``): a
    handshake missing one is refused 401 without calling it. ``region`` and ``account_id`` go
    into the authorizer's ``methodArn``.

    ``console_dir`` serves the voice console's files to plain HTTP GETs under ``/console/``, with
    ``console_config`` as ``/console/config.json`` (None: no console). ``allowed_origins`` are the
    browser origins allowed besides the console's own (``*``: any); a handshake from any other
    ``Origin`` is refused with 403, one without ``Origin`` (a native app) is not checked.

    ``http_api`` serves ``/sessions…`` (its handler, authorizer and integration timeout); by
    default one for ``handlers.sessions`` without an authorizer.
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
        integration_timeout: float = INTEGRATION_TIMEOUT_S,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        authorizer_identity_source: Sequence[str] = (),
        region: str = "us-east-1",
        account_id: str = "123456789012",
        console_dir: Path | None = None,
        console_config: Mapping[str, Any] | None = None,
        allowed_origins: Sequence[str] = (),
        http_api: HttpApi | None = None,
    ) -> None:
        self.handlers = handlers
        self.host = host
        self.stage = stage
        self.api_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))
        self.region = region
        self.account_id = account_id
        self.integration_timeout = integration_timeout
        self.max_frame_bytes = max_frame_bytes
        self.max_message_bytes = max_message_bytes
        self.authorizer_identity_source = tuple(authorizer_identity_source)
        for source in self.authorizer_identity_source:
            if not source.startswith(("route.request.header.", "route.request.querystring.")):
                raise ValueError(f"unsupported identity source {source!r}")
        self.console_dir = console_dir
        self.console_config = dict(console_config or {})
        self.allowed_origins = frozenset(normalize_origin(origin) for origin in allowed_origins)
        self.guard = LoopbackGuard(bind=host)
        """``Host`` and ``Origin`` rules of the WebSocket handshakes, the console and the HTTP API."""
        self._native_guard = LoopbackGuard(bind=host)
        """The management API's: no browser at all (only the handlers post to connections)."""
        self._requested_port = port
        self._context_factory = context_factory
        self._on_log = on_log
        self._disconnect_timeout = disconnect_timeout
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Server | None = None
        self._open: dict[str, GatewayConnection] = {}
        self._tcp: set[GatewayConnection] = set()
        self._integrations: set[asyncio.Task[None]] = set()
        self.http_api = http_api or HttpApi(handlers.sessions, region=region, account_id=account_id)
        if self.http_api.on_log is None:
            self.http_api.on_log = self._log

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
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
    def sessions_url(self) -> str:
        """The sessions API's base URL (``http://HOST:PORT/sessions``), on the gateway's own port."""
        return f"http://{self.domain_name}{SESSIONS_PATH}"

    @property
    def callback_url(self) -> str:
        """The management API endpoint, as given to ``apigatewaymanagementapi`` clients."""
        return f"http://{self.domain_name}/{self.stage}"

    @property
    def connect_method_arn(self) -> str:
        """The ``methodArn`` the ``$connect`` authorizer is asked about."""
        return f"arn:aws:execute-api:{self.region}:{self.account_id}:{self.api_id}/{self.stage}/$connect"

    async def _serve(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self._requested_port), family=family)
        self._server = await serve(
            self._session,
            sock=sock,
            create_connection=partial(GatewayConnection, gateway=self),  # type: ignore[arg-type]
            process_request=self._check_request,
            process_response=self._connect,
            compression=None,
            ping_interval=None,
            # the authorizer and $connect each get the integration timeout
            open_timeout=2 * self.integration_timeout + 5,
            close_timeout=5,
            # (message, frame) limits: the protocol fails the connection with 1009 past either
            max_size=(self.max_message_bytes, self.max_frame_bytes),
            logger=wire_logger,
        )
        self._port = sock.getsockname()[1]
        self.guard.allow_origins(self.browser_origins)

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()  # closes open WebSockets with 1001 and waits for their sessions
        for conn in list(self._tcp):
            if conn.route is None or (conn.route == "websocket" and conn.request is None):
                conn.transport.abort()  # connected but never sent a request
            elif conn.route in ("management", "http"):
                conn.close_when_answered()  # kept alive between requests
        await self._server.wait_closed()
        for task in list(self._integrations):  # nobody is left to hear of a slow $default
            task.cancel()
        await asyncio.gather(*self._integrations, return_exceptions=True)

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

    @property
    def browser_origins(self) -> frozenset[str]:
        """The browser origins this gateway answers: the console's own (every loopback spelling of
        ``http://HOST:PORT``) and ``allowed_origins``."""
        return own_origins(self.host, self.port) | self.allowed_origins

    @property
    def console_url(self) -> str:
        """The voice console, served on the gateway's own origin."""
        return f"http://{self.domain_name}/console/"

    # ---- routes ---------------------------------------------------------------------------

    async def _session(self, ws: ServerConnection) -> None:
        """Runs while a WebSocket is open: each frame is a ``$default`` invocation."""
        assert isinstance(ws, GatewayConnection)
        self._open[ws.connection_id] = ws
        try:
            async for message in ws:
                if ws.connection_id in self._open:  # messages after a DELETE are dropped
                    assert isinstance(message, str)  # binary frames never get here (process_event)
                    self._on_frame(ws, message)
        except ConnectionClosedError:
            pass
        finally:
            self._open.pop(ws.connection_id, None)
            await self._disconnect(ws)

    def _on_frame(self, ws: GatewayConnection, message: str) -> None:
        """Hand one frame to ``$default``, then log it; nothing a client sends stops the connection
        (``summarize`` never raises, and a log line that cannot be written is dropped)."""
        ws.last_active_at = time.time()
        task = asyncio.get_running_loop().create_task(self._default_route(ws, message_event(self, ws, message)))
        self._integrations.add(task)
        task.add_done_callback(self._integrations.discard)
        if self._on_log is not None:
            self._log(f"→ conn {ws.connection_id} {summarize(message)}")

    async def _default_route(self, ws: GatewayConnection, event: dict[str, Any]) -> None:
        """One ``$default`` integration. Past the integration timeout, or when the handler fails
        (raises, or answers 5xx), the client hears it from API Gateway itself; a late handler
        runs on, as a Lambda does."""
        invocation = await self._integrate(self.handlers.message, event, "$default")
        if invocation is None:
            message = TIMED_OUT
        elif invocation.status >= 500:
            message = INTERNAL_ERROR
        else:
            return
        if ws.connection_id not in self._open or ws.state is not State.OPEN:
            return
        frame = gateway_message(message, ws.connection_id, event["requestContext"]["requestId"])
        with contextlib.suppress(ConnectionClosed):
            await ws.send(frame)
            self._log(f"← conn {ws.connection_id} {message}")

    async def _disconnect(self, ws: GatewayConnection) -> None:
        await ws.wait_closed()
        code, reason = ws.close_status()
        self._log(f"- conn {ws.connection_id} $disconnect {code} {reason}".rstrip())
        done = self._invoke(self.handlers.disconnect, disconnect_event(self, ws, code, reason), "$disconnect")
        await asyncio.wait([done], timeout=self._disconnect_timeout)

    async def _integrate(self, handler: Handler, event: dict[str, Any], route: str) -> Invocation | None:
        """Invoke ``handler`` and wait for it as API Gateway does: at most the integration
        timeout (None past it; the invocation itself runs on)."""
        invocation = self._invoke(handler, event, route)
        try:
            return await asyncio.wait_for(asyncio.shield(invocation), self.integration_timeout)
        except TimeoutError:
            return None

    def _invoke(self, handler: Handler, event: dict[str, Any], route: str) -> asyncio.Future[Invocation]:
        """Run one invocation in its own worker thread; the future gets what it came to.

        Workers are daemon threads, not a pool, so an in-flight turn never holds up shutdown.
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[Invocation] = loop.create_future()

        def work() -> None:
            result = self._call(handler, event, route)
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for it
                loop.call_soon_threadsafe(_resolve, outcome, result)

        threading.Thread(target=work, name=f"lambda {route}", daemon=True).start()
        return outcome

    def _call(self, handler: Handler, event: dict[str, Any], route: str) -> Invocation:
        connection_id = event["requestContext"]["connectionId"]
        started = time.monotonic()
        try:
            result = handler(event, self._context_factory(route))
        except Exception as exc:
            if not (route == AUTHORIZER_ROUTE and str(exc) == "Unauthorized"):
                logger.exception("%s handler failed for connection %s", route, connection_id)
            return Invocation(error=exc, latency_ms=int((time.monotonic() - started) * 1000))
        return Invocation(value=result, latency_ms=int((time.monotonic() - started) * 1000))

    # ---- HTTP API -----------------------------------------------------------------------------

    async def _http_api_reply(self, request: management.ManagementRequest, conn: GatewayConnection) -> bytes:
        """The HTTP API's answer to one ``/sessions…`` request."""
        reason = self._refusal(self.guard, request)
        if reason is not None:
            self._log(
                f"x http {request.method[:16]} {safe_text(urlsplit(request.target).path, 80)} refused → 403: {reason}"
            )
            return gateway_answer(403, "Forbidden").to_bytes(aws_id())
        source_ip = str(conn.remote_address[0]) if conn.remote_address else "127.0.0.1"
        return await self.http_api.answer(request, source_ip=source_ip, domain_name=self.domain_name, port=self.port)

    # ---- management API ---------------------------------------------------------------------

    def _refusal(self, guard: LoopbackGuard, request: management.ManagementRequest) -> str | None:
        origin = request.headers.get("origin")
        return guard.refusal(request.headers.get("host"), [] if origin is None else [origin], self.port)

    async def _management_reply(self, request: management.ManagementRequest) -> bytes:
        reason = self._refusal(self._native_guard, request)
        if reason is not None:
            self._log(f"x management {safe_text(request.method, 16)} refused → 403: {reason}")
            return management.error_response(403, "ForbiddenException", "Forbidden")
        try:
            return await self._manage(request)
        except Exception:
            logger.exception(
                "management API request %s %s failed", safe_text(request.method, 16), safe_text(request.target, 160)
            )
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
            fragments = split_frames(frame, self.max_frame_bytes)
            try:
                await ws.send(fragments[0] if len(fragments) == 1 else fragments)
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

    def _log(self, line: str) -> None:
        """One readable line; a line that cannot be written never breaks the connection it is about."""
        if self._on_log is not None:
            try:
                self._on_log(line)
            except Exception:
                logger.warning("could not write a log line", exc_info=True)
