"""Bedrock adapter: ConverseStream request → the core's stream items.

Errors before the stream (modeled exceptions, after botocore's retries) and during it
(``EventStreamError``: modelStreamErrorException, throttlingException, ...) become ``BrainError``.
"""

from __future__ import annotations

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
    StreamItem,
    TextDelta,
    ToolUseRequest,
    ToolUseStarted,
    parse_tool_input,
)

_STALLS = (BotocoreReadTimeout, Urllib3ReadTimeout)  # no byte from the model within the read timeout


class BrainError(Exception):
    """The model could not answer; ``during_stream`` tells whether output had started."""

    def __init__(self, code: str, message: str, *, during_stream: bool, stalled: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.during_stream = during_stream
        self.stalled = stalled  # no byte from the model within the read timeout


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
                messages=messages,
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
    tool: dict[str, Any] | None = None
    stop_reason = ""
    usage: dict[str, int] = {}
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"].get("start", {})
            if "toolUse" in start:
                tool = {"id": start["toolUse"]["toolUseId"], "name": start["toolUse"]["name"], "input": []}
                yield ToolUseStarted(tool_use_id=tool["id"], name=tool["name"])
        elif "contentBlockDelta" in event:
            delta = event["contentBlockDelta"]["delta"]
            if delta.get("text"):
                yield TextDelta(delta["text"])
            elif "toolUse" in delta and tool is not None:
                tool["input"].append(delta["toolUse"].get("input", ""))
        elif "contentBlockStop" in event:
            if tool is not None:
                raw = "".join(tool["input"])
                yield ToolUseRequest(tool_use_id=tool["id"], name=tool["name"], input=parse_tool_input(raw))
                tool = None
        elif "messageStop" in event:
            stop_reason = event["messageStop"].get("stopReason", "")
        elif "metadata" in event:
            usage = {k: int(v) for k, v in event["metadata"].get("usage", {}).items() if isinstance(v, int)}
    yield MessageEnd(stop_reason=stop_reason, usage=usage)
