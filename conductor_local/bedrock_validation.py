"""How the local Bedrock endpoint checks a ConverseStream request, as Bedrock checks it.

The API model's constraints that botocore leaves to the service (tool names
``[a-zA-Z0-9_-]{1,64}``, tool use ids ``[a-zA-Z0-9_.:-]{1,64}``, ``maxTokens`` at least 1,
``temperature`` and ``topP`` from 0 to 1, at most 2500 ``stopSequences``, at least one tool in a
``toolConfig``), the conversation rules (roles alternate and start with user, every ``toolUse``
answered by a ``toolResult`` in the next message, ...), and the input-token estimate a context
window is checked against.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock_script import RejectRequest, validation_error

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
