"""How the local Bedrock endpoint answers as each model family does (``shared.wire.model_rules``).

Before the stream, a request is refused with Bedrock's ``400 ValidationException`` and its words
where the model would refuse it: a sampling parameter (``temperature``, ``topP``, ``top_k``) for
the Claude models from Opus 4.7 on; a ``thinking.type`` the model does not take (``disabled`` for a
model that always thinks, ``between_tools`` instead of ``disabled`` on Sonnet 5.5, ``enabled`` for
an adaptive model, any thinking for a model without it); a thinking budget of at least
``maxTokens``; an effort level the model does not know, or above ``high`` while thinking is off; a
``maxTokens`` above the model's output limit.

While streaming, a model that thinks (asked to, or by default when the request says nothing)
writes a reasoning block (text deltas, then a signature) before its answer, the answer's blocks
moved one index on; Sonnet 5.5 with ``between_tools`` thinks only after a tool result. Thinking
takes ``THINK_TOKENS`` of its effort (``LOCAL_BEDROCK_THINK_TOKENS`` sets one count for every
effort), written at the endpoint's pace (``seconds_per_token``; None streams it at once). Thinking
counts against ``maxTokens`` as the answer does: a message that reaches it is cut there and ends
with ``stopReason`` ``max_tokens``. Tokens are estimated as everywhere here: characters / 4.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

from conductor_local.bedrock.script import (
    Pause,
    RejectRequest,
    Script,
    Step,
    block_stop,
    message_stop,
    validation_error,
)
from conductor_local.bedrock.validation import estimate_input_tokens
from shared.wire.model_rules import EFFORTS, ModelRules, rules_for

MODEL_ERRORS = "The model returned the following errors: "
USE_ADAPTIVE = 'Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
THINK_TOKENS: Mapping[str, int] = {"low": 150, "medium": 600, "high": 1500, "xhigh": 3000, "max": 6000}
"""Reasoning tokens an adaptive model writes before a voice answer, by effort (the fake's choice:
enough to be felt, as real adaptive thinking is at medium and above)."""
THINK_TOKENS_ENV = "LOCAL_BEDROCK_THINK_TOKENS"
CHARS_PER_TOKEN = 4
REASONING_WORDS = "Let me think about what the user asked and how to answer it briefly, out loud. "
SIGNATURE = "local-bedrock-reasoning-signature"


def model_refusal(model_id: str, request: Mapping[str, Any]) -> RejectRequest | None:
    """How Bedrock refuses ``request`` for this model before streaming, or None."""
    rules = rules_for(model_id)
    problem = _sampling_problem(rules, request) or _thinking_problem(rules, request) or _tokens_problem(rules, request)
    return None if problem is None else validation_error(problem)


def _inference(request: Mapping[str, Any]) -> Mapping[str, Any]:
    config = request.get("inferenceConfig")
    return config if isinstance(config, Mapping) else {}


def _additional(request: Mapping[str, Any]) -> Mapping[str, Any]:
    fields = request.get("additionalModelRequestFields")
    return fields if isinstance(fields, Mapping) else {}


def _thinking_type(request: Mapping[str, Any]) -> str | None:
    thinking = _additional(request).get("thinking")
    return thinking.get("type") if isinstance(thinking, Mapping) else None


def _effort(request: Mapping[str, Any]) -> str | None:
    output = request.get("outputConfig")
    return output.get("effort") if isinstance(output, Mapping) else None


def _sampling_problem(rules: ModelRules, request: Mapping[str, Any]) -> str | None:
    sent = [("temperature", _inference(request).get("temperature")), ("top_p", _inference(request).get("topP"))]
    sent += [(name, _additional(request).get(name)) for name in ("temperature", "top_p", "top_k")]
    given = [name for name, value in sent if value is not None]
    if given and not rules.sampling:
        return f"{MODEL_ERRORS}`{given[0]}` is deprecated for this model."
    if "temperature" in given and _thinking_type(request) in ("enabled", "adaptive"):
        temperature = _inference(request).get("temperature", _additional(request).get("temperature"))
        if temperature != 1:
            return f"{MODEL_ERRORS}`temperature` may only be set to 1 when thinking is enabled or in adaptive mode."
    return None


def _thinking_problem(rules: ModelRules, request: Mapping[str, Any]) -> str | None:
    kind = _thinking_type(request)
    effort = _effort(request)
    if kind is not None and rules.thinking == "none":
        return f"{MODEL_ERRORS}thinking: Extra inputs are not permitted"
    if kind == "enabled":
        if rules.thinking != "budget":
            return f'{MODEL_ERRORS}"thinking.type.enabled" is not supported for this model. {USE_ADAPTIVE}'
        budget = _additional(request)["thinking"].get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return f"{MODEL_ERRORS}thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= _inference(request).get("maxTokens", 0):
            return f"{MODEL_ERRORS}`max_tokens` must be greater than `thinking.budget_tokens`."
    elif kind == "adaptive" and rules.thinking != "adaptive":
        return f'{MODEL_ERRORS}"thinking.type.adaptive" is not supported for this model.'
    elif kind in ("disabled", "between_tools") and kind != rules.off and rules.thinking != "budget":
        if kind == "disabled" and rules.off == "between_tools":
            return (
                f'{MODEL_ERRORS}To turn thinking off on this model, send "thinking": {{"type": "between_tools"}} '
                'instead of {"type": "disabled"}.'
            )
        return f'{MODEL_ERRORS}"thinking.type.{kind}" is not supported for this model. {USE_ADAPTIVE}'
    elif kind is not None and kind not in ("enabled", "adaptive", "disabled", "between_tools"):
        expected = "does not match any of the expected tags: 'enabled', 'adaptive', 'disabled'"
        return f"{MODEL_ERRORS}thinking: Input tag '{kind}' found using 'type' {expected}"
    if effort is not None:
        if effort not in rules.efforts:
            if not rules.efforts:
                return f"{MODEL_ERRORS}output_config.effort: This model does not support the effort parameter."
            return f"{MODEL_ERRORS}output_config.effort: Input should be {', '.join(repr(e) for e in rules.efforts)}"
        cap = rules.off_effort_cap
        if kind in ("disabled", "between_tools") and cap is not None and EFFORTS.index(effort) > EFFORTS.index(cap):
            return (
                f"{MODEL_ERRORS}output_config.effort '{effort}' is not supported when thinking is disabled on this "
                f"model. Use effort '{cap}' or below."
            )
    return None


def _tokens_problem(rules: ModelRules, request: Mapping[str, Any]) -> str | None:
    max_tokens = _inference(request).get("maxTokens")
    if isinstance(max_tokens, int) and max_tokens > rules.max_output_tokens:
        limit = rules.max_output_tokens
        return (
            f"The maximum tokens you requested exceeds the model limit of {limit}. Try again with a maximum "
            f"tokens value that is lower than {limit}."
        )
    return None


# ---- the answer ----------------------------------------------------------------------------------


def think_tokens(model_id: str, request: Mapping[str, Any]) -> int:
    """How many reasoning tokens the model writes before this answer (0: it does not think)."""
    rules = rules_for(model_id)
    kind = _thinking_type(request)
    after_tool = _after_tool_result(request)
    if rules.thinking == "none" or kind == "disabled":
        return 0
    if kind == "between_tools" or (kind is None and not rules.thinks_by_default):
        return _think_count(rules, request) if after_tool and kind == "between_tools" else 0
    if kind == "enabled":
        budget = _additional(request)["thinking"].get("budget_tokens", 1024)
        return min(_think_count(rules, request), int(budget))
    return _think_count(rules, request)


def _think_count(rules: ModelRules, request: Mapping[str, Any]) -> int:
    fixed = os.environ.get(THINK_TOKENS_ENV)
    if fixed:
        return max(0, int(fixed))
    effort = _effort(request) or rules.default_effort or "low"
    return THINK_TOKENS.get(effort, THINK_TOKENS["low"])


def _after_tool_result(request: Mapping[str, Any]) -> bool:
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    return any("toolResult" in block for block in last.get("content") or [] if isinstance(block, Mapping))


def as_the_model(
    script: Script, model_id: str, request: Mapping[str, Any], *, seconds_per_token: float | None = None
) -> Iterator[Step]:
    """``script`` as the model streams it: its reasoning first when it thinks, everything cut at
    ``maxTokens``."""
    reasoning = think_tokens(model_id, request)
    steps: Iterator[Step] = iter(script)
    if reasoning and not _has_reasoning(script):
        steps = _reasoning_first(steps, reasoning, seconds_per_token)
    max_tokens = _inference(request).get("maxTokens")
    if not isinstance(max_tokens, int):
        return steps
    return _cut_at(steps, max_tokens, estimate_input_tokens(request))


def _has_reasoning(script: Script) -> bool:
    if not isinstance(script, list):
        return False  # a generator is not read twice; a scripted reasoning block stays as written
    return any(
        isinstance(step, Mapping) and "reasoningContent" in str(step.get("contentBlockDelta", "")) for step in script
    )


def _reasoning_first(steps: Iterator[Step], tokens: int, seconds_per_token: float | None) -> Iterator[Step]:
    """The reasoning block at index 0 (right after messageStart), every later block one index on."""
    started = False
    for step in steps:
        if not started and isinstance(step, Mapping) and "messageStart" in step:
            yield step
            yield from _reasoning_block(tokens, seconds_per_token)
            started = True
            continue
        if not started and not isinstance(step, Pause):
            yield from _reasoning_block(tokens, seconds_per_token)
            started = True
        if isinstance(step, Mapping) and "metadata" in step:
            step = _counted(step, tokens)
        yield _shifted(step) if started else step


def _reasoning_block(tokens: int, seconds_per_token: float | None) -> Iterator[Step]:
    words = REASONING_WORDS * math.ceil(tokens * CHARS_PER_TOKEN / len(REASONING_WORDS))
    text = words[: tokens * CHARS_PER_TOKEN]
    piece = 12 * CHARS_PER_TOKEN  # a delta of about a dozen tokens
    for start in range(0, len(text), piece):
        chunk = text[start : start + piece]
        if seconds_per_token:
            yield Pause(len(chunk) / CHARS_PER_TOKEN * seconds_per_token)
        yield {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": chunk}}}}
    yield {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": SIGNATURE}}}}
    yield block_stop(0)


def _shifted(step: Step) -> Step:
    if not isinstance(step, Mapping):
        return step
    for key in ("contentBlockStart", "contentBlockDelta", "contentBlockStop"):
        if key in step and isinstance(step[key], Mapping) and "contentBlockIndex" in step[key]:
            body = dict(step[key])
            body["contentBlockIndex"] = body["contentBlockIndex"] + 1
            return {**step, key: body}
    return step


def _cut_at(steps: Iterator[Step], max_tokens: int, input_tokens: int) -> Iterator[Step]:
    """The steps until the output reaches ``max_tokens``; there the block in progress stops and the
    message ends with ``max_tokens`` (its metadata counting every output token)."""
    budget_chars = max_tokens * CHARS_PER_TOKEN
    written = 0
    for step in steps:
        delta = step.get("contentBlockDelta") if isinstance(step, Mapping) else None
        if delta is not None:
            body = delta.get("delta", {})
            piece, key = _delta_text(body)
            if piece is not None and written + len(piece) > budget_chars:
                room = budget_chars - written
                if room > 0:
                    yield {"contentBlockDelta": {**delta, "delta": _with_text(body, key, piece[:room])}}
                yield block_stop(delta.get("contentBlockIndex", 0))
                yield message_stop("max_tokens")
                yield _metadata(input_tokens, max_tokens)
                return
            written += len(piece or "")
        yield step


def _delta_text(body: Mapping[str, Any]) -> tuple[str | None, str]:
    if "text" in body:
        return str(body["text"]), "text"
    if "toolUse" in body:
        return str(body["toolUse"].get("input", "")), "toolUse"
    if "reasoningContent" in body and "text" in body["reasoningContent"]:
        return str(body["reasoningContent"]["text"]), "reasoningContent"
    return None, ""


def _with_text(body: Mapping[str, Any], key: str, text: str) -> dict[str, Any]:
    if key == "text":
        return {"text": text}
    if key == "toolUse":
        return {"toolUse": {"input": text}}
    return {"reasoningContent": {"text": text}}


def _metadata(input_tokens: int, output_tokens: int) -> Step:
    usage = {"inputTokens": input_tokens, "outputTokens": output_tokens, "totalTokens": input_tokens + output_tokens}
    return {"metadata": {"usage": usage, "metrics": {"latencyMs": 250}}}


def _counted(step: Mapping[str, Any], reasoning_tokens: int) -> Step:
    """The metadata event counting the reasoning among the output tokens, as Bedrock bills it."""
    meta = dict(step["metadata"])
    usage = dict(meta.get("usage") or {})
    for key in ("outputTokens", "totalTokens"):
        if isinstance(usage.get(key), int):
            usage[key] += reasoning_tokens
    meta["usage"] = usage
    return {"metadata": meta}
