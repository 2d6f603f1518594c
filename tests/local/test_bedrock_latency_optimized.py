"""``performanceConfig`` on the local Bedrock endpoint: ``optimized`` is served only for the models
Bedrock offers latency-optimized inference for, as Bedrock refuses it for any other."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from conductor_local.bedrock.script import ScriptedResponder, message
from conductor_local.bedrock.server import LocalBedrockServer
from conductor_local.bedrock.validation import LATENCY_UNSUPPORTED, offers_latency_optimized

from .conftest import make_client

USER_HI = [{"role": "user", "content": [{"text": "hi"}]}]
HAIKU_35 = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
HAIKU_55 = "us.anthropic.claude-haiku-5-5"
SONNET_55 = "global.anthropic.claude-sonnet-5-5"


@pytest.fixture
def served() -> Iterator[tuple[LocalBedrockServer, ScriptedResponder]]:
    responder = ScriptedResponder()
    server = LocalBedrockServer(responder).start()
    try:
        yield server, responder
    finally:
        server.stop()


def _body(latency: Any) -> dict[str, Any]:
    return {"messages": USER_HI, "performanceConfig": {"latency": latency}}


@pytest.mark.parametrize(
    ("model_id", "offered"),
    [
        (HAIKU_35, True),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("us.amazon.nova-pro-v1:0", True),
        ("us.meta.llama3-1-405b-instruct-v1:0", True),
        (HAIKU_55, False),
        (SONNET_55, False),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", False),
        ("us.amazon.nova-lite-v1:0", False),
    ],
)
def test_which_models_are_offered_latency_optimized(model_id: str, offered: bool) -> None:
    assert offers_latency_optimized(model_id) is offered


def test_optimized_to_a_model_without_it_is_refused_and_standard_is_served() -> None:
    server = LocalBedrockServer(ScriptedResponder())

    refused = server.refusal(_body("optimized"), SONNET_55)

    assert refused is not None
    assert (refused.status, refused.error_type, refused.message) == (400, "ValidationException", LATENCY_UNSUPPORTED)
    assert server.refusal(_body("standard"), SONNET_55) is None
    assert server.refusal(_body("optimized"), HAIKU_35) is None
    assert server.refusal({"messages": USER_HI}, SONNET_55) is None


def test_a_latency_outside_the_enum_is_refused_in_aws_words() -> None:
    refused = LocalBedrockServer(ScriptedResponder()).refusal(_body("fast"), HAIKU_35)

    assert refused is not None and refused.status == 400
    assert refused.message == (
        "1 validation error detected: Value 'fast' at 'performanceConfig.latency' failed to satisfy "
        "constraint: Member must satisfy enum value set: [standard, optimized]"
    )


def test_boto3_gets_the_refusal_before_any_stream(served: tuple[LocalBedrockServer, ScriptedResponder]) -> None:
    server, responder = served
    responder.push(message("Hello."))
    client = make_client(server.url)

    with pytest.raises(ClientError) as refused:
        client.converse_stream(modelId=HAIKU_55, messages=USER_HI, performanceConfig={"latency": "optimized"})
    answered = client.converse_stream(modelId=HAIKU_55, messages=USER_HI, performanceConfig={"latency": "standard"})

    assert refused.value.response["Error"] == {"Code": "ValidationException", "Message": LATENCY_UNSUPPORTED}
    assert [e for e in answered["stream"] if "messageStop" in e]
