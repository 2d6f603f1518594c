"""The offline brain's ``tools`` directive: it says which tools the request offered it, so a person at
the local stack (or a test) sees what the model would see: the app's and devices' tools, the
conductor's own, and those of the MCP servers (``mcp.<server>.<tool>``).

The names are those of the ``tool_call`` wrapper's spec in ``toolConfig``: its input schema's
``name.enum``, or, without one, the ``- <name>: …`` lines of its description, in the order given:
"I was offered 14 tools: editor.openFile, …, mcp.demo.issues_search."
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.core.wrapper import WRAPPER_TOOL_NAME

NO_TOOLS = "I was offered no tools."
_TOOLS = re.compile(r"\s*tools\s*[.!]?\s*", re.IGNORECASE)
_LISTED = re.compile(r"^- ([^\s:]+):", re.MULTILINE)


def is_tools(transcript: str) -> bool:
    """Whether the transcript is the ``tools`` directive (any case, a trailing ``.``/``!`` allowed)."""
    return _TOOLS.fullmatch(transcript) is not None


def offered_tools(request: Mapping[str, Any]) -> list[str]:
    """The tool names the request's ``tool_call`` wrapper offers, in its order (none without one)."""
    config = request.get("toolConfig")
    tools = config.get("tools") if isinstance(config, Mapping) else None
    for tool in tools if isinstance(tools, list) else []:
        spec = tool.get("toolSpec") if isinstance(tool, Mapping) else None
        if isinstance(spec, Mapping) and spec.get("name") == WRAPPER_TOOL_NAME:
            return _names(spec)
    return []


def _names(spec: Mapping[str, Any]) -> list[str]:
    schema = (spec.get("inputSchema") or {}).get("json") or {}
    enum = ((schema.get("properties") or {}).get("name") or {}).get("enum")
    if isinstance(enum, list):
        return [str(name) for name in enum]
    return _LISTED.findall(str(spec.get("description") or ""))


def offered_tools_answer(request: Mapping[str, Any]) -> str:
    """The answer: ``I was offered <n> tools: <names>.`` (one tool: ``1 tool``), or ``NO_TOOLS``."""
    names = offered_tools(request)
    if not names:
        return NO_TOOLS
    return f"I was offered {len(names)} tool{'' if len(names) == 1 else 's'}: {', '.join(names)}."
