"""Tools as the app declares them, over the local stack with the real client stub: the model is
offered exactly the declared tools, and a result over one frame crosses the gateway in parts."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from conductor_local.stack import LocalStack
from shared.core.background_report import REPORT_MARKER
from shared.wire.protocol import ErrorPayload, Event, SessionStart, make_event, parse_event
from shared.wire.protocol_tools import RESERVED_TOOL_NAMES
from voiceide_client.tools.declarations import declared_tools
from voiceide_client.tools.workspace import Workspace

from .conftest import TURN_TIMEOUT_S, async_test, client_for, is_state

KB = 1024
REPORTED = "The build.run you started in the background"  # how the offline brain reports it
GIT_STATUS = {"name": "git.status", "description": "The working tree's changed files"}
LINT = {
    "name": "lint.run",
    "description": "Run the linter on a file",
    "arguments": {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]},
}


def offered(stack: LocalStack) -> list[str]:
    """The tool names the newest ConverseStream request offered the model."""
    (request,) = [r for r in stack.bedrock_server.requests[-3:] if "toolConfig" in r.body][-1:]
    spec = request.body["toolConfig"]["tools"][0]["toolSpec"]
    return spec["inputSchema"]["json"]["properties"]["name"]["enum"]


@async_test
async def test_a_session_that_declares_two_tools_calls_them_and_the_model_sees_exactly_those(stack: LocalStack) -> None:
    linted: list[dict[str, Any]] = []

    async def lint(arguments: dict[str, Any]) -> dict[str, Any]:
        linted.append(arguments)
        return {"problems": 0}

    async def status(_: dict[str, Any]) -> dict[str, Any]:
        return {"changed": ["main.swift"]}

    tools = {"lint.run": lint, "git.status": status}
    async with client_for(stack, tools=tools, declared_tools=[GIT_STATUS, LINT]) as client:
        turn = await client.say('call lint.run {"file": "main.swift"}', timeout=TURN_TIMEOUT_S)
        assert turn.completed and linted == [{"file": "main.swift"}]
        names = offered(stack)
        assert names[:2] == ["git.status", "lint.run"] and set(names[2:]) == RESERVED_TOOL_NAMES
        turn = await client.say("call git.status {}", timeout=TURN_TIMEOUT_S)
        assert turn.completed and [call.name for call in turn.tool_calls if call.name == "git.status"] == ["git.status"]


@async_test
async def test_a_bad_declaration_gets_invalid_event_naming_the_tool(stack: LocalStack) -> None:
    """Sent as an app that does not check its declarations would (the stub itself refuses to)."""
    bad = {"name": "lint.run", "description": "x", "arguments": {"type": "object", "properties": {"f": {"type": 1}}}}
    session_id = str(uuid.uuid4())
    start = make_event(SessionStart(sessionId=session_id)).to_wire()
    start["kind"]["sessionStart"]["tools"] = [GIT_STATUS, bad]
    async with connect(stack.session_url(session_id)) as ws:
        await ws.send(json.dumps(start))
        answer = parse_event(await asyncio.wait_for(ws.recv(), 5))
    assert isinstance(answer, Event) and isinstance(answer.payload, ErrorPayload)
    assert answer.payload.code == "invalid_event" and "'lint.run'" in answer.payload.message


@async_test
async def test_a_100_kb_result_crosses_the_gateway_in_parts_and_the_model_sees_it(stack: LocalStack) -> None:
    content = "".join(f"line {n:05d}: let value = {n}\n" for n in range(4_000))
    assert len(content) > 100 * KB

    async def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"path": arguments["path"], "content": content}

    async with client_for(stack, tools={"editor.readFile": read_file}) as client:
        turn = await client.say('call editor.readFile {"path": "big.swift"}', timeout=TURN_TIMEOUT_S)
        assert turn.completed and client.errors == [] and client.gateway_frames == []
    parts = [e.payload for e in client.sent if e.kind_name == "toolResult" and e.payload.part is not None]
    assert len(parts) == 4 and sorted(p.part for p in parts) == [0, 1, 2, 3]
    assert all(len(e.to_json().encode()) <= 32 * KB for e in client.sent)  # every event one frame
    request = [r for r in stack.bedrock_server.requests if "toolConfig" in r.body][-1].body
    results = [b["toolResult"] for b in request["messages"][-1]["content"] if "toolResult" in b]
    (seen,) = [r["content"][0]["text"] for r in results]
    whole = json.dumps({"path": "big.swift", "content": content}, separators=(",", ":"))
    assert seen.startswith(whole[:1000]) and f"the result has {len(whole):,} characters" in seen


@async_test
async def test_an_edit_asked_for_by_voice_reaches_the_app_only_after_a_yes(stack: LocalStack, tmp_path: Path) -> None:
    source = tmp_path / "main.swift"
    source.write_text("let x = 1\nlet y = 2\n")
    original = source.read_text()
    edits: list[dict[str, Any]] = []

    async def replace_text(arguments: dict[str, Any]) -> dict[str, Any]:
        edits.append(arguments)
        lines = source.read_text().splitlines(keepends=True)
        start, end = arguments["startLine"] - 1, arguments["endLine"]
        source.write_text("".join([*lines[:start], arguments["text"] + "\n", *lines[end:]]))
        return {"replaced": True}

    ask = 'call editor.replaceText {"path": "main.swift", "startLine": 1, "endLine": 1, "text": "let x = 42"}'
    async with client_for(stack, tools={"editor.replaceText": replace_text}) as client:
        asked = await client.say(ask, timeout=TURN_TIMEOUT_S)
        assert asked.completed and edits == [] and asked.calls("editor.replaceText") == []
        assert "Replace line 1 of main.swift?" in asked.finals
        # The card follows the app's answer to the conductor's read of the file (this app runs no
        # editor.readFile: its error is noted on the card), which may come after the turn went idle.
        await client.wait_until(lambda: bool(client.ui.cards), TURN_TIMEOUT_S)
        (card,) = client.ui.cards
        assert card["type"] == "diff" and "+let x = 42" in card["body"]
        declined = await client.say("no", timeout=TURN_TIMEOUT_S)
        assert declined.completed and edits == [] and source.read_text() == original  # untouched
        assert any("editor.replaceText failed: declined by the user" in final for final in declined.finals)
        await client.say(ask, timeout=TURN_TIMEOUT_S)
        confirmed = await client.say("yes please", timeout=TURN_TIMEOUT_S)
        assert confirmed.completed and len(edits) == 1
        assert source.read_text() == "let x = 42\nlet y = 2\n"
        assert any("editor.replaceText returned" in final for final in confirmed.finals)


def test_a_20_s_build_does_not_hold_the_talk_and_is_reported_once_after_its_result(
    stack: LocalStack, tmp_path: Path
) -> None:
    """The stub's simulated build (its --build-seconds) runs 20 s while the person goes on talking."""
    asyncio.run(asyncio.wait_for(twenty_second_build(stack, tmp_path), 60))


async def twenty_second_build(stack: LocalStack, tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, build_seconds=20.0)
    handlers = workspace.handlers()
    async with client_for(stack, tools=handlers, declared_tools=declared_tools(handlers)) as client:
        started = await client.say('call build.run {"scheme": "App"}', timeout=TURN_TIMEOUT_S)
        assert started.completed and started.states == ["thinking", "idle"]
        (build,) = started.calls("build.run")
        assert not build.finished  # idle came while the build runs
        assert any('"started": true' in final for final in started.finals)
        other = await client.say("what is on the screen", timeout=TURN_TIMEOUT_S)
        assert other.completed and other.finals == ["You said: what is on the screen"] and not build.finished
        report = await client.wait_for(
            lambda e: e.kind_name == "assistantSpeechFinal" and e.payload.text.startswith(REPORTED), 40
        )
        assert build.finished and build.error is None  # the report came after the result
        await client.wait_for(lambda e: is_state(e, "idle"), 10, since=client.events.index(report))
    finals = [e.payload.text for e in client.events if e.kind_name == "assistantSpeechFinal"]
    reports = [text for text in finals if text.startswith(REPORTED)]
    assert len(reports) == 1 and '"status":"succeeded"' in reports[0] and REPORT_MARKER not in reports[0]
