"""Tools an app declares in ``sessionStart``: what the session's model may ask the app to run.

Each declaration is checked on arrival, so a bad one is an ``invalid_event`` naming the tool and
never reaches the model: a name pattern, a description, arguments that are a valid JSON Schema
(draft 2020-12, checked with ``jsonschema``) of an object, and the sizes below, which keep a
``sessionStart`` carrying all of them well under API Gateway's 32 KB frame.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator

TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$"
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
MAX_DECLARED_TOOLS = 64
MAX_TOOL_DESCRIPTION = 1024
MAX_TOOL_SCHEMA_BYTES = 2048  # one tool's arguments schema, as compact JSON
MAX_TOOLS_BYTES = 16 * 1024  # all declarations together, as compact JSON
MAX_TOOL_DEADLINE_S = 3600
MAX_RESULT_PARTS = 64  # a toolResult in parts: at most this many events
MAX_RESULT_CHARS = 1_000_000  # and at most this many characters once assembled
# The protocol's own calls (the conductor makes them) and the conductor's own tools (the model calls
# them through the wrapper; the conductor answers them itself): no app may declare these names.
STATUS_TOOL = "conductor.status"
CANCEL_TOOL = "conductor.cancel"
# What the conductor remembers of the person across sessions (``shared.core.person_memory``).
MEMORY_TOOL_NAMES = frozenset({"memory.search", "memory.write", "memory.forget"})
CONDUCTOR_TOOL_NAMES = frozenset({STATUS_TOOL, CANCEL_TOOL, *MEMORY_TOOL_NAMES})
RESERVED_TOOL_NAMES = frozenset({"tts.speak", "convo.setState", *CONDUCTOR_TOOL_NAMES})
# Tools on the MCP servers a stage names are offered as ``mcp.<server>.<tool>`` (``shared.core.mcp_tools``).
MCP_TOOL_PREFIX = "mcp."


def compact_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


class DeclaredTool(BaseModel):
    """One tool as the app declares it."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    name: StrictStr
    description: StrictStr = Field(min_length=1, max_length=MAX_TOOL_DESCRIPTION)
    arguments: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    deadline_seconds: int | None = Field(default=None, ge=1, le=MAX_TOOL_DEADLINE_S, alias="deadlineSeconds")
    effects: Literal["none", "changes"] = "none"
    background: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _shape_checked(cls, raw: Any) -> Any:
        """Each field's type, checked with the tool's name in the message (pydantic's own messages
        name only a list index)."""
        if not isinstance(raw, dict):
            raise ValueError("a declared tool must be an object with name and description")
        name = raw.get("name")
        if not isinstance(name, str):
            raise ValueError("a declared tool needs a name (a string)")
        label = f"tool {name[:80]!r}"
        description = raw.get("description")
        if not isinstance(description, str) or not 1 <= len(description) <= MAX_TOOL_DESCRIPTION:
            raise ValueError(f"{label}: description must be a string of 1 to {MAX_TOOL_DESCRIPTION} characters")
        if "arguments" in raw and not isinstance(raw["arguments"], dict):
            raise ValueError(f"{label}: arguments must be the schema of an object (a JSON object with type: object)")
        deadline = raw.get("deadlineSeconds", raw.get("deadline_seconds"))
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, int) or not 1 <= deadline <= MAX_TOOL_DEADLINE_S
        ):
            raise ValueError(f"{label}: deadlineSeconds must be a whole number of seconds, 1 to {MAX_TOOL_DEADLINE_S}")
        if "effects" in raw and raw["effects"] not in ("none", "changes"):
            raise ValueError(f"{label}: effects must be 'none' or 'changes'")
        if "background" in raw and not isinstance(raw["background"], bool):
            raise ValueError(f"{label}: background must be true or false")
        return raw

    @field_validator("name")
    @classmethod
    def _name_checked(cls, name: str) -> str:
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(
                f"tool {name[:80]!r}: a name starts with a letter and has at most 64 letters, digits, '.', '_', '-'"
            )
        return name

    @model_validator(mode="after")
    def _checked(self) -> DeclaredTool:
        if self.name in RESERVED_TOOL_NAMES:
            raise ValueError(f"tool {self.name!r}: the name is the protocol's own call")
        if self.name.startswith(MCP_TOOL_PREFIX):
            raise ValueError(f"tool {self.name!r}: names beginning {MCP_TOOL_PREFIX!r} are the MCP servers' tools")
        size = compact_size(self.arguments)
        if size > MAX_TOOL_SCHEMA_BYTES:
            raise ValueError(f"tool {self.name!r}: arguments schema is {size} bytes, over {MAX_TOOL_SCHEMA_BYTES}")
        # imported on first use: most sessionStarts declare nothing, and a cold start should not pay for it
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(self.arguments)
        except SchemaError as error:
            where = "/".join(str(part) for part in error.path) or "the schema"
            raise ValueError(
                f"tool {self.name!r}: arguments is not a valid JSON Schema ({where}: {error.message})"
            ) from None
        if self.arguments.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: arguments must be the schema of an object (type: object)")
        return self


def checked_declarations(tools: tuple[DeclaredTool, ...] | None) -> tuple[DeclaredTool, ...] | None:
    """The declarations of one ``sessionStart``: unique names, at most the total size."""
    if tools is None:
        return None
    if len(tools) > MAX_DECLARED_TOOLS:
        extra = tools[MAX_DECLARED_TOOLS]
        raise ValueError(f"tool {extra.name!r} is one too many: at most {MAX_DECLARED_TOOLS} tools may be declared")
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ValueError(f"tool {tool.name!r} is declared twice")
        seen.add(tool.name)
    total = compact_size([tool.model_dump(by_alias=True, exclude_defaults=True) for tool in tools])
    if total > MAX_TOOLS_BYTES:
        raise ValueError(f"the tools take {total} bytes, over {MAX_TOOLS_BYTES}")
    return tools
