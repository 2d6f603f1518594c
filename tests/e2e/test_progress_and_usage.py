"""While a tool runs the person knows how it goes and can stop it; every turn says what it cost.
Over the local stack with the client stub: progress of a background build, the model asked how it
goes and told to cancel it, the "still running" line of a long foreground call, and the usage of
each turn against what the local Bedrock's metadata said."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conductor_local.bedrock.offline_brain import OfflineBrain
from conductor_local.stack import LocalStack
from shared.wire.protocol import ToolCall, ToolCancel, TurnUsage
from voiceide_client.conversation.client import ConductorClient

from .conftest import TURN_TIMEOUT_S, WAIT_S, async_test, client_for, poll_until, session_store

PROGRESS_WORDS = "Still running"


def spoken(client: ConductorClient, since: int = 0) -> list[str]:
    return [
        json.loads(event.payload.arguments)["text"]
        for event in client.events[since:]
        if isinstance(event.payload, ToolCall) and event.payload.name == "tts.speak"
    ]


def turn_requests(stack: LocalStack, since: int) -> list[dict[str, Any]]:
    """The turn's model requests from ``since`` (the session's title request offers no tools). A
    transcript's turn is launched alongside its write; when that write loses a race (a memory
    write is announced and waited for, but another event of the session may still win) the model is
    asked again on the same messages and the first stream is closed at its claim, unread: only the
    request that answered counts."""
    bodies = [request.body for request in stack.bedrock_server.requests[since:] if "toolConfig" in request.body]
    return [
        body
        for index, body in enumerate(bodies)
        if body["messages"] not in (b["messages"] for b in bodies[index + 1 :])
    ]


def metadata_usage(requests: list[dict[str, Any]]) -> dict[str, int]:
    """What the local Bedrock's ``metadata`` event said for each request (the offline brain answers
    the same request with the same stream), summed."""
    totals: dict[str, int] = {}
    for body in requests:
        for step in OfflineBrain().reply(body):
            if isinstance(step, dict) and "metadata" in step:
                for key, value in step["metadata"]["usage"].items():
                    totals[key] = totals.get(key, 0) + value
    return totals


@async_test
async def test_a_background_build_reports_progress_is_asked_about_and_cancelled(stack: LocalStack) -> None:
    finish = asyncio.Event()

    async def build(_: dict[str, Any]) -> dict[str, Any]:
        await finish.wait()
        return {"status": "succeeded"}

    async with client_for(stack, tools={"build.run": build}) as client:
        turn = await client.say('call build.run {"scheme": "App"}', timeout=TURN_TIMEOUT_S)
        assert turn.completed
        (call,) = [c for c in client.tool_calls if c.name == "build.run"]
        call_id = call.call_id
        for fraction, words in ((0.2, "Compiling 24 of 120 files"), (0.6, "Compiling 72 of 120 files")):
            await client.send_progress(call_id, fraction, words)

        def kept(fraction: float) -> bool:
            state = session_store(stack).load(client.session_id)
            job = next((job for job in state.background if job.call_id == call_id), None) if state else None
            return job is not None and job.progress is not None and job.progress.fraction == fraction

        await poll_until(lambda: kept(0.6))
        asked = len(client.events)
        turn = await client.say("How's the build going?", timeout=TURN_TIMEOUT_S)
        assert turn.completed
        answer = " ".join(spoken(client, asked))
        assert "60 %" in answer and "Compiling 72 of 120 files" in answer and "20 %" not in answer

        await client.send_progress(call_id, 1.0, "Linking")
        await poll_until(lambda: kept(1.0))
        asked = len(client.events)
        turn = await client.say("Cancel the build.", timeout=TURN_TIMEOUT_S)
        assert turn.completed
        cancels = [e.payload for e in client.events[asked:] if isinstance(e.payload, ToolCancel)]
        assert [(c.call_id, c.name) for c in cancels] == [(call_id, "build.run")]
        confirmed = " ".join(spoken(client, asked))
        assert "conductor.cancel returned" in confirmed and '"cancelled": true' in confirmed

        # the build's result still comes: a late result, and no report turn
        after = len(client.events)
        finish.set()
        await client.wait_for(lambda e: getattr(e.payload, "code", None) == "no_pending_tool_call", WAIT_S, since=after)
        assert not [text for text in spoken(client, after) if "build.run" in text]


@async_test
async def test_a_foreground_call_held_8_s_gets_exactly_one_progress_line_and_one_of_2_s_none(
    stack: LocalStack,
) -> None:
    async def slow_read(arguments: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(float(arguments["hold"]))
        return {"text": "ok"}

    async with client_for(stack, tools={"editor.readFile": slow_read}) as client:
        before = len(client.events)
        turn = await client.say('call editor.readFile {"path": "a.swift", "hold": 2}', timeout=TURN_TIMEOUT_S)
        assert turn.completed
        assert not [text for text in spoken(client, before) if PROGRESS_WORDS in text]

        before = len(client.events)
        turn = await client.say('call editor.readFile {"path": "a.swift", "hold": 8}', timeout=TURN_TIMEOUT_S + 8)
        assert turn.completed
        lines = spoken(client, before)
        progress = [index for index, text in enumerate(lines) if PROGRESS_WORDS in text]
        assert len(progress) == 1, lines
        answer = next(index for index, text in enumerate(lines) if "editor.readFile returned" in text)
        assert progress[0] < answer  # never after the result


@async_test
async def test_every_turn_reports_the_tokens_bedrock_counted_and_their_cost(stack: LocalStack) -> None:
    async def status(_: dict[str, Any]) -> dict[str, Any]:
        return {"changed": ["main.swift"]}

    async with client_for(stack, tools={"git.status": status}) as client:
        for transcript, rounds in (("hello there", 1), ("call git.status {}", 2)):
            since, events = len(stack.bedrock_server.requests), len(client.events)
            turn = await client.say(transcript, timeout=TURN_TIMEOUT_S)
            assert turn.completed
            usage = await client.wait_for(lambda e: isinstance(e.payload, TurnUsage), WAIT_S, since=events)
            reported = usage.payload
            assert isinstance(reported, TurnUsage)
            requests = turn_requests(stack, since)
            counted = metadata_usage(requests)
            assert reported.requests == len(requests) == rounds
            assert (reported.input_tokens, reported.output_tokens) == (counted["inputTokens"], counted["outputTokens"])
            assert reported.input_tokens > 0 and reported.output_tokens > 0
            assert reported.end_ms >= (reported.first_speak_ms or 0)
        state = session_store(stack).load(client.session_id)
        assert state is not None
        assert state.usage_total.requests == 3
        assert state.usage_total.input_tokens == sum(u.input_tokens for u in client.usages)
