"""Bedrock Converse message shapes and the rules a history must keep for Bedrock to accept it."""

from __future__ import annotations

from typing import Any, Literal

Role = Literal["user", "assistant"]
Block = dict[str, Any]
Message = dict[str, Any]

INTERRUPTED_MARKER = "[interrupted by the user]"
ERROR_MARKER = "[cut off by an error]"


def text_block(text: str) -> Block:
    return {"text": text}


def tool_result_block(tool_use_id: str, text: str, *, error: bool) -> Block:
    """A Bedrock toolResult; the app's result string travels as text, verbatim."""
    return {
        "toolResult": {
            "toolUseId": tool_use_id,
            "content": [{"text": text if text else "(empty)"}],
            "status": "error" if error else "success",
        }
    }


def tool_use_block(tool_use_id: str, name: str, tool_input: dict[str, Any]) -> Block:
    return {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": tool_input}}


def reasoning_block(text: str, signature: str | None, redacted: str | None = None) -> Block:
    """A Bedrock reasoningContent block as stored: redacted content as base64 text (the brain
    turns it back into bytes when it sends the history)."""
    if redacted is not None:
        return {"reasoningContent": {"redactedContent": redacted}}
    reasoning: dict[str, str] = {"text": text}
    if signature is not None:
        reasoning["signature"] = signature
    return {"reasoningContent": {"reasoningText": reasoning}}


def tool_use_ids(content: list[Block]) -> list[str]:
    return [block["toolUse"]["toolUseId"] for block in content if "toolUse" in block]


def tool_result_ids(content: list[Block]) -> list[str]:
    return [block["toolResult"]["toolUseId"] for block in content if "toolResult" in block]


def is_plain_user_message(message: Message) -> bool:
    """A user message that answers no tool use: a safe first message of a history window."""
    return message["role"] == "user" and not tool_result_ids(message["content"])


def history_problems(messages: list[Message]) -> list[str]:
    """Why Bedrock would reject this history (empty list = valid).

    Rules: starts with a user message; roles alternate; no empty content or blank text; every
    toolUse of an assistant message is answered by a toolResult in the next (user) message, and
    every toolResult answers a toolUse of the message right before it.
    """
    problems: list[str] = []
    if not messages:
        return problems
    if messages[0]["role"] != "user":
        problems.append("history does not start with a user message")
    if messages[0]["role"] == "user" and tool_result_ids(messages[0]["content"]):
        problems.append("history starts with tool results whose tool uses are not in it")
    for index, message in enumerate(messages):
        content = message.get("content") or []
        if message["role"] not in ("user", "assistant"):
            problems.append(f"message {index} has role {message['role']!r}")
        if not content:
            problems.append(f"message {index} has no content")
        for block in content:
            if "text" in block and not block["text"].strip():
                problems.append(f"message {index} has a blank text block")
        if index and messages[index - 1]["role"] == message["role"]:
            problems.append(f"messages {index - 1} and {index} are both {message['role']}")
        wanted = tool_use_ids(messages[index - 1]["content"]) if index else []
        got = tool_result_ids(content)
        if message["role"] == "user" and sorted(wanted) != sorted(got):
            problems.append(f"message {index} answers tool uses {got}, expected {wanted}")
        if message["role"] == "assistant" and tool_result_ids(content):
            problems.append(f"assistant message {index} carries tool results")
        if message["role"] == "user" and tool_use_ids(content):
            problems.append(f"user message {index} carries tool uses")
    last = messages[-1]
    if last["role"] == "assistant" and tool_use_ids(last["content"]):
        problems.append("the last message has tool uses with no results")
    return problems


def window_start(messages: list[Message]) -> int:
    """Index of the first plain user message: where a trimmed history window may begin."""
    for index, message in enumerate(messages):
        if is_plain_user_message(message):
            return index
    return len(messages)


def fit_window(messages: list[Message], window: int) -> list[Message] | None:
    """The last ``window`` messages, starting at a plain user message; None when they hold none
    (the store then reaches further back)."""
    recent = messages[-window:]
    start = window_start(recent)
    return recent[start:] if start < len(recent) else None


def shrink_window(messages: list[Message]) -> list[Message] | None:
    """A shorter history window for a request that did not fit the model's context.

    About the newer half, starting at a plain user message so no tool result loses its tool use;
    None when the window is already down to its last user message.
    """
    starts = [index for index, message in enumerate(messages) if index and is_plain_user_message(message)]
    if not starts:
        return None
    later = [index for index in starts if index >= len(messages) // 2]
    return messages[later[0] if later else starts[-1] :]


def cap_tool_result(text: str, limit: int) -> str:
    """What the model sees of a tool result: at most ``limit`` characters, cut visibly."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: the result has {len(text):,} characters; only the first {limit:,} are shown]"
