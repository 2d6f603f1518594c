"""What the offline brain says back about its own memory: the ``recall`` directive and summaries.

``recall`` answers with what the request carried, so a test (or a person at the local stack) sees
which turns a request still holds and what the rolling summary says: the summary first (the
section ``with_summary`` put in the system prompt), then one line per message,
``<role>: <its first 80 characters>``.

A title request (``title_request``'s) gets the first words of the first request, capitalised.
A summary request (``summary_request``'s system prompt) gets a deterministic summary instead of a
model's: ``Summary: `` and the first 60 characters of each thing the user said, the previous
summary's items first, the newest ``MAX_SUMMARY_ITEMS`` kept, joined by ``; ``.
``answering_summaries(responder)`` gives any responder (a test's ``ScriptedResponder``) that answer,
so summary calls never take a script queued for the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock.script import RejectRequest, Responder, Script, message
from conductor_local.bedrock.validation import estimate_input_tokens
from shared.core.memory import (
    NO_SUMMARY,
    PREVIOUS_HEADING,
    SUMMARY_CLOSING,
    SUMMARY_SYSTEM_PROMPT,
    TURNS_HEADING,
    result_text,
    summary_of,
)
from shared.core.title import TITLE_SYSTEM_PROMPT

RECALL_LINE_CHARS = 80
SUMMARY_ITEM_CHARS = 60
MAX_SUMMARY_ITEMS = 20
TITLE_WORDS = 6
SUMMARY_PREFIX = "Summary: "
SUMMARY_SEPARATOR = "; "
NOTHING = "(nothing)"

_RECALL = re.compile(r"\s*recall\s*[.!]?\s*", re.IGNORECASE)
# A rendered tool result line: "user: editor.readFile result: ..." / "... failed: ...".
_RESULT_LINE = re.compile(r"\S+ (?:result|failed): ")
WRAPPER_TOOL = "tool_call"


def is_recall(transcript: str) -> bool:
    """Whether the transcript is the ``recall`` directive (any case, a trailing ``.``/``!`` allowed)."""
    return _RECALL.fullmatch(transcript) is not None


def _system_text(request: Mapping[str, Any]) -> str:
    system = request.get("system")
    blocks = system if isinstance(system, list) else []
    return "\n".join(str(block["text"]) for block in blocks if isinstance(block, Mapping) and "text" in block)


def _tool_name(use: Mapping[str, Any]) -> str:
    tool_input = use.get("input")
    if use.get("name") == WRAPPER_TOOL and isinstance(tool_input, Mapping) and isinstance(tool_input.get("name"), str):
        return tool_input["name"]
    return str(use.get("name", "tool"))


def _brief(block: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    if "text" in block:
        return " ".join(str(block["text"]).split())
    if "toolUse" in block:
        return f"[called {_tool_name(block['toolUse'])}]"
    if "toolResult" in block:
        result = block["toolResult"]
        name = names.get(str(result.get("toolUseId", "")), "tool")
        outcome = "failed" if result.get("status") == "error" else "result"
        return f"[{name} {outcome}: {' '.join(result_text(result).split())}]"
    return None  # reasoning, cache points


def recall_answer(request_body: dict[str, Any]) -> str:
    """The summary the request carries (if any), then each message as ``<role>: <first 80 chars>``."""
    lines = []
    summary = summary_of(_system_text(request_body))
    if summary:
        lines.append(f"summary: {summary}")
    names: dict[str, str] = {}
    for sent in request_body.get("messages") or []:
        content = sent.get("content") or []
        for block in content:
            if "toolUse" in block:
                names[str(block["toolUse"].get("toolUseId", ""))] = _tool_name(block["toolUse"])
        parts = [part for block in content if (part := _brief(block, names))]
        lines.append(f"{sent.get('role', '?')}: {' '.join(parts)[:RECALL_LINE_CHARS]}")
    return "\n".join(lines) or NOTHING


def _section(text: str, heading: str, end: str) -> str:
    start = text.find(heading)
    if start < 0:
        return ""
    body = text[start + len(heading) :]
    stop = body.find(end)
    return (body[:stop] if stop >= 0 else body).strip()


def _previous_items(previous: str) -> list[str]:
    if not previous.startswith(SUMMARY_PREFIX):
        return [] if previous in ("", NO_SUMMARY) else [previous[:SUMMARY_ITEM_CHARS]]
    return [item for item in previous[len(SUMMARY_PREFIX) :].split(SUMMARY_SEPARATOR) if item]


def summary_answer(request_body: dict[str, Any]) -> str | None:
    """A deterministic summary when the request is a summary request, else None.

    The previous summary's items, then the first 60 characters of each thing the user said in the
    turns to fold in (tool results left out), the newest ``MAX_SUMMARY_ITEMS`` kept."""
    if _system_text(request_body).strip() != SUMMARY_SYSTEM_PROMPT:
        return None
    messages = request_body.get("messages") or []
    text = "\n".join(str(block["text"]) for sent in messages for block in sent.get("content") or [] if "text" in block)
    items = _previous_items(_section(text, PREVIOUS_HEADING, TURNS_HEADING))
    for line in _section(text, TURNS_HEADING, SUMMARY_CLOSING).splitlines():
        if not line.startswith("user: "):
            continue
        said = line[len("user: ") :].strip()
        if said and not _RESULT_LINE.match(said):
            items.append(said[:SUMMARY_ITEM_CHARS].replace(SUMMARY_SEPARATOR, ", "))
    if not items:
        return f"{SUMMARY_PREFIX}nothing yet."
    return SUMMARY_PREFIX + SUMMARY_SEPARATOR.join(items[-MAX_SUMMARY_ITEMS:])


def title_answer(request_body: dict[str, Any]) -> str | None:
    """A deterministic title when the request is a title request, else None: the first thing the
    user said, its first ``TITLE_WORDS`` words, capitalised."""
    if _system_text(request_body).strip() != TITLE_SYSTEM_PROMPT:
        return None
    messages = request_body.get("messages") or []
    text = "\n".join(str(block["text"]) for sent in messages for block in sent.get("content") or [] if "text" in block)
    said = next((line[len("user: ") :].strip() for line in text.splitlines() if line.startswith("user: ")), "")
    words = said.split()[:TITLE_WORDS]
    if not words:
        return "A new session"
    title = " ".join(words).rstrip(".?!,;:")
    return title[:1].upper() + title[1:]


def answering_summaries(responder: Responder) -> Responder:
    """``responder`` with summary and title requests answered by ``summary_answer`` and
    ``title_answer`` (they never reach it)."""

    def respond(model_id: str, request: dict[str, Any]) -> Script | RejectRequest:
        made = summary_answer(request)
        if made is None:
            made = title_answer(request)
        if made is not None:
            return message(made, input_tokens=estimate_input_tokens(request))
        return responder(model_id, request)

    return respond
