"""Every way a model message can stop, through the deployed handlers over real WebSockets.

The offline brain's ``stop <reason> [text]`` directive ends its message with any stop reason
(``stop none``: with no messageStop at all); the local Bedrock endpoint's context limit refuses a
conversation that has grown too long, as Bedrock does. The app must always hear why the answer
ended, reach ``idle``, and be answered normally on the next turn; the stored history must stay one
Bedrock accepts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conductor_local.bedrock.offline_brain import CALL_PREAMBLE, STOP_TEXT
from conductor_local.bedrock.server import RecordedRequest, estimate_input_tokens
from conductor_local.stack import LocalStack
from shared.core.failure_lines import FAILURE_LINES, FailureCause
from shared.core.messages import ERROR_MARKER, is_plain_user_message
from shared.core.stream import (
    CUT_OFF_LINE,
    CUT_OFF_MARKER,
    FILTERED_LINE,
    FILTERED_MARKER,
    MALFORMED_LINE,
    MALFORMED_MARKER,
)
from shared.wire.protocol import ErrorCode
from tests.e2e.conftest import (
    STACK_ENV,
    TURN_TIMEOUT_S,
    assert_cumulative,
    async_test,
    caught_up,
    client_for,
    collapse_partials,
    label,
    stored_history,
)
from tests.history_check import assert_valid_history
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.conversation.turn import TurnResult

pytestmark = pytest.mark.e2e

SPOKEN_TURN = ["thinking", "partial+", "final", "tool:tts.speak", "idle"]


def spoken(turn: TurnResult) -> list[str]:
    """What the app was asked to say aloud, in order."""
    return [call.args["text"] for call in turn.calls("tts.speak")]


def error_codes(turn: TurnResult) -> list[str]:
    return [error.code for error in turn.errors]


def assert_clean_end(turn: TurnResult, client: ConductorClient) -> None:
    """The turn ended (idle), every call the app got was answered, and nothing went wrong on the wire."""
    assert turn.completed, f"turn {turn.transcript!r} did not complete"
    assert turn.states == ["thinking", "idle"]
    assert all(call.finished and call.error is None for call in turn.tool_calls), turn.tool_calls
    assert client.errors == [] and client.gateway_frames == []


async def assert_next_turn_is_normal(client: ConductorClient) -> None:
    turn = await client.say("are you still there", timeout=TURN_TIMEOUT_S)

    assert_clean_end(turn, client)
    assert collapse_partials([label(e) for e in turn.events]) == SPOKEN_TURN
    assert turn.finals == ["You said: are you still there"]
    assert turn.errors == []


def assistant_texts(stack: LocalStack, session_id: str) -> list[str]:
    """The text of every assistant message stored, after checking the history is one Bedrock accepts."""
    history = stored_history(stack, session_id)
    assert_valid_history(history)
    return [" ".join(block.get("text", "") for block in m["content"]) for m in history if m["role"] == "assistant"]


# ---- stop reasons ---------------------------------------------------------------------------


@async_test
async def test_max_tokens_speaks_the_text_and_the_cut_off_line_and_never_runs_the_cut_tool(stack: LocalStack) -> None:
    asked: list[Any] = []

    async def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
        asked.append(arguments)
        return {"text": "let x = 1"}

    async with client_for(stack, tools={"editor.readFile": read_file}) as client:
        await caught_up(stack, client)
        turn = await client.say('stop max_tokens call editor.readFile {"path": "a.swift"}', timeout=TURN_TIMEOUT_S)

        assert_clean_end(turn, client)
        assert collapse_partials([label(e) for e in turn.events]) == [
            "thinking",
            "partial+",
            "final",
            "tool:tts.speak",
            "final",
            "tool:tts.speak",
            "idle",
        ]
        assert_cumulative(turn.partials, CALL_PREAMBLE)
        assert turn.finals == [CALL_PREAMBLE, CUT_OFF_LINE]
        assert spoken(turn) == [CALL_PREAMBLE, CUT_OFF_LINE]
        assert turn.calls("editor.readFile") == [] and asked == []
        assert turn.errors == []
        await assert_next_turn_is_normal(client)

    first_answer, _ = assistant_texts(stack, client.session_id)
    assert first_answer == f"{CALL_PREAMBLE} {CUT_OFF_MARKER}"
    assert not any("toolUse" in block for m in stored_history(stack, client.session_id) for block in m["content"])


@async_test
async def test_content_filtered_speaks_a_line_instead_of_the_filtered_text(stack: LocalStack) -> None:
    async with client_for(stack) as client:
        await caught_up(stack, client)
        turn = await client.say("stop content_filtered", timeout=TURN_TIMEOUT_S)

        assert_clean_end(turn, client)
        assert collapse_partials([label(e) for e in turn.events]) == SPOKEN_TURN
        assert turn.finals == [FILTERED_LINE] and spoken(turn) == [FILTERED_LINE]
        assert turn.errors == []
        await assert_next_turn_is_normal(client)

    assert assistant_texts(stack, client.session_id)[0] == FILTERED_MARKER


@async_test
async def test_guardrail_intervened_speaks_the_guardrails_own_message(stack: LocalStack) -> None:
    message = "Sorry, I can't talk about that here."
    async with client_for(stack) as client:
        await caught_up(stack, client)
        turn = await client.say(f"stop guardrail_intervened {message}", timeout=TURN_TIMEOUT_S)

        assert_clean_end(turn, client)
        assert collapse_partials([label(e) for e in turn.events]) == SPOKEN_TURN
        assert turn.finals == [message] and spoken(turn) == [message]
        assert turn.errors == []
        await assert_next_turn_is_normal(client)

    assert assistant_texts(stack, client.session_id)[0] == f"{message} {FILTERED_MARKER}"


@pytest.mark.parametrize(
    "transcript",
    [
        "stop malformed_tool_use",
        "stop malformed_model_output",
        'stop malformed_tool_use call editor.readFile {"path": "a.swift"}',
    ],
)
@async_test
async def test_a_malformed_reply_is_a_bedrock_error_and_a_spoken_line(stack: LocalStack, transcript: str) -> None:
    async with client_for(stack) as client:
        await caught_up(stack, client)
        turn = await client.say(transcript, timeout=TURN_TIMEOUT_S)

        assert_clean_end(turn, client)
        labels = collapse_partials([label(e) for e in turn.events])
        assert labels[0] == "thinking" and labels[-4:] == ["error:bedrock_error", "final", "tool:tts.speak", "idle"]
        assert error_codes(turn) == [ErrorCode.BEDROCK_ERROR]
        assert turn.finals[-1] == MALFORMED_LINE and spoken(turn)[-1] == MALFORMED_LINE
        assert turn.calls("editor.readFile") == []
        await assert_next_turn_is_normal(client)

    assert assistant_texts(stack, client.session_id)[0] == MALFORMED_MARKER


@async_test
async def test_an_unknown_stop_reason_ends_the_turn_cleanly_with_what_was_said(stack: LocalStack) -> None:
    said = STOP_TEXT.format(reason="reason_from_the_future")
    async with client_for(stack) as client:
        await caught_up(stack, client)
        turn = await client.say("stop reason_from_the_future", timeout=TURN_TIMEOUT_S)

        assert_clean_end(turn, client)
        assert collapse_partials([label(e) for e in turn.events]) == SPOKEN_TURN
        assert turn.finals == [said] and spoken(turn) == [said]
        assert turn.errors == []
        await assert_next_turn_is_normal(client)

    assert assistant_texts(stack, client.session_id)[0] == said


@async_test
async def test_a_stream_without_message_stop_is_a_bedrock_error_and_the_text_is_kept(stack: LocalStack) -> None:
    async with client_for(stack) as client:
        await caught_up(stack, client)
        turn = await client.say("stop none I was just about to say", timeout=TURN_TIMEOUT_S)

        assert_clean_end(turn, client)
        assert collapse_partials([label(e) for e in turn.events]) == [
            "thinking",
            "partial+",
            "final",
            "error:bedrock_error",
            "tool:tts.speak",
            "idle",
        ]
        assert turn.finals == ["I was just about to say"]
        assert [call.args["text"] for call in turn.calls("tts.speak")] == [FAILURE_LINES[FailureCause.MODEL_FAILED]]
        assert error_codes(turn) == [ErrorCode.BEDROCK_ERROR]
        await assert_next_turn_is_normal(client)

    assert assistant_texts(stack, client.session_id)[0] == f"I was just about to say {ERROR_MARKER}"


# ---- a conversation that outgrows the model's context ----------------------------------------


@pytest.fixture
def own_stack() -> Iterator[LocalStack]:
    """A stack of its own: this test narrows its Bedrock's context window."""
    with LocalStack(port=0, quiet=True, env=STACK_ENV) as local:
        yield local


def transcript(number: int) -> str:
    """Transcripts of one length, so every turn grows the conversation by the same amount."""
    return f"note {number:02d}:" + " the quick brown fox jumps over the lazy dog" * 8


def texts_of(messages: list[dict[str, Any]]) -> list[list[str]]:
    return [[block.get("text", "") for block in m["content"] if "cachePoint" not in block] for m in messages]


@async_test
async def test_a_conversation_past_the_context_window_still_gets_answers(own_stack: LocalStack) -> None:
    bedrock = own_stack.bedrock_server
    async with client_for(own_stack, session_id=str(uuid.uuid4())) as client:
        for number in (1, 2):
            turn = await client.say(transcript(number), timeout=TURN_TIMEOUT_S)
            assert turn.finals == [f"You said: {transcript(number)}"]
        first, second = (estimate_input_tokens(r.body) for r in bedrock.requests if "toolConfig" in r.body)
        growth = second - first
        # Turns 3 and 4 fit; turn 5 does not, until the conductor sends a shorter window.
        limit = second + 2 * growth + growth // 2
        bedrock.max_input_tokens = limit

        answers = []
        for number in (3, 4, 5, 6):
            turn = await client.say(transcript(number), timeout=TURN_TIMEOUT_S)
            assert_clean_end(turn, client)
            assert turn.errors == []
            answers.append(turn.finals)
        assert answers == [[f"You said: {transcript(number)}"] for number in (3, 4, 5, 6)]

    # the model's turns (the rolling summary's own Converse calls, after a turn, are left out)
    requests: list[RecordedRequest] = [r for r in bedrock.requests if "toolConfig" in r.body]
    sizes = [estimate_input_tokens(r.body) for r in requests]
    lengths = [len(r.body["messages"]) for r in requests]
    # Turns 1-4 sent the whole conversation; turn 5's was refused, then sent again shorter; turn 6
    # started from the shorter window right away.
    assert lengths[:5] == [1, 3, 5, 7, 9]
    assert sizes[4] > limit
    assert lengths[5] < 9 and sizes[5] <= limit
    assert len(requests) == 7 and lengths[6] <= lengths[5] + 2 and sizes[6] <= limit
    stored = stored_history(own_stack, client.session_id)
    assert_valid_history(stored)
    # Nothing was forgotten: the whole conversation is stored, every answer in its place.
    assert texts_of(stored) == [
        text for number in range(1, 7) for text in ([transcript(number)], [f"You said: {transcript(number)}"])
    ]
    # Each shorter window is the latest part of what was stored, from a plain user message on.
    for request, stored_before in ((requests[5], stored[:9]), (requests[6], stored[:11])):
        window = request.body["messages"]
        assert is_plain_user_message(window[0])
        assert texts_of(window) == texts_of(stored_before[-len(window) :])
