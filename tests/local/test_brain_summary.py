"""``BedrockBrain.summarize`` over the real ``bedrock-runtime`` client, against the local endpoint's
non-streaming ``Converse``; and the summary in the system prompt of a streamed request."""

from __future__ import annotations

from typing import Any

import pytest

from conductor_local.bedrock.server import (
    INPUT_TOO_LONG,
    LocalBedrockServer,
    ScriptedResponder,
    Text,
    message,
    throttled,
    validation_error,
)
from shared.adapters.brain import BedrockBrain, BrainError
from shared.core.memory import SUMMARY_MARKER, summary_request
from shared.core.tool_catalog import default_catalog
from shared.core.wrapper import wrapper_tool_spec
from shared.wire.model_rules import Inference

from .conftest import MODEL_ID, make_client

SUMMARY_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
CACHING_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
DROPPED = [
    {"role": "user", "content": [{"text": "rename the parser's entry point"}]},
    {"role": "assistant", "content": [{"text": "Renamed parse() to parseDocument()."}]},
]


def make_brain(client: Any, *, prompt_cache: bool = False) -> BedrockBrain:
    return BedrockBrain(
        client,
        model_id=CACHING_MODEL if prompt_cache else MODEL_ID,
        system_prompt="You are the VoiceIDE assistant.",
        tool_spec=wrapper_tool_spec(default_catalog()),
        inference=Inference(max_tokens=256),
        prompt_cache=prompt_cache,
    )


def test_summarize_is_one_converse_call_without_tools_at_temperature_zero(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any
) -> None:
    responder.push(message(Text("The user renamed parse() ", words_per_delta=2), "to parseDocument()."))
    system, messages = summary_request("The user works on the parser.", DROPPED)

    summary = make_brain(client).summarize(system, messages)

    assert summary == "The user renamed parse() to parseDocument()."
    assert bedrock.operations == ["Converse"]
    (request,) = bedrock.requests
    assert request.model_id == MODEL_ID
    assert request.body["system"] == [{"text": system}]
    assert request.body["messages"] == messages
    assert request.body["inferenceConfig"] == {"maxTokens": 400, "temperature": 0}
    assert "toolConfig" not in request.body


def test_summarize_may_use_another_model_and_output_limit(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any
) -> None:
    responder.push(message("Short."))
    system, messages = summary_request(None, DROPPED)
    assert make_brain(client).summarize(system, messages, model_id=SUMMARY_MODEL, max_tokens=120) == "Short."
    (request,) = bedrock.requests
    assert request.model_id == SUMMARY_MODEL
    assert request.body["inferenceConfig"]["maxTokens"] == 120


def test_a_refused_summary_is_a_brain_error(responder: ScriptedResponder, client: Any) -> None:
    responder.push(validation_error(INPUT_TOO_LONG))
    with pytest.raises(BrainError) as caught:
        make_brain(client).summarize(*summary_request(None, DROPPED))
    assert caught.value.code == "ValidationException"
    assert caught.value.input_too_long and not caught.value.during_stream


def test_a_throttled_summary_is_a_brain_error_after_retries(responder: ScriptedResponder) -> None:
    with LocalBedrockServer(responder) as server:
        responder.push(throttled(), throttled())
        client = make_client(server.url, total_attempts=2)
        with pytest.raises(BrainError) as caught:
            make_brain(client).summarize(*summary_request(None, DROPPED))
    assert caught.value.code == "ThrottlingException"
    assert len(server.requests) == 2


def test_a_model_error_while_summarizing_is_a_brain_error(responder: ScriptedResponder, client: Any) -> None:
    from conductor_local.bedrock.server import model_stream_error

    responder.push(message("half a", interrupted_by=model_stream_error("the model failed")))
    with pytest.raises(BrainError) as caught:
        make_brain(client).summarize(*summary_request(None, DROPPED))
    assert caught.value.code == "ModelErrorException"
    assert caught.value.message == "the model failed"


def test_an_unreachable_endpoint_is_a_brain_error() -> None:
    with LocalBedrockServer(ScriptedResponder()) as server:
        url = server.url
    with pytest.raises(BrainError) as caught:
        make_brain(make_client(url)).summarize(*summary_request(None, DROPPED))
    assert caught.value.code == "EndpointConnectionError"


def test_a_streamed_request_carries_the_summary_in_its_system_prompt(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any
) -> None:
    responder.push(message("ok"), message("ok"))
    user = [{"role": "user", "content": [{"text": "what did we rename?"}]}]
    brain = make_brain(client, prompt_cache=True)

    list(brain.stream(user, summary="The user renamed parse() to parseDocument()."))
    list(brain.stream(user))

    with_summary, without = (r.body["system"] for r in bedrock.requests)
    assert with_summary[0]["text"].startswith("You are the VoiceIDE assistant.\n\n")
    assert f"{SUMMARY_MARKER}\nThe user renamed parse() to parseDocument()." in with_summary[0]["text"]
    assert with_summary[1] == {"cachePoint": {"type": "default"}}
    assert without == [{"text": "You are the VoiceIDE assistant."}, {"cachePoint": {"type": "default"}}]


def test_the_summary_of_a_model_that_refuses_sampling_sends_none_and_does_not_think(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any
) -> None:
    responder.push(message("Renamed the entry point."))
    system, messages = summary_request(None, DROPPED)
    assert make_brain(client).summarize(system, messages, model_id="us.anthropic.claude-haiku-5-5") == (
        "Renamed the entry point."
    )
    (request,) = bedrock.requests
    assert request.body["inferenceConfig"] == {"maxTokens": 400}
    assert request.body["additionalModelRequestFields"] == {"thinking": {"type": "disabled"}}
    assert request.body["outputConfig"] == {"effort": "low"}
