"""The offline brain's long-term memory: it asks the conductor's own ``memory.*`` tools as a model
would, so the local stack remembers, recalls and forgets what the person says, and says the
results back as a person would.

``remember <text>`` / ``remember that <text>``
    One ``tool_call`` use of ``memory.write`` ``{"text": <text>, "scope": "person"}``; when the
    text begins "for this project" or "in this project" (a comma after it allowed), the rest with
    ``"scope": "project"``. The next reply reads it back: "I'll remember that you prefer tabs over
    spaces." (the person's "I", "my", "me" … said as "you", "your"), "For this project, I'll
    remember that …", "I already knew that; I've updated it." when it was merged, and a refusal as
    its own text (the conductor writes it to be spoken). "remember that" alone is ordinary speech.

``forget <text>``
    ``memory.forget`` ``{"text": <text>}`` (a leading "that " dropped when more follows).

``forget that`` / ``forget it``
    ``memory.forget`` ``{"id": <id>}``, the memory the conversation named last: the id of the
    latest ``memory.write`` result, or the first memory of the latest ``memory.search`` result (ids
    a later ``memory.forget`` result forgot are passed over); without one, ``{"text": <the first
    record's words in the newest <context kind="remembered"> block>}``, else ``{"text": "that"}``.
    Read back: "Forgotten." or "I couldn't find that in what I remember."

``what do you remember`` (``… about me``, ``… about <anything>``, a ``?`` allowed)
    ``memory.search`` ``{"query": <what follows "about">}``; without it, or "about me",
    ``{"query": "what I prefer and how I work"}``. Read back: "I remember: you prefer tabs over
    spaces; we use pnpm." (at most ``MAX_SAID_MEMORIES``, in order), or "I don't remember anything
    about you yet." ("… about this project yet." when the query was about this project).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from conductor_local.bedrock.offline_words import parsed, sentence, short
from shared.core.memory import result_text
from shared.core.person_memory import FORGET_TOOL, SEARCH_TOOL, WRITE_TOOL
from shared.core.workspace_context import CONTEXT_OPEN
from shared.core.wrapper import WRAPPER_TOOL_NAME
from shared.wire.protocol_tools import MEMORY_TOOL_NAMES

REMEMBERED_OPEN = CONTEXT_OPEN.format(kind="remembered")
DEFAULT_QUERY = "what I prefer and how I work"
MAX_SAID_MEMORIES = 5
PERSON, PROJECT = "person", "project"

MERGED = "I already knew that; I've updated it."
FORGOTTEN = "Forgotten."
NOT_FOUND = "I couldn't find that in what I remember."
NOTHING_ABOUT_YOU = "I don't remember anything about you yet."
NOTHING_ABOUT_PROJECT = "I don't remember anything about this project yet."

_REMEMBER = re.compile(r"remember\s+(?:that\s+(?=\S))?(?P<text>.+)", re.IGNORECASE | re.DOTALL)
_FORGET_LAST = re.compile(r"forget\s+(?:that|it)", re.IGNORECASE)
_FORGET = re.compile(r"forget\s+(?:that\s+(?=\S))?(?P<text>.+)", re.IGNORECASE | re.DOTALL)
_SEARCH = re.compile(r"what\s+do\s+you\s+remember(?:\s+about\s+(?P<about>.+?))?\s*\??", re.IGNORECASE | re.DOTALL)
_PROJECT_PREFIX = re.compile(r"(?:for|in)\s+this\s+project\b[\s,:]*", re.IGNORECASE)
_ABOUT_THE_PERSON = frozenset({"me", "myself", "you", "yourself"})
_REMEMBERED_LINE = re.compile(r"- \([^)]*\) (?P<text>.+)")
_NOT_FOUND_ERROR = "nothing remembered matches"

# The person's words about themselves, as said back to them (whole words).
_SAID_BACK = {
    "i am": "you are",
    "i": "you",
    "i'm": "you're",
    "i've": "you've",
    "i'll": "you'll",
    "i'd": "you'd",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
}
_PERSON_WORD = re.compile(r"\b(?:i['\u2019](?:m|ve|ll|d)|i\s+am|i|me|my|mine|myself)\b", re.IGNORECASE)


def memory_calls(directive: str, messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]] | None:
    """``[(tool name, arguments)]`` for a memory directive, None for anything else."""
    directive = directive.strip()
    if match := _SEARCH.fullmatch(directive):
        about = (match["about"] or "").strip().rstrip("?").strip()
        query = about if about and about.lower() not in _ABOUT_THE_PERSON else DEFAULT_QUERY
        return [(SEARCH_TOOL, {"query": query})]
    if _FORGET_LAST.fullmatch(directive):
        memory_id = latest_memory_id(messages)
        if memory_id:
            return [(FORGET_TOOL, {"id": memory_id})]
        return [(FORGET_TOOL, {"text": first_remembered(messages) or "that"})]
    if match := _FORGET.fullmatch(directive):
        return [(FORGET_TOOL, {"text": match["text"].strip()})]
    if (match := _REMEMBER.fullmatch(directive)) and match["text"].strip().lower() != "that":
        text = match["text"].strip()
        if prefix := _PROJECT_PREFIX.match(text):
            rest = text[prefix.end() :].strip()
            if rest:
                return [(WRITE_TOOL, {"text": rest, "scope": PROJECT})]
        return [(WRITE_TOOL, {"text": text, "scope": PERSON})]
    return None


def latest_memory_id(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The id of the memory the conversation named last (see the module docstring), or None."""
    forgotten: set[str] = set()
    for name, value in _memory_results(messages):
        if not isinstance(value, Mapping):
            continue
        if name == FORGET_TOOL:
            forgotten.update(str(gone) for gone in value.get("forgotten") or [] if isinstance(gone, str))
        elif name == WRITE_TOOL and isinstance(value.get("id"), str) and value["id"] not in forgotten:
            return str(value["id"])
        elif name == SEARCH_TOOL:
            for memory in value.get("memories") or []:
                memory_id = memory.get("id") if isinstance(memory, Mapping) else None
                if isinstance(memory_id, str) and memory_id not in forgotten:
                    return memory_id
    return None


def first_remembered(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The first record's words in the newest ``<context kind="remembered">`` block (its lines carry no
    ids: ``- (preference) prefers tabs``), or None."""
    for block in _remembered_blocks(messages):
        for line in block.splitlines():
            if match := _REMEMBERED_LINE.fullmatch(line.strip()):
                return match["text"]
        return None  # only the newest block counts
    return None


def _memory_results(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Any]]:
    """``(tool name, parsed result)`` of each successful ``memory.*`` result, newest first."""
    names: dict[str, str] = {}
    for message in messages:
        for block in message.get("content") or []:
            use = block.get("toolUse") if isinstance(block, Mapping) else None
            if use and use.get("name") == WRAPPER_TOOL_NAME and isinstance(use.get("input"), Mapping):
                names[str(use.get("toolUseId", ""))] = str(use["input"].get("name", ""))
    for message in reversed(messages):
        for block in reversed(message.get("content") or []):
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            if not result or result.get("status") == "error":
                continue
            name = names.get(str(result.get("toolUseId", "")), "")
            if name in MEMORY_TOOL_NAMES:
                yield name, parsed(result_text(dict(result)))


def _remembered_blocks(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    for message in reversed(messages):
        for block in reversed(message.get("content") or []):
            text = block.get("text") if isinstance(block, Mapping) else None
            if isinstance(text, str) and text.startswith(REMEMBERED_OPEN):
                yield text


def said_memory(name: str, tool_input: Any, text: str, *, failed: bool) -> str | None:
    """A ``memory.*`` result said as a person would, None for any other tool."""
    if name not in MEMORY_TOOL_NAMES:
        return None
    arguments = tool_input if isinstance(tool_input, Mapping) else {}
    value = parsed(text)
    if name == FORGET_TOOL:
        if failed and _NOT_FOUND_ERROR not in text.lower():
            return _spoken_error(value, text)
        forgot = isinstance(value, Mapping) and bool(value.get("forgotten"))
        return FORGOTTEN if forgot and not failed else NOT_FOUND
    if failed:
        return _spoken_error(value, text)
    if name == WRITE_TOOL:
        if isinstance(value, Mapping) and value.get("merged") is True:
            return MERGED
        said = _said_back(str(arguments.get("text") or ""))
        if not said:
            return "I'll remember that."
        if arguments.get("scope") == PROJECT:
            return f"For this project, I'll remember that {said}."
        return f"I'll remember that {said}."
    memories = value.get("memories") if isinstance(value, Mapping) else None
    texts = [
        said
        for memory in memories or []
        if isinstance(memory, Mapping) and (said := _said_back(str(memory.get("text") or "")))
    ]
    if not texts:
        query = str(arguments.get("query") or "")
        return NOTHING_ABOUT_PROJECT if "project" in query.lower() else NOTHING_ABOUT_YOU
    return f"I remember: {'; '.join(texts[:MAX_SAID_MEMORIES])}."


def _said_back(text: str) -> str:
    """What the person said of themselves, said back to them: "I prefer my tabs" → "you prefer
    your tabs"; one line, no final full stop."""
    text = short(text).rstrip(" .!")
    return _PERSON_WORD.sub(lambda word: _SAID_BACK[" ".join(word[0].lower().replace("\u2019", "'").split())], text)


def _spoken_error(value: Any, text: str) -> str:
    """A refusal the conductor wrote to be spoken: its text (an ``error`` or ``message`` field when
    it is JSON)."""
    if isinstance(value, Mapping):
        for key in ("error", "message", "reason"):
            if isinstance(value.get(key), str) and value[key].strip():
                return sentence(short(value[key]))
        return sentence(short(json.dumps(value, ensure_ascii=False)))
    return sentence(short(text)) or "I couldn't do that."
