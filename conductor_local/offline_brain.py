"""The offline brain: a deterministic stand-in for the model, the default brain of the local stack.

It answers ConverseStream requests (served by ``LocalBedrockServer``) from the conversation
alone, so the whole stack runs and can be driven by hand without AWS. The same request always
gets the same answer.

The *transcript* is the last text block of the last user message. Directives (keywords are
case-insensitive; a trailing ``.`` or ``!`` is ignored, as speech-to-text tends to add one):

``call <tool.name> <json object>``
    One assistant message with a ``tool_call`` use, input
    ``{"name": <tool.name>, "arguments": <object>}``, its JSON streamed over several deltas,
    stop reason ``tool_use``. Several directives joined by `` ; `` give several uses in one
    message. A missing argument means ``{}``. An argument that is not valid JSON is still
    emitted, as the raw text in ``arguments``, so the conductor's own checks judge it.
    ``toolUseId`` is ``tooluse_`` plus a hash of the conversation and the use's position:
    unique within a conversation and identical on a retry.

``count <n>``
    Streams ``1 2 … n`` (n from 1 to 1000), one word per delta, 50 ms apart: a slow stream to
    interrupt.

``fail``
    Streams a few words, then breaks the stream with a ``modelStreamErrorException``.

anything else
    ``You said: <transcript>``, one word per delta.

When the last user message carries ``toolResult`` blocks (the app answered), the reply reads
back each result in order, joined with ``". "``: ``<tool.name> returned <result>`` or
``<tool.name> failed: <error>`` (status ``error``). The tool name is found by matching the
``toolUseId`` against the previous assistant message (the inner name for ``tool_call`` uses,
``unknown tool`` when no use matches); the result is the concatenated ``text`` of its content
blocks, ``json`` blocks serialized, ``(empty)`` when there is none. If that message also
carries a text block, that is a new utterance merged after abandoned calls, and the reply
answers it as a transcript instead.

Every reply is a complete message: messageStart, content blocks, messageStop and metadata with
token counts estimated from the text sizes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock_server import (
    WRAPPER_TOOL,
    RaiseInStream,
    Step,
    Text,
    ToolUse,
    message,
    model_stream_error,
)

MAX_COUNT = 1000
COUNT_PAUSE = 0.05
FAIL_WORDS = "Let me think about that and"
FAIL_MESSAGE = "The offline brain broke the stream, as the transcript asked."

_CALL = re.compile(r"call\s+([^\s;]+)\s*", re.IGNORECASE)
_NEXT_CALL = re.compile(r"\s*;\s*(?=call\s)", re.IGNORECASE)
_COUNT = re.compile(r"count\s+(\d+)", re.IGNORECASE)
_FAIL = re.compile(r"fail", re.IGNORECASE)
_TRAILING_MARK = re.compile(r"\s*[.!]$")
_DECODER = json.JSONDecoder()


class OfflineBrain:
    """A ``Responder`` for ``LocalBedrockServer``; see the module docstring for its directives."""

    def __init__(self, *, count_pause: float = COUNT_PAUSE, max_count: int = MAX_COUNT) -> None:
        self.count_pause = count_pause
        self.max_count = max_count

    def __call__(self, model_id: str, request: dict[str, Any]) -> list[Step]:
        messages: list[dict[str, Any]] = request.get("messages") or []
        input_tokens = max(1, len(json.dumps(messages)) // 4)
        user_at = next((i for i in reversed(range(len(messages))) if messages[i].get("role") == "user"), None)
        if user_at is None:
            return message("I did not hear anything.", input_tokens=input_tokens)
        content = messages[user_at].get("content") or []
        texts = [block["text"] for block in content if "text" in block]
        results = [block["toolResult"] for block in content if "toolResult" in block]
        if results and not texts:
            previous = messages[user_at - 1] if user_at else {}
            return message(read_back(results, previous), input_tokens=input_tokens)
        transcript = str(texts[-1]).strip() if texts else ""
        return self.answer(transcript, conversation_key=_digest(messages), input_tokens=input_tokens)

    def answer(self, transcript: str, *, conversation_key: str = "", input_tokens: int = 100) -> list[Step]:
        """The reply to one transcript; ``conversation_key`` makes tool use ids unique per conversation."""
        directive = _TRAILING_MARK.sub("", transcript)
        calls = parse_calls(directive)
        if calls is not None:
            uses: list[Text | ToolUse] = [
                ToolUse(
                    WRAPPER_TOOL,
                    {"name": name, "arguments": arguments},
                    tool_use_id="tooluse_" + _digest([conversation_key, index])[:22],
                )
                for index, (name, arguments) in enumerate(calls)
            ]
            return message(*uses, input_tokens=input_tokens)
        if match := _COUNT.fullmatch(directive):
            n = min(max(int(match.group(1)), 1), self.max_count)
            words = " ".join(str(i) for i in range(1, n + 1))
            return message(Text(words, pause=self.count_pause), input_tokens=input_tokens)
        if _FAIL.fullmatch(directive):
            error: RaiseInStream = model_stream_error(FAIL_MESSAGE)
            return message(FAIL_WORDS, input_tokens=input_tokens, interrupted_by=error)
        if not transcript:
            return message("I did not hear anything.", input_tokens=input_tokens)
        return message(f"You said: {transcript}", input_tokens=input_tokens)


def parse_calls(transcript: str) -> list[tuple[str, Any]] | None:
    """``[(tool name, arguments), ...]`` for a ``call`` directive, None for any other transcript."""
    if not _CALL.match(transcript):
        return None
    calls: list[tuple[str, Any]] = []
    pos = 0
    while (match := _CALL.match(transcript, pos)) is not None:
        arguments, pos = _parse_arguments(transcript, match.end())
        calls.append((match.group(1), arguments))
        separator = _NEXT_CALL.match(transcript, pos)
        if separator is None:
            break
        pos = separator.end()
    return calls


def _parse_arguments(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value at ``pos`` and where it ends; the raw text up to the next call if it is not JSON."""
    if pos == len(text) or _NEXT_CALL.match(text, pos):
        return {}, pos
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except ValueError:
        pass
    else:
        rest = text[end:]
        if not rest.strip() or _NEXT_CALL.match(text, end):
            return value, end
    following = _NEXT_CALL.search(text, pos)
    stop = following.start() if following else len(text)
    return text[pos:stop].strip(), stop


def read_back(results: list[Mapping[str, Any]], previous: Mapping[str, Any]) -> str:
    """What the tools answered, said back: ``<name> returned <result>`` / ``<name> failed: <error>``."""
    names: dict[str, str] = {}
    for block in previous.get("content") or []:
        use = block.get("toolUse")
        if not use:
            continue
        name = use.get("name", "")
        tool_input = use.get("input")
        if name == WRAPPER_TOOL and isinstance(tool_input, Mapping) and isinstance(tool_input.get("name"), str):
            name = tool_input["name"]
        names[use.get("toolUseId", "")] = name
    said = []
    for result in results:
        name = names.get(result.get("toolUseId", ""), "unknown tool")
        text = _result_text(result) or "(empty)"
        if result.get("status") == "error":
            said.append(f"{name} failed: {text}")
        else:
            said.append(f"{name} returned {text}")
    return ". ".join(said)


def _result_text(result: Mapping[str, Any]) -> str:
    parts = []
    for block in result.get("content") or []:
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(json.dumps(block["json"], ensure_ascii=False))
    return "".join(parts)


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
