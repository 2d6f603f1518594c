"""What a model stream yields, and the assistant message it adds up to."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shared.core.messages import Block, reasoning_block, text_block, tool_use_block


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolUseStarted:
    tool_use_id: str
    name: str


@dataclass(frozen=True)
class ToolUseRequest:
    """A complete tool use; ``input`` is None when the joined input JSON was not an object."""

    tool_use_id: str
    name: str
    input: dict[str, Any] | None


@dataclass(frozen=True)
class ReasoningBlock:
    """A complete reasoning ("thinking") block: never spoken, but kept in the assistant message,
    since a thinking model needs it back, unmodified, to continue after tool results."""

    text: str
    signature: str | None = None
    redacted: str | None = None  # base64 of content the provider encrypted


@dataclass(frozen=True)
class MessageEnd:
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)


StreamItem = TextDelta | ToolUseStarted | ToolUseRequest | ReasoningBlock | MessageEnd


def parse_tool_input(raw: str) -> dict[str, Any] | None:
    """Join-and-parse of streamed tool input; an empty input is an empty object."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass
class ModelMessage:
    """The assistant message a stream produced, block by block in order."""

    content: list[Block] = field(default_factory=list)
    tool_uses: list[ToolUseRequest] = field(default_factory=list)
    stop_reason: str = ""
    usage: dict[str, int] = field(default_factory=dict)

    def add(self, item: StreamItem) -> None:
        if isinstance(item, TextDelta):
            if self.content and "text" in self.content[-1]:
                self.content[-1] = text_block(self.content[-1]["text"] + item.text)
            else:
                self.content.append(text_block(item.text))
        elif isinstance(item, ReasoningBlock):
            self.content.append(reasoning_block(item.text, item.signature, item.redacted))
        elif isinstance(item, ToolUseRequest):
            self.tool_uses.append(item)
            self.content.append(tool_use_block(item.tool_use_id, item.name, item.input or {}))
        elif isinstance(item, MessageEnd):
            self.stop_reason = item.stop_reason
            self.usage = dict(item.usage)

    def history_content(self) -> list[Block]:
        """Content Bedrock accepts back: blank text blocks dropped, text stripped at the ends."""
        blocks: list[Block] = []
        for block in self.content:
            if "text" in block:
                if block["text"].strip():
                    blocks.append(text_block(block["text"].strip()))
            else:
                blocks.append(block)
        return blocks
