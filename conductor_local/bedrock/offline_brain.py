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

``context [words]``
    Answers with every block the conductor added to the request after its cached prefix (the
    ``<context kind="…">`` text blocks of the newest message: the devices' workspace context, the
    files discussed, running tasks, the names the words may have meant, what it remembers of the
    person (``kind="remembered"``)), each whole, in order; "No context was given." when there is
    none. Those blocks are never taken for the transcript. Words after the keyword are said with it
    (the names they may mean are among the blocks).

``recall``
    Answers with the memory it was sent, in order: the rolling summary (when the system prompt
    carries one), then each message as ``<role>: <its first 80 characters>``.

``tools``
    Answers with the names of the tools the request offered, in the order given: those of the
    ``tool_call`` wrapper's spec (its input schema's ``name.enum``, else its description's list),
    e.g. "I was offered 14 tools: editor.openFile, …, mcp.demo.issues_search." (``offline_offered``);
    "I was offered no tools." without one.

``ramble <n>``
    A long plain answer of ``n`` text deltas (1 to 1000) of about three tokens each (``RAMBLE_CHARS``
    characters, whole words): several sentences with commas, full stops and questions, so sentence
    and clause ends happen while it streams.

``how's the <thing> going`` / ``cancel the <thing>``
    A use of the conductor's own ``conductor.status`` / ``conductor.cancel``
    (``offline_conductor_tools``); the next reply says how the running calls are going ("The build
    is 25 % done: compiling unit5.py.") or what was cancelled.

``remember <text>`` / ``forget <text>`` / ``forget that`` / ``what do you remember``
    A use of the conductor's own ``memory.write`` / ``memory.forget`` / ``memory.search``
    (``offline_memory``); the next reply says what was remembered ("I'll remember that you prefer
    tabs over spaces."), "Forgotten.", or what it remembers ("I remember: you prefer tabs over
    spaces; …").

a background report (the conductor's ``[background report]`` message)
    Each outcome said as a person would ("The build succeeded.", "The build failed: <its first
    problem line>.", "1 of 2 tests failed: ParserTests.testEmptyInput."), never the output; with
    ``CONDUCTOR_LOCAL_READBACK=literal`` its lines as the conductor wrote them.

anything else
    ``You said: <transcript>``, one word per delta.

When the last user message carries ``toolResult`` blocks (the app answered), the reply says
each result back in order, as a person would ("I opened README.md; it has 120 lines.", "The build
succeeded.", see ``offline_readback`` and ``offline_runs``), or with
``CONDUCTOR_LOCAL_READBACK=literal`` word for word, joined with ``". "``: ``<tool.name> returned
<result>`` or ``<tool.name> failed: <error>`` (status ``error``). The tool name is found by matching the
``toolUseId`` against the previous assistant message (the inner name for ``tool_call`` uses,
``unknown tool`` when no use matches); the result is the concatenated ``text`` of its content
blocks, ``json`` blocks serialized, ``(empty)`` when there is none. If that message also
carries a text block, that is a new utterance merged after abandoned calls, and the reply
answers it as a transcript instead.

*Pacing* (``OfflineBrain(pace=ModelPace())``, off by default): the reply streams as a real model's
does. The first delta comes ``first_token_s`` after the request, each text block is re-cut into
deltas of about ``tokens_per_delta`` tokens (whole words, a token taken as ``CHARS_PER_TOKEN``
characters) and every later delta waits as long as its tokens take at ``tokens_per_s``; tool input
deltas are paced by their size too. The reported ``outputTokens`` are then the characters streamed
/ ``CHARS_PER_TOKEN``. Scripts that already pause (``count``, ``slow``) keep their own pauses and
only get the wait for the first token. ``ModelPace.parse`` reads ``instant``, ``paced`` or
``<first token ms>:<tokens per s>``.

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
from dataclasses import dataclass
from typing import Any

from conductor_local.bedrock.offline_conductor_tools import conductor_calls
from conductor_local.bedrock.offline_memory import memory_calls
from conductor_local.bedrock.offline_offered import is_tools, offered_tools_answer
from conductor_local.bedrock.offline_readback import literal_wanted, said_literally, said_naturally, said_report
from conductor_local.bedrock.offline_recall import is_recall, recall_answer, summary_answer, title_answer
from conductor_local.bedrock.server import (
    WRAPPER_TOOL,
    Pause,
    RaiseInStream,
    Step,
    Text,
    ToolUse,
    block_stop,
    estimate_input_tokens,
    message,
    message_start,
    message_stop,
    metadata,
    model_stream_error,
    split_words,
    text_delta,
)
from shared.core.background_report import REPORT_MARKER
from shared.core.workspace_context import CONTEXT_OPEN

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

MAX_RAMBLE = 1000
CHARS_PER_TOKEN = 4
RAMBLE_CHARS = 12
"""About three tokens: a ``ramble`` delta is the shortest run of whole words this long."""
RAMBLE_TEXT = (
    "Here is how I would approach it. First, we read the file that defines the session, then the one "
    "that sends the events, and we compare them line by line. Does the order matter? It does, because "
    "the app plays speech in the order it arrives, and a late sentence sounds wrong. Next, we look at "
    "the tests, which tell us what the code promises, and at the logs, which tell us what it did. "
    "Where do they disagree? That is where the bug lives, usually in a corner nobody measured. "
)

_RAMBLE = re.compile(r"ramble\s+(\d+)", re.IGNORECASE)
_CALL = re.compile(r"call\s+([^\s;]+)\s*", re.IGNORECASE)
_NEXT_CALL = re.compile(r"\s*;\s*(?=call\s)", re.IGNORECASE)
_COUNT = re.compile(r"count\s+(\d+)", re.IGNORECASE)
_FAIL = re.compile(r"fail", re.IGNORECASE)
_CONTEXT = re.compile(r"context(?:\s+.*)?", re.IGNORECASE | re.DOTALL)
NO_CONTEXT = "No context was given."


def is_added_context(text: object) -> bool:
    """A block the conductor added to the request (``shared.core.workspace_context``), not words said."""
    return isinstance(text, str) and text.startswith(CONTEXT_OPEN.split("{", 1)[0])


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
        pace: ModelPace | None = None,
    ) -> None:
        self.count_pause = count_pause
        self.max_count = max_count
        self.max_slow_seconds = max_slow_seconds
        self.pace = pace
        """None: every step at once (the default); else the reply streams at this pace."""

    def __call__(self, model_id: str, request: dict[str, Any]) -> list[Step]:
        steps = self.reply(request)
        return steps if self.pace is None else paced(steps, self.pace)

    def reply(self, request: dict[str, Any]) -> list[Step]:
        """The reply to a ConverseStream request, unpaced."""
        messages: list[dict[str, Any]] = request.get("messages") or []
        input_tokens = estimate_input_tokens(request)
        if (summary := summary_answer(request)) is not None:  # the conductor's rolling summary call
            return message(summary, input_tokens=input_tokens)
        if (title := title_answer(request)) is not None:  # the session's title
            return message(title, input_tokens=input_tokens)
        user_at = next((i for i in reversed(range(len(messages))) if messages[i].get("role") == "user"), None)
        if user_at is None:
            return message("I did not hear anything.", input_tokens=input_tokens)
        content = messages[user_at].get("content") or []
        added = [block["text"] for block in content if "text" in block and is_added_context(block["text"])]
        texts = [block["text"] for block in content if "text" in block and not is_added_context(block["text"])]
        results = [block["toolResult"] for block in content if "toolResult" in block]
        if results and not texts:
            previous = messages[user_at - 1] if user_at else {}
            return message(read_back(results, previous), input_tokens=input_tokens)
        transcript = str(texts[-1]).strip() if texts else ""
        if transcript.startswith(REPORT_MARKER):  # background outcomes: as a person would, or line by line
            said = None if literal_wanted() else said_report(transcript)
            if said is None:
                lines = [line for line in transcript.splitlines()[1:-1] if line.strip()]
                said = " ".join(lines) or transcript
            return message(said, input_tokens=input_tokens)
        if _CONTEXT.fullmatch(_TRAILING_MARK.sub("", transcript)):
            return message("\n".join(added) or NO_CONTEXT, input_tokens=input_tokens)
        if is_recall(transcript):
            return message(recall_answer(request), input_tokens=input_tokens)
        if is_tools(transcript):
            return message(offered_tools_answer(request), input_tokens=input_tokens)
        directive = _TRAILING_MARK.sub("", transcript)
        if (asked := conductor_calls(directive, messages) or memory_calls(directive, messages)) is not None:
            return message(*_tool_uses(asked, _digest(messages)), input_tokens=input_tokens)
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
        if match := _RAMBLE.fullmatch(directive):
            n = min(max(int(match.group(1)), 1), MAX_RAMBLE)
            return ramble(n, input_tokens=input_tokens)
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


@dataclass(frozen=True)
class ModelPace:
    """How fast a real model streams: its time to first token, delta size and output rate."""

    first_token_s: float = 0.4
    tokens_per_delta: int = 3
    tokens_per_s: float = 80.0

    @classmethod
    def parse(cls, spec: str) -> ModelPace | None:
        """``instant`` (or empty) -> None, ``paced`` -> the defaults, ``<first token ms>:<tokens per s>``."""
        spec = spec.strip().lower()
        if spec in ("", "instant", "off", "none"):
            return None
        if spec in ("paced", "on", "default"):
            return cls()
        first_ms, sep, rate = spec.partition(":")
        try:
            pace = cls(first_token_s=float(first_ms) / 1000, tokens_per_s=float(rate) if sep else cls.tokens_per_s)
        except ValueError:
            raise ValueError(f"model pace {spec!r}: use instant, paced or <first token ms>:<tokens per s>") from None
        if pace.first_token_s < 0 or pace.tokens_per_s <= 0:
            raise ValueError(f"model pace {spec!r}: the first token wait must be >= 0 and the rate > 0")
        return pace

    @property
    def seconds_per_token(self) -> float:
        """How long the model takes to write one token (its reasoning too, when it thinks)."""
        return 1 / self.tokens_per_s

    def delta_seconds(self, chars: int) -> float:
        """How long the model takes to write a delta of ``chars`` characters."""
        return estimate_tokens(chars) / self.tokens_per_s


def estimate_tokens(chars: int) -> int:
    return max(1, math.ceil(chars / CHARS_PER_TOKEN))


def word_pieces(text: str, min_chars: int) -> list[str]:
    """``text`` cut into runs of whole words, each the shortest run of at least ``min_chars`` characters
    (the last may be shorter); they join back to ``text``."""
    pieces: list[str] = []
    current = ""
    for word in split_words(text):
        current += word
        if len(current) >= min_chars:
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces


def ramble(deltas: int, *, input_tokens: int = 100) -> list[Step]:
    """``ramble <n>``: a plain message of exactly ``deltas`` text deltas of ``RAMBLE_CHARS``+ characters."""
    bank = split_words(RAMBLE_TEXT.strip() + " ")
    pieces: list[str] = []
    current = ""
    position = 0
    while len(pieces) < deltas:
        word = bank[position % len(bank)]
        position += 1
        current += word if current or pieces else word.lstrip()
        if len(current) >= RAMBLE_CHARS:
            pieces.append(current)
            current = ""
    text = "".join(pieces)
    return [
        message_start(),
        *(text_delta(0, piece) for piece in pieces),
        block_stop(0),
        message_stop("end_turn"),
        metadata(input_tokens, estimate_tokens(len(text))),
    ]


def paced(steps: list[Step], pace: ModelPace) -> list[Step]:
    """``steps`` streamed at ``pace`` (see the module docstring)."""
    own_pauses = any(isinstance(step, Pause) for step in steps)
    out: list[Step] = []
    run: list[str] = []  # the text deltas of the current text block, not yet emitted
    run_index = 0
    streamed_chars = 0

    def emit(event: Step, chars: int) -> None:
        nonlocal streamed_chars
        if streamed_chars == 0:
            out.append(Pause(pace.first_token_s))
        elif not own_pauses:
            out.append(Pause(pace.delta_seconds(chars)))
        out.append(event)
        streamed_chars += max(1, chars)

    def flush() -> None:
        if not run:
            return
        text = "".join(run)
        run.clear()
        pieces = [text] if own_pauses else word_pieces(text, pace.tokens_per_delta * CHARS_PER_TOKEN)
        for piece in pieces:
            emit(text_delta(run_index, piece), len(piece))

    for step in steps:
        delta = step.get("contentBlockDelta") if isinstance(step, dict) else None
        if delta is not None and "text" in delta["delta"] and not own_pauses:
            if run and delta["contentBlockIndex"] != run_index:
                flush()
            run_index = delta["contentBlockIndex"]
            run.append(delta["delta"]["text"])
            continue
        flush()
        if own_pauses and isinstance(step, Pause) and streamed_chars == 0:
            continue  # the wait for the first token stands in for the script's first pause
        if delta is not None:
            body = delta["delta"]
            emit(step, len(body.get("text") or body.get("toolUse", {}).get("input", "")))
        elif isinstance(step, dict) and "metadata" in step:
            usage = dict(step["metadata"]["usage"])
            usage["outputTokens"] = estimate_tokens(streamed_chars)
            usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
            out.append({"metadata": {**step["metadata"], "usage": usage}})
        else:
            out.append(step)
    flush()
    return out


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
    """What the tools answered, said back (``offline_readback``): as a person would, or word for word."""
    uses: dict[str, tuple[str, Any]] = {}
    for block in previous.get("content") or []:
        use = block.get("toolUse")
        if not use:
            continue
        name, tool_input = use.get("name", ""), use.get("input")
        if name == WRAPPER_TOOL and isinstance(tool_input, Mapping) and isinstance(tool_input.get("name"), str):
            name, tool_input = tool_input["name"], tool_input.get("arguments")
        uses[use.get("toolUseId", "")] = (name, tool_input)
    literal = literal_wanted()
    said = []
    for result in results:
        name, tool_input = uses.get(result.get("toolUseId", ""), ("unknown tool", None))
        text, failed = _result_text(result), result.get("status") == "error"
        said.append(
            said_literally(name, text, failed=failed)
            if literal
            else said_naturally(name, tool_input, text, failed=failed)
        )
    return (". " if literal else " ").join(said)


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
