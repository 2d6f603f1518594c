"""The local Bedrock endpoint's non-streaming ``Converse``: a script's stream assembled into one
answer (output message, stop reason, usage, metrics), its in-stream errors as the HTTP errors
Converse answers with."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

from conductor_local.bedrock.script import Event, RaiseInStream, RejectRequest

_CONVERSE_ERRORS = {
    "modelStreamErrorException": (424, "ModelErrorException"),
    "throttlingException": (429, "ThrottlingException"),
    "internalServerException": (500, "InternalServerException"),
    "validationException": (400, "ValidationException"),
    "serviceUnavailableException": (503, "ServiceUnavailableException"),
}
INCOMPLETE_ANSWER = "The model's answer ended before it was complete."


def _tool_input(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw  # a scripted malformed input is passed on as it is


def _assembled_block(block: dict[str, Any]) -> dict[str, Any]:
    if "toolUse" in block:
        use = block["toolUse"]
        return {"toolUse": {**use, "input": _tool_input("".join(block["input"]))}}
    if "reasoning" in block:
        reasoning = block["reasoning"]
        if reasoning.get("redacted"):
            redacted = b"".join(base64.b64decode(part) for part in reasoning["redacted"])
            return {"reasoningContent": {"redactedContent": base64.b64encode(redacted).decode("ascii")}}
        text: dict[str, Any] = {"text": "".join(reasoning.get("text", []))}
        if "signature" in reasoning:
            text["signature"] = reasoning["signature"]
        return {"reasoningContent": {"reasoningText": text}}
    return {"text": "".join(block.get("text", []))}


def _add_delta(block: dict[str, Any], delta: Mapping[str, Any]) -> None:
    if "text" in delta:
        block.setdefault("text", []).append(str(delta["text"]))
    elif "toolUse" in delta:
        block.setdefault("input", []).append(str(delta["toolUse"].get("input", "")))
    elif "reasoningContent" in delta:
        reasoning = block.setdefault("reasoning", {})
        part = delta["reasoningContent"]
        if "text" in part:
            reasoning.setdefault("text", []).append(str(part["text"]))
        if "signature" in part:
            reasoning["signature"] = part["signature"]
        if "redactedContent" in part:
            reasoning.setdefault("redacted", []).append(part["redactedContent"])


def converse_answer(steps: Iterator[Event | RaiseInStream], input_tokens: int) -> dict[str, Any] | RejectRequest:
    """The ``Converse`` response a ConverseStream script stands for, or the error it ends with.

    Blocks in index order; usage and metrics from the metadata event, else estimated
    (``input_tokens``, one output token per delta)."""
    blocks: dict[int, dict[str, Any]] = {}
    deltas = 0
    stop_reason: str | None = None
    meta: Mapping[str, Any] = {}
    for step in steps:
        if isinstance(step, RaiseInStream):
            status, error_type = _CONVERSE_ERRORS.get(step.exception_type, (500, "InternalServerException"))
            return RejectRequest(status, error_type, step.message)
        if "contentBlockStart" in step:
            start = step["contentBlockStart"]
            use = start.get("start", {}).get("toolUse")
            if use is not None:
                blocks[start.get("contentBlockIndex", 0)] = {"toolUse": dict(use), "input": []}
        elif "contentBlockDelta" in step:
            delta = step["contentBlockDelta"]
            _add_delta(blocks.setdefault(delta.get("contentBlockIndex", 0), {}), delta.get("delta", {}))
            deltas += 1
        elif "messageStop" in step:
            stop_reason = step["messageStop"].get("stopReason", "end_turn")
        elif "metadata" in step:
            meta = step["metadata"]
    if stop_reason is None:
        return RejectRequest(500, "InternalServerException", INCOMPLETE_ANSWER)
    usage = dict(meta.get("usage") or {})
    usage.setdefault("inputTokens", input_tokens)
    usage.setdefault("outputTokens", max(1, deltas))
    usage.setdefault("totalTokens", usage["inputTokens"] + usage["outputTokens"])
    content = [_assembled_block(blocks[index]) for index in sorted(blocks)]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": usage,
        "metrics": dict(meta.get("metrics") or {}),
    }
