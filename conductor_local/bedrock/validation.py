"""How the local Bedrock endpoint checks a ConverseStream request, as Bedrock checks it.

The API model's constraints that botocore leaves to the service (tool names
``[a-zA-Z0-9_-]{1,64}``, tool use ids ``[a-zA-Z0-9_.:-]{1,64}``, ``maxTokens`` at least 1,
``temperature`` and ``topP`` from 0 to 1, at most 2500 ``stopSequences``, at least one tool in a
``toolConfig``, a ``cachePoint``'s ``type`` ``default`` and ``ttl`` ``5m``/``1h``,
``performanceConfig.latency`` ``standard``/``optimized``), the conversation rules (roles alternate and
start with user, every ``toolUse`` answered by a ``toolResult`` in the next message, ...), where
``cachePoint`` blocks may stand, which models take latency-optimized inference, and the input-token
estimate a context window is checked against.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock.script import RejectRequest, validation_error
from shared.adapters.brain import MAX_CACHE_POINTS, supports_prompt_cache
from shared.wire.model_rules import OTHER, rules_for

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
        if not any("cachePoint" not in block for block in content):  # a cachePoint is no content
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


_CACHE_POINT_TYPES = ("default",)
_CACHE_TTLS = ("5m", "1h")


def _enum_problems(value: Any, path: str, allowed: tuple[str, ...]) -> list[str]:
    if not isinstance(value, str) or value in allowed:
        return []  # a missing or mistyped member is botocore's to refuse
    return [_failed(f"Value '{value}' at '{path}'", f"satisfy enum value set: [{', '.join(allowed)}]")]


def _cache_point_problems(block: Any, at: str) -> list[str]:
    point = block.get("cachePoint") if isinstance(block, Mapping) else None
    if not isinstance(point, Mapping):
        return []
    problems = _enum_problems(point.get("type"), f"{at}.cachePoint.type", _CACHE_POINT_TYPES)
    return problems + _enum_problems(point.get("ttl"), f"{at}.cachePoint.ttl", _CACHE_TTLS)


def _system_problems(system: list[Any]) -> list[str]:
    return [p for s, block in enumerate(system, start=1) for p in _cache_point_problems(block, f"system.{s}.member")]


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
        problems += _cache_point_problems(tool, f"toolConfig.tools.{t}.member")
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
            problems += _cache_point_problems(block, at)
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
    system = request.get("system")
    if isinstance(system, list):
        problems += _system_problems(system)
    tool_config = request.get("toolConfig")
    if isinstance(tool_config, Mapping):
        problems += _tool_config_problems(tool_config)
    messages = request.get("messages")
    if isinstance(messages, list):
        problems += _message_problems(messages)
    performance = request.get("performanceConfig")
    if isinstance(performance, Mapping):
        problems += _enum_problems(performance.get("latency"), "performanceConfig.latency", LATENCY_MODES)
    if not problems:
        return None
    errors = "validation error" if len(problems) == 1 else "validation errors"
    return f"{len(problems)} {errors} detected: {'; '.join(problems)}"


# ---- request validation: where cachePoint blocks may stand ----------------------------------

MODEL_ERRORS = "The model returned the following errors: "
AFTER_REASONING = (
    "Cache point cannot be inserted after reasoning block. Please remove the invalid cache point and try again."
)
UNSUPPORTED_CACHE = "You invoked an unsupported model or your request did not allow prompt caching."


def _sections(request: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """(path, blocks) of every list a cachePoint may stand in, in the order Bedrock reads them:
    tools, system, then each message's content."""
    tool_config = request.get("toolConfig")
    tools = tool_config.get("tools") if isinstance(tool_config, Mapping) else None
    sections: list[tuple[str, list[Any]]] = [("tools", tools if isinstance(tools, list) else [])]
    system = request.get("system")
    sections.append(("system", system if isinstance(system, list) else []))
    messages = request.get("messages")
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        content = msg.get("content") if isinstance(msg, Mapping) else None
        sections.append((f"messages.{i}.content", content if isinstance(content, list) else []))
    return sections


def cache_point_problem(request: Mapping[str, Any]) -> str | None:
    """Why Bedrock would refuse the request's ``cachePoint`` blocks, or None.

    At most four per request (tools, system and messages together); each marks the end of the
    block before it, so it may not stand first (the endpoint's wording: Bedrock's model says the
    block's ``type`` is missing) nor after a reasoning block; a ``ttl`` ``1h`` checkpoint may not
    come after a ``5m`` one (``5m`` when omitted).
    """
    found = 0
    short_ttl_seen = False
    for path, blocks in _sections(request):
        for j, block in enumerate(blocks):
            if not isinstance(block, Mapping) or "cachePoint" not in block:
                continue
            found += 1
            before = blocks[j - 1] if j else None
            if not isinstance(before, Mapping) or "cachePoint" in before:
                return f"{MODEL_ERRORS}{path}.{j}.type: Field required"
            if "reasoningContent" in before:
                return AFTER_REASONING
            point = block["cachePoint"] if isinstance(block["cachePoint"], Mapping) else {}
            if point.get("ttl") == "1h" and short_ttl_seen:
                return (
                    f"{MODEL_ERRORS}{path}.{j - 1}.cache_control.ttl: a ttl='1h' cache_control block must not come "
                    "after a ttl='5m' cache_control block. Note that blocks are processed in the following order: "
                    "`tools`, `system`, `messages`."
                )
            short_ttl_seen = short_ttl_seen or point.get("ttl") != "1h"
    if found > MAX_CACHE_POINTS:
        limit = f"A maximum of {MAX_CACHE_POINTS} blocks with cache_control may be provided."
        return f"{MODEL_ERRORS}{limit} Found {found}."
    return None


def caches_unsupported(model_id: str) -> bool:
    """Bedrock refuses ``cachePoint`` blocks for a model without prompt caching; an ARN (an
    application inference profile, whose model the id does not tell) is given the benefit of the
    doubt."""
    return not supports_prompt_cache(model_id) and not model_id.startswith("arn:")


def unsupported_cache() -> RejectRequest:
    """``403 AccessDeniedException``: cachePoint blocks for a model without prompt caching."""
    return RejectRequest(403, "AccessDeniedException", UNSUPPORTED_CACHE)


# ---- latency-optimized inference -----------------------------------------------------------

LATENCY_MODES = ("standard", "optimized")
# Model ids (foundation or cross-region profile ids, by their foundation part) Bedrock serves with
# ``performanceConfig.latency: optimized`` (docs.aws.amazon.com/bedrock/latest/userguide/
# latency-optimized-inference.html, a preview: Claude 3.5 Haiku, Amazon Nova Pro, Llama 3.1 405B and
# 70B; no newer Claude).
LATENCY_OPTIMIZED_MODELS = re.compile(
    r"(?:^|\.|/)(?:anthropic\.claude-3-5-haiku|amazon\.nova-pro|meta\.llama3-1-(?:405|70)b)"
)
LATENCY_UNSUPPORTED = (
    "The model you selected doesn't support latency-optimized inference. Remove performanceConfig or set "
    "latency to standard, and try again."
)
"""The endpoint's words for ``optimized`` asked of a model without it: Bedrock publishes no transcript of
this refusal; the status and type (``400 ValidationException``, before any stream) are those of its
other refusals of a request a model cannot serve."""


def offers_latency_optimized(model_id: str) -> bool:
    """Whether Bedrock serves ``model_id`` latency-optimized; an ARN (whose model the id does not
    tell) is given the benefit of the doubt."""
    return model_id.startswith("arn:") or LATENCY_OPTIMIZED_MODELS.search(model_id) is not None


def latency_refusal(request: Mapping[str, Any], model_id: str) -> RejectRequest | None:
    """``400 ValidationException`` for ``performanceConfig.latency: optimized`` to a model without
    latency-optimized inference (``standard``, or no ``performanceConfig``, is served by every model)."""
    config = request.get("performanceConfig")
    if not isinstance(config, Mapping) or config.get("latency") != "optimized":
        return None
    return None if offers_latency_optimized(model_id) else validation_error(LATENCY_UNSUPPORTED)


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


DEFAULT_CONTEXT_WINDOW = OTHER.context_tokens
"""The window of a model the rules do not know (another provider, an application profile)."""


def context_window(model_id: str) -> int:
    """The input tokens a model takes (``shared.wire.model_rules``: 1M for Claude from Sonnet/Opus 4.6
    and Haiku 5.5 on, 200k for older Claude, Nova's per model, ``DEFAULT_CONTEXT_WINDOW`` else)."""
    return rules_for(model_id).context_tokens


def input_too_long() -> RejectRequest:
    """``400 ValidationException`` for a request over the context window (not retried)."""
    return validation_error(INPUT_TOO_LONG)
