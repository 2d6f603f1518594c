"""What the turn runner really sends each configured model: the request as it reached the local
Bedrock endpoint (which refuses what the model refuses), for every stage in cdk.json."""

from __future__ import annotations

import pytest

from conductor_local.bedrock.server import message
from infra.config import read_cdk_json_context, select_stage
from lambdas import runtime
from shared.wire.model_rules import BETWEEN_TOOLS, THINKING_HEADROOM, rules_for
from tests.handlers.conftest import Harness

STAGES = sorted(read_cdk_json_context()["stages"])


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_sends_its_model_what_it_accepts_with_the_stages_effort_and_thinking(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    bedrock = select_stage(read_cdk_json_context()["stages"], stage).bedrock
    for name, value in {
        "BEDROCK_MODEL_ID": bedrock.model_id,
        "BEDROCK_MAX_TOKENS": str(bedrock.max_tokens),
        "BEDROCK_EFFORT": bedrock.effort,
        "BEDROCK_THINKING": bedrock.thinking,
        "BEDROCK_TEMPERATURE": "0.3",  # a stale setting must not reach a model that refuses it
    }.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    conductor.script.push(message("Hello."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "hello")

    (sent,) = [request for request in conductor.script.requests]
    rules = rules_for(bedrock.model_id)
    assert sent.model_id == bedrock.model_id
    config = sent.body["inferenceConfig"]
    if not rules.sampling:
        assert "temperature" not in config and "topP" not in config
    assert sent.body["outputConfig"] == {"effort": bedrock.effort}
    thinking = sent.body.get("additionalModelRequestFields", {}).get("thinking")
    if bedrock.thinking == "off" and rules.off is not None:  # both stages' models can stop thinking
        assert thinking == {"type": rules.off}  # Haiku 5.5: disabled; Sonnet 5.5: between_tools
        # No thinking before the answer; Sonnet 5.5 still thinks after tool results: room for that.
        room = THINKING_HEADROOM[bedrock.effort] if rules.off == BETWEEN_TOOLS else 0
        assert config["maxTokens"] == bedrock.max_tokens + room
    else:
        assert thinking == {"type": "adaptive"}
    assert ("final", "Hello.") in conductor.summary(conn)  # the endpoint took the request


def test_thinking_left_on_streams_reasoning_first_and_none_of_it_is_spoken(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BEDROCK_MODEL_ID", "us.anthropic.claude-haiku-5-5")
    monkeypatch.setenv("BEDROCK_THINKING", "adaptive")
    runtime.reset()
    conductor.script.push(message("Hello."))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "hello")
    (sent,) = conductor.script.requests
    assert sent.body["additionalModelRequestFields"] == {"thinking": {"type": "adaptive"}}
    assert sent.body["inferenceConfig"]["maxTokens"] > 1024  # room for thinking on top of the answer
    summary = conductor.summary(conn)
    assert ("final", "Hello.") in summary
    assert not any("think" in str(item).lower() for item in summary if item[0] in ("partial", "final"))
