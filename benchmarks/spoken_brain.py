"""The offline brain answering at the length a voice answer has, for the capacity speaker.

The offline brain (``conductor_local.bedrock.offline_brain``) answers a question with ``You said:
<transcript>`` (about 29 tokens) and calls a tool without a word: far shorter than what the
conductor's system prompt asks of the model ("short, natural spoken sentences", "say briefly what
you are about to do before you call tools, and report results in a sentence or two"). Here its
answers keep their shape (the same tool uses, the same stop reasons, ``count`` and ``ramble`` as
they are) and get a voice answer's length:

* an answer to a question: at least ``ANSWER_WORDS`` words (three or four spoken sentences, about
  17 s of speech at 160 words a minute);
* a read-back of tool results and a background report: at least ``READBACK_WORDS`` words (a
  sentence or two);
* a reply that calls tools without a word: ``PREAMBLE`` first, as the system prompt asks.

Each request it answers is noted (``requests``: its estimated input and whether it carried tools),
cut-short streams included, since Bedrock counts a request's input when it starts.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conductor_local.bedrock.offline_brain import ModelPace, OfflineBrain, paced
from conductor_local.bedrock.script import Pause, RaiseInStream, Step, block_stop, split_words, text_delta
from conductor_local.bedrock.validation import estimate_input_tokens
from shared.core.background_report import REPORT_MARKER

ANSWER_WORDS = 45
READBACK_WORDS = 25
PREAMBLE = "Okay, let me do that for you now."
ANSWER_SENTENCES = (
    "The parser reads the file in two passes: first it splits the text into tokens, then it builds the tree.",
    "The failing test expects an empty input to give an empty list, but the code returns nothing at all.",
    "I would start with the function that handles the first line, since every other case goes through it.",
    "If you want, I can open it and walk you through the exact spot.",
)
"""Spoken sentences appended, in turn, until an answer is long enough."""


@dataclass(frozen=True)
class Request:
    input_tokens: int
    """The endpoint's estimate (characters / 4 of the request's compact JSON)."""
    tools: bool
    """The request carried tool specs (so Claude adds its tool-use system prompt)."""


class SpokenBrain:
    """A ``LocalBedrockServer`` responder: the offline brain's answers at a voice answer's length."""

    def __init__(self, pace: ModelPace | None = None) -> None:
        self._brain = OfflineBrain()
        self.pace = pace
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    def __call__(self, model_id: str, request: dict[str, Any]) -> list[Step]:
        with self._lock:
            self.requests.append(Request(estimate_input_tokens(request), bool(request.get("toolConfig"))))
        steps = spoken(self._brain.reply(request), READBACK_WORDS if _reads_back(request) else ANSWER_WORDS)
        return steps if self.pace is None else paced(steps, self.pace)

    def mark(self) -> int:
        with self._lock:
            return len(self.requests)

    def since(self, mark: int) -> list[Request]:
        with self._lock:
            return list(self.requests[mark:])


def _reads_back(request: Mapping[str, Any]) -> bool:
    """The reply says tool results or a background report back (rather than answering a question)."""
    messages = request.get("messages") or []
    if not messages:
        return False
    content = messages[-1].get("content") or []
    if any("toolResult" in block for block in content):
        return True
    texts = [str(block["text"]) for block in content if "text" in block]
    return bool(texts) and texts[-1].strip().startswith(REPORT_MARKER)


def spoken(steps: list[Step], words: int) -> list[Step]:
    """``steps`` (one whole unpaced message) with a text answer lengthened to ``words`` words, or a
    spoken preamble before tool uses that have none. Scripts with pauses or a broken stream (``count``,
    ``slow``, ``fail``) and messages without a messageStop stay as they are."""
    if any(isinstance(step, Pause | RaiseInStream) for step in steps):
        return steps
    if not any(isinstance(step, dict) and "messageStop" in step for step in steps):
        return steps
    texts: dict[int, str] = {}
    tools = False
    for step in steps:
        if not isinstance(step, dict):
            continue
        start = step.get("contentBlockStart")
        if start is not None and "toolUse" in start.get("start", {}):
            tools = True
        delta = step.get("contentBlockDelta")
        if delta is not None and "text" in delta["delta"]:
            index = delta["contentBlockIndex"]
            texts[index] = texts.get(index, "") + delta["delta"]["text"]
    if tools:
        return steps if texts else _with_preamble(steps)
    if len(texts) != 1:
        return steps
    ((index, text),) = texts.items()
    longer = lengthened(text, words)
    if longer == text:
        return steps
    out: list[Step] = []
    for step in steps:
        delta = step.get("contentBlockDelta") if isinstance(step, dict) else None
        if delta is not None and delta["contentBlockIndex"] == index:
            continue
        if isinstance(step, dict) and step.get("contentBlockStop", {}).get("contentBlockIndex") == index:
            out += [text_delta(index, piece) for piece in split_words(longer)]
        out.append(step)
    return out


def lengthened(text: str, words: int) -> str:
    """``text`` with ``ANSWER_SENTENCES`` appended in turn until it has at least ``words`` words."""
    count = len(text.split())
    sentence = 0
    while count < words:
        addition = ANSWER_SENTENCES[sentence % len(ANSWER_SENTENCES)]
        stem = text.rstrip()
        if stem and stem[-1] not in ".?!":
            stem += "."
        text = f"{stem} {addition}" if stem else addition
        count += len(addition.split())
        sentence += 1
    return text


def _with_preamble(steps: list[Step]) -> list[Step]:
    """``PREAMBLE`` as block 0, every other block one index on."""
    out: list[Step] = []
    for step in steps:
        if isinstance(step, dict) and "messageStart" in step:
            out.append(step)
            out += [text_delta(0, piece) for piece in split_words(PREAMBLE)]
            out.append(block_stop(0))
            continue
        out.append(_shifted(step))
    return out


def _shifted(step: Step) -> Step:
    if not isinstance(step, dict):
        return step
    for key in ("contentBlockStart", "contentBlockDelta", "contentBlockStop"):
        body = step.get(key)
        if isinstance(body, dict) and "contentBlockIndex" in body:
            return {**step, key: {**body, "contentBlockIndex": body["contentBlockIndex"] + 1}}
    return step
