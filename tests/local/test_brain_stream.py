"""``BedrockBrain`` over the real ``bedrock-runtime`` client, against scripted event streams.

What the turn runner sees of a ConverseStream reply: only client tool uses become tool calls, only
text deltas are speech, reasoning comes out as one block, a stream cut short is an error, and a
request too long for the model is told apart from other validation errors.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from conductor_local.bedrock.server import (
    INPUT_TOO_LONG,
    RaiseInStream,
    ScriptedResponder,
    Step,
    block_stop,
    message,
    message_start,
    message_stop,
    metadata,
    text_delta,
    tool_call,
    tool_input_delta,
    tool_use_start,
    validation_error,
)
from shared.adapters.brain import INCOMPLETE_STREAM, BedrockBrain, BrainError
from shared.core.model_output import (
    MessageEnd,
    ModelMessage,
    ReasoningBlock,
    StreamItem,
    TextDelta,
    ToolUseRequest,
    ToolUseStarted,
)
from shared.core.tool_catalog import default_catalog
from shared.core.wrapper import wrapper_tool_spec
from shared.wire.model_rules import Inference

from .conftest import MODEL_ID

USER_HI = [{"role": "user", "content": [{"text": "what is new in Swift?"}]}]
SEARCH_INPUT = '{"query": "Swift 6 release notes"}'
SEARCH_RESULT = "Swift 6 release notes: complete concurrency checking"


@pytest.fixture
def brain(client: Any) -> BedrockBrain:
    return BedrockBrain(
        client,
        model_id=MODEL_ID,
        system_prompt="You are the VoiceIDE assistant.",
        tool_spec=wrapper_tool_spec(default_catalog()),
        inference=Inference(max_tokens=256),
    )


def run(brain: BedrockBrain, messages: list[dict[str, Any]] = USER_HI) -> list[StreamItem]:
    return list(brain.stream(messages))


def texts(items: list[StreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, TextDelta)]


def server_tool_use_start(index: int, tool_use_id: str, name: str) -> dict[str, Any]:
    start = {"toolUse": {"toolUseId": tool_use_id, "name": name, "type": "server_tool_use"}}
    return {"contentBlockStart": {"start": start, "contentBlockIndex": index}}


def server_tool_result_start(index: int, tool_use_id: str) -> dict[str, Any]:
    start = {"toolResult": {"toolUseId": tool_use_id, "status": "success"}}
    return {"contentBlockStart": {"start": start, "contentBlockIndex": index}}


def reasoning_delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"contentBlockDelta": {"delta": {"reasoningContent": fields}, "contentBlockIndex": index}}


def searched_then(*rest: Step) -> list[Step]:
    """A server tool use (input streamed in two pieces) and its result block, then ``rest``."""
    return [
        message_start(),
        server_tool_use_start(0, "srvtoolu_01", "web_search"),
        tool_input_delta(0, SEARCH_INPUT[:12]),
        tool_input_delta(0, SEARCH_INPUT[12:]),
        block_stop(0),
        server_tool_result_start(1, "srvtoolu_01"),
        {"contentBlockDelta": {"delta": {"toolResult": [{"text": SEARCH_RESULT}]}, "contentBlockIndex": 1}},
        block_stop(1),
        *rest,
    ]


# ---- server tool uses ------------------------------------------------------------------------


def test_a_server_tool_use_is_neither_a_tool_call_nor_speech(responder: ScriptedResponder, brain: BedrockBrain) -> None:
    responder.push(
        searched_then(
            text_delta(2, "Swift 6 adds"),
            text_delta(2, " data-race safety."),
            block_stop(2),
            message_stop("end_turn"),
            metadata(40, 12),
        )
    )
    items = run(brain)
    assert not [item for item in items if isinstance(item, ToolUseStarted | ToolUseRequest)]
    assert texts(items) == ["Swift 6 adds", " data-race safety."]
    assert not any("query" in text or SEARCH_RESULT in text for text in texts(items))
    assert items[-1] == MessageEnd(
        stop_reason="end_turn", usage={"inputTokens": 40, "outputTokens": 12, "totalTokens": 52}
    )
    message_ = ModelMessage()
    for item in items:
        message_.add(item)
    assert message_.history_content() == [{"text": "Swift 6 adds data-race safety."}]


def test_a_client_tool_use_after_a_server_one_is_still_a_tool_call(
    responder: ScriptedResponder, brain: BedrockBrain
) -> None:
    use = tool_call("editor.openFile", {"path": "Package.swift"}, parts=3)
    wrapper = '{"name":"editor.openFile","arguments":{"path":"Package.swift"}}'
    responder.push(
        searched_then(
            tool_use_start(2, use.tool_use_id, "tool_call"),
            tool_input_delta(2, wrapper[:20]),
            tool_input_delta(2, wrapper[20:]),
            block_stop(2),
            message_stop("tool_use"),
            metadata(40, 12),
        )
    )
    items = run(brain)
    assert [type(item) for item in items] == [ToolUseStarted, ToolUseRequest, MessageEnd]
    request = items[1]
    assert isinstance(request, ToolUseRequest)
    assert (request.tool_use_id, request.name) == (use.tool_use_id, "tool_call")
    assert request.input == {"name": "editor.openFile", "arguments": {"path": "Package.swift"}}


# ---- reasoning -------------------------------------------------------------------------------


def test_reasoning_deltas_are_one_block_and_never_text(responder: ScriptedResponder, brain: BedrockBrain) -> None:
    responder.push(
        [
            message_start(),
            reasoning_delta(0, text="The user asks about "),
            reasoning_delta(0, text="Swift; answer briefly."),
            reasoning_delta(0, signature="sig-abc123"),
            block_stop(0),
            text_delta(1, "Data-race"),
            text_delta(1, " safety."),
            block_stop(1),
            message_stop("end_turn"),
            metadata(30, 9),
        ]
    )
    items = run(brain)
    assert texts(items) == ["Data-race", " safety."]
    blocks = [item for item in items if isinstance(item, ReasoningBlock)]
    assert blocks == [ReasoningBlock(text="The user asks about Swift; answer briefly.", signature="sig-abc123")]
    assert items.index(blocks[0]) == 0  # in the order the model produced it
    assert not any("Swift; answer" in text for text in texts(items))


def test_redacted_reasoning_comes_out_as_base64_of_the_same_bytes(
    responder: ScriptedResponder, brain: BedrockBrain
) -> None:
    secret = b"\x00provider-encrypted\xff\x10"
    responder.push(
        [
            message_start(),
            reasoning_delta(0, redactedContent=base64.b64encode(secret[:5]).decode()),
            reasoning_delta(0, redactedContent=base64.b64encode(secret[5:]).decode()),
            block_stop(0),
            text_delta(1, "Done."),
            block_stop(1),
            message_stop("end_turn"),
        ]
    )
    items = run(brain)
    (block,) = [item for item in items if isinstance(item, ReasoningBlock)]
    assert block.redacted is not None and base64.b64decode(block.redacted) == secret
    assert texts(items) == ["Done."]


# ---- streams cut short -----------------------------------------------------------------------


def test_a_stream_without_message_stop_is_an_incomplete_stream_error(
    responder: ScriptedResponder, brain: BedrockBrain
) -> None:
    responder.push([message_start(), text_delta(0, "Half an"), text_delta(0, " answer"), block_stop(0)])
    seen: list[StreamItem] = []
    with pytest.raises(BrainError) as raised:
        for item in brain.stream(USER_HI):
            seen.append(item)
    assert raised.value.code == INCOMPLETE_STREAM
    assert raised.value.during_stream is True
    assert raised.value.input_too_long is False
    assert texts(seen) == ["Half an", " answer"]  # what was said before the cut is still seen
    assert not any(isinstance(item, MessageEnd) for item in seen)


def test_a_stream_with_only_metadata_after_the_text_is_incomplete_too(
    responder: ScriptedResponder, brain: BedrockBrain
) -> None:
    responder.push([message_start(), text_delta(0, "Hi"), block_stop(0), metadata(5, 1)])
    with pytest.raises(BrainError) as raised:
        run(brain)
    assert (raised.value.code, raised.value.during_stream) == (INCOMPLETE_STREAM, True)


def test_a_complete_message_ends_with_its_stop_reason(responder: ScriptedResponder, brain: BedrockBrain) -> None:
    responder.push(message("Cut", stop_reason="max_tokens"))
    items = run(brain)
    assert isinstance(items[-1], MessageEnd) and items[-1].stop_reason == "max_tokens"


# ---- requests too long for the model ------------------------------------------------------------


@pytest.mark.parametrize(
    "wording",
    [
        INPUT_TOO_LONG,
        "The model returned the following errors: prompt is too long: 200049 tokens > 200000 maximum",
        "The model returned the following errors: input length and `max_tokens` exceed context limit: 196395 + "
        "64000 > 204698, decrease input length or `max_tokens` and try again",
        "The model returned the following errors: too many total text bytes",
    ],
)
def test_input_too_long_is_recognised_in_every_wording(
    responder: ScriptedResponder, brain: BedrockBrain, wording: str
) -> None:
    responder.push(validation_error(wording))
    with pytest.raises(BrainError) as raised:
        run(brain)
    error = raised.value
    assert (error.code, error.message, error.during_stream) == ("ValidationException", wording, False)
    assert error.input_too_long is True
    assert len(responder.requests) == 1  # a 400 is not retried


@pytest.mark.parametrize(
    "problem",
    [
        "A conversation must alternate between user and assistant roles.",
        "The model returned the following errors: max_tokens: 200000 > 64000",
        "Malformed input request: #: extraneous key [foo] is not permitted, please reformat your input and try again.",
    ],
)
def test_other_validation_errors_are_not_input_too_long(
    responder: ScriptedResponder, brain: BedrockBrain, problem: str
) -> None:
    responder.push(validation_error(problem))
    with pytest.raises(BrainError) as raised:
        run(brain)
    assert raised.value.code == "ValidationException"
    assert raised.value.input_too_long is False


def test_input_too_long_mid_stream_is_not_a_window_to_shrink(responder: ScriptedResponder, brain: BedrockBrain) -> None:
    """Once output has started, shrinking the window and asking again would repeat what was said."""
    responder.push([message_start(), text_delta(0, "So"), RaiseInStream("validationException", INPUT_TOO_LONG)])
    with pytest.raises(BrainError) as raised:
        run(brain)
    assert raised.value.during_stream is True
    assert raised.value.input_too_long is False


def test_the_same_message_from_another_error_type_is_not_input_too_long(
    responder: ScriptedResponder, brain: BedrockBrain
) -> None:
    from conductor_local.bedrock.server import RejectRequest

    responder.push(RejectRequest(403, "AccessDeniedException", INPUT_TOO_LONG))
    with pytest.raises(BrainError) as raised:
        run(brain)
    assert raised.value.code == "AccessDeniedException"
    assert raised.value.input_too_long is False
