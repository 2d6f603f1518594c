"""The local Bedrock endpoint answers as each model family does: it refuses what the model refuses,
in Bedrock's words, and thinks where the model thinks (a real boto3 client on the wire)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from conductor_local.bedrock.models import THINK_TOKENS
from conductor_local.bedrock.server import ScriptedResponder, message, tool_call

from .conftest import WRAPPER_TOOL_CONFIG, read_stream

HAIKU = "us.anthropic.claude-haiku-5-5"
SONNET = "us.anthropic.claude-sonnet-5-5"
OPUS = "anthropic.claude-opus-5-5"
NOVA = "us.amazon.nova-micro-v1:0"
OLD_SONNET = "anthropic.claude-sonnet-4-5-20250929-v1:0"
HELLO = [{"role": "user", "content": [{"text": "hello"}]}]


def stream(client: Any, model_id: str, messages: list[dict[str, Any]] = HELLO, **fields: Any) -> Any:
    fields.setdefault("inferenceConfig", {"maxTokens": 1024})
    response = client.converse_stream(modelId=model_id, messages=messages, toolConfig=WRAPPER_TOOL_CONFIG, **fields)
    return read_stream(response["stream"])


def refused(client: Any, model_id: str, **fields: Any) -> dict[str, str]:
    with pytest.raises(ClientError) as raised:
        stream(client, model_id, **fields)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return raised.value.response["Error"]


def reasoning(reply: Any) -> str:
    deltas = [e["contentBlockDelta"]["delta"] for e in reply.events if "contentBlockDelta" in e]
    return "".join(d["reasoningContent"].get("text", "") for d in deltas if "reasoningContent" in d)


@pytest.mark.parametrize("model_id", [HAIKU, SONNET, OPUS])
@pytest.mark.parametrize(
    ("field", "name"),
    [
        ({"inferenceConfig": {"maxTokens": 64, "temperature": 0.3}}, "temperature"),
        ({"inferenceConfig": {"maxTokens": 64, "topP": 0.9}}, "top_p"),
    ],
)
def test_sampling_parameters_are_refused_as_bedrock_refuses_them(
    client: Any, responder: ScriptedResponder, model_id: str, field: dict[str, Any], name: str
) -> None:
    error = refused(client, model_id, **field)
    assert error == {
        "Code": "ValidationException",
        "Message": f"The model returned the following errors: `{name}` is deprecated for this model.",
    }
    assert responder.pending == 0  # nothing was streamed


@pytest.mark.parametrize("model_id", [NOVA, OLD_SONNET])
def test_older_models_and_nova_take_a_temperature(client: Any, responder: ScriptedResponder, model_id: str) -> None:
    responder.push(message("Hi."))
    assert stream(client, model_id, inferenceConfig={"maxTokens": 64, "temperature": 0.3}).text == "Hi."


@pytest.mark.parametrize(
    ("model_id", "thinking", "words"),
    [
        (OPUS, {"type": "disabled"}, '"thinking.type.disabled" is not supported for this model.'),
        (SONNET, {"type": "disabled"}, 'send "thinking": {"type": "between_tools"} instead of {"type": "disabled"}'),
        (HAIKU, {"type": "enabled", "budget_tokens": 2048}, '"thinking.type.enabled" is not supported'),
        (NOVA, {"type": "adaptive"}, "thinking: Extra inputs are not permitted"),
    ],
)
def test_a_thinking_setting_the_model_does_not_take_is_refused(
    client: Any, model_id: str, thinking: dict[str, Any], words: str
) -> None:
    error = refused(client, model_id, additionalModelRequestFields={"thinking": thinking})
    assert error["Code"] == "ValidationException"
    assert words in error["Message"]


def test_effort_above_high_is_refused_while_thinking_is_off(client: Any) -> None:
    error = refused(
        client, HAIKU, additionalModelRequestFields={"thinking": {"type": "disabled"}}, outputConfig={"effort": "xhigh"}
    )
    assert "output_config.effort 'xhigh' is not supported when thinking is disabled" in error["Message"]
    assert (
        "does not support the effort parameter"
        in refused(client, OLD_SONNET, outputConfig={"effort": "low"})["Message"]
    )


def test_max_tokens_over_the_models_output_limit_is_refused(client: Any) -> None:
    error = refused(client, HAIKU, inferenceConfig={"maxTokens": 200_000})
    assert error["Message"].startswith("The maximum tokens you requested exceeds the model limit of 128000.")


def test_haiku_thinks_before_it_answers_unless_the_request_turns_thinking_off(
    client: Any, responder: ScriptedResponder
) -> None:
    responder.push(message("Hi there."), message("Hi there."))
    thought = stream(client, HAIKU)  # says nothing of thinking: Haiku 5.5 thinks at medium effort
    quiet = stream(client, HAIKU, additionalModelRequestFields={"thinking": {"type": "disabled"}})
    kinds = [next(iter(e["contentBlockDelta"]["delta"])) for e in thought.events if "contentBlockDelta" in e]
    assert kinds[0] == "reasoningContent" and kinds[-1] == "text"
    assert kinds.index("text") > max(i for i, kind in enumerate(kinds) if kind == "reasoningContent")
    assert len(reasoning(thought)) == THINK_TOKENS["medium"] * 4
    text_blocks = {
        e["contentBlockDelta"]["contentBlockIndex"]
        for e in thought.events
        if "text" in e.get("contentBlockDelta", {}).get("delta", {})
    }
    assert text_blocks == {1}  # the answer moved one block on
    assert thought.text == quiet.text == "Hi there."
    assert reasoning(quiet) == ""
    usage = next(e["metadata"]["usage"] for e in thought.events if "metadata" in e)
    assert usage["outputTokens"] >= THINK_TOKENS["medium"]


def test_thinking_counts_against_max_tokens_and_can_leave_no_room_for_the_answer(
    client: Any, responder: ScriptedResponder
) -> None:
    responder.push(message("An answer that never comes."))
    reply = stream(client, HAIKU, inferenceConfig={"maxTokens": 100}, outputConfig={"effort": "low"})
    assert reply.stop_reason == "max_tokens"
    assert reply.text == ""
    assert len(reasoning(reply)) == 100 * 4


def test_an_answer_longer_than_max_tokens_is_cut_there(client: Any, responder: ScriptedResponder) -> None:
    responder.push(message("word " * 100))
    reply = stream(client, NOVA, inferenceConfig={"maxTokens": 10})
    assert reply.stop_reason == "max_tokens"
    assert reply.text == ("word " * 100)[:40]


def test_sonnet_between_tools_thinks_only_after_a_tool_result(client: Any, responder: ScriptedResponder) -> None:
    between = {"thinking": {"type": "between_tools"}}
    responder.push(message(tool_call("editor.open", {"path": "a.py"}, tool_use_id="tu1")), message("Opened."))
    first = stream(client, SONNET, additionalModelRequestFields=between)
    assert reasoning(first) == ""
    use = next(u for u in first.tool_uses)
    messages = [
        *HELLO,
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "tu1", "name": use["name"], "input": use["input"]}}],
        },
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tu1", "content": [{"text": "opened"}]}}]},
    ]
    after = stream(client, SONNET, messages, additionalModelRequestFields=between, outputConfig={"effort": "low"})
    assert len(reasoning(after)) == THINK_TOKENS["low"] * 4
    assert after.text == "Opened."
