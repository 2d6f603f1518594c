"""An MCP server's answers as the conductor reads them: a listed tool with its hints, and a tool's
result as bounded text. Called on the event loop, after the SDK is loaded."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from shared.core.mcp_tools import McpResult, McpTool

if TYPE_CHECKING:
    from mcp_types import CallToolResult, Tool

MAX_RESULT_CHARS = 200_000
_NOTE_ROOM = 100  # the characters kept for the note saying what was cut


def mcp_tool(server: str, tool: Tool) -> McpTool:
    """A listed tool, its hints read with MCP's defaults (not read-only, destructive, open world).

    Destructive and idempotent mean something only for a tool that is not read-only: a read-only
    tool is not destructive, and is idempotent."""
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    destructive = not read_only and (hints is None or hints.destructive_hint is None or hints.destructive_hint)
    return McpTool(
        server=server,
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        read_only=read_only,
        destructive=destructive,
        idempotent=read_only or bool(hints and hints.idempotent_hint),
        open_world=hints is None or hints.open_world_hint is None or hints.open_world_hint,
        title=tool.title or (hints.title if hints else None),
    )


def render(result: CallToolResult) -> McpResult:
    """Text content joined; images, audio and binary resources summarised (``[image: image/png, 1234
    bytes]``); ``structuredContent`` as compact JSON when no text came with it; at most
    ``MAX_RESULT_CHARS``."""
    from mcp_types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    parts: list[str] = []
    texts = 0
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
            texts += 1
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, {_decoded_size(block.data)} bytes]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if hasattr(resource, "text"):
                parts.append(resource.text)
                texts += 1
            else:
                mime = resource.mime_type or "application/octet-stream"
                parts.append(f"[resource: {resource.uri}, {mime}, {_decoded_size(resource.blob)} bytes]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource link: {block.name}, {block.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'unknown')} content]")
    if not texts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False))
    return McpResult(bounded("\n".join(parts)), is_error=result.is_error)


def bounded(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text``, or its start and a note of what was cut: ``limit`` characters at most in all."""
    if len(text) <= limit:
        return text
    kept = limit - _NOTE_ROOM
    return text[:kept] + f"\n[… cut here: {len(text) - kept:,} more characters of the result were left out]"


def _decoded_size(data: str) -> int:
    """The size of base64 ``data`` once decoded, without decoding it."""
    data = data.strip()
    return len(data) * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)
