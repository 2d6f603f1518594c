"""The script vocabulary of the local Bedrock endpoint: what a responder answers with.

A *responder* is ``(model_id, request_json) -> Script | RejectRequest``. A script is an iterable
of steps, sent in order as they are produced:

* an event dict, e.g. ``{"messageStart": {"role": "assistant"}}`` (shapes of botocore's
  ``ConverseStreamOutput``); build them with ``message(...)`` and the helpers below;
* ``Pause(seconds)``: wait before the next step;
* ``RaiseInStream(exception_type, message)``: an exception message, after which the stream
  ends; boto3 raises ``EventStreamError`` while iterating.

``RejectRequest(status, error_type, message)`` answers with an HTTP error before any stream,
so boto3 raises the modeled ``ClientError`` (and retries it when botocore deems it retryable).
``ScriptedResponder`` answers each request with the next queued script.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
