"""Tool declarations in sessionStart: each refusal names the tool; the limits keep one frame."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.wire.protocol import ErrorCode, ProtocolError, SessionStart, parse_event
from shared.wire.protocol_tools import MAX_DECLARED_TOOLS, MAX_TOOL_SCHEMA_BYTES, MAX_TOOLS_BYTES, compact_size

API_GATEWAY_FRAME_BYTES = 32 * 1024


def start(tools: Any) -> str:
    return json.dumps(
        {
            "id": "550e8400-e29b-41d4-a716-446655440000",
            "timestamp": "2025-01-15T10:30:00Z",
            "kind": {"sessionStart": {"sessionId": "9c5b94b1-35ad-49bb-b118-8e8fc24abf80", "tools": tools}},
        }
    )


def tool(name: str = "git.status", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": "Does one thing", **fields}


def refusal(tools: Any) -> str:
    outcome = parse_event(start(tools))
    assert isinstance(outcome, ProtocolError) and outcome.code == ErrorCode.INVALID_EVENT
    return outcome.message


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        (tool("git status"), "'git status'"),
        (tool("9lives"), "'9lives'"),
        (tool("tts.speak"), "'tts.speak': the name is the protocol's own call"),
        (tool(arguments={"type": "object", "properties": {"a": {"type": "nope"}}}), "'git.status': arguments is not"),
        (tool(arguments={"type": "string"}), "'git.status': arguments must be the schema of an object"),
        (tool(arguments={"type": "object", "description": "x" * MAX_TOOL_SCHEMA_BYTES}), "'git.status': arguments"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_tool(declared: dict[str, Any], says: str) -> None:
    assert says in refusal([declared])


def test_names_are_unique_counts_and_sizes_are_bounded() -> None:
    assert "'a.b' is declared twice" in refusal([tool("a.b"), tool("a.b")])
    assert "tools" in refusal([tool(f"t{n}") for n in range(MAX_DECLARED_TOOLS + 1)])
    padded = {"type": "object", "description": "x" * (MAX_TOOL_SCHEMA_BYTES - 60)}
    over = [tool(f"t{n}", arguments=padded) for n in range(MAX_TOOLS_BYTES // MAX_TOOL_SCHEMA_BYTES + 1)]
    assert f"over {MAX_TOOLS_BYTES}" in refusal(over)


def test_the_most_a_session_start_may_declare_fits_one_frame_of_api_gateway() -> None:
    tools: list[dict[str, Any]] = []
    n = 0
    while True:
        candidate = tool(f"tool.n{n:02d}", arguments={"type": "object", "description": "x" * 150})
        if compact_size([*tools, candidate]) > MAX_TOOLS_BYTES or len(tools) == MAX_DECLARED_TOOLS:
            break
        tools.append(candidate)
        n += 1
    parsed = parse_event(start(tools))
    assert not isinstance(parsed, ProtocolError), parsed
    assert isinstance(parsed.payload, SessionStart) and len(parsed.payload.tools or ()) == len(tools)
    assert len(start(tools).encode()) < API_GATEWAY_FRAME_BYTES // 2 + 1024


def test_declared_fields_round_trip_with_their_defaults() -> None:
    parsed = parse_event(start([tool(deadlineSeconds=600, effects="changes", background=True), tool("b")]))
    assert not isinstance(parsed, ProtocolError)
    first, second = parsed.payload.tools
    assert (first.deadline_seconds, first.effects, first.background) == (600, "changes", True)
    assert (second.deadline_seconds, second.effects, second.background, second.arguments) == (
        None,
        "none",
        False,
        {"type": "object"},
    )
