"""A local Amazon Bedrock AgentCore Memory data plane, in the real wire protocol (rest-json).

The real ``bedrock-agentcore`` client, pointed here by ``endpoint_url`` or
``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE``, calls it as it calls AWS: each request is routed by the
botocore model's HTTP method and ``requestUri`` (``wire``), its parameters parsed back and checked
against every constraint of the model (``validation``), then answered from the ``MemoryStore``
(``operations``). Errors come as the service sends them: the status the model gives the error,
``x-amzn-ErrorType`` and ``{"message": …}`` (``ValidationException`` adds its ``reason``), so boto3
raises ``ClientError`` with the right code. A body that is not JSON, or a value of the wrong type, is
``400 ValidationException`` (reason ``CannotParse``); an operation of the service this stand-in does
not serve is ``501 NotImplementedException``; a failure of its own, ``500 ServiceException``.

Signatures are not checked (any credentials do). Like the stack's other endpoints it answers
native clients only, by a loopback name (``loopback_guard``).
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

from conductor_local.agentcore_memory import operations
from conductor_local.agentcore_memory.errors import (
    CANNOT_PARSE,
    ServiceError,
    internal,
    not_implemented,
    validation_error,
)
from conductor_local.agentcore_memory.store import DEFAULT_STRATEGIES, LOCAL_MEMORY_ID, MemoryStore, Strategy
from conductor_local.agentcore_memory.validation import check
from conductor_local.agentcore_memory.wire import parse_request, route, serialize_response
from conductor_local.local_server import EndpointHttpServer, LoopbackHttpServer
from conductor_local.loopback_guard import GuardedRequestHandler
from shared.wire.log_safety import safe_text

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 10 * 1024 * 1024
"""A bigger request is refused unread (the largest the model allows, 100 events of 100,000
characters, is about 10 MB)."""


class _HTTPServer(EndpointHttpServer):
    app: LocalAgentCoreMemoryServer


class _Handler(GuardedRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), safe_text(format % args))

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        text = self.headers.get("Content-Length") or "0"
        if not text.isdigit():
            self.close_connection = True
            raise validation_error("Content-Length is not a number", CANNOT_PARSE)
        length = int(text)
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body stays unread
            raise ServiceError(413, "ValidationException", "The request body is too large", reason=CANNOT_PARSE)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        try:
            body = self._read_body()
            status, payload = self._answer(body)
        except ServiceError as error:
            self._send(error.status, json.dumps(error.body).encode("utf-8"), error.error_type)
            return
        except Exception as error:  # never a crash: the client hears a 500, the log has the trace
            logger.exception("the local AgentCore Memory failed")
            failure = internal(f"the local AgentCore Memory failed: {error!r}")
            self._send(failure.status, json.dumps(failure.body).encode("utf-8"), failure.error_type)
            return
        self._send(status, payload)

    def _answer(self, body: bytes) -> tuple[int, bytes]:
        parts = urlsplit(self.path)
        operation, labels = route(self.command, parts.path)
        if operation.name not in operations.OPERATIONS:
            raise not_implemented(operation.name)
        headers = {name.lower(): value for name, value in self.headers.items()}
        params = parse_request(operation, labels, parse_qs(parts.query, keep_blank_values=True), headers, body)
        check(operation.input_shape, params)
        output = self.server.app.call(operation.name, params)
        return serialize_response(operation, output)

    def _send(self, status: int, body: bytes, error_type: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        if error_type is not None:
            self.send_header("x-amzn-ErrorType", error_type)
        self.end_headers()
        self.wfile.write(body)


class LocalAgentCoreMemoryServer(LoopbackHttpServer):
    """The memory data plane on loopback (``port=0``: a free port; ``url`` once started). It serves the
    memories ``memory_ids`` (by default the local stack's, ``voiceide_local-0123456789``), each with
    ``strategies``; ``store`` holds what they contain (``store.records(memory_id)``,
    ``store.events(memory_id)``); ``clear()`` empties them."""

    handler_class = _Handler
    server_class = _HTTPServer
    thread_name = "local-agentcore-memory"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        memory_ids: tuple[str, ...] = (LOCAL_MEMORY_ID,),
        strategies: tuple[Strategy, ...] = DEFAULT_STRATEGIES,
    ) -> None:
        super().__init__(host, port)
        self.store = MemoryStore(memory_ids, strategies)

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one operation with checked parameters (what a request runs)."""
        return operations.run(self.store, operation, params)

    def clear(self) -> None:
        self.store.clear()
