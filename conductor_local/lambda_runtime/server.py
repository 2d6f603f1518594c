"""A local Lambda endpoint: the ``Invoke`` API for the conductor's own functions.

``POST /2015-03-31/functions/{FunctionName}/invocations`` is answered as Lambda does, so the real
``lambda`` client (pointed here by ``AWS_ENDPOINT_URL_LAMBDA``) invokes the registered handlers:

* ``InvocationType: Event`` (asynchronous): ``202`` at once, the handler then runs in its own
  worker thread with a fresh context. Payloads over 1 MB are refused with ``413
  RequestEntityTooLargeException`` (the type Lambda really sends). If the handler raises, the
  invocation is retried as configured (``retry_attempts``), then an invocation record (Lambda's
  documented destination shape, condition ``RetriesExhausted``) goes to the function's
  ``on_failure`` destination function.
* ``RequestResponse`` (default): runs the handler, ``200`` with its JSON result; a raised error
  comes back as ``X-Amz-Function-Error: Unhandled`` with ``{errorMessage, errorType}``. Over 6 MB
  is refused. ``DryRun``: ``204``.
* An unknown function: ``404 ResourceNotFoundException``.

``wait_idle()`` lets a test wait until every asynchronous invocation (and its destination) ended.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.local_server import EndpointHttpServer, LoopbackHttpServer
from conductor_local.loopback_guard import GuardedRequestHandler
from shared.wire.log_safety import safe_text

logger = logging.getLogger(__name__)

Handler = Callable[[Any, Any], Any]

ASYNC_PAYLOAD_LIMIT = 1024 * 1024
"""Lambda's limit on an asynchronous invocation's payload (1 MB)."""
SYNC_PAYLOAD_LIMIT = 6 * 1024 * 1024
# What Lambda really answers (botocore's model names the shape RequestTooLargeException, but the
# service sends this type, so boto3 raises a plain ClientError with it).
TOO_LARGE = "RequestEntityTooLargeException"
REGION = "us-east-1"
ACCOUNT = "000000000000"
_PATH = re.compile(r"/2015-03-31/functions/([^/]+)/invocations")
_ARN = re.compile(r"arn:[^:]+:lambda:[^:]*:[^:]*:function:([^:]+)(?::.+)?")


@dataclass(frozen=True)
class LocalFunction:
    """A registered function: its handler, timeout and asynchronous invocation settings."""

    handler: Handler
    timeout_seconds: float = 900.0
    retry_attempts: int = 2  # Lambda's default for asynchronous invocations
    on_failure: str | None = None  # name of the destination function


def function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"


def failure_record(name: str, payload: Any, error: BaseException, *, request_id: str, attempts: int) -> dict[str, Any]:
    """The invocation record Lambda sends an on-failure destination (version 1.0)."""
    return {
        "version": "1.0",
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "requestContext": {
            "requestId": request_id,
            "functionArn": f"{function_arn(name)}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": attempts,
        },
        "requestPayload": payload,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": str(error), "errorType": type(error).__name__},
    }


class _HTTPServer(EndpointHttpServer):
    app: LocalLambdaServer


class _Handler(GuardedRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), safe_text(format % args))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        match = _PATH.fullmatch(urlsplit(self.path).path)
        if match is None:
            self._error(404, "UnknownOperationException", f"no such operation: POST {self.path}")
            return
        name = unquote(match.group(1))
        arn = _ARN.fullmatch(name)
        name = arn.group(1) if arn else name
        app = self.server.app
        function = app.functions.get(name)
        if function is None:
            self._error(404, "ResourceNotFoundException", f"Function not found: {function_arn(name)}")
            return
        invocation_type = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
        if invocation_type == "Event" and len(body) > ASYNC_PAYLOAD_LIMIT:
            limit = ASYNC_PAYLOAD_LIMIT
            message = f"{len(body)} byte payload is too large for the Event invocation type (limit {limit} bytes)"
            self._error(413, TOO_LARGE, message)
            return
        if len(body) > SYNC_PAYLOAD_LIMIT:
            message = f"Request must be smaller than {SYNC_PAYLOAD_LIMIT} bytes for the InvokeFunction operation"
            self._error(413, TOO_LARGE, message)
            return
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            self._error(400, "InvalidRequestContentException", "Could not parse request body into json")
            return
        if invocation_type == "DryRun":
            self._reply(204, b"")
        elif invocation_type == "Event":
            app._start_async(name, function, payload)
            self._reply(202, b"")
        elif invocation_type == "RequestResponse":
            self._invoke_sync(name, function, payload)
        else:
            self._error(400, "InvalidParameterValueException", f"Unsupported invocation type {invocation_type}")

    def _invoke_sync(self, name: str, function: LocalFunction, payload: Any) -> None:
        try:
            result = function.handler(payload, LocalLambdaContext(name, function.timeout_seconds))
        except Exception as error:
            body = json.dumps({"errorMessage": str(error), "errorType": type(error).__name__}).encode()
            self._reply(200, body, {"X-Amz-Function-Error": "Unhandled"})
            return
        self._reply(200, json.dumps(result).encode())

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.send_header("X-Amz-Executed-Version", "$LATEST")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, error_type: str, message: str) -> None:
        body = json.dumps({"Type": "User", "message": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-ErrorType", error_type)
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(body)


class LocalLambdaServer(LoopbackHttpServer):
    """A threaded loopback HTTP server speaking Lambda's ``Invoke`` for registered functions."""

    handler_class = _Handler
    server_class = _HTTPServer
    thread_name = "local-lambda"

    def __init__(self, functions: dict[str, LocalFunction], host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.functions = dict(functions)
        self._idle = threading.Condition()
        self._started = 0
        self._running: set[int] = set()
        self.failures: list[dict[str, Any]] = []
        """Invocation records of asynchronous invocations that failed every attempt."""

    @property
    def started(self) -> int:
        """How many asynchronous invocations have been accepted so far (a mark for ``wait_idle``)."""
        with self._idle:
            return self._started

    def wait_idle(self, timeout: float = 30.0, *, since: int = 0) -> bool:
        """Wait until every asynchronous invocation accepted after mark ``since`` has ended (its
        destination included); False if one still runs at the timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while any(number > since for number in self._running):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def _start_async(self, name: str, function: LocalFunction, payload: Any) -> None:
        with self._idle:
            self._started += 1
            number = self._started
            self._running.add(number)
        thread = threading.Thread(
            target=self._run_async, args=(number, name, function, payload), name=f"lambda {name}", daemon=True
        )
        thread.start()

    def _run_async(self, number: int, name: str, function: LocalFunction, payload: Any) -> None:
        request_id = str(uuid.uuid4())
        try:
            for attempt in range(1, function.retry_attempts + 2):
                try:
                    function.handler(payload, LocalLambdaContext(name, function.timeout_seconds))
                    return
                except Exception as error:
                    logger.exception("asynchronous invocation %s of %s failed (attempt %d)", request_id, name, attempt)
                    last_error: BaseException = error
            record = failure_record(name, payload, last_error, request_id=request_id, attempts=attempt)
            self.failures.append(record)
            destination_name = function.on_failure or ""
            destination = self.functions.get(destination_name)
            if destination is not None:
                try:
                    destination.handler(record, LocalLambdaContext(destination_name, destination.timeout_seconds))
                except Exception:
                    logger.exception("on-failure destination %s of %s failed", destination_name, name)
        finally:
            with self._idle:
                self._running.discard(number)
                self._idle.notify_all()
