"""The one wrapper tool the model calls (``tool_call``) and how its uses are unwrapped.

The model never sees the app's tools directly: it asks for them through ``tool_call``
``{name, arguments, call_id}``; the conductor turns each use into a ``toolCall`` event.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.wire.protocol_tools import DeclaredTool

OWN_CALL_PREFIX = "conductor-"
"""Every id of the conductor's own calls (convo.setState, tts.speak) begins so: the model's call
ids never do (one that would is replaced by its tool use id), so the two never collide."""

WRAPPER_TOOL_NAME = "tool_call"


class ClientTool(BaseModel):
    """One tool of the app's catalog, as configured or as the app declared it."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    description: str
    arguments: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # How long the app may take to answer a call of this tool (None: the conductor's default).
    deadline_s: float | None = Field(default=None, gt=0, le=3600)
    effects: Literal["none", "changes"] = "none"
    background: bool = False

    @classmethod
    def of_declared(cls, tool: DeclaredTool) -> ClientTool:
        return cls(
            name=tool.name,
            description=tool.description,
            arguments=tool.arguments,
            deadline_s=tool.deadline_seconds,
            effects=tool.effects,
            background=tool.background,
        )


def wrapper_tool_spec(catalog: list[ClientTool]) -> dict[str, Any]:
    """The Bedrock ``toolSpec`` of the wrapper; its schema lists the catalog's names."""
    lines = [
        "Run one action in the user's VoiceIDE app (editor, project, build, terminal).",
        "Call it once per action; several calls in one reply run in parallel.",
        "Available tools (name: description; arguments JSON schema):",
    ]
    for tool in catalog:
        lines.append(f"- {tool.name}: {tool.description}; arguments {json.dumps(tool.arguments)}")
    return {
        "toolSpec": {
            "name": WRAPPER_TOOL_NAME,
            "description": "\n".join(lines),
            "inputSchema": {
                "json": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": [tool.name for tool in catalog]},
                        "arguments": {
                            "type": "object",
                            "description": "Arguments for the tool, matching its schema.",
                        },
                        "call_id": {"type": "string", "description": "Optional id for this call."},
                    },
                    "required": ["name", "arguments"],
                }
            },
        }
    }


@dataclass(frozen=True)
class UnwrappedCall:
    call_id: str
    name: str
    arguments: str  # a JSON object, serialized


@dataclass(frozen=True)
class RejectedUse:
    reason: str


def unwrap_tool_use(
    tool_use_id: str,
    tool_name: str,
    tool_input: Any,
    *,
    catalog_names: Collection[str],
    taken_call_ids: Collection[str],
) -> UnwrappedCall | RejectedUse:
    """Turn one model tool use into the app's tool call, or say why it is malformed."""
    if tool_name != WRAPPER_TOOL_NAME:
        return RejectedUse(f"unknown tool {tool_name!r}: use {WRAPPER_TOOL_NAME} to run app tools")
    if not isinstance(tool_input, dict):
        return RejectedUse(f"{WRAPPER_TOOL_NAME} input must be a JSON object")
    name = tool_input.get("name")
    if not isinstance(name, str) or not name.strip():
        return RejectedUse(f"{WRAPPER_TOOL_NAME} needs a tool name")
    if name not in catalog_names:
        return RejectedUse(f"tool {name!r} is not in the app's catalog: {', '.join(sorted(catalog_names))}")
    arguments = tool_input.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return RejectedUse(f"arguments of {name} are not valid JSON")
    if not isinstance(arguments, dict):
        return RejectedUse(f"arguments of {name} must be a JSON object")
    call_id = tool_input.get("call_id")
    if (
        not isinstance(call_id, str)
        or not call_id.strip()
        or call_id in taken_call_ids
        or len(call_id) > 128
        or call_id.startswith(OWN_CALL_PREFIX)
    ):
        call_id = tool_use_id
    return UnwrappedCall(
        call_id=call_id, name=name, arguments=json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    )
