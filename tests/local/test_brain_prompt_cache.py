"""``BedrockBrain`` with prompt caching: which models cache, where the request's ``cachePoint``
blocks go, and the cache usage the stream reports, over the real client and the local endpoint."""

from __future__ import annotations

import copy
from typing import Any

import boto3
import pytest

from conductor_local.bedrock.server import (
    LocalBedrockServer,
    ScriptedResponder,
    cache_point_problem,
    message,
    tool_call,
)
from shared.adapters.brain import (
    CACHE_POINT,
    MAX_CACHE_POINTS,
    BedrockBrain,
    prompt_cache_enabled,
    supports_prompt_cache,
)
from shared.core.model_output import ModelMessage
from shared.core.tool_catalog import default_catalog
from shared.core.wrapper import wrapper_tool_spec
from shared.flows.config import DEFAULT_SYSTEM_PROMPT
from shared.wire.model_rules import Inference, rules_for

CLAUDE = "us.anthropic.claude-haiku-5-5"
NOVA = "us.amazon.nova-pro-v1:0"


def offline_client() -> Any:
    """A real Bedrock runtime client that is never called (only the request is looked at)."""
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="unused", aws_secret_access_key="unused"
    )


def make_brain(client: Any, model_id: str = CLAUDE, *, prompt_cache: bool = True, **options: Any) -> BedrockBrain:
    return BedrockBrain(
        client if client is not None else offline_client(),
        model_id=model_id,
        system_prompt=DEFAULT_SYSTEM_PROMPT,
        tool_spec=wrapper_tool_spec(default_catalog()),
        inference=Inference(max_tokens=256),
        prompt_cache=prompt_cache,
        **options,
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


def conversation(pairs: int, newest: str = "and now?") -> list[dict[str, Any]]:
    history = []
    for n in range(pairs):
        history += [user(f"question {n}"), assistant(f"answer {n}")]
    return [*history, user(newest)]


def points(blocks: list[dict[str, Any]]) -> list[int]:
    return [i for i, block in enumerate(blocks) if "cachePoint" in block]


# ---- which models cache -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "supported"),
    [
        ("anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", True),
        ("anthropic.claude-sonnet-4-20250514-v1:0", True),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", True),
        ("anthropic.claude-opus-4-1-20250805-v1:0", True),
        ("us.anthropic.claude-haiku-5-5", True),
        ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0", True),
        ("amazon.nova-micro-v1:0", True),
        ("us.amazon.nova-lite-v1:0", True),
        ("amazon.nova-premier-v1:0", True),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", False),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", False),
        ("anthropic.claude-3-haiku-20240307-v1:0", False),
        ("anthropic.claude-3-opus-20240229-v1:0", False),
        ("anthropic.claude-v2:1", False),
        ("amazon.nova-sonic-v1:0", False),
        ("meta.llama3-70b-instruct-v1:0", False),
        ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", False),
    ],
)
def test_supports_prompt_cache(model_id: str, supported: bool) -> None:
    assert supports_prompt_cache(model_id) is supported


def test_the_setting_auto_follows_the_model_and_on_off_override_it() -> None:
    assert prompt_cache_enabled("auto", CLAUDE) is True
    assert prompt_cache_enabled("auto", "anthropic.claude-3-haiku-20240307-v1:0") is False
    assert prompt_cache_enabled("on", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x") is True
    assert prompt_cache_enabled("off", CLAUDE) is False
    with pytest.raises(ValueError, match="prompt_cache"):
        prompt_cache_enabled("yes", CLAUDE)


# ---- where the cachePoint blocks go -----------------------------------------------------------


def test_without_prompt_cache_the_request_has_no_cache_points() -> None:
    request = make_brain(None, prompt_cache=False).request(conversation(2))

    assert "cachePoint" not in repr(request)


def test_checkpoints_after_the_tool_the_system_prompt_and_the_stable_history() -> None:
    messages = conversation(2)
    sent = copy.deepcopy(messages)

    request = make_brain(None).request(messages)

    assert request["toolConfig"]["tools"][-1] == CACHE_POINT and points(request["toolConfig"]["tools"]) == [1]
    assert request["system"][-1] == CACHE_POINT and points(request["system"]) == [1]
    wired = request["messages"]
    assert [points(m["content"]) for m in wired] == [[], [], [], [1], []]
    assert wired[-2]["content"][0] == messages[-2]["content"][0]
    assert wired[-1] == messages[-1]  # the newest message is never a checkpoint
    assert messages == sent  # the caller's history is left as it was
    assert cache_point_problem(request) is None


def test_the_history_checkpoint_moves_with_the_conversation_and_the_prefix_stays_the_same() -> None:
    brain = make_brain(None)
    first = brain.request(conversation(1))["messages"]
    second = brain.request([*conversation(1), assistant("answer 1"), user("next")])["messages"]

    assert [points(m["content"]) for m in first] == [[], [1], []]
    assert [points(m["content"]) for m in second] == [[], [], [], [1], []]
    # what the first request cached (its messages up to the checkpoint) begins the second one
    strip = [{**m, "content": [b for b in m["content"] if "cachePoint" not in b]} for m in first[:2]]
    assert strip == second[:2]


def test_a_tool_round_checkpoints_the_assistant_tool_use() -> None:
    tool_use = {"toolUse": {"toolUseId": "tu1", "name": "tool_call", "input": {"name": "editor.open"}}}
    result = {"toolResult": {"toolUseId": "tu1", "content": [{"text": "opened"}]}}
    messages = [user("open it"), {"role": "assistant", "content": [{"text": "Opening."}, tool_use]}]
    messages.append({"role": "user", "content": [result]})

    wired = make_brain(None).request(messages)["messages"]

    assert wired[1]["content"] == [{"text": "Opening."}, tool_use, CACHE_POINT]
    assert wired[2]["content"] == [result]


def test_a_first_message_alone_has_no_history_checkpoint() -> None:
    request = make_brain(None).request([user("hello")])

    assert request["messages"] == [user("hello")]


def test_no_checkpoint_after_a_reasoning_block() -> None:
    thought = {
        "role": "assistant",
        "content": [{"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}}],
    }

    request = make_brain(None).request([user("a"), thought, user("b")])

    assert [points(m["content"]) for m in request["messages"]] == [[], [], []]


def test_nova_caches_the_system_prompt_and_history_but_not_the_tools() -> None:
    request = make_brain(None, NOVA).request(conversation(1))

    assert points(request["toolConfig"]["tools"]) == []
    assert points(request["system"]) == [1]
    assert points(request["messages"][-2]["content"]) == [1]


def test_no_history_checkpoint_when_the_next_request_would_start_later() -> None:
    """At the window's size the next request drops its oldest messages: a prefix never sent again."""
    brain = make_brain(None, history_window=7)

    fits = brain.request(conversation(2))["messages"]  # 5 messages, the next one 7
    full = brain.request(conversation(3))["messages"]  # 7 messages, the next one would be 9

    assert points(fits[-2]["content"]) == [1]
    assert all(not points(m["content"]) for m in full)


def test_never_more_checkpoints_than_bedrock_takes() -> None:
    request = make_brain(None).request(conversation(30))

    found = sum(
        len(points(blocks))
        for blocks in (request["system"], request["toolConfig"]["tools"], *(m["content"] for m in request["messages"]))
    )
    assert found == 3 <= MAX_CACHE_POINTS


# ---- the cache usage, through the real client and the local endpoint --------------------------


def finish(brain: BedrockBrain, messages: list[dict[str, Any]]) -> ModelMessage:
    reply = ModelMessage()
    for item in brain.stream(messages):
        reply.add(item)
    return reply


def test_the_second_turn_reads_the_cache_the_first_wrote(
    client: Any, responder: ScriptedResponder, bedrock: LocalBedrockServer
) -> None:
    bedrock.prompt_cache.min_tokens = 0  # the short prompt is under the model's minimum: cache every checkpoint
    brain = make_brain(client)
    responder.push(message("First answer.", output_tokens=4), message("Second answer.", output_tokens=5))

    first = finish(brain, conversation(1))
    second = finish(brain, [*conversation(1), assistant("First answer."), user("and then?")])

    assert first.usage["cacheReadInputTokens"] == 0
    assert first.usage["cacheWriteInputTokens"] > 0
    assert second.usage["cacheReadInputTokens"] == first.usage["cacheWriteInputTokens"]
    assert 0 < second.usage["cacheWriteInputTokens"] < second.usage["cacheReadInputTokens"]
    assert second.usage["outputTokens"] == 5
    assert second.usage["totalTokens"] == sum(
        second.usage[k] for k in ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
    )
    (sent, _) = [r.body for r in responder.requests]
    assert points(sent["system"]) == [1]


def test_a_tool_round_is_served_with_its_checkpoints(
    client: Any, responder: ScriptedResponder, bedrock: LocalBedrockServer
) -> None:
    bedrock.prompt_cache.min_tokens = 0  # the short prompt is under the model's minimum: cache every checkpoint
    brain = make_brain(client)
    responder.push(message(tool_call("editor.open", {"path": "a.py"}, tool_use_id="tu1")), message("Done."))
    first = finish(brain, [user("open a.py")])
    result = {"toolResult": {"toolUseId": "tu1", "content": [{"text": "opened"}]}}
    round_trip = [user("open a.py"), {"role": "assistant", "content": first.history_content()}]

    second = finish(brain, [*round_trip, {"role": "user", "content": [result]}])

    assert second.stop_reason == "end_turn"
    assert second.usage["cacheReadInputTokens"] == first.usage["cacheWriteInputTokens"] > 0
    assert second.usage["cacheWriteInputTokens"] > 0  # the user message and the tool use


def test_usage_without_cache_members_stays_as_reported(client: Any, responder: ScriptedResponder) -> None:
    responder.push(message("Hi.", input_tokens=11, output_tokens=2))

    reply = finish(make_brain(client, prompt_cache=False), [user("hello")])

    assert reply.usage == {"inputTokens": 11, "outputTokens": 2, "totalTokens": 13}


def test_a_prefix_under_the_models_minimum_caches_nothing_and_one_over_it_does(
    client: Any, responder: ScriptedResponder
) -> None:
    """Bedrock silently caches nothing below the model's minimum (4,096 tokens for Claude Haiku
    5.5): the conductor's short prompt pays full price until the history grows past it."""
    brain = make_brain(client)
    responder.push(message("Short.", output_tokens=2), message("Long.", output_tokens=2))
    short = finish(brain, conversation(1))
    long_history = [user("x " * 9000), assistant("Noted."), user("and now?")]
    long = finish(brain, long_history)
    assert short.usage["cacheWriteInputTokens"] == short.usage["cacheReadInputTokens"] == 0
    assert long.usage["cacheWriteInputTokens"] >= rules_for(CLAUDE).cache_min_tokens
