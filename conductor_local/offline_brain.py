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

``stop <reason> [text]``
    Streams ``text`` as said (without one, a sentence naming the reason) and ends the message
    with ``messageStop`` ``stopReason = <reason>``: the next word, verbatim, so any snake_case
    reason (an unknown one too) can be tried; "stop the build" is ordinary speech. When the
    text is a ``call`` directive, the message is a short sentence, then those tool uses; with
    ``max_tokens`` the last use's input JSON is cut
    off in the middle, as a real cut at the output limit looks (its block is still stopped).
    Example: ``stop max_tokens call editor.readFile {"path": "a.swift"}``.

``stop none [text]``
    The same text, then the stream ends right after the last delta: no ``contentBlockStop``,
    no ``messageStop``, no metadata (a stream cut short).

``slow <seconds> [text]``
    Streams ``text`` (without one, a few sentences) spread evenly over ``<seconds>`` (more than 0,
    capped at 900): a pause before every delta, one word per delta, or pieces of words when there
    are too few words to keep each pause under ``SLOW_MAX_GAP`` (5) seconds. For turns longer
    than API Gateway's 29 s integration timeout.

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

Every reply but ``fail`` and ``stop none`` is a complete message: messageStart, content blocks,
messageStop and metadata with token counts estimated from the text sizes (the input counted as the
endpoint's context limit counts it, ``estimate_input_tokens``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock_server import (
    WRAPPER_TOOL,
    RaiseInStream,
    Step,
    Text,
    ToolUse,
    estimate_input_tokens,
    message,
    model_stream_error,
    split_words,
)

MAX_COUNT = 1000
COUNT_PAUSE = 0.05
FAIL_WORDS = "Let me think about that and"
FAIL_MESSAGE = "The offline brain broke the stream, as the transcript asked."
NO_MESSAGE_STOP = "none"
"""``stop none``: the stream ends with no messageStop."""
CUT_OFF_STOP = "max_tokens"
CALL_PREAMBLE = "Let me do that."
STOP_TEXT = "This answer stops with the reason {reason}."
CUT_SHORT_TEXT = "This answer is cut short before its end."
MAX_SLOW_SECONDS = 900.0
SLOW_MAX_GAP = 5.0
SLOW_TEXT = (
    "I am taking my time with this answer, one word after another, so that the turn lasts as long as "
    "you asked. A long answer is fine: it streams in the background while the app keeps listening. "
    "That is all I wanted to say."
)

_CALL = re.compile(r"call\s+([^\s;]+)\s*", re.IGNORECASE)
_NEXT_CALL = re.compile(r"\s*;\s*(?=call\s)", re.IGNORECASE)
_COUNT = re.compile(r"count\s+(\d+)", re.IGNORECASE)
_FAIL = re.compile(r"fail", re.IGNORECASE)
# A reason is snake_case, as Bedrock's are (so "stop the build" stays ordinary speech), or "none".
_STOP = re.compile(r"stop\s+(none|[a-z0-9]+(?:_[a-z0-9]+)+)(?:\s+(.*))?", re.IGNORECASE | re.DOTALL)
_SLOW = re.compile(r"slow\s+(\d+(?:\.\d*)?|\.\d+)(?:\s+(.*))?", re.IGNORECASE | re.DOTALL)
_TRAILING_MARK = re.compile(r"\s*[.!]$")
_DECODER = json.JSONDecoder()


class OfflineBrain:
    """A ``Responder`` for ``LocalBedrockServer``; see the module docstring for its directives."""

    def __init__(
        self,
        *,
        count_pause: float = COUNT_PAUSE,
        max_count: int = MAX_COUNT,
        max_slow_seconds: float = MAX_SLOW_SECONDS,
    ) -> None:
        self.count_pause = count_pause
        self.max_count = max_count
        self.max_slow_seconds = max_slow_seconds

    def __call__(self, model_id: str, request: dict[str, Any]) -> list[Step]:
        messages: list[dict[str, Any]] = request.get("messages") or []
        input_tokens = estimate_input_tokens(request)
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
            return message(*_tool_uses(calls, conversation_key), input_tokens=input_tokens)
        if match := _STOP.fullmatch(directive):
            # The text is what was said after the reason, trailing mark included.
            text = transcript[match.start(2) :].strip() if match.group(2) else ""
            return self.stop(match.group(1), text, conversation_key=conversation_key, input_tokens=input_tokens)
        if (match := _SLOW.fullmatch(directive)) and float(match.group(1)) > 0:
            seconds = min(float(match.group(1)), self.max_slow_seconds)
            text = transcript[match.start(2) :].strip() if match.group(2) else SLOW_TEXT
            return message(slow_text(text, seconds), input_tokens=input_tokens)
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

    def stop(self, reason: str, text: str, *, conversation_key: str = "", input_tokens: int = 100) -> list[Step]:
        """``stop <reason> [text]``: the text (or tool uses) ending with ``reason``, or with no
        messageStop at all for ``none``."""
        cut = reason.lower() == NO_MESSAGE_STOP
        calls = parse_calls(_TRAILING_MARK.sub("", text))
        content: list[Text | ToolUse | str]
        if calls is not None:
            uses = _tool_uses(calls, conversation_key)
            if reason == CUT_OFF_STOP:
                uses[-1] = cut_off(uses[-1])
            content = [CALL_PREAMBLE, *uses]
        elif text:
            content = [text]
        else:
            content = [CUT_SHORT_TEXT if cut else STOP_TEXT.format(reason=reason)]
        steps = message(*content, stop_reason=reason, input_tokens=input_tokens)
        if cut:  # drop the last block's stop, the messageStop and the metadata
            return steps[:-3]
        return steps


def _tool_uses(calls: list[tuple[str, Any]], conversation_key: str) -> list[ToolUse]:
    return [
        ToolUse(
            WRAPPER_TOOL,
            {"name": name, "arguments": arguments},
            tool_use_id="tooluse_" + _digest([conversation_key, index])[:22],
        )
        for index, (name, arguments) in enumerate(calls)
    ]


def cut_off(use: ToolUse) -> ToolUse:
    """``use`` with its input JSON cut in the middle, as the output limit leaves it."""
    full = use.input_json()
    return ToolUse(use.name, full[: len(full) // 2], use.tool_use_id, use.parts, use.pause)


def slow_text(text: str, seconds: float, max_gap: float = SLOW_MAX_GAP) -> Text:
    """``text`` streamed over ``seconds``: a word per delta, or smaller pieces when the text has too
    few words to keep each pause under ``max_gap``; the pauses add up to ``seconds``."""
    words = len(split_words(text))
    wanted = math.ceil(seconds / max_gap)
    if words >= wanted:
        return Text(text, pause=seconds / max(1, words))
    size = max(1, len(text) // min(wanted, len(text)))
    pieces = math.ceil(len(text) / size)
    return Text(text, chars_per_delta=size, pause=seconds / pieces)


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
