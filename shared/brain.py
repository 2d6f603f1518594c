"""Bedrock adapter: ConverseStream request → the core's stream items.

Errors before the stream (modeled exceptions, after botocore's retries) and during it
(``EventStreamError``: modelStreamErrorException, throttlingException, ...) become ``BrainError``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.exceptions import ReadTimeoutError as BotocoreReadTimeout
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeout

from shared.core.messages import Message
from shared.core.model_output import (
    MessageEnd,
    ReasoningBlock,
    StreamItem,
    TextDelta,
    ToolUseRequest,
    ToolUseStarted,
    parse_tool_input,
)

_STALLS = (BotocoreReadTimeout, Urllib3ReadTimeout)  # no byte from the model within the read timeout
SERVER_TOOL_USE = "server_tool_use"  # ToolUseBlockStart.type of a tool Bedrock runs itself
INCOMPLETE_STREAM = "IncompleteStream"
# Bedrock refuses a request that does not fit the model's context window with this message.
INPUT_TOO_LONG = "input is too long"


class BrainError(Exception):
    """The model could not answer; ``during_stream`` tells whether output had started."""

    def __init__(self, code: str, message: str, *, during_stream: bool, stalled: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.during_stream = during_stream
        self.stalled = stalled  # no byte from the model within the read timeout

    @property
    def input_too_long(self) -> bool:
        """The request did not fit the model's context window (nothing was generated)."""
        return not self.during_stream and self.code == "ValidationException" and INPUT_TOO_LONG in self.message.lower()


def bedrock_client_config(connect_timeout: float, read_timeout: float, max_attempts: int) -> Config:
    """The read timeout bounds a stalled stream (no byte for that long); standard retries back
    off on throttling before the stream."""
    return Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        tcp_keepalive=True,
    )


class BedrockBrain:
    def __init__(
        self,
        client: Any,
        *,
        model_id: str,
        system_prompt: str,
        tool_spec: dict[str, Any],
        max_tokens: int,
        temperature: float,
    ) -> None:
        self._client = client
        self._model_id = model_id
        self._system = [{"text": system_prompt}]
        self._tools = {"tools": [tool_spec]}
        self._inference = {"maxTokens": max_tokens, "temperature": temperature}

    def stream(self, messages: list[Message]) -> Iterator[StreamItem]:
        try:
            response = self._client.converse_stream(
                modelId=self._model_id,
                messages=wire_messages(messages),
                system=self._system,
                toolConfig=self._tools,
                inferenceConfig=self._inference,
            )
        except ClientError as error:
            raise BrainError(
                error.response["Error"].get("Code", "ClientError"),
                error.response["Error"].get("Message", str(error)),
                during_stream=False,
            ) from error
        except BotoCoreError as error:
            stalled = isinstance(error, _STALLS)
            raise BrainError(type(error).__name__, str(error), during_stream=False, stalled=stalled) from error
        events = response["stream"]
        try:
            yield from _translate(events)
        except ClientError as error:  # EventStreamError is a ClientError
            raise BrainError(
                error.response["Error"].get("Code", "StreamError"),
                error.response["Error"].get("Message", str(error)),
                during_stream=True,
            ) from error
        except (BotoCoreError, Urllib3Error, OSError) as error:
            # botocore reads the event stream straight from urllib3: a stall surfaces as
            # urllib3's ReadTimeoutError, a dropped connection as its ProtocolError.
            stalled = isinstance(error, _STALLS)
            raise BrainError(type(error).__name__, str(error), during_stream=True, stalled=stalled) from error
        finally:
            events.close()


def _translate(events: Any) -> Iterator[StreamItem]:
    """ConverseStream events → stream items.

    Only client tool uses become tool calls: a ``server_tool_use`` block (a tool Bedrock runs
    itself) and its result are skipped, as are citation deltas. Reasoning is never speech; it
    becomes a ``ReasoningBlock`` kept in the message. A stream that ends without ``messageStop``
    was cut short: an error, not a reply.
    """
    tool: dict[str, Any] | None = None
    skipped_blocks: set[int] = set()
    reasoning: dict[int, dict[str, Any]] = {}
    stop_reason: str | None = None
    usage: dict[str, int] = {}
    for event in events:
        if "contentBlockStart" in event:
            block = event["contentBlockStart"]
            start = block.get("start", {})
            use = start.get("toolUse")
            if use is not None and use.get("type") != SERVER_TOOL_USE:
                tool = {"id": use["toolUseId"], "name": use["name"], "input": []}
                yield ToolUseStarted(tool_use_id=tool["id"], name=tool["name"])
            else:
                skipped_blocks.add(block.get("contentBlockIndex", -1))
        elif "contentBlockDelta" in event:
            block = event["contentBlockDelta"]
            if block.get("contentBlockIndex", -1) in skipped_blocks:
                continue
            delta = block["delta"]
            if "reasoningContent" in delta:
                _add_reasoning(reasoning.setdefault(block.get("contentBlockIndex", -1), {}), delta["reasoningContent"])
            elif delta.get("text"):
                yield TextDelta(delta["text"])
            elif "toolUse" in delta and tool is not None:
                tool["input"].append(delta["toolUse"].get("input", ""))
        elif "contentBlockStop" in event:
            index = event["contentBlockStop"].get("contentBlockIndex", -1)
            if index in reasoning:
                yield _reasoning_block(reasoning.pop(index))
            elif tool is not None and index not in skipped_blocks:
                raw = "".join(tool["input"])
                yield ToolUseRequest(tool_use_id=tool["id"], name=tool["name"], input=parse_tool_input(raw))
                tool = None
        elif "messageStop" in event:
            stop_reason = event["messageStop"].get("stopReason", "")
        elif "metadata" in event:
            usage = {k: int(v) for k, v in event["metadata"].get("usage", {}).items() if isinstance(v, int)}
    if stop_reason is None:
        raise BrainError(INCOMPLETE_STREAM, "the model stream ended without messageStop", during_stream=True)
    yield MessageEnd(stop_reason=stop_reason, usage=usage)


def _add_reasoning(block: dict[str, Any], delta: dict[str, Any]) -> None:
    if "text" in delta:
        block.setdefault("text", []).append(delta["text"])
    if "signature" in delta:
        block["signature"] = delta["signature"]
    if "redactedContent" in delta:
        block.setdefault("redacted", []).append(bytes(delta["redactedContent"]))


def _reasoning_block(block: dict[str, Any]) -> ReasoningBlock:
    redacted = block.get("redacted")
    return ReasoningBlock(
        text="".join(block.get("text", [])),
        signature=block.get("signature"),
        redacted=base64.b64encode(b"".join(redacted)).decode("ascii") if redacted else None,
    )


def wire_messages(messages: list[Message]) -> list[Message]:
    """The stored history as ConverseStream takes it: redacted reasoning back to bytes."""
    if not any("reasoningContent" in block for message in messages for block in message["content"]):
        return messages
    wired = []
    for message in messages:
        content = []
        for block in message["content"]:
            redacted = block.get("reasoningContent", {}).get("redactedContent")
            if isinstance(redacted, str):
                block = {"reasoningContent": {"redactedContent": base64.b64decode(redacted)}}
            content.append(block)
        wired.append({**message, "content": content})
    return wired
