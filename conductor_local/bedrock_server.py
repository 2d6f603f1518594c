"""A local Bedrock Runtime endpoint that answers ``ConverseStream`` in the real wire format.

``POST /model/{modelId}/converse-stream`` is answered with ``200`` and an
``application/vnd.amazon.eventstream`` body sent with chunked transfer encoding, one chunk per
event, so the real ``bedrock-runtime`` client (pointed here by ``endpoint_url`` or
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``) parses it and pauses between deltas are real.

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

``max_input_tokens`` (off by default, settable while running) gives the endpoint a context
window: a request whose estimated size (``estimate_input_tokens``: characters / 4 of the compact
JSON of ``system``, ``messages`` and ``toolConfig``) exceeds it is refused before any stream with
``400 ValidationException`` "Input is too long for requested model.", as Bedrock refuses a
conversation that does not fit the model.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import logging
import math
import re
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

from conductor_local.eventstream import CONTENT_TYPE, event_message, exception_message

logger = logging.getLogger(__name__)

WRAPPER_TOOL = "tool_call"
"""The one tool through which the model asks the app for client-side actions."""

# ---- script vocabulary --------------------------------------------------------------------

Event = dict[str, Any]


@dataclass(frozen=True)
class Pause:
    """Wait ``seconds`` before the next step (cut short when the server stops)."""

    seconds: float


@dataclass(frozen=True)
class RaiseInStream:
    """A modeled exception in the middle of the stream; the stream ends after it.

    ``exception_type`` is the member name of ``ConverseStreamOutput``: ``modelStreamErrorException``,
    ``throttlingException``, ``internalServerException``, ``validationException``,
    ``serviceUnavailableException``. ``fields`` are extra members (e.g. ``originalStatusCode``).
    """

    exception_type: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RejectRequest:
    """An HTTP error instead of a stream: ``status``, ``x-amzn-ErrorType`` and ``{"message"}``."""

    status: int
    error_type: str
    message: str


Step = Event | Pause | RaiseInStream
Script = Iterable[Step]
Responder = Callable[[str, dict[str, Any]], Script | RejectRequest]


def throttled(message: str = "Too many requests, please wait before trying again.") -> RejectRequest:
    """``429 ThrottlingException`` before the stream (botocore retries it)."""
    return RejectRequest(429, "ThrottlingException", message)


def validation_error(message: str) -> RejectRequest:
    """``400 ValidationException`` before the stream (not retried)."""
    return RejectRequest(400, "ValidationException", message)


def model_stream_error(message: str = "The model stream failed.") -> RaiseInStream:
    return RaiseInStream("modelStreamErrorException", message)


def stream_throttling(message: str = "Too many tokens, please wait before trying again.") -> RaiseInStream:
    return RaiseInStream("throttlingException", message)


# ---- events, exactly as botocore's ConverseStreamOutput members --------------------------


def message_start(role: str = "assistant") -> Event:
    return {"messageStart": {"role": role}}


def text_delta(index: int, text: str) -> Event:
    return {"contentBlockDelta": {"delta": {"text": text}, "contentBlockIndex": index}}


def tool_use_start(index: int, tool_use_id: str, name: str) -> Event:
    start = {"toolUse": {"toolUseId": tool_use_id, "name": name}}
    return {"contentBlockStart": {"start": start, "contentBlockIndex": index}}


def tool_input_delta(index: int, partial_json: str) -> Event:
    return {"contentBlockDelta": {"delta": {"toolUse": {"input": partial_json}}, "contentBlockIndex": index}}


def block_stop(index: int) -> Event:
    return {"contentBlockStop": {"contentBlockIndex": index}}


def message_stop(stop_reason: str = "end_turn") -> Event:
    return {"messageStop": {"stopReason": stop_reason}}


def metadata(input_tokens: int, output_tokens: int, latency_ms: int = 250) -> Event:
    return {
        "metadata": {
            "usage": {
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens,
            },
            "metrics": {"latencyMs": latency_ms},
        }
    }


# ---- content blocks and whole messages ----------------------------------------------------


def split_words(text: str, per_delta: int = 1) -> list[str]:
    """Pieces of ``per_delta`` words, each keeping its leading whitespace; they join back to ``text``."""
    words = re.findall(r"\s*\S+", text)
    if not words:
        return [text] if text else []
    trailing = text[len("".join(words)) :]
    pieces = ["".join(words[i : i + per_delta]) for i in range(0, len(words), max(1, per_delta))]
    pieces[-1] += trailing
    return pieces


def split_parts(text: str, parts: int) -> list[str]:
    """``text`` cut into ``parts`` nearly equal non-empty pieces (fewer if it is shorter)."""
    parts = max(1, min(parts, len(text)))
    bounds = [round(i * len(text) / parts) for i in range(parts + 1)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)] or [text]


@dataclass(frozen=True)
class Text:
    """A text block streamed in deltas of ``words_per_delta`` words (or ``chars_per_delta`` chars).

    ``pause`` is waited before every delta: set it for slow streams.
    """

    text: str
    words_per_delta: int = 1
    chars_per_delta: int | None = None
    pause: float = 0.0

    def pieces(self) -> list[str]:
        if self.chars_per_delta:
            size = self.chars_per_delta
            return [self.text[i : i + size] for i in range(0, len(self.text), size)]
        return split_words(self.text, self.words_per_delta)


def new_tool_use_id() -> str:
    return "tooluse_" + uuid.uuid4().hex[:22]


@dataclass(frozen=True)
class ToolUse:
    """A toolUse block whose input JSON is streamed in ``parts`` deltas.

    ``input`` is a JSON object, or a string sent verbatim (to script malformed input).
    """

    name: str
    input: Mapping[str, Any] | str
    tool_use_id: str = field(default_factory=new_tool_use_id)
    parts: int = 3
    pause: float = 0.0

    def input_json(self) -> str:
        if isinstance(self.input, str):
            return self.input
        return json.dumps(self.input, separators=(",", ":"), ensure_ascii=False)


def tool_call(
    name: str,
    arguments: Any,
    *,
    call_id: str | None = None,
    tool_use_id: str | None = None,
    parts: int = 3,
    pause: float = 0.0,
) -> ToolUse:
    """A use of the ``tool_call`` wrapper asking the app to run ``name`` with ``arguments``."""
    wrapper_input: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id is not None:
        wrapper_input["call_id"] = call_id
    return ToolUse(WRAPPER_TOOL, wrapper_input, tool_use_id or new_tool_use_id(), parts, pause)


Content = Text | ToolUse | str


def _block_deltas(index: int, content: Text | ToolUse) -> list[Step]:
    steps: list[Step] = []
    if isinstance(content, ToolUse):
        steps.append(tool_use_start(index, content.tool_use_id, content.name))
        pieces = split_parts(content.input_json(), content.parts)
        events = [tool_input_delta(index, piece) for piece in pieces]
    else:
        events = [text_delta(index, piece) for piece in content.pieces()]
    for event in events:
        if content.pause > 0:
            steps.append(Pause(content.pause))
        steps.append(event)
    return steps


def message(
    *content: Content,
    stop_reason: str | None = None,
    input_tokens: int = 100,
    output_tokens: int | None = None,
    latency_ms: int = 250,
    interrupted_by: RaiseInStream | None = None,
) -> list[Step]:
    """A whole assistant message: messageStart, each block, messageStop, metadata.

    Plain strings are ``Text`` blocks. ``stop_reason`` defaults to ``tool_use`` when the message
    has a tool use, else ``end_turn``. ``output_tokens`` defaults to the number of deltas.
    With ``interrupted_by`` the stream breaks right after the last delta: that block is never
    stopped, and no messageStop or metadata follow.
    """
    blocks = [Text(item) if isinstance(item, str) else item for item in content]
    steps: list[Step] = [message_start()]
    for index, block in enumerate(blocks):
        steps += _block_deltas(index, block)
        if interrupted_by is None or index < len(blocks) - 1:
            steps.append(block_stop(index))
    if interrupted_by is not None:
        steps.append(interrupted_by)
        return steps
    if stop_reason is None:
        stop_reason = "tool_use" if any(isinstance(b, ToolUse) for b in blocks) else "end_turn"
    if output_tokens is None:
        output_tokens = max(1, sum(1 for s in steps if isinstance(s, dict) and "contentBlockDelta" in s))
    steps += [message_stop(stop_reason), metadata(input_tokens, output_tokens, latency_ms)]
    return steps


# ---- request validation: the conversation rules Bedrock enforces --------------------------


def _tool_use_ids(msg: Mapping[str, Any]) -> list[str]:
    return [b["toolUse"].get("toolUseId", "") for b in msg.get("content") or [] if "toolUse" in b]


def _tool_result_ids(msg: Mapping[str, Any]) -> list[str]:
    return [b["toolResult"].get("toolUseId", "") for b in msg.get("content") or [] if "toolResult" in b]


def converse_validation_error(request: Mapping[str, Any]) -> str | None:
    """Why Bedrock would reject this ConverseStream request, or None when it is well formed."""
    messages = request.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        return (
            "A conversation must start with a user message. "
            "Try again with a conversation that starts with a user message."
        )
    uses_tools = False
    for i, msg in enumerate(messages):
        if i and msg.get("role") == messages[i - 1].get("role"):
            return (
                "A conversation must alternate between user and assistant roles. Make sure the "
                "conversation alternates between user and assistant roles and try again."
            )
        content = msg.get("content") or []
        if not content:
            return f"The content field in the Message object at messages.{i} is empty."
        for j, block in enumerate(content):
            if "text" in block and not str(block["text"]).strip():
                return f"The text field in the ContentBlock object at messages.{i}.content.{j} is blank."
            uses_tools = uses_tools or "toolUse" in block or "toolResult" in block
        expected = _tool_use_ids(messages[i - 1]) if i and msg.get("role") == "user" else []
        results = _tool_result_ids(msg)
        if set(results) - set(expected) or len(results) > len(expected):
            return (
                f"The number of toolResult blocks at messages.{i}.content exceeds the number of "
                "toolUse blocks of previous turn."
            )
        missing = [tool_id for tool_id in expected if tool_id not in results]
        if missing:
            ids = ", ".join(missing)
            return f"Expected toolResult blocks at messages.{i}.content for the following Ids: {ids}"
    if uses_tools and not request.get("toolConfig"):
        return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    return None


# ---- request validation: the API model's constraints botocore leaves to the service ---------

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_.:-]+")
ID_MAX_LENGTH = 64
MAX_STOP_SEQUENCES = 2500


def _failed(at: str, constraint: str) -> str:
    return f"{at} failed to satisfy constraint: Member must {constraint}"


def _string_problems(value: Any, path: str, pattern: re.Pattern[str], *, shown: bool) -> list[str]:
    """A ``ToolName`` / ``ToolUseId`` member outside its pattern or its 1..64 length. Bedrock does
    not echo message content back, so values inside ``messages`` are not shown."""
    if not isinstance(value, str):
        return []  # a missing or mistyped member is botocore's to refuse
    at = f"Value '{value}' at '{path}'" if shown else f"Value at '{path}'"
    problems = []
    if pattern.fullmatch(value) is None:
        problems.append(_failed(at, f"satisfy regular expression pattern: {pattern.pattern}"))
    if not value:
        problems.append(_failed(at, "have length greater than or equal to 1"))
    if len(value) > ID_MAX_LENGTH:
        problems.append(_failed(at, f"have length less than or equal to {ID_MAX_LENGTH}"))
    return problems


def _range_problems(value: Any, path: str, low: float, high: float | None = None) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    at = f"Value '{value}' at '{path}'"
    if value < low:
        return [_failed(at, f"have value greater than or equal to {low:g}")]
    if high is not None and value > high:
        return [_failed(at, f"have value less than or equal to {high:g}")]
    return []


def _inference_problems(inference: Mapping[str, Any]) -> list[str]:
    problems = _range_problems(inference.get("maxTokens"), "inferenceConfig.maxTokens", 1)
    problems += _range_problems(inference.get("temperature"), "inferenceConfig.temperature", 0, 1)
    problems += _range_problems(inference.get("topP"), "inferenceConfig.topP", 0, 1)
    stops = inference.get("stopSequences")
    if isinstance(stops, list) and len(stops) > MAX_STOP_SEQUENCES:
        at = "Value at 'inferenceConfig.stopSequences'"
        problems.append(_failed(at, f"have length less than or equal to {MAX_STOP_SEQUENCES}"))
    return problems


def _tool_config_problems(tool_config: Mapping[str, Any]) -> list[str]:
    tools = tool_config.get("tools")
    if not isinstance(tools, list):
        return []
    if not tools:
        return [_failed("Value '[]' at 'toolConfig.tools'", "have length greater than or equal to 1")]
    problems = []
    for t, tool in enumerate(tools, start=1):
        spec = tool.get("toolSpec") if isinstance(tool, Mapping) else None
        if isinstance(spec, Mapping):
            path = f"toolConfig.tools.{t}.member.toolSpec.name"
            problems += _string_problems(spec.get("name"), path, _TOOL_NAME, shown=True)
    return problems


def _message_problems(messages: list[Any]) -> list[str]:
    problems = []
    for m, msg in enumerate(messages, start=1):
        content = msg.get("content") if isinstance(msg, Mapping) else None
        for c, block in enumerate(content if isinstance(content, list) else [], start=1):
            at = f"messages.{m}.member.content.{c}.member"
            use = block.get("toolUse") if isinstance(block, Mapping) else None
            if isinstance(use, Mapping):
                problems += _string_problems(use.get("toolUseId"), f"{at}.toolUse.toolUseId", _TOOL_USE_ID, shown=False)
                problems += _string_problems(use.get("name"), f"{at}.toolUse.name", _TOOL_NAME, shown=False)
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            if isinstance(result, Mapping):
                path = f"{at}.toolResult.toolUseId"
                problems += _string_problems(result.get("toolUseId"), path, _TOOL_USE_ID, shown=False)
    return problems


def constraint_violation(request: Mapping[str, Any]) -> str | None:
    """Why Bedrock's request validation would refuse this ConverseStream request, or None.

    The API model's constraints that botocore leaves to the service (it checks minimums, never
    patterns or maximums), in AWS's words: ``N validation error(s) detected: Value '<v>' at
    '<path>' failed to satisfy constraint: Member must ...``, 1-based ``.member.`` paths, the
    problems joined by ``; ``.
    """
    problems: list[str] = []
    inference = request.get("inferenceConfig")
    if isinstance(inference, Mapping):
        problems += _inference_problems(inference)
    tool_config = request.get("toolConfig")
    if isinstance(tool_config, Mapping):
        problems += _tool_config_problems(tool_config)
    messages = request.get("messages")
    if isinstance(messages, list):
        problems += _message_problems(messages)
    if not problems:
        return None
    errors = "validation error" if len(problems) == 1 else "validation errors"
    return f"{len(problems)} {errors} detected: {'; '.join(problems)}"


# ---- the context window -------------------------------------------------------------------

INPUT_TOO_LONG = "Input is too long for requested model."
"""Bedrock's message when a request does not fit the model's context window."""


def estimate_input_tokens(request: Mapping[str, Any]) -> int:
    """Roughly what Bedrock counts as input: characters / 4 (rounded up) of the compact JSON of
    ``system``, ``messages`` and ``toolConfig`` (the usual rule of thumb for English text)."""
    chars = sum(
        len(json.dumps(request[key], separators=(",", ":"), ensure_ascii=False))
        for key in ("system", "messages", "toolConfig")
        if request.get(key) is not None
    )
    return max(1, math.ceil(chars / 4))


def input_too_long() -> RejectRequest:
    """``400 ValidationException`` for a request over the context window (not retried)."""
    return validation_error(INPUT_TOO_LONG)


# ---- the scripted responder ---------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One ConverseStream request as received: the decoded model id and the JSON body."""

    model_id: str
    body: dict[str, Any]


class ScriptedResponder:
    """Answers each request with the next queued script (or rejection), recording every request."""

    def __init__(self, *scripts: Script | RejectRequest) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Script | RejectRequest] = deque(scripts)
        self._requests: list[RecordedRequest] = []

    def push(self, *scripts: Script | RejectRequest) -> None:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._queue.extend(scripts)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def __call__(self, model_id: str, request: dict[str, Any]) -> Script | RejectRequest:
        with self._lock:
            self._requests.append(RecordedRequest(model_id, request))
            if self._queue:
                return self._queue.popleft()
            number = len(self._requests)
        return RejectRequest(
            500,
            "InternalServerException",
            f"ScriptedResponder: no script queued for request #{number} (model {model_id!r})",
        )


# ---- the HTTP server ----------------------------------------------------------------------

_PATH = re.compile(r"/model/([^/]+)/converse-stream")


class _StreamAborted(Exception):
    """The server is stopping: drop the stream without ending it cleanly."""


def _encode_event(step: Mapping[str, Any]) -> bytes:
    if len(step) != 1:
        raise ValueError(f"an event must have exactly one key (its type), got {sorted(step)}")
    ((event_type, payload),) = step.items()
    if not isinstance(payload, Mapping):
        raise TypeError(f"the payload of {event_type!r} must be a dict")
    return event_message(event_type, payload)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    app: LocalBedrockServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client that went away is not a server fault
            logger.debug("connection from %s dropped", client_address)
        else:
            logger.exception("local Bedrock request from %s failed", client_address)


class _Handler(BaseHTTPRequestHandler):
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
        logger.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:
        app = self.server.app
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        match = _PATH.fullmatch(urlsplit(self.path).path)
        if match is None:
            self._send_error(404, "UnknownOperationException", f"no such operation: POST {self.path}")
            return
        model_id = unquote(match.group(1))
        try:
            body = json.loads(raw_body or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_error(400, "ValidationException", "the request body is not a JSON object")
            return
        app._record(RecordedRequest(model_id, body))
        refusal = app.refusal(body)
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
        else:
            self._stream(outcome)

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


class LocalBedrockServer:
    """A threaded loopback HTTP server speaking Bedrock Runtime's ``ConverseStream``.

    ``port=0`` picks a free port; ``url`` is what to give boto3 as ``endpoint_url``.
    """

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        validate_requests: bool = True,
        max_input_tokens: int | None = None,
    ) -> None:
        self.responder = responder
        self.validate_requests = validate_requests
        self.max_input_tokens = max_input_tokens
        self._host = host
        self._port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._connections: dict[socket.socket, threading.Thread] = {}

    @property
    def max_input_tokens(self) -> int | None:
        """The context window (``estimate_input_tokens`` units), None for no limit; may be changed
        while the server runs (the next request sees it)."""
        return self._max_input_tokens

    @max_input_tokens.setter
    def max_input_tokens(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"max_input_tokens must be a positive int or None, not {value!r}")
        self._max_input_tokens = value

    def refusal(self, request: Mapping[str, Any]) -> RejectRequest | None:
        """How Bedrock would refuse ``request`` before streaming (validation, then the context
        window), or None when it would be served."""
        if self.validate_requests:
            problem = constraint_violation(request) or converse_validation_error(request)
            if problem is not None:
                return validation_error(problem)
        limit = self._max_input_tokens
        if limit is not None and estimate_input_tokens(request) > limit:
            return input_too_long()
        return None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every ConverseStream request received, in arrival order (rejected ones too)."""
        with self._lock:
            return list(self._requests)

    def start(self) -> LocalBedrockServer:
        if self._httpd is not None:
            raise RuntimeError("the server is already started")
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.app = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="local-bedrock", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and cut open streams; returns within about ``timeout`` seconds."""
        if self._httpd is None or self._stopping.is_set():
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            open_connections = dict(self._connections)
        for sock in open_connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in [self._thread, *open_connections.values()]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> LocalBedrockServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections[sock] = threading.current_thread()
        if self._stopping.is_set():  # accepted while stopping: cut it like the others
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)
