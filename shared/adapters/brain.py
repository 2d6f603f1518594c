"""Bedrock adapter: ConverseStream request → the core's stream items.

Errors before the stream (modeled exceptions, after botocore's retries) and during it
(``EventStreamError``: modelStreamErrorException, throttlingException, ...) become ``BrainError``.

What a request may carry depends on the model (``shared.wire.model_rules``): no sampling parameter for
the models that refuse them, their thinking and effort fields, ``maxTokens`` with room for thinking.

Prompt caching (``prompt_cache=True``): Bedrock reads a prompt in the order tools, system,
messages, and caches the prefix up to each ``cachePoint`` block (at most four per request; a
prefix under the model's minimum, e.g. 1,024 tokens for Claude Sonnet, is simply not cached; an
entry lives 5 minutes after its last use). The request carries up to three: after the tool (not
for Amazon Nova, which does not cache tools), after the system prompt, and at the end of the
message before the newest one: the history the next request sends again, so that request reads it
from the cache and writes only what is new.

``summarize`` is a separate non-streaming ``Converse`` call (no tools, least effort) that writes
the rolling summary of the turns leaving the history window (``shared.core.memory``); a request
given that summary carries it in its system prompt (``with_summary``).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.exceptions import ReadTimeoutError as BotocoreReadTimeout
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeout

from shared.core.memory import with_summary
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
from shared.core.wrapper import ClientTool, wrapper_tool_spec
from shared.wire.model_rules import Inference, ModelRules, request_fields, rules_for

_STALLS = (BotocoreReadTimeout, Urllib3ReadTimeout)  # no byte from the model within the read timeout
SERVER_TOOL_USE = "server_tool_use"  # ToolUseBlockStart.type of a tool Bedrock runs itself
INCOMPLETE_STREAM = "IncompleteStream"
# How Bedrock words its refusal of a request that does not fit the model's context window (a 400
# ValidationException before any output), lower-cased: its own check ("Input is too long for
# requested model."), Anthropic's ("The model returned the following errors: prompt is too long:
# 200049 tokens > 200000 maximum", "input length and `max_tokens` exceed context limit: …") and the
# byte limit on a request's text ("too many total text bytes").
CONTEXT_OVERFLOW_PHRASES = (
    "input is too long",
    "prompt is too long",
    "exceed context limit",
    "too many total text bytes",
)


CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
DECLARED_BLOCKS_KEPT = 64  # tool blocks of declared tools a warm runner keeps, one per distinct declaration
MAX_CACHE_POINTS = 4  # per request, tools + system + messages
# The usage members of the stream's metadata event kept in the message's usage.
USAGE_KEYS = ("inputTokens", "outputTokens", "totalTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
# One request later the history is at least this much longer: the reply and the next user message.
NEXT_REQUEST_GROWTH = 2


def supports_prompt_cache(model_id: str) -> bool:
    """Whether Bedrock caches prompts of this model (``cachePoint`` blocks): every Claude from 3.5
    Haiku and 3.7 Sonnet on, and Amazon Nova, directly or through an inference profile. Older
    Claude models and other providers refuse ``cachePoint`` blocks (``AccessDeniedException``), as
    do ids the rules cannot read (application inference profiles): set ``prompt_cache`` to ``on``
    for those."""
    return rules_for(model_id).cache_min_tokens is not None


def prompt_cache_enabled(setting: str, model_id: str) -> bool:
    """The ``prompt_cache`` setting for this model: ``on``, ``off``, or ``auto`` (on when the
    model supports it)."""
    if setting == "on":
        return True
    if setting == "off":
        return False
    if setting == "auto":
        return supports_prompt_cache(model_id)
    raise ValueError(f"prompt_cache must be 'auto', 'on' or 'off', not {setting!r}")


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
        if self.during_stream or self.code != "ValidationException":
            return False
        message = self.message.lower()
        return any(phrase in message for phrase in CONTEXT_OVERFLOW_PHRASES)


def bedrock_client_config(connect_timeout: float, read_timeout: float, max_attempts: int) -> Config:
    """The read timeout bounds a stalled stream (no byte for that long); standard retries back
    off on throttling before the stream."""
    return Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        tcp_keepalive=True,
    )


SERVICE_EVENT_NAME = "bedrock-runtime"
"""How botocore names the Bedrock runtime in its events (the service id, hyphenized)."""


class BedrockBrain:
    def __init__(
        self,
        client: Any,
        *,
        model_id: str,
        system_prompt: str,
        tool_spec: dict[str, Any],
        inference: Inference,
        prompt_cache: bool = False,
        history_window: int | None = None,
    ) -> None:
        """``inference``: the answer's token budget, effort, thinking and temperature, sent as the
        model's rules allow (``shared.wire.model_rules``). ``history_window``: the most messages a
        request carries (the store's window). The history checkpoint is left out when the next
        request, two messages longer, would no longer start with the same message: its prefix
        would never be read back."""
        self._client = client
        self._model_id = model_id
        self.rules: ModelRules = rules_for(model_id)
        self._request_fields = request_fields(self.rules, inference)
        self._prompt_cache = prompt_cache
        self._history_window = history_window
        self._system_prompt = system_prompt
        self._tools: dict[str, Any] = {"tools": [tool_spec]}
        self._declared: dict[str, dict[str, Any]] = {}  # tool blocks of declared tools, by content
        if prompt_cache and self.rules.caches_tools:
            self._tools = {"tools": [tool_spec, CACHE_POINT]}
        self._sending = threading.local()  # the calling thread's ``on_sent`` (boto3 calls run in it)
        client.meta.events.register(f"before-send.{SERVICE_EVENT_NAME}.ConverseStream", self._request_going_out)

    def _request_going_out(self, **_: Any) -> None:
        """botocore is about to send a ConverseStream request: tell the caller (once)."""
        on_sent = getattr(self._sending, "on_sent", None)
        if on_sent is not None:
            self._sending.on_sent = None
            on_sent()

    def tool_config(self, tools: Sequence[ClientTool] | None) -> dict[str, Any]:
        """The wrapper tool over the session's declared tools (None: the configured catalog). The
        same tools give the same block, so the prompt cache keeps reading it within a session."""
        if tools is None:
            return self._tools
        key = json.dumps([tool.model_dump() for tool in tools], sort_keys=True, separators=(",", ":"))
        block = self._declared.get(key)
        if block is None:
            spec = wrapper_tool_spec(list(tools))
            block = (
                {"tools": [spec, CACHE_POINT]} if self._prompt_cache and self.rules.caches_tools else {"tools": [spec]}
            )
            if len(self._declared) >= DECLARED_BLOCKS_KEPT:
                self._declared.pop(next(iter(self._declared)))
            self._declared[key] = block
        return block

    def request(
        self,
        messages: list[Message],
        *,
        summary: str | None = None,
        tools: Sequence[ClientTool] | None = None,
        context: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The ConverseStream parameters for this history window; ``summary`` (of the turns before
        it) joins the system prompt; ``tools``: the session's declared tools (None: the catalog);
        ``context``: text blocks added to the newest message only, after every cached prefix
        (``shared.core.workspace_context``)."""
        wired = wire_messages(messages)
        if context and wired:
            newest = wired[-1]
            wired = [*wired[:-1], {**newest, "content": [*newest["content"], *({"text": text} for text in context)]}]
        if self._prompt_cache:
            wired = self._with_history_checkpoint(wired)
        system: list[dict[str, Any]] = [{"text": with_summary(self._system_prompt, summary)}]
        if self._prompt_cache:
            system.append(CACHE_POINT)
        return {
            "modelId": self._model_id,
            "messages": wired,
            "system": system,
            "toolConfig": self.tool_config(tools),
            **self._request_fields,
        }

    def _with_history_checkpoint(self, messages: list[Message]) -> list[Message]:
        """A cachePoint at the end of the message before the newest one, where the next request
        will still carry the same prefix. Never after a reasoning block (Bedrock refuses that)."""
        if len(messages) < 2:
            return messages
        if self._history_window is not None and len(messages) + NEXT_REQUEST_GROWTH > self._history_window:
            return messages
        stable = messages[-2]
        content = stable["content"]
        if not content or "reasoningContent" in content[-1] or "cachePoint" in content[-1]:
            return messages
        return [*messages[:-2], {**stable, "content": [*content, CACHE_POINT]}, messages[-1]]

    def stream(
        self,
        messages: list[Message],
        *,
        summary: str | None = None,
        tools: Sequence[ClientTool] | None = None,
        on_sent: Callable[[], None] | None = None,
        context: Sequence[str] = (),
    ) -> Iterator[StreamItem]:
        """The model's answer as stream items. ``on_sent`` is called as the request goes out, so
        the caller can do its own work (a write) in the model's shadow, never ahead of it."""
        self._sending.on_sent = on_sent
        try:
            response = self._client.converse_stream(
                **self.request(messages, summary=summary, tools=tools, context=context)
            )
        except (ClientError, BotoCoreError) as error:
            raise _before_output(error) from error
        finally:
            self._sending.on_sent = None
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

    def summarize(
        self, system: str, messages: list[Message], *, model_id: str | None = None, max_tokens: int = 400
    ) -> str:
        """One non-streaming ``Converse`` call without tools, at the lowest effort and without
        thinking where the model allows that, at temperature 0 where it takes one (the same input
        gives the same summary as far as the model allows): the text of its answer (never its
        reasoning)."""
        model = model_id or self._model_id
        inference = Inference(max_tokens=max_tokens, effort="low", thinking="off", temperature=0)
        try:
            response = self._client.converse(
                modelId=model,
                messages=wire_messages(messages),
                system=[{"text": system}],
                **request_fields(rules_for(model), inference),
            )
        except (ClientError, BotoCoreError) as error:
            raise _before_output(error) from error
        content = response.get("output", {}).get("message", {}).get("content") or []
        return "".join(block["text"] for block in content if "text" in block).strip()


def _before_output(error: ClientError | BotoCoreError) -> BrainError:
    """A request Bedrock refused, or that failed before any output (after botocore's retries)."""
    if isinstance(error, ClientError):
        return BrainError(
            error.response["Error"].get("Code", "ClientError"),
            error.response["Error"].get("Message", str(error)),
            during_stream=False,
        )
    return BrainError(type(error).__name__, str(error), during_stream=False, stalled=isinstance(error, _STALLS))


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
            usage = _usage(event["metadata"].get("usage", {}))
    if stop_reason is None:
        raise BrainError(INCOMPLETE_STREAM, "the model stream ended without messageStop", during_stream=True)
    yield MessageEnd(stop_reason=stop_reason, usage=usage)


def _usage(reported: dict[str, Any]) -> dict[str, int]:
    """Token counts of the metadata event; the cache members only when Bedrock reports them
    (a request with cachePoint blocks)."""
    return {key: int(reported[key]) for key in USAGE_KEYS if isinstance(reported.get(key), int)}


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
