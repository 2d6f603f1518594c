"""Cards, states, heardText and a handoff against the whole local stack (API Gateway, Lambda
handlers, DynamoDB, the offline brain), over real WebSockets. The offline brain answers
"You said: <transcript>"; the local Bedrock endpoint records every request the conductor makes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.tools.router import ToolRouter

from .fake_conductor import async_test
from .stack_support import session_started
from .word_speaker import WordSpeaker

pytestmark = pytest.mark.e2e

INTERRUPTED = "[interrupted by the user]"
CODE_TRANSCRIPT = "Change the guard. Use this:\n```swift\nguard let input else { return nil }\n```\nThen run the tests."


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(port=0, quiet=True, env={"CONDUCTOR_TURN_RESERVE_MS": "1000"}) as local:
        yield local


def model_requests(stack: LocalStack, last_user_text: str) -> list[dict[str, Any]]:
    """The bodies of the model's answer requests whose last user message ends with that text."""
    found = []
    for request, operation in zip(stack.bedrock_server.requests, stack.bedrock_server.operations, strict=True):
        messages = request.body.get("messages") or []
        if operation != "ConverseStream" or not messages or messages[-1].get("role") != "user":
            continue
        texts = [block["text"] for block in messages[-1].get("content", []) if "text" in block]
        if texts and texts[-1] == last_user_text:
            found.append(request.body)
    return found


def texts(message: dict[str, Any]) -> list[str]:
    return [block["text"] for block in message["content"] if "text" in block]


@async_test
async def test_a_code_answer_becomes_a_card_in_the_clients_ui_model(stack: LocalStack) -> None:
    async with ConductorClient(stack.ws_url, str(uuid.uuid4())) as client:
        await session_started(stack, client)
        turn = await client.say(CODE_TRANSCRIPT, timeout=20)

    assert turn.completed and turn.errors == []
    assert client.ui.rejected == []
    assert client.ui.document == {
        "cards": [
            {"type": "code", "title": "Swift code", "language": "swift", "body": "guard let input else { return nil }"}
        ]
    }
    assert "[code: Swift code]" in turn.final_text and "return nil" not in turn.final_text


@async_test
async def test_the_states_of_a_tool_turn_for_a_client_that_announces_them(stack: LocalStack) -> None:
    async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"opened": arguments["path"]}

    tools = ToolRouter(handlers={"editor.openFile": open_file})
    async with ConductorClient(stack.ws_url, str(uuid.uuid4()), tools) as client:
        await session_started(stack, client)  # its capabilities apply from the first turn on
        turn = await client.say('call editor.openFile {"path": "main.swift"}', timeout=20)

    assert turn.completed and turn.errors == []
    assert turn.states == ["thinking", "executing", "thinking", "speaking", "idle"]


@async_test
async def test_a_barge_in_after_three_spoken_words_leaves_exactly_those_words_in_the_history(
    stack: LocalStack,
) -> None:
    speaker = WordSpeaker()
    transcript = "Build the app. Then run the tests. Tell me what failed."
    follow_up = f"what did you hear {uuid.uuid4().hex[:8]}"
    async with ConductorClient(stack.ws_url, str(uuid.uuid4()), ToolRouter(speaker)) as client:
        await session_started(stack, client)
        turn = asyncio.create_task(client.say(transcript, timeout=20))
        speaker.allow(3)
        await speaker.wait_words(3)
        await client.barge_in()
        interrupted = await turn
        speaker.allow(1000)  # the next answer plays in full
        following = await client.say(follow_up, timeout=20)

    barge_in = next(e.payload for e in client.sent if e.kind_name == "error")
    assert barge_in.heard_text == "You said: Build"
    assert interrupted.completed and following.completed and following.errors == []
    # A turn launched alongside its write asks the model at once; if that write lost a race (here
    # with the interrupted turn's last commits), the decision is made again and the model asked
    # once more: the answer is the last request's.
    request = model_requests(stack, follow_up)[-1]
    messages = request["messages"]
    assert texts(messages[-3]) == [transcript]
    assert messages[-2]["role"] == "assistant" and texts(messages[-2]) == [f"You said: Build {INTERRUPTED}"]


@async_test
async def test_a_handoff_seeds_the_first_request_of_a_new_session(stack: LocalStack) -> None:
    marker = uuid.uuid4().hex[:8]
    handoff = {
        "summary": f"Fixing the parser tests of the demo app ({marker}).",
        "recentTurns": [
            {"role": "user", "text": "Why does testEmptyInput fail?"},
            {"role": "assistant", "text": "The parser returns nil for an empty string."},
        ],
    }
    first = f"go on {marker}"
    async with ConductorClient(stack.ws_url, str(uuid.uuid4()), handoff=handoff) as client:
        await session_started(stack, client)  # else the transcript may start the conversation first
        turn = await client.say(first, timeout=20)

    assert turn.completed and turn.errors == []
    (request,) = model_requests(stack, first)
    assert [(message["role"], texts(message)) for message in request["messages"]] == [
        ("user", ["Why does testEmptyInput fail?"]),
        ("assistant", ["The parser returns nil for an empty string."]),
        ("user", [first]),
    ]
    assert any(handoff["summary"] in block.get("text", "") for block in request.get("system", []))
