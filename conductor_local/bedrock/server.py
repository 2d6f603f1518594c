"""A local Bedrock Runtime endpoint that answers ``ConverseStream`` and ``Converse`` in the real wire format.

``POST /model/{modelId}/converse-stream`` is answered with ``200`` and an
``application/vnd.amazon.eventstream`` body sent with chunked transfer encoding, one chunk per
event, so the real ``bedrock-runtime`` client (pointed here by ``endpoint_url`` or
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``) parses it and pauses between deltas are real.

``POST /model/{modelId}/converse`` (the non-streaming ``Converse``) is answered from the same
responder and checked the same way: the script is played out (its pauses waited) and its events
assembled into one JSON response (``output.message``, ``stopReason``, ``usage``, ``metrics``), the
text deltas of a block joined, a tool use's input deltas parsed; an exception in the script
becomes that error's HTTP answer (``modelStreamErrorException`` as ``424 ModelErrorException``),
and a script that ends without ``messageStop`` a ``500 InternalServerException``.

What to send is decided by a *responder*: ``(model_id, request_json) -> Script | RejectRequest``.
A script is an iterable of steps, sent in order as they are produced:

* an event dict, e.g. ``{"messageStart": {"role": "assistant"}}`` (shapes of botocore's
  ``ConverseStreamOutput``); build them with ``message(...)`` and the helpers below;
* ``Pause(seconds)``: wait before the next step;
* ``RaiseInStream(exception_type, message)``: an exception message, after which the stream
  ends; boto3 raises ``EventStreamError`` while iterating.

``RejectRequest(status, error_type, message)`` answers with an HTTP error before any stream,
so boto3 raises the modeled ``ClientError`` (and retries it when botocore deems it retryable).

By default requests are first checked like Bedrock checks them, and rejected with a ``400
ValidationException`` in Bedrock's words: the API model's constraints that botocore leaves to the
service (tool names ``[a-zA-Z0-9_-]{1,64}``, tool use ids ``[a-zA-Z0-9_.:-]{1,64}``, ``maxTokens``
at least 1, ``temperature`` and ``topP`` from 0 to 1, at most 2500 ``stopSequences``, at least one
tool in a ``toolConfig``), then the conversation rules (roles alternate and start with user,
every ``toolUse`` answered by a ``toolResult`` in the next message, ...).

``cachePoint`` blocks are checked as Bedrock checks them (``cache_point_problem``: at most four,
never first in their list nor after a reasoning block, no ``1h`` after a ``5m``; a model without
prompt caching refuses them with ``403 AccessDeniedException``), and a request carrying them reads
and writes the endpoint's prompt cache (``bedrock_cache``): its metadata event then reports
``cacheReadInputTokens``, ``cacheWriteInputTokens`` and the rest as ``inputTokens``, estimated as
the context window is. ``prompt_cache`` is that cache (``clear()`` empties it; ``min_tokens``
is the per-checkpoint minimum, 0 by default).

``performanceConfig`` ``{"latency": "optimized"}`` is served only for the models Bedrock offers
latency-optimized inference for (``latency_refusal``: Claude 3.5 Haiku, Amazon Nova Pro, Llama 3.1
405B/70B); to any other model it is refused with ``400 ValidationException``; ``standard`` is served by
every model.

``max_input_tokens`` is the endpoint's context window: a request whose estimated size
(``estimate_input_tokens``: characters / 4 of the compact JSON of ``system``, ``messages`` and
``toolConfig``) exceeds it is refused before any stream with ``400 ValidationException`` "Input is
too long for requested model.", as Bedrock refuses a conversation that does not fit the model.
By default (``"model"``) it is the requested model's window (``context_window``: 200,000 for
Claude); an int sets one for every model, None turns the check off. The constructor's default
can be overridden by the environment variable ``LOCAL_BEDROCK_MAX_INPUT_TOKENS`` (an int,
``model`` or ``none``); the setting may be changed while the server runs.

The script vocabulary lives in ``bedrock_script`` and the request checks in ``bedrock_validation``;
both are re-exported here.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from conductor_local.bedrock.cache import CacheUsage, PromptCache, has_cache_points, with_cache_usage
from conductor_local.bedrock.converse import converse_answer
from conductor_local.bedrock.eventstream import CONTENT_TYPE, event_message, exception_message
from conductor_local.bedrock.models import as_the_model, model_refusal
from conductor_local.bedrock.script import (
    WRAPPER_TOOL,
    Content,
    Event,
    Pause,
    RaiseInStream,
    RecordedRequest,
    RejectRequest,
    Responder,
    Script,
    ScriptedResponder,
    Step,
    Text,
    ToolUse,
    block_stop,
    message,
    message_start,
    message_stop,
    metadata,
    model_stream_error,
    new_tool_use_id,
    split_parts,
    split_words,
    stream_throttling,
    text_delta,
    throttled,
    tool_call,
    tool_input_delta,
    tool_use_start,
    validation_error,
)
from conductor_local.bedrock.validation import (
    ID_MAX_LENGTH,
    INPUT_TOO_LONG,
    MAX_STOP_SEQUENCES,
    cache_point_problem,
    caches_unsupported,
    constraint_violation,
    context_window,
    converse_validation_error,
    estimate_input_tokens,
    input_too_long,
    latency_refusal,
    unsupported_cache,
)
from conductor_local.local_server import EndpointHttpServer, LoopbackHttpServer
from conductor_local.loopback_guard import GuardedRequestHandler
from shared.wire.log_safety import safe_text

__all__ = [
    "ID_MAX_LENGTH",
    "INPUT_TOO_LONG",
    "MAX_STOP_SEQUENCES",
    "MODEL_WINDOW",
    "WRAPPER_TOOL",
    "CacheUsage",
    "Content",
    "Event",
    "LocalBedrockServer",
    "Pause",
    "PromptCache",
    "RaiseInStream",
    "RecordedRequest",
    "RejectRequest",
    "Responder",
    "Script",
    "ScriptedResponder",
    "Step",
    "Text",
    "ToolUse",
    "block_stop",
    "cache_point_problem",
    "constraint_violation",
    "context_window",
    "converse_validation_error",
    "estimate_input_tokens",
    "input_too_long",
    "message",
    "message_start",
    "message_stop",
    "metadata",
    "model_stream_error",
    "new_tool_use_id",
    "split_parts",
    "split_words",
    "stream_throttling",
    "text_delta",
    "throttled",
    "tool_call",
    "tool_input_delta",
    "tool_use_start",
    "validation_error",
]

logger = logging.getLogger(__name__)

# ---- the HTTP server ----------------------------------------------------------------------

_PATH = re.compile(r"/model/([^/]+)/(converse-stream|converse)")
CONVERSE = "converse"

MODEL_WINDOW = "model"
"""``max_input_tokens``: the requested model's context window (``context_window``)."""
MAX_INPUT_TOKENS_ENV = "LOCAL_BEDROCK_MAX_INPUT_TOKENS"
InputLimit = int | Literal["model"] | None


class _StreamAborted(Exception):
    """The server is stopping: drop the stream without ending it cleanly."""


def _encode_event(step: Mapping[str, Any]) -> bytes:
    if len(step) != 1:
        raise ValueError(f"an event must have exactly one key (its type), got {sorted(step)}")
    ((event_type, payload),) = step.items()
    if not isinstance(payload, Mapping):
        raise TypeError(f"the payload of {event_type!r} must be a dict")
    return event_message(event_type, payload)


class _HTTPServer(EndpointHttpServer):
    app: LocalBedrockServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client that went away is not a server fault
            logger.debug("connection from %s dropped", client_address)
        else:
            logger.exception("local Bedrock request from %s failed", client_address)


class _Handler(GuardedRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.app._track(self.connection)

    def finish(self) -> None:
        try:
            with contextlib.suppress(OSError):
                super().finish()
        finally:
            self.server.app._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), safe_text(format % args))

    def do_POST(self) -> None:
        app = self.server.app
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        match = _PATH.fullmatch(urlsplit(self.path).path)
        if match is None:
            self._send_error(404, "UnknownOperationException", f"no such operation: POST {self.path}")
            return
        model_id = unquote(match.group(1))
        operation = match.group(2)
        try:
            body = json.loads(raw_body or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_error(400, "ValidationException", "the request body is not a JSON object")
            return
        app._record(RecordedRequest(model_id, body), "Converse" if operation == CONVERSE else "ConverseStream")
        refusal = app.refusal(body, model_id)
        if refusal is not None:
            self._send_error(refusal.status, refusal.error_type, refusal.message)
            return
        try:
            outcome = app.responder(model_id, copy.deepcopy(body))
        except Exception as exc:
            logger.exception("local Bedrock responder failed")
            self._send_error(500, "InternalServerException", f"local Bedrock responder failed: {exc!r}")
            return
        if isinstance(outcome, RejectRequest):
            self._send_error(outcome.status, outcome.error_type, outcome.message)
            return
        outcome = as_the_model(outcome, model_id, body, seconds_per_token=app.think_seconds_per_token)
        if has_cache_points(body):
            usage = app.prompt_cache.account(body, estimate_input_tokens(body), model_id)
            outcome = with_cache_usage(outcome, usage)
        if operation == CONVERSE:
            self._answer(outcome, estimate_input_tokens(body))
        else:
            self._stream(outcome)

    def _answer(self, script: Script, input_tokens: int) -> None:
        """The non-streaming answer: the script played out and assembled into one response."""
        started = time.monotonic()
        try:
            answer = converse_answer(_steps(script, self.server.app._stopping), input_tokens)
        except _StreamAborted:
            self.close_connection = True
            return
        except Exception as exc:
            logger.exception("local Bedrock script failed")
            answer = RejectRequest(500, "InternalServerException", f"script failed: {exc!r}")
        if isinstance(answer, RejectRequest):
            self._send_error(answer.status, answer.error_type, answer.message)
            return
        answer["metrics"].setdefault("latencyMs", max(1, round((time.monotonic() - started) * 1000)))
        payload = json.dumps(answer, ensure_ascii=False).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(payload)

    def _send_error(self, status: int, error_type: str, message: str) -> None:
        payload = json.dumps({"message": message}).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-amzn-ErrorType", error_type)
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(payload)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _stream(self, script: Script) -> None:
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        try:
            self._send_steps(script)
            self.wfile.write(b"0\r\n\r\n")
        except (_StreamAborted, OSError):  # stopping, or the client went away (barge-in)
            self.close_connection = True

    def _send_steps(self, script: Script) -> None:
        try:
            for step in _steps(script, self.server.app._stopping):
                if isinstance(step, RaiseInStream):
                    self._write_chunk(exception_message(step.exception_type, step.message, **step.fields))
                    return
                self._write_chunk(_encode_event(step))
        except (_StreamAborted, OSError):
            raise
        except Exception as exc:
            logger.exception("local Bedrock script failed")
            self._write_chunk(exception_message("internalServerException", f"script failed: {exc!r}"))


def _steps(script: Script, stopping: threading.Event) -> Iterator[Event | RaiseInStream]:
    """The script's events, with pauses waited out and the server's stop honoured."""
    for step in script:
        if stopping.is_set():
            raise _StreamAborted
        if isinstance(step, Pause):
            if stopping.wait(step.seconds):
                raise _StreamAborted
            continue
        if not isinstance(step, Mapping | RaiseInStream):
            raise TypeError(f"a script step must be an event dict, Pause or RaiseInStream, not {step!r}")
        yield step  # type: ignore[misc]


# ---- Converse: a script assembled into one response -----------------------------------------


# A stream's exception → the HTTP error Converse answers with (status, x-amzn-ErrorType).
def _input_limit_from_env(value: str | None) -> InputLimit:
    setting = (value or MODEL_WINDOW).strip().lower()
    if setting == MODEL_WINDOW:
        return MODEL_WINDOW
    if setting in ("none", "off"):
        return None
    if setting.isdecimal() and int(setting) > 0:
        return int(setting)
    raise ValueError(f"{MAX_INPUT_TOKENS_ENV} must be a positive int, 'model' or 'none', not {value!r}")


class LocalBedrockServer(LoopbackHttpServer):
    """A threaded loopback HTTP server speaking Bedrock Runtime's ``ConverseStream`` and ``Converse``.

    ``port=0`` picks a free port; ``url`` is what to give boto3 as ``endpoint_url``.
    """

    handler_class = _Handler
    server_class = _HTTPServer
    thread_name = "local-bedrock"

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        validate_requests: bool = True,
        max_input_tokens: InputLimit = MODEL_WINDOW,
        prompt_cache: PromptCache | None = None,
        think_seconds_per_token: float | None = None,
    ) -> None:
        """``max_input_tokens`` left at ``"model"`` reads ``LOCAL_BEDROCK_MAX_INPUT_TOKENS`` when set.
        ``think_seconds_per_token``: how fast a thinking model writes its reasoning (None: at once;
        the paced local model passes its own rate)."""
        super().__init__(host, port)
        self.responder = responder
        self.think_seconds_per_token = think_seconds_per_token
        self.validate_requests = validate_requests
        if max_input_tokens == MODEL_WINDOW:
            max_input_tokens = _input_limit_from_env(os.environ.get(MAX_INPUT_TOKENS_ENV))
        self.max_input_tokens = max_input_tokens
        self.prompt_cache = prompt_cache or PromptCache()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._operations: list[str] = []
        self._connections: dict[socket.socket, threading.Thread] = {}

    @property
    def max_input_tokens(self) -> InputLimit:
        """The context window (``estimate_input_tokens`` units): ``"model"`` for each requested
        model's own, an int for every model, None for no limit; may be changed while the server
        runs (the next request sees it)."""
        return self._max_input_tokens

    @max_input_tokens.setter
    def max_input_tokens(self, value: InputLimit) -> None:
        if (
            value is not None
            and value != MODEL_WINDOW
            and (isinstance(value, bool) or not isinstance(value, int) or value < 1)
        ):
            raise ValueError(f"max_input_tokens must be a positive int, 'model' or None, not {value!r}")
        self._max_input_tokens = value

    def input_limit(self, model_id: str | None) -> int | None:
        """The context window a request to ``model_id`` is checked against (None: unchecked)."""
        limit = self._max_input_tokens
        if limit == MODEL_WINDOW:
            return context_window(model_id or "")
        return limit  # type: ignore[return-value]

    def refusal(self, request: Mapping[str, Any], model_id: str | None = None) -> RejectRequest | None:
        """How Bedrock would refuse ``request`` to ``model_id`` before streaming (validation, prompt
        caching on a model without it, then the context window), or None when it would be served."""
        if self.validate_requests:
            problem = (
                constraint_violation(request) or converse_validation_error(request) or cache_point_problem(request)
            )
            if problem is not None:
                return validation_error(problem)
            if model_id is not None and caches_unsupported(model_id) and has_cache_points(request):
                return unsupported_cache()
            if model_id is not None and (slow := latency_refusal(request, model_id)) is not None:
                return slow
            if model_id is not None and (refused := model_refusal(model_id, request)) is not None:
                return refused
        limit = self.input_limit(model_id)
        if limit is not None and estimate_input_tokens(request) > limit:
            return input_too_long()
        return None

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received (ConverseStream and Converse), in arrival order (rejected ones too)."""
        with self._lock:
            return list(self._requests)

    @property
    def operations(self) -> list[str]:
        """The operation of each of ``requests``: ``ConverseStream`` or ``Converse``."""
        with self._lock:
            return list(self._operations)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and cut open streams; returns within about ``timeout`` seconds."""
        if self._httpd is None or self._stopping.is_set():
            return
        self._stopping.set()
        self._stop_listening()
        with self._lock:
            open_connections = dict(self._connections)
        for sock in open_connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in [self._thread, *open_connections.values()]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    def _record(self, request: RecordedRequest, operation: str) -> None:
        with self._lock:
            self._requests.append(request)
            self._operations.append(operation)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections[sock] = threading.current_thread()
        if self._stopping.is_set():  # accepted while stopping: cut it like the others
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)
