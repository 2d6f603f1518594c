"""The local API Gateway's handshakes: the plain HTTP requests it answers itself (the console),
a browser origin it refuses, and ``$connect`` with its optional REQUEST authorizer, as API Gateway
runs them: each may refuse the handshake with the status a client sees."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from conductor_local.gateway.authorizer import authorizer_decision, identity_value
from conductor_local.gateway.connection import GatewayConnection
from conductor_local.gateway.console import console_response, is_websocket_handshake
from conductor_local.gateway.events import authorizer_event, aws_id, connect_event, request_context
from conductor_local.gateway.frames import AUTHORIZER_ROUTE, INTERNAL_ERROR, TIMED_OUT, handshake_refusal
from conductor_local.loopback_guard import LoopbackGuard
from shared.wire.log_safety import safe_text


class Handshakes:
    """The handshake hooks of ``LocalApiGateway`` (``process_request`` / ``process_response``)."""

    console_dir: Path | None
    console_config: dict[str, Any]
    authorizer_identity_source: tuple[str, ...]
    handlers: Any
    guard: LoopbackGuard
    port: int
    stage: str
    _log: Callable[[str], None]
    _integrate: Callable[..., Awaitable[Any]]

    def _check_request(self, ws: ServerConnection, request: Request) -> Response | None:
        """``process_request`` hook: a request naming another host than this machine's loopback
        names (DNS rebinding) or coming from a browser origin that is not allowed is refused with
        403 (before ``$connect``, and before the console serves anything); plain HTTP GETs get the
        console."""
        hosts = request.headers.get_all("Host")
        origins = request.headers.get_all("Origin")
        reason = self.guard.refusal(hosts[0] if len(hosts) == 1 else None, origins, self.port)
        handshake = is_websocket_handshake(request)
        if reason is not None:
            what = "handshake" if handshake else f"http GET {safe_text(request.path.split('?')[0], 80)}"
            hint = " (allow it with --allow-origin)" if reason.startswith("origin") else ""
            self._log(f"x {what} refused → 403: {reason}{hint}")
            return handshake_refusal(403, "Forbidden")
        if not handshake and self.console_dir is not None:
            response = console_response(request, self.console_dir, self.console_config)
            self._log(f"  http GET {safe_text(request.path.split('?')[0], 120)} → {response.status_code}")
            return response
        if handshake and not self.is_stage_path(request.path):
            # API Gateway knows a WebSocket API's URL by its stage: any other path is not an API of it
            self._log(f"x handshake {safe_text(request.path.split('?')[0], 80)} refused → 403: not the stage's path")
            return handshake_refusal(403, "Forbidden")
        return None

    def is_stage_path(self, target: str) -> bool:
        """Whether a handshake's path is the stage's: ``/`` (the URL the stack prints) or ``/<stage>``."""
        path = target.split("?", 1)[0]
        return path in ("", "/") or path.rstrip("/") == f"/{self.stage}"

    async def _connect(self, ws: ServerConnection, request: Request, response: Response) -> Response | None:
        """``process_response`` hook: a valid handshake is accepted only if ``$connect`` says so."""
        if response.status_code != 101:
            return None
        assert isinstance(ws, GatewayConnection)
        ws.connection_id = aws_id()
        ws.connected_at = ws.last_active_at = time.time()
        ws.source_ip = str(ws.remote_address[0])
        agents = request.headers.get_all("User-Agent")
        ws.user_agent = agents[-1] if agents else None
        context = request_context(self, ws, "$connect", "CONNECT")
        if self.handlers.authorizer is not None:
            refusal = await self._authorize(ws, request, context)
            if refusal is not None:
                return refusal
            context["authorizer"] = dict(ws.authorizer or {})
        invocation = await self._integrate(self.handlers.connect, connect_event(self, ws, request, context), "$connect")
        path = safe_text(request.path, 160)  # the query's token= is redacted
        if invocation is None:
            self._log(f"+ conn {ws.connection_id} $connect {path} → timed out")
            return handshake_refusal(504, TIMED_OUT)
        status = invocation.status
        self._log(f"+ conn {ws.connection_id} $connect {path} → {status}")
        if status < 400:
            return None
        try:
            return ws.respond(status, "Forbidden\n" if status == 403 else "Connection refused\n")
        except ValueError:  # not a registered HTTP status
            return ws.respond(500, "Internal server error\n")

    async def _authorize(self, ws: GatewayConnection, request: Request, context: dict[str, Any]) -> Response | None:
        """Run the ``$connect`` authorizer; None if it allows the connection, else the refusal."""
        assert self.handlers.authorizer is not None
        missing = [source for source in self.authorizer_identity_source if not identity_value(request, source)]
        if missing:
            self._log(f"x conn {ws.connection_id} $connect: no {', '.join(missing)} → 401")
            return handshake_refusal(401, "Unauthorized")
        event = authorizer_event(self, ws, request, context)
        invocation = await self._integrate(self.handlers.authorizer, event, AUTHORIZER_ROUTE)
        if invocation is None:
            status, ws.authorizer = 500, None
        else:
            status, ws.authorizer = authorizer_decision(invocation, event["methodArn"])
        self._log(f"+ conn {ws.connection_id} $connect authorizer → {status}")
        if status == 200:
            return None
        message = {401: "Unauthorized", 403: "Forbidden"}.get(status, INTERNAL_ERROR)
        return handshake_refusal(status, message)
