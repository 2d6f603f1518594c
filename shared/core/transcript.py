"""A session's transcript as the sessions API shows it, built from the stored history.

Each stored message (``MSG#<seq>``) gives zero or more entries, in order: what the person said,
the answers as they were shown (reasoning cut out, the conductor's own markers turned back into
what the person saw or heard), and each of the model's tool calls with the result it got. Entries
of one message share its ``seq`` and are told apart by ``part``, their place within it; the pair
is where a page of the transcript starts. Pure: the store reads the messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shared.core.background_report import REPORT_MARKER
from shared.core.inline_reasoning import reasoning_words, without_reasoning
from shared.core.messages import ERROR_MARKER, INTERRUPTED_MARKER, Block
from shared.core.stream import (
    CONTEXT_FULL_LINE,
    CONTEXT_FULL_MARKER,
    CUT_OFF_LINE,
    CUT_OFF_MARKER,
    FILTERED_LINE,
    FILTERED_MARKER,
    MALFORMED_LINE,
    MALFORMED_MARKER,
)
from shared.core.wrapper import OWN_CALL_PREFIX, WRAPPER_TOOL_NAME
from shared.wire import session_api_models as api

RESULT_MAX_CHARS = 2000
NO_ANSWER_PREFIX = "[no answer:"  # a turn that failed before the model said anything
TIMEOUT_PREFIX = "timed out:"  # the result a tool call gets when the app misses its deadline
# Markers the conductor appends to an answer that stopped early, and the line the person heard then.
ENDING_MARKERS: tuple[tuple[str, str | None], ...] = (
    (CUT_OFF_MARKER, CUT_OFF_LINE),
    (FILTERED_MARKER, FILTERED_LINE),
    (MALFORMED_MARKER, MALFORMED_LINE),
    (CONTEXT_FULL_MARKER, CONTEXT_FULL_LINE),
    (ERROR_MARKER, None),
)

Outcome = Literal["ok", "error", "timeout"]


@dataclass(frozen=True)
class StoredMessage:
    """One history item as stored: ``at`` is None for messages stored before times were kept."""

    seq: int
    at: float | None
    role: str
    content: list[Block]


@dataclass(frozen=True)
class UserEntry:
    seq: int
    part: int
    at: float | None
    text: str


@dataclass(frozen=True)
class AssistantEntry:
    seq: int
    part: int
    at: float | None
    text: str
    interrupted: bool = False


@dataclass(frozen=True)
class ToolEntry:
    seq: int
    part: int
    at: float | None
    name: str
    arguments: dict[str, Any]
    call_id: str
    outcome: Outcome
    result: str


Entry = UserEntry | AssistantEntry | ToolEntry


def has_tool_use(message: StoredMessage) -> bool:
    """Whether the message's tool calls get their results from the next message."""
    return message.role == "assistant" and any("toolUse" in block for block in message.content)


def transcript_entries(messages: Sequence[StoredMessage]) -> list[Entry]:
    """The entries of consecutive stored messages, oldest first. A tool call is paired with its
    result in the message after its own; results of calls made before the first message are left
    out (they belong to entries already shown)."""
    entries: list[Entry] = []
    for index, message in enumerate(messages):
        following = messages[index + 1] if index + 1 < len(messages) else None
        if message.role == "assistant":
            results = _results(following) if following is not None and following.seq == message.seq + 1 else {}
            _assistant_entries(message, results, entries)
        elif message.role == "user":
            _user_entries(message, entries)
    return entries


def entry_of(entry: Entry) -> api.UserEntry | api.AssistantEntry | api.ToolEntry:
    """The entry as the sessions API answers it."""
    at = api.timestamp(entry.at) if entry.at is not None else None
    if isinstance(entry, UserEntry):
        return api.UserEntry(seq=entry.seq, at=at, role="user", text=entry.text)
    if isinstance(entry, AssistantEntry):
        return api.AssistantEntry(
            seq=entry.seq, at=at, role="assistant", text=entry.text, interrupted=entry.interrupted
        )
    assert isinstance(entry, ToolEntry)
    return api.ToolEntry(
        seq=entry.seq,
        at=at,
        role="tool",
        name=entry.name,
        arguments=entry.arguments,
        call_id=entry.call_id,
        outcome=entry.outcome,
        result=entry.result,
    )


def _user_entries(message: StoredMessage, entries: list[Entry]) -> None:
    part = 0
    for block in message.content:
        text = block.get("text")
        if isinstance(text, str) and text.strip() and not text.startswith(REPORT_MARKER):  # not the person's words
            entries.append(UserEntry(message.seq, part, message.at, text.strip()))
            part += 1


def _assistant_entries(message: StoredMessage, results: dict[str, Block], entries: list[Entry]) -> None:
    """Text runs become answers, each ``tool_call`` use a tool entry, in the order written."""
    part = 0
    texts: list[str] = []

    def flush(before_tools: bool) -> None:
        nonlocal part
        answer = _answer(texts, before_tools)
        texts.clear()
        if answer is not None:
            entries.append(AssistantEntry(message.seq, part, message.at, *answer))
            part += 1

    for block in message.content:
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif "toolUse" in block:
            flush(before_tools=True)
            entries.append(_tool_entry(message, part, block["toolUse"], results))
            part += 1
    flush(before_tools=False)


def _answer(texts: list[str], before_tools: bool) -> tuple[str, bool] | None:
    """The text shown for consecutive text blocks and whether a barge-in cut it; None when none
    was shown. An interrupted answer is stored as what was heard followed by the marker (a marker
    alone, after the answer, when the app did not say how much was heard)."""
    shown: list[str] = []
    interrupted = False
    for raw in texts:
        text = raw.strip()
        if text.endswith(INTERRUPTED_MARKER):
            interrupted = True
            text = text.removesuffix(INTERRUPTED_MARKER).strip()
            if not text:
                continue
        if text.startswith(NO_ANSWER_PREFIX) and text.endswith("]"):
            continue
        visible = _visible(text, before_tools)
        if visible:
            shown.append(visible)
    if not shown and not interrupted:
        return None
    return "\n\n".join(shown), interrupted


def _visible(text: str, before_tools: bool) -> str:
    """What the person saw of one stored text: reasoning cut out (a plan written only as reasoning
    before tool calls is shown as its words), an early stop's marker turned into its line."""
    line: str | None = None
    for marker, marker_line in ENDING_MARKERS:
        if text.endswith(marker):
            text, line = text.removesuffix(marker).strip(), marker_line
            break
    visible = without_reasoning(text).strip()
    if not visible and before_tools:
        visible = reasoning_words(text)
    if line and visible:
        return f"{visible}\n\n{line}"
    return visible or line or ""


def _results(message: StoredMessage) -> dict[str, Block]:
    return {
        block["toolResult"].get("toolUseId", ""): block["toolResult"]
        for block in message.content
        if message.role == "user" and isinstance(block.get("toolResult"), dict)
    }


def _tool_entry(message: StoredMessage, part: int, use: dict[str, Any], results: dict[str, Block]) -> ToolEntry:
    tool_use_id = str(use.get("toolUseId", ""))
    name, arguments, call_id = _unwrapped(use, tool_use_id)
    result = results.get(tool_use_id)
    if result is None:
        return ToolEntry(message.seq, part, message.at, name, arguments, call_id, "error", "(no result was stored)")
    text = _result_text(result)
    outcome: Outcome = "ok"
    if result.get("status") == "error":
        outcome = "timeout" if text.startswith(TIMEOUT_PREFIX) else "error"
    return ToolEntry(message.seq, part, message.at, name, arguments, call_id, outcome, text[:RESULT_MAX_CHARS])


def _unwrapped(use: dict[str, Any], tool_use_id: str) -> tuple[str, dict[str, Any], str]:
    """The app tool's name, arguments and call id of a ``tool_call`` use, as the conductor
    unwrapped it (``shared.core.wrapper``); a use of another tool keeps its own name."""
    tool_input = use.get("input")
    if use.get("name") != WRAPPER_TOOL_NAME or not isinstance(tool_input, dict):
        return str(use.get("name", "")), tool_input if isinstance(tool_input, dict) else {}, tool_use_id
    name = tool_input.get("name")
    arguments = tool_input.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    call_id = tool_input.get("call_id")
    if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > 128 or call_id.startswith(OWN_CALL_PREFIX):
        call_id = tool_use_id
    return (
        name if isinstance(name, str) else "",
        arguments if isinstance(arguments, dict) else {},
        call_id,
    )


def _result_text(result: Block) -> str:
    """The result as the model saw it: its text blocks (a JSON block as JSON)."""
    parts: list[str] = []
    for block in result.get("content") or []:
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif "json" in block:
            parts.append(json.dumps(block["json"], ensure_ascii=False))
    return "\n".join(parts)
