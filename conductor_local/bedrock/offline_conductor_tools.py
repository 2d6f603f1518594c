"""The offline brain's questions about running calls: it asks the conductor's own tools as a model
would, so the local stack answers "how's the build going?" and "cancel the build" from what the
app reported.

``how's the <thing> going`` (or ``how is``)
    One ``tool_call`` use of ``conductor.status`` (no arguments); the next reply reads its result
    back, progress included.

``cancel the <thing>``
    One ``tool_call`` use of ``conductor.cancel`` naming the latest tool of the conversation whose
    name starts with ``<thing>`` (``build`` → ``build.run``), or with no arguments when none does.
    "stop the build" stays ordinary speech (the ``stop`` directive's rule).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from shared.core.wrapper import WRAPPER_TOOL_NAME
from shared.wire.protocol_tools import CANCEL_TOOL, STATUS_TOOL

_STATUS = re.compile(r"how(?:'s| is) the ([\w.-]+) going\??", re.IGNORECASE)
_CANCEL = re.compile(r"cancel the ([\w.-]+)", re.IGNORECASE)


def conductor_calls(directive: str, messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]] | None:
    """``[(tool name, arguments)]`` for a question about running calls, None for anything else."""
    if _STATUS.fullmatch(directive):
        return [(STATUS_TOOL, {})]
    if match := _CANCEL.fullmatch(directive):
        name = _latest_tool(messages, match.group(1).lower())
        return [(CANCEL_TOOL, {"name": name} if name else {})]
    return None


def _latest_tool(messages: Sequence[Mapping[str, Any]], prefix: str) -> str | None:
    for message in reversed(messages):
        for block in reversed(message.get("content") or []):
            use = block.get("toolUse") if isinstance(block, Mapping) else None
            if not use or use.get("name") != WRAPPER_TOOL_NAME:
                continue
            name = (use.get("input") or {}).get("name")
            if isinstance(name, str) and name.lower().startswith(prefix):
                return name
    return None
