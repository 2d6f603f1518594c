"""Conversation memory over real WebSockets: a long session with big tool results stays within the
token budget (the local Bedrock endpoint refuses what exceeds the model's context window, as
Bedrock does), every turn answers, and what left the window lives on in the rolling summary."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from conductor_local.stack import LocalStack
from shared.core.memory import SUMMARY_MARKER
from tests.e2e.conftest import STACK_ENV, client_for, session_store
from tests.history_check import assert_valid_history

TURNS = 60
RESULT_CHARS = 30_000
BUDGET_TOKENS = 24_000


async def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"path": arguments.get("path"), "text": ("let answer = 42 // a long generated file\n" * 800)[:RESULT_CHARS]}


def test_a_sixty_turn_session_with_big_tool_results_stays_within_the_budget() -> None:
    with LocalStack(
        port=0,
        quiet=True,
        env={
            **STACK_ENV,
            "CONDUCTOR_INPUT_BUDGET_TOKENS": str(BUDGET_TOKENS),
            "CONDUCTOR_MAX_TURNS_PER_MINUTE": "1000",
        },
    ) as stack:

        async def session() -> str:
            session_id = str(uuid.uuid4())
            async with client_for(stack, session_id=session_id, tools={"editor.readFile": read_file}) as client:
                for number in range(TURNS):
                    call = f'call editor.readFile {{"path": "Sources/File{number}.swift"}}'
                    turn = await client.say(call, timeout=30)
                    assert turn.completed and turn.errors == [], (number, turn.errors)
                    assert turn.final_text and turn.final_text.startswith("editor.readFile returned"), number
            return session_id

        session_id = asyncio.run(asyncio.wait_for(session(), 600))
        streamed = [r.body for r in stack.bedrock_server.requests if "toolConfig" in r.body]
        # The call, then the read-back, every turn; a transcript said the instant the last turn
        # went idle may race the memory's own write after it: its turn, launched alongside its
        # write, is then asked again on the newer state (the first stream closed at its claim).
        user_turns = [body for body in streamed if "toolResult" not in json.dumps(body["messages"][-1])]
        assert len(streamed) - len(user_turns) == TURNS and TURNS <= len(user_turns) <= TURNS * 1.25
        for body in streamed:
            chars = (
                len(json.dumps(body["messages"]))
                + len(json.dumps(body["system"]))
                + len(json.dumps(body["toolConfig"]))
            )
            assert chars <= BUDGET_TOKENS * 4.5, chars  # the budget (with the measured chars per token) held
            assert_valid_history(body["messages"])
        assert any(SUMMARY_MARKER in json.dumps(body["system"]) for body in streamed[-10:])
        state = session_store(stack).load(session_id)
        assert state is not None and state.summary and state.summary_until > 0
