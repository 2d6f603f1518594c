"""Tool calls the app never answers time out: the deadline queue (moto SQS) and its poller run the
deployed tool-deadline function, the model hears of the timeout and the turn ends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect

from conductor_local.stack import LocalStack
from shared.wire.protocol import (
    AssistantSpeechFinal,
    ErrorCode,
    ErrorPayload,
    SessionStart,
    ToolResult,
    UserAudioTranscriptFinal,
)
from tests.e2e.conftest import STACK_ENV, RawApp, async_test, is_state, is_tool_call

DEADLINE_S = 2


@pytest.fixture(scope="module")
def deadline_stack() -> Iterator[LocalStack]:
    env = {**STACK_ENV, "CONDUCTOR_TOOL_DEADLINE_S": str(DEADLINE_S)}
    with LocalStack(port=0, quiet=True, env=env) as local:  # the stack runs the deadline queue and its poller
        yield local


@async_test
async def test_a_tool_the_app_never_answers_times_out_and_the_turn_goes_on(deadline_stack: LocalStack) -> None:
    session_id = str(uuid.uuid4())
    async with connect(deadline_stack.session_url(session_id)) as ws:
        app = RawApp(ws)
        await app.send(SessionStart(session_id=session_id))
        await app.send(UserAudioTranscriptFinal(text='call editor.openFile {"path":"main.swift"}'))
        opened = await app.read_until(lambda e: is_tool_call(e, "editor.openFile"))
        # Never answered: past its deadline the model reads back the timeout.
        final = await app.read_until(lambda e: isinstance(e.payload, AssistantSpeechFinal))
        speak = await app.read_until(lambda e: is_tool_call(e, "tts.speak"))
        await app.send(ToolResult(call_id=speak.payload.call_id, result='{"spoken":true}', error=None))
        await app.read_until(lambda e: is_state(e, "idle"))
        # The app's result, too late: the call is no longer pending.
        await app.send(ToolResult(call_id=opened.payload.call_id, result='{"opened":true}', error=None))
        late = await app.read_until(lambda e: isinstance(e.payload, ErrorPayload))

    assert final.payload.text.startswith("editor.openFile failed: timed out"), final.payload.text
    assert late.payload.code == ErrorCode.NO_PENDING_TOOL_CALL


@async_test
async def test_a_round_with_one_unanswered_call_resumes_at_its_deadline_with_both_results(
    deadline_stack: LocalStack,
) -> None:
    session_id = str(uuid.uuid4())
    async with connect(deadline_stack.session_url(session_id)) as ws:
        app = RawApp(ws)
        await app.send(SessionStart(session_id=session_id))
        await app.send(UserAudioTranscriptFinal(text='call editor.openFile {"path":"a.swift"} ; call git.status {}'))
        opened = await app.read_until(lambda e: is_tool_call(e, "editor.openFile"))
        await app.read_until(lambda e: is_tool_call(e, "git.status"))
        await app.send(ToolResult(call_id=opened.payload.call_id, result='{"opened":true}', error=None))
        final = await app.read_until(lambda e: isinstance(e.payload, AssistantSpeechFinal))
        speak = await app.read_until(lambda e: is_tool_call(e, "tts.speak"))
        await app.send(ToolResult(call_id=speak.payload.call_id, result='{"spoken":true}', error=None))
        await app.read_until(lambda e: is_state(e, "idle"))

    answered, timed_out = final.payload.text.split(". ", 1)
    assert answered == 'editor.openFile returned {"opened":true}'
    assert timed_out.startswith("git.status failed: timed out"), timed_out
    assert not any(isinstance(e.payload, ErrorPayload) for e in app.events)
