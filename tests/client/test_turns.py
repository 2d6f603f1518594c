"""Turns against the fake conductor: speech, tool calls, odd frames, duplicates, timeouts."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Event,
    ToolCall,
    ToolResult,
    make_event,
    now_timestamp,
)
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.conversation.turn import TurnTimeout
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import SilentSpeaker

from .fake_conductor import FakeConductor, FakeSession, async_test, speak, standard_turn


@async_test
async def test_full_turn_returns_partials_final_speech_and_states() -> None:
    speaker = SilentSpeaker()
    seen = []
    async with (
        FakeConductor(standard_turn("Hi there friend")) as fake,
        ConductorClient(fake.url, tools=ToolRouter(speaker), on_event=seen.append) as client,
    ):
        result = await client.say("hello")

        assert result.completed
        assert result.transcript == "hello"
        assert result.partials == ["Hi", "Hi there", "Hi there friend"]
        assert result.finals == ["Hi there friend"] and result.final_text == "Hi there friend"
        assert result.states == ["thinking", "idle"]
        assert [call.name for call in result.tool_calls] == ["convo.setState", "tts.speak", "convo.setState"]
        assert result.calls("tts.speak")[0].value == {"spoken": True}
        assert all(call.finished and call.error is None for call in result.tool_calls)
        assert result.errors == []
        assert [e.kind_name for e in result.events] == ["toolCall"] + ["assistantSpeechPartial"] * 3 + [
            "assistantSpeechFinal",
            "toolCall",
            "toolCall",
        ]
        assert speaker.spoken == ["Hi there friend"]
        assert client.state == "idle"
        assert [e.kind_name for e in client.events] == ["sessionReady", *(e.kind_name for e in result.events)]
        assert seen == client.events and client.events[1:] == result.events
        assert client.last_seq == 4  # thinking, final, tts.speak, idle: partials are unnumbered

        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(session.results()) == 3)
        assert session.transcripts() == ["hello"]
        assert [r.call_id for r in session.results()] == [c.call_id for c in result.tool_calls]
        assert {r.result for r in session.results()} == {'{"ok":true}', '{"spoken":true}'}


async def _open_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"opened": arguments["path"]}


@async_test
async def test_model_tool_call_then_two_parallel_calls_are_answered() -> None:
    lint_started = asyncio.Event()
    answers: dict[str, Any] = {}

    async def format_file(arguments: dict[str, Any]) -> dict[str, Any]:
        await lint_started.wait()  # only returns if lint runs at the same time
        return {"formatted": True}

    async def lint(arguments: dict[str, Any]) -> list[str]:
        lint_started.set()
        return ["ok"]

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        answers["open"] = await session.call("editor.openFile", {"path": "main.swift"})
        pending = [
            await session.call_nowait("editor.format", {"path": "main.swift"}),
            await session.call_nowait("editor.lint", {}),
        ]
        answers["parallel"] = await asyncio.gather(*pending)
        await speak(session, "Done.")
        await session.call_nowait("convo.setState", {"state": "idle"})

    tools = {"editor.openFile": _open_file, "editor.format": format_file, "editor.lint": lint}
    async with FakeConductor(turn) as fake, ConductorClient(fake.url, tools=tools) as client:
        result = await client.say("open main.swift and tidy it")

    assert answers["open"].result == '{"opened":"main.swift"}' and answers["open"].error is None
    assert [r.result for r in answers["parallel"]] == ['{"formatted":true}', '["ok"]']
    model_calls = [c for c in result.tool_calls if c.name.startswith("editor.")]
    assert [(c.name, c.args, c.value) for c in model_calls] == [
        ("editor.openFile", {"path": "main.swift"}, {"opened": "main.swift"}),
        ("editor.format", {"path": "main.swift"}, {"formatted": True}),
        ("editor.lint", {}, ["ok"]),
    ]


@async_test
async def test_unknown_tool_and_bad_arguments_get_error_results() -> None:
    answers = {}

    async def turn(session: FakeSession, text: str) -> None:
        answers["unknown"] = await session.call("editor.teleport", {"to": "moon"})
        answers["bad_json"] = await session.call("editor.openFile", "{not json")
        answers["not_object"] = await session.call("editor.openFile", "[1, 2]")
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with (
        FakeConductor(turn) as fake,
        ConductorClient(fake.url, tools={"editor.openFile": _open_file}) as client,
    ):
        result = await client.say("go")

    assert answers["unknown"].result is None
    assert answers["unknown"].error == "unknown tool: editor.teleport"
    assert answers["bad_json"].result is None and "not valid JSON" in (answers["bad_json"].error or "")
    assert answers["not_object"].error == "arguments must be a JSON object"
    assert result.calls("editor.teleport")[0].error == "unknown tool: editor.teleport"


@async_test
async def test_unknown_kinds_ignored_and_duplicates_handled_once() -> None:
    opened: list[str] = []

    async def open_file(arguments: dict[str, Any]) -> dict[str, bool]:
        opened.append(arguments["path"])
        return {"ok": True}

    async def turn(session: FakeSession, text: str) -> None:
        await session.send_raw(
            json.dumps(
                {
                    "id": str(uuid.uuid4()),
                    "timestamp": now_timestamp(),
                    "seq": session.next_seq(),
                    "kind": {"assistantHologram": {"shape": "cube"}},
                }
            )
        )
        open_a = ToolCall(call_id="c-1", name="editor.openFile", arguments='{"path":"a.swift"}')
        call = make_event(open_a, seq=session.next_seq())
        await session.send_event(call)
        await session.send_event(call)  # the same event id again
        await session.send_event(make_event(open_a, seq=call.seq))  # a new id, but the same seq
        await session.send(AssistantSpeechFinal(text="Opened."))
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with (
        FakeConductor(turn) as fake,
        ConductorClient(fake.url, tools={"editor.openFile": open_file}) as client,
    ):
        result = await client.say("open a")
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(session.results()) == 2)

    assert opened == ["a.swift"]
    assert [r.call_id for r in session.results()].count("c-1") == 1
    assert [i.kind_name for i in client.ignored] == ["assistantHologram"]
    assert len(client.duplicates) == 2
    assert result.final_text == "Opened." and result.completed
    assert client.last_seq == 4
    assert client.errors == []


@async_test
async def test_a_call_sent_again_as_a_new_event_is_not_run_again_its_result_is_resent() -> None:
    """After a reconnect the conductor re-sends a call still waiting for its result (a new event,
    new seq, same callId): the build is not run twice; the same toolResult event goes again."""
    builds: list[str] = []
    release = asyncio.Event()
    build_calls_seen: list[Event] = []

    def release_after_the_repeat(event: Event) -> None:  # runs once the client has handled the event
        if isinstance(event.payload, ToolCall) and event.payload.call_id == "c-build":
            build_calls_seen.append(event)
            if len(build_calls_seen) == 2:
                release.set()

    async def build(arguments: dict[str, Any]) -> dict[str, str]:
        builds.append(arguments["scheme"])
        await release.wait()
        return {"status": "succeeded"}

    async def turn(session: FakeSession, text: str) -> None:
        build_call = ToolCall(call_id="c-build", name="build.run", arguments='{"scheme":"App"}')
        await session.send(build_call)
        await session.send(build_call)  # while it still runs: answered once, when done
        await session.wait_until(lambda: len(session.results()) == 1)
        await session.send(build_call)  # after it answered: the answer goes again
        await session.wait_until(lambda: len(session.results()) == 2)
        await session.send(AssistantSpeechFinal(text="Built."))
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with (
        FakeConductor(turn) as fake,
        ConductorClient(fake.url, tools={"build.run": build}, on_event=release_after_the_repeat) as client,
    ):
        result = await client.say("build it")
        session = fake.sessions[client.session_id]

    assert builds == ["App"]
    assert [c.call_id for c in client.repeated_calls] == ["c-build", "c-build"]
    answers = [e for _, e in session.received if isinstance(e.payload, ToolResult) and e.payload.call_id == "c-build"]
    assert len(answers) == 2 and answers[0] == answers[1]  # the same event: the conductor takes it once
    assert answers[0].payload.result == '{"status":"succeeded"}'
    assert result.completed and result.final_text == "Built."
    assert client.errors == []


@async_test
async def test_undecodable_frames_are_decode_errors_and_the_turn_goes_on() -> None:
    async def turn(session: FakeSession, text: str) -> None:
        await session.send_raw("this is not json")
        await session.send_raw(json.dumps({"id": "x", "timestamp": "yesterday", "kind": {}}))
        await session.send_raw(b"\xff\xfe")
        await standard_turn("Still here.")(session, text)

    async with FakeConductor(turn) as fake, ConductorClient(fake.url) as client:
        result = await client.say("are you there")

    assert client.error_codes == [ErrorCode.DECODE_ERROR] * 3
    assert [e.code for e in result.errors] == [ErrorCode.DECODE_ERROR] * 3
    assert "invalid_json" in client.errors[0].payload.message
    assert result.completed and result.final_text == "Still here."


@async_test
async def test_server_error_event_is_part_of_the_turn() -> None:
    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.send(ErrorPayload(code="bedrock_error", message="throttled"))
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with FakeConductor(turn) as fake, ConductorClient(fake.url) as client:
        result = await client.say("hi")

    assert [(e.code, e.message) for e in result.errors] == [("bedrock_error", "throttled")]
    assert client.errors == []  # a server error is received, not raised by the client
    assert result.completed and result.states == ["thinking", "idle"]


@async_test
async def test_turn_that_never_goes_idle_times_out_with_what_happened() -> None:
    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.send(AssistantSpeechPartial(text="Hmm"))

    async with FakeConductor(turn) as fake, ConductorClient(fake.url) as client:
        with pytest.raises(TurnTimeout) as caught:
            await client.say("think forever", timeout=0.3)

    assert not caught.value.result.completed
    assert caught.value.result.partials == ["Hmm"]
    assert client.state == "thinking"


@async_test
async def test_a_new_transcript_replaces_an_unfinished_turn() -> None:
    async def turn(session: FakeSession, text: str) -> None:
        if text == "second":
            await standard_turn("Second answer.")(session, text)

    async with FakeConductor(turn) as fake, ConductorClient(fake.url) as client:
        first = asyncio.create_task(client.say("first"))
        await client.wait_until(lambda: len(client.sent) == 2)
        second = await client.say("second")
        first_result = await first

    assert not first_result.completed
    assert second.completed and second.final_text == "Second answer."


@async_test
async def test_a_refused_transcript_ends_the_turn_at_once_without_waiting_for_idle() -> None:
    async def turn(session: FakeSession, text: str) -> None:
        await session.send(ErrorPayload(code="rate_limited", message="at most 30 requests a minute; wait a moment"))

    async with FakeConductor(turn) as fake, ConductorClient(fake.url) as client:
        result = await client.say("one more", timeout=5)

    assert not result.completed
    assert [e.code for e in result.errors] == ["rate_limited"]
    assert result.states == []
