"""Conversation memory: what of a long history one model request carries.

A voice session runs for dozens of turns, many with file reads and build logs. A request holds the
newest part of the history that fits a token budget: tool results older than the last round are
cut down to one line (the model has already read them and answered), and the oldest turns are
dropped whole, from a plain user message on, so no tool result ever loses its tool use. What is
dropped lives on as a short rolling summary in the system prompt, written by a separate
non-streaming model call (``summary_request``).

The window drops its oldest turns in steps (``stepped_window``): its start stays where it was as long
as the messages from there fit, then jumps forward by about half at once, and only then is the
summary rewritten. Between steps every request starts with the same tools, system prompt and
messages as the one before, so Bedrock's prompt cache reads all of it back.

Pure functions: no I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from shared.core.messages import Block, Message, is_plain_user_message

WRAPPER_TOOL = "tool_call"

# ---- sizes and the budget ---------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    input_tokens: int = 24_000  # what one request may hold (system + tools + summary + messages)
    chars_per_token: float = 4.0  # calibrated from Bedrock's usage.inputTokens of earlier requests
    elide_over_chars: int = 2_000  # tool results longer than this, older than the last round, are elided


MIN_CHARS_PER_TOKEN = 1.0
MAX_CHARS_PER_TOKEN = 8.0
# Below this many tokens a request is mostly fixed overhead (tool schema, formatting tokens the
# model adds): its ratio says little about the history's.
MIN_CALIBRATION_TOKENS = 500


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def message_chars(message: Message) -> int:
    """The size of a message as a request carries it: its compact JSON, role included."""
    return len(_compact(message)) + 1  # the comma between messages


def calibrated(chars_sent: int, input_tokens: int, previous: float = 4.0) -> float:
    """Characters per token observed on the last request (Bedrock's ``usage.inputTokens`` for what
    was sent), clamped to 1..8; ``previous`` when the request was too small to tell."""
    if input_tokens < MIN_CALIBRATION_TOKENS or chars_sent <= 0:
        return previous
    return min(MAX_CHARS_PER_TOKEN, max(MIN_CHARS_PER_TOKEN, chars_sent / input_tokens))


def estimate_tokens(chars: int, chars_per_token: float) -> int:
    return math.ceil(chars / chars_per_token) if chars > 0 else 0


# ---- elided tool results ----------------------------------------------------------------------


def _tool_names(messages: list[Message]) -> dict[str, str]:
    """toolUseId → the app tool's name (the wrapper's inner ``name``), for every tool use."""
    names: dict[str, str] = {}
    for message in messages:
        for block in message["content"]:
            use = block.get("toolUse")
            if use is None:
                continue
            name = use.get("name", "tool")
            tool_input = use.get("input")
            if name == WRAPPER_TOOL and isinstance(tool_input, dict) and isinstance(tool_input.get("name"), str):
                name = tool_input["name"]
            names[use.get("toolUseId", "")] = name
    return names


def result_text(result: dict[str, Any]) -> str:
    """A toolResult's content as text: text blocks as they are, json blocks serialized."""
    parts = []
    for block in result.get("content") or []:
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(_compact(block["json"]))
    return "".join(parts)


def _size(text: str) -> str:
    size = len(text.encode("utf-8"))
    if size < 1024:
        return f"{size} bytes"
    return f"{round(size / 1024)} KB"


def _last_round_results(messages: list[Message]) -> int:
    """Index of the message holding the last round's tool results (len when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] == "assistant" and any("toolUse" in block for block in message["content"]):
            return index + 1
    return len(messages)


def elide_old_tool_results(messages: list[Message], over_chars: int) -> list[Message]:
    """The history with every tool result older than the last round, and longer than
    ``over_chars``, replaced by one line: ``editor.readFile result, 38 KB, elided``.

    The last round (the last assistant message with tool uses and the results answering it) is
    kept whole: the model may still be working from it. ``toolUseId`` and ``status`` are kept.
    Changed messages are new dicts; the input is never mutated (unchanged messages are shared).
    """
    keep_from = _last_round_results(messages)
    names: dict[str, str] | None = None
    elided: list[Message] = []
    for index, message in enumerate(messages):
        if index >= keep_from or message["role"] != "user":
            elided.append(message)
            continue
        content: list[Block] = []
        changed = False
        for block in message["content"]:
            result = block.get("toolResult")
            text = result_text(result) if result is not None else ""
            if result is None or len(text) <= over_chars:
                content.append(block)
                continue
            if names is None:
                names = _tool_names(messages)
            name = names.get(result.get("toolUseId", ""), "tool")
            short = {**result, "content": [{"text": f"{name} result, {_size(text)}, elided"}]}
            content.append({**block, "toolResult": short})
            changed = True
        elided.append({**message, "content": content} if changed else message)
    return elided


# ---- the window that fits ---------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    messages: list[Message]  # what to send (elided copies), starts at a plain user message
    start: int  # index in the given list where it starts (messages before it are "dropped")
    estimated_tokens: int
    stepped: bool = False  # the start moved forward from where the previous window started


STEP_KEEPS = 0.5
"""At a step, the window keeps at most this share of the messages' token room and of the messages."""


def fit_budget(messages: list[Message], *, fixed_chars: int, budget: Budget) -> Window:
    """The longest newest part of ``messages`` that, tool results elided, fits the budget.

    ``messages``: the candidate history, oldest first, valid for Bedrock. ``fixed_chars``: the
    system prompt, tool config and summary. The window starts at a plain user message, so a
    tool use is never split from its results. When even the part from the last plain user
    message on does not fit, that part is returned anyway: the current turn must go (Bedrock
    tells if it really is too long). With no plain user message at all the window is empty.
    """
    elided = elide_old_tool_results(messages, budget.elide_over_chars)
    starts = [index for index, message in enumerate(messages) if is_plain_user_message(message)]
    if not starts:
        return Window([], len(messages), estimate_tokens(fixed_chars, budget.chars_per_token))
    suffix_chars = [0] * (len(elided) + 1)
    for index in range(len(elided) - 1, -1, -1):
        suffix_chars[index] = suffix_chars[index + 1] + message_chars(elided[index])
    chosen = starts[-1]
    for start in starts:  # oldest first: the first that fits is the longest
        if estimate_tokens(fixed_chars + suffix_chars[start], budget.chars_per_token) <= budget.input_tokens:
            chosen = start
            break
    tokens = estimate_tokens(fixed_chars + suffix_chars[chosen], budget.chars_per_token)
    return Window(elided[chosen:], chosen, tokens)


def stepped_window(
    messages: list[Message],
    *,
    fixed_chars: int,
    budget: Budget,
    keep_from: int | None,
    max_messages: int | None = None,
) -> Window:
    """The window from where the previous one started, or, when that no longer fits, from a step
    forward that drops about half at once.

    ``keep_from``: index in ``messages`` where the previous window started (None: ``messages``
    no longer reach it). The window starts at the first plain user message from there while it
    fits ``budget`` and holds at most ``max_messages``: the request's prefix stays the same. When
    it does not, the start steps forward to the first plain user message from which at most
    ``STEP_KEEPS`` of the token room (the budget less ``fixed_chars``) and of the messages (at most
    ``max_messages``) remain, and ``stepped`` is set: what is before it is due for the summary.
    Tool results are elided as in ``fit_budget``; the current turn always goes; with no plain user
    message the window is empty.
    """
    elided = elide_old_tool_results(messages, budget.elide_over_chars)
    starts = [index for index, message in enumerate(messages) if is_plain_user_message(message)]
    if not starts:
        return Window([], len(messages), estimate_tokens(fixed_chars, budget.chars_per_token))
    suffix_chars = [0] * (len(elided) + 1)
    for index in range(len(elided) - 1, -1, -1):
        suffix_chars[index] = suffix_chars[index + 1] + message_chars(elided[index])
    capacity = len(messages) if max_messages is None else min(max_messages, len(messages))

    def window(start: int, stepped: bool) -> Window:
        tokens = estimate_tokens(fixed_chars + suffix_chars[start], budget.chars_per_token)
        return Window(elided[start:], start, tokens, stepped)

    if keep_from is not None:
        kept = next((start for start in starts if start >= keep_from), starts[-1])
        fits = estimate_tokens(fixed_chars + suffix_chars[kept], budget.chars_per_token) <= budget.input_tokens
        if kept == starts[-1] or (fits and len(messages) - kept <= capacity):
            return window(kept, False)
    room = budget.input_tokens - estimate_tokens(fixed_chars, budget.chars_per_token)
    for start in starts:  # oldest first: the first within the share keeps the most
        half_tokens = estimate_tokens(suffix_chars[start], budget.chars_per_token) <= room * STEP_KEEPS
        if half_tokens and len(messages) - start <= capacity * STEP_KEEPS:
            return window(start, True)
    return window(starts[-1], True)


# ---- the rolling summary ----------------------------------------------------------------------

SUMMARY_SYSTEM_PROMPT = (
    "You keep the running summary of a conversation between a developer and a voice coding assistant "
    "in an IDE. Rewrite the previous summary and the conversation turns you are given into one new "
    "summary of at most about 200 words: what the user is working on, decisions made, files and "
    "symbols involved, and open questions or next steps. Plain prose, no preamble: reply with the "
    "summary only."
)
"""The system prompt of a summary call (the offline brain recognises a summary request by it)."""

SUMMARY_MARKER = "Earlier in this conversation (summary):"
"""The heading of the summary section ``with_summary`` appends to the system prompt."""
SUMMARY_END = "(End of the summary.)"

# The parts of a summary request's user message.
PREVIOUS_HEADING = "Previous summary:"
TURNS_HEADING = "Conversation turns to fold in:"
SUMMARY_CLOSING = "Write the new summary."

MAX_SUMMARY_INPUT_CHARS = 40_000
RESULT_CHARS = 300
NO_SUMMARY = "(none yet)"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _block_lines(role: str, block: Block, names: dict[str, str]) -> list[str]:
    if "text" in block:
        text = str(block["text"]).strip()
        return [f"{role}: {text}"] if text else []
    if "toolUse" in block:
        use = block["toolUse"]
        tool_input = use.get("input")
        if use.get("name") == WRAPPER_TOOL and isinstance(tool_input, dict):
            name = str(tool_input.get("name", WRAPPER_TOOL))
            arguments = tool_input.get("arguments", {})
        else:
            name, arguments = str(use.get("name", "tool")), tool_input
        return [f"{role}: called {name} {_clip(_compact(arguments), RESULT_CHARS)}"]
    if "toolResult" in block:
        result = block["toolResult"]
        name = names.get(result.get("toolUseId", ""), "tool")
        outcome = "failed" if result.get("status") == "error" else "result"
        return [f"{role}: {name} {outcome}: {_clip(result_text(result), RESULT_CHARS)}"]
    return []  # reasoning, cache points, anything else: not part of what was said


def render_turns(messages: list[Message]) -> str:
    """The messages as plain text lines ``<role>: <text>``, tool uses and results in brief."""
    names = _tool_names(messages)
    lines = []
    for message in messages:
        for block in message["content"]:
            lines += _block_lines(message["role"], block, names)
    return "\n".join(lines)


def _newest(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, from a line start when there is one."""
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    newline = tail.find("\n")
    return tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail


def summary_request(previous: str | None, dropped: list[Message]) -> tuple[str, list[Message]]:
    """The system prompt and the one user message of a summary call folding ``dropped`` (the
    turns leaving the window) into ``previous``. The turns are capped to the newest
    ``MAX_SUMMARY_INPUT_CHARS`` characters."""
    previous_text = previous.strip() if previous and previous.strip() else NO_SUMMARY
    turns = _newest(render_turns(dropped), MAX_SUMMARY_INPUT_CHARS) or "(no turns)"
    text = f"{PREVIOUS_HEADING}\n{previous_text}\n\n{TURNS_HEADING}\n{turns}\n\n{SUMMARY_CLOSING}"
    return SUMMARY_SYSTEM_PROMPT, [{"role": "user", "content": [{"text": text}]}]


def with_summary(system_prompt: str, summary: str | None) -> str:
    """The system prompt the model gets: unchanged without a summary, else followed by a
    delimited section holding it."""
    if not summary or not summary.strip():
        return system_prompt
    return f"{system_prompt}\n\n{SUMMARY_MARKER}\n{summary.strip()}\n{SUMMARY_END}"


def summary_of(system_prompt: str) -> str | None:
    """The summary ``with_summary`` put into a system prompt, or None."""
    at = system_prompt.rfind(SUMMARY_MARKER)
    if at < 0:
        return None
    body = system_prompt[at + len(SUMMARY_MARKER) :]
    end = body.rfind(SUMMARY_END)
    return (body[:end] if end >= 0 else body).strip() or None
