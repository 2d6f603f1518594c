"""The local Bedrock endpoint's prompt caching, through the real ``bedrock-runtime`` client:
``cachePoint`` blocks checked as Bedrock checks them, and cache reads and writes reported in the
metadata event."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from botocore.exceptions import ClientError

from conductor_local.bedrock.cache import LOOKBACK_BLOCKS, PromptCache, has_cache_points
from conductor_local.bedrock.server import (
    LocalBedrockServer,
    ScriptedResponder,
    cache_point_problem,
    constraint_violation,
    estimate_input_tokens,
    message,
)

from .conftest import WRAPPER_TOOL_CONFIG, make_client, read_stream

CACHING_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
CACHE_POINT = {"cachePoint": {"type": "default"}}
SYSTEM = [{"text": "You are the VoiceIDE assistant. " * 40}, CACHE_POINT]
TOOLS = {"tools": [*WRAPPER_TOOL_CONFIG["tools"], CACHE_POINT]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(clock: Clock) -> PromptCache:
    """No per-model minimum: these tests are about what is read and written (the minimum has its own)."""
    return PromptCache(min_tokens=0, clock=clock)


@pytest.fixture
def server(responder: ScriptedResponder, cache: PromptCache) -> Any:
    with LocalBedrockServer(responder, prompt_cache=cache) as running:
        yield running


@pytest.fixture
def client(server: LocalBedrockServer) -> Any:
    return make_client(server.url)


def request(messages: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "modelId": CACHING_MODEL,
        "messages": messages,
        "system": SYSTEM,
        "toolConfig": TOOLS,
        "inferenceConfig": {"maxTokens": 256},
    }
    return {**params, **overrides}


def usage_of(client: Any, responder: ScriptedResponder, params: dict[str, Any]) -> dict[str, Any]:
    responder.push(message("Sure.", input_tokens=7, output_tokens=3))
    reply = read_stream(client.converse_stream(**params)["stream"])
    assert reply.error is None
    (meta,) = reply.of("metadata")
    return meta["usage"]


def user(text: str, *, cache: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}, *([CACHE_POINT] if cache else [])]}


def assistant(text: str, *, cache: bool = False) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}, *([CACHE_POINT] if cache else [])]}


def turns(count: int) -> list[dict[str, Any]]:
    """``count`` question/answer pairs (the history before a new user message)."""
    history = []
    for n in range(count):
        history += [user(f"question number {n} " * 8), assistant(f"answer number {n} " * 8)]
    return history


def with_history_checkpoint(history: list[dict[str, Any]], newest: dict[str, Any]) -> list[dict[str, Any]]:
    """The conductor's request shape: a checkpoint at the end of the message before the newest."""
    last = history[-1]
    return [*history[:-1], {**last, "content": [*last["content"], CACHE_POINT]}, newest]


# ---- cache usage in the metadata event -------------------------------------------------------


def test_without_cache_points_the_usage_is_the_scripts(client: Any, responder: ScriptedResponder) -> None:
    params = request([user("hi")], system=[{"text": "plain"}], toolConfig=WRAPPER_TOOL_CONFIG)

    assert usage_of(client, responder, params) == {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}


def test_the_first_request_writes_its_checkpoints_the_second_reads_them(
    client: Any, responder: ScriptedResponder
) -> None:
    params = request([user("hi")])
    total = estimate_input_tokens(params)

    first = usage_of(client, responder, params)
    second = usage_of(client, responder, params)

    assert first["cacheReadInputTokens"] == 0
    assert 0 < first["cacheWriteInputTokens"] < total
    assert first["inputTokens"] == total - first["cacheWriteInputTokens"]
    assert first["cacheDetails"] == [{"ttl": "5m", "inputTokens": first["cacheWriteInputTokens"]}]
    assert second["cacheReadInputTokens"] == first["cacheWriteInputTokens"]
    assert second["cacheWriteInputTokens"] == 0
    assert "cacheDetails" not in second
    assert second["inputTokens"] == first["inputTokens"]
    for usage in (first, second):
        assert usage["outputTokens"] == 3
        assert usage["totalTokens"] == (
            usage["inputTokens"]
            + usage["outputTokens"]
            + usage["cacheReadInputTokens"]
            + usage["cacheWriteInputTokens"]
        )


def test_a_changed_tool_misses_the_whole_cache(client: Any, responder: ScriptedResponder) -> None:
    usage_of(client, responder, request([user("hi")]))
    spec = {**WRAPPER_TOOL_CONFIG["tools"][0]["toolSpec"], "description": "Run a tool of the app."}

    tools = {"tools": [{"toolSpec": spec}, CACHE_POINT]}
    changed = usage_of(client, responder, request([user("hi")], toolConfig=tools))

    assert changed["cacheReadInputTokens"] == 0
    assert changed["cacheWriteInputTokens"] > 0


def test_the_tools_prefix_is_read_when_only_the_system_prompt_changed(
    client: Any, responder: ScriptedResponder
) -> None:
    """Bedrock reads tools before system: the tools checkpoint's prefix does not include it."""
    first = usage_of(client, responder, request([user("hi")]))

    changed = usage_of(client, responder, request([user("hi")], system=[{"text": "Another prompt."}, CACHE_POINT]))

    assert 0 < changed["cacheReadInputTokens"] < first["cacheWriteInputTokens"]


def test_a_conversation_reads_last_turns_history_checkpoint_and_writes_only_what_is_new(
    client: Any, responder: ScriptedResponder
) -> None:
    history = turns(2)
    first = usage_of(client, responder, request(with_history_checkpoint(history, user("third question"))))
    longer = [*history, user("third question"), assistant("third answer " * 8)]

    second = usage_of(client, responder, request(with_history_checkpoint(longer, user("fourth question"))))

    cached_before = first["cacheWriteInputTokens"]
    assert second["cacheReadInputTokens"] == cached_before  # found by looking back from the new checkpoint
    assert 0 < second["cacheWriteInputTokens"] < cached_before  # only the third question and answer
    assert second["inputTokens"] < second["cacheReadInputTokens"] / 4  # the new user message, not the history


def replies(count: int) -> list[dict[str, Any]]:
    """``count`` messages alternating from an assistant one."""
    return [assistant(f"reply {n}") if n % 2 == 0 else user(f"more {n}") for n in range(count)]


def test_the_lookback_reaches_twenty_blocks_before_a_checkpoint(client: Any, responder: ScriptedResponder) -> None:
    history = turns(2)  # one block each, after the tool and the system prompt: cached up to block 6
    first = usage_of(client, responder, request(with_history_checkpoint(history, user("next"))))
    cached_at = 2 + len(history)
    # The new checkpoint ends the message before the newest: 2 + len(messages) - 1 blocks.
    near = [*history, user("next"), *replies(cached_at + LOOKBACK_BLOCKS - 2 - len(history))]
    far = [*history, user("next"), *replies(cached_at + LOOKBACK_BLOCKS - len(history))]
    assert (2 + len(near) - 1 - LOOKBACK_BLOCKS, 2 + len(far) - 1 - LOOKBACK_BLOCKS) == (cached_at, cached_at + 2)

    missed = usage_of(client, responder, request(with_history_checkpoint(far[:-1], far[-1])))
    assert missed["cacheReadInputTokens"] < first["cacheWriteInputTokens"]  # only tools + system
    found = usage_of(client, responder, request(with_history_checkpoint(near[:-1], near[-1])))
    assert found["cacheReadInputTokens"] == first["cacheWriteInputTokens"]


def test_an_entry_expires_five_minutes_after_its_last_use(
    client: Any, responder: ScriptedResponder, clock: Clock
) -> None:
    params = request([user("hi")])
    written = usage_of(client, responder, params)["cacheWriteInputTokens"]

    clock.now += 299
    assert usage_of(client, responder, params)["cacheReadInputTokens"] == written  # a read renews the entry
    clock.now += 299
    assert usage_of(client, responder, params)["cacheReadInputTokens"] == written
    clock.now += 301
    expired = usage_of(client, responder, params)
    assert (expired["cacheReadInputTokens"], expired["cacheWriteInputTokens"]) == (0, written)


def test_a_one_hour_checkpoint_outlives_five_minutes(client: Any, responder: ScriptedResponder, clock: Clock) -> None:
    long_lived = {"cachePoint": {"type": "default", "ttl": "1h"}}
    params = request([user("hi")], system=[{"text": "Long prompt. " * 50}, long_lived], toolConfig=WRAPPER_TOOL_CONFIG)
    first = usage_of(client, responder, params)
    assert first["cacheDetails"] == [{"ttl": "1h", "inputTokens": first["cacheWriteInputTokens"]}]

    clock.now += 3000

    assert usage_of(client, responder, params)["cacheReadInputTokens"] == first["cacheWriteInputTokens"]


def test_a_checkpoint_under_the_minimum_caches_nothing(responder: ScriptedResponder, clock: Clock) -> None:
    params = request([user("hi")])
    with LocalBedrockServer(responder, prompt_cache=PromptCache(min_tokens=100_000, clock=clock)) as server:
        client = make_client(server.url)
        usage = usage_of(client, responder, params)
        again = usage_of(client, responder, params)

    assert (usage["cacheReadInputTokens"], usage["cacheWriteInputTokens"]) == (0, 0)
    assert usage["inputTokens"] == estimate_input_tokens(params)
    assert again["cacheReadInputTokens"] == 0


def test_a_rejected_request_writes_nothing(client: Any, responder: ScriptedResponder, server: Any) -> None:
    params = request([user("hi")])
    server.max_input_tokens = 1
    with pytest.raises(client.exceptions.ValidationException):
        client.converse_stream(**params)
    server.max_input_tokens = None

    assert usage_of(client, responder, params)["cacheReadInputTokens"] == 0


# ---- where cachePoint blocks may stand --------------------------------------------------------


def refused(client: Any, params: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ClientError) as caught:
        client.converse_stream(**params)
    return caught.value.response["Error"]


def test_five_cache_points_are_refused(client: Any) -> None:
    messages = [user("a", cache=True), assistant("b", cache=True), user("c", cache=True)]

    error = refused(client, request(messages))

    assert error == {
        "Code": "ValidationException",
        "Message": "The model returned the following errors: "
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    }


def test_four_cache_points_are_served(client: Any, responder: ScriptedResponder) -> None:
    messages = [user("a"), assistant("b", cache=True), user("c", cache=True)]

    assert usage_of(client, responder, request(messages))["cacheWriteInputTokens"] > 0


def test_a_cache_point_after_a_reasoning_block_is_refused(client: Any) -> None:
    thought = {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": "hm"}}}, CACHE_POINT]}
    messages = [user("a"), thought, user("c")]

    error = refused(client, request(messages))

    assert error["Code"] == "ValidationException"
    assert error["Message"].startswith("Cache point cannot be inserted after reasoning block.")


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ({"system": [CACHE_POINT, {"text": "x"}]}, "system.0"),
        ({"toolConfig": {"tools": [CACHE_POINT, *WRAPPER_TOOL_CONFIG["tools"]]}}, "tools.0"),
        ({"messages": [{"role": "user", "content": [CACHE_POINT, {"text": "hi"}]}]}, "messages.0.content.0"),
    ],
)
def test_a_cache_point_must_follow_a_block(client: Any, where: dict[str, Any], path: str) -> None:
    error = refused(client, {**request([user("hi")]), **where})

    assert error["Code"] == "ValidationException"
    assert f"{path}.type" in error["Message"]


def test_a_message_of_cache_points_only_is_empty(client: Any) -> None:
    messages = [user("a"), {"role": "assistant", "content": [CACHE_POINT]}, user("c")]

    assert cache_point_problem({"messages": messages}) is not None
    assert refused(client, request(messages))["Message"].endswith("at messages.1 is empty.")


def test_a_one_hour_checkpoint_may_not_follow_a_five_minute_one(client: Any) -> None:
    long_lived = {"cachePoint": {"type": "default", "ttl": "1h"}}

    last = {"role": "user", "content": [{"text": "y"}, long_lived]}
    error = refused(client, request([user("hi"), assistant("x"), last]))
    assert "a ttl='1h' cache_control block must not come after a ttl='5m'" in error["Message"]

    fine = request([user("hi")], toolConfig={"tools": [*WRAPPER_TOOL_CONFIG["tools"], long_lived]})
    assert cache_point_problem(fine) is None


def test_cache_point_members_outside_their_enums_are_refused(client: Any) -> None:
    bad = {"cachePoint": {"type": "ephemeral", "ttl": "2h"}}

    error = refused(client, request([user("hi")], system=[{"text": "x"}, bad]))

    assert error == {
        "Code": "ValidationException",
        "Message": "2 validation errors detected: "
        "Value 'ephemeral' at 'system.2.member.cachePoint.type' failed to satisfy constraint: "
        "Member must satisfy enum value set: [default]; "
        "Value '2h' at 'system.2.member.cachePoint.ttl' failed to satisfy constraint: "
        "Member must satisfy enum value set: [5m, 1h]",
    }
    assert constraint_violation(request([user("hi")])) is None


@pytest.mark.parametrize(
    "model_id", ["anthropic.claude-3-5-sonnet-20240620-v1:0", "meta.llama3-70b-instruct-v1:0", "amazon.titan-text"]
)
def test_a_model_without_prompt_caching_refuses_cache_points(
    client: Any, responder: ScriptedResponder, model_id: str
) -> None:
    error = refused(client, request([user("hi")], modelId=model_id))

    assert error == {
        "Code": "AccessDeniedException",
        "Message": "You invoked an unsupported model or your request did not allow prompt caching.",
    }
    plain = request([user("hi")], modelId=model_id, system=[{"text": "x"}], toolConfig=WRAPPER_TOOL_CONFIG)
    assert "cacheReadInputTokens" not in usage_of(client, responder, plain)


def test_cache_points_are_found_in_tools_system_and_messages() -> None:
    assert not has_cache_points(request([user("hi")], system=[{"text": "x"}], toolConfig=WRAPPER_TOOL_CONFIG))
    assert has_cache_points({"toolConfig": TOOLS})
    assert has_cache_points({"system": SYSTEM})
    assert has_cache_points({"messages": [user("hi", cache=True)]})


def test_each_checkpoint_needs_the_minimum_since_the_last_cached_one(clock: Clock) -> None:
    """Bedrock: with a 1,024-token minimum the first checkpoint may follow 1,024 tokens, the second 2,048."""
    cache = PromptCache(min_tokens=100, clock=clock)
    long_a, short, long_b = {"text": "a" * 400}, {"text": "s" * 40}, {"text": "b" * 400}

    def tokens(*blocks: dict[str, str]) -> int:
        return math.ceil(sum(len(json.dumps(b, separators=(",", ":"))) for b in blocks) / 4)

    def system(*blocks: dict[str, Any]) -> dict[str, Any]:
        return {"system": list(blocks), "messages": [user("hi")]}

    first = cache.account(system(long_a, CACHE_POINT, short, CACHE_POINT, long_b, CACHE_POINT), 1000)
    assert (first.read, first.write) == (0, tokens(long_a, short, long_b))  # the short one rolls into the next

    again = cache.account(system(long_a, CACHE_POINT, short, CACHE_POINT, long_b, CACHE_POINT), 1000)
    assert (again.read, again.write) == (tokens(long_a, short, long_b), 0)

    long_c = {"text": "c" * 400}
    other_end = cache.account(system(long_a, CACHE_POINT, short, CACHE_POINT, long_c, CACHE_POINT), 1000)
    assert other_end.read == tokens(long_a)  # nothing was cached at the short checkpoint
    assert other_end.write == tokens(long_a, short, long_c) - tokens(long_a)
