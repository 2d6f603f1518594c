"""Tools the app declares in sessionStart: the model sees exactly those, kept with the session."""

from __future__ import annotations

import json
from typing import Any

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.wire.protocol_tools import RESERVED_TOOL_NAMES
from tests.handlers.conftest import Harness

GIT_STATUS = {
    "name": "git.status",
    "description": "The working tree's changed files",
    "arguments": {"type": "object", "properties": {"path": {"type": "string"}}},
}
RUN_LINT = {
    "name": "lint.run",
    "description": "Run the linter on a file",
    "arguments": {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]},
    "deadlineSeconds": 120,
}


def protocol_calls() -> list[str]:
    """The catalog's protocol calls (tts.speak, convo.setState): offered beside declared tools."""
    return [tool.name for tool in runtime.settings().catalog if tool.name in RESERVED_TOOL_NAMES]


def offered(body: dict[str, Any]) -> list[str]:
    """The tool names the request's wrapper tool offers the model."""
    (spec, *rest) = body["toolConfig"]["tools"]
    assert all("cachePoint" in block for block in rest)
    return spec["toolSpec"]["inputSchema"]["json"]["properties"]["name"]["enum"]


def test_the_model_sees_exactly_the_declared_tools_and_calls_them(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "tools": [GIT_STATUS, RUN_LINT]})
    conductor.script.push(message(tool_call("lint.run", {"file": "main.swift"})), message("Lint is clean."))
    conductor.say(conn, "lint main")
    request = conductor.script.requests[0].body
    assert offered(request) == ["git.status", "lint.run", *protocol_calls()] and protocol_calls()
    assert "lint.run: Run the linter on a file" in request["toolConfig"]["tools"][0]["toolSpec"]["description"]
    (call,) = [e.payload for e in conductor.events(conn) if e.kind_name == "toolCall" and e.payload.name == "lint.run"]
    assert json.loads(call.arguments) == {"file": "main.swift"}
    state = runtime.store().load(conn.session_id)
    assert state is not None and state.turn is not None and state.turn.tools is not None
    (pending,) = state.turn.tools.pending()
    assert 119 <= pending.deadline - state.turn.tools.sent_at <= 121  # the declared deadline
    conductor.answer(conn, call.call_id, '{"problems":0}')
    second = conductor.script.requests[1].body
    assert second["toolConfig"] == request["toolConfig"]  # the same block: the prompt cache reads it again


def test_a_catalog_tool_the_app_did_not_declare_is_refused_to_the_model(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "tools": [GIT_STATUS]})
    conductor.script.push(message(tool_call("build.run", {})), message("I cannot build here."))
    conductor.say(conn, "build it")
    assert ("error", "invalid_tool_call") in conductor.summary(conn)
    assert not [e for e in conductor.events(conn) if e.kind_name == "toolCall" and e.payload.name == "build.run"]


def test_a_reconnect_without_tools_keeps_them_and_one_with_tools_replaces_them(conductor: Harness) -> None:
    first = conductor.connect()
    conductor.send(first, "sessionStart", {"sessionId": first.session_id, "tools": [GIT_STATUS, RUN_LINT]})
    again = conductor.connect(first.session_id)
    conductor.send(again, "sessionStart", {"sessionId": first.session_id})
    conductor.script.push(message("Kept."))
    conductor.say(again, "what can you do")
    assert offered(conductor.script.requests[-1].body) == ["git.status", "lint.run", *protocol_calls()]
    conductor.finish_turn(again)
    conductor.send(again, "sessionStart", {"sessionId": first.session_id, "tools": [RUN_LINT]})
    conductor.script.push(message("Replaced."))
    conductor.say(again, "and now")
    assert offered(conductor.script.requests[-1].body) == ["lint.run", *protocol_calls()]


def test_a_session_that_declares_none_gets_the_catalog(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(message("Hello."))
    conductor.say(conn, "hello")
    assert offered(conductor.script.requests[-1].body) == [tool.name for tool in runtime.settings().catalog]


def test_a_bad_declaration_is_an_invalid_event_naming_the_tool_and_changes_nothing(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "tools": [GIT_STATUS]})
    bad = {"name": "lint.run", "description": "x", "arguments": {"type": "object", "properties": {"f": {"type": 7}}}}
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "tools": [bad]})
    errors = [e.payload for e in conductor.events(conn) if e.kind_name == "error"]
    assert errors and errors[-1].code == "invalid_event" and "'lint.run'" in errors[-1].message
    state = runtime.store().load(conn.session_id)
    assert state is not None and [tool.name for tool in state.tools or ()] == ["git.status"]
