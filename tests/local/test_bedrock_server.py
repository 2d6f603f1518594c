"""The local Bedrock endpoint, driven through the real boto3 ``bedrock-runtime`` client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.retries.standard import ExponentialBackoff
from urllib3.exceptions import ProtocolError

from conductor_local.bedrock.server import (
    LocalBedrockServer,
    Pause,
    RaiseInStream,
    RejectRequest,
    ScriptedResponder,
    Step,
    Text,
    ToolUse,
    constraint_violation,
    context_window,
    converse_validation_error,
    estimate_input_tokens,
    message,
    message_start,
    model_stream_error,
    split_parts,
    split_words,
    stream_throttling,
    text_delta,
    throttled,
    tool_call,
)
from conductor_local.bedrock.validation import DEFAULT_CONTEXT_WINDOW

from .conftest import MODEL_ID, WRAPPER_TOOL_CONFIG, Converse, make_client, read_stream

USER_HI = [{"role": "user", "content": [{"text": "hi"}]}]


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore waits up to a second before retrying a throttled call; the retry itself is what counts."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)


# ---- scripted messages as boto3 parses them -----------------------------------------------


def test_text_arrives_in_many_deltas(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message("The quick brown fox jumps.", input_tokens=12))

    reply = converse("hi")

    assert reply.error is None
    assert reply.kinds == ["messageStart"] + ["contentBlockDelta"] * 5 + [
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert reply.events[0] == {"messageStart": {"role": "assistant"}}
    assert reply.text_deltas == ["The", " quick", " brown", " fox", " jumps."]
    assert {d["contentBlockIndex"] for d in reply.of("contentBlockDelta")} == {0}
    assert reply.stop_reason == "end_turn"
    (meta,) = reply.of("metadata")
    assert meta["usage"] == {"inputTokens": 12, "outputTokens": 5, "totalTokens": 17}
    assert meta["metrics"]["latencyMs"] > 0


def test_text_can_be_cut_by_characters(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message(Text("abcdefgh", chars_per_delta=3)))

    assert converse("hi").text_deltas == ["abc", "def", "gh"]


def test_tool_input_json_is_split_across_deltas(responder: ScriptedResponder, converse: Converse) -> None:
    tool_input = {"path": "src/app.py", "line": 42, "text": "print('hi')"}
    responder.push(message(ToolUse("editor.insert", tool_input, tool_use_id="tooluse_a1", parts=4)))

    reply = converse("insert it")

    (use,) = reply.tool_uses
    assert (use["index"], use["toolUseId"], use["name"]) == (0, "tooluse_a1", "editor.insert")
    assert len(use["deltas"]) == 4
    assert all(_not_json(piece) for piece in use["deltas"])
    assert use["input"] == tool_input
    assert reply.kinds[:2] == ["messageStart", "contentBlockStart"]
    assert reply.stop_reason == "tool_use"


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def test_text_then_two_tool_calls_in_one_message(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(
        message(
            "Opening both files.",
            tool_call("editor.open", {"path": "a.py"}, tool_use_id="tooluse_1"),
            tool_call("editor.open", {"path": "b.py"}, call_id="call-b", tool_use_id="tooluse_2"),
        )
    )

    reply = converse("open a and b")

    assert reply.text == "Opening both files."
    assert [(u["index"], u["toolUseId"], u["name"]) for u in reply.tool_uses] == [
        (1, "tooluse_1", "tool_call"),
        (2, "tooluse_2", "tool_call"),
    ]
    assert reply.tool_uses[0]["input"] == {"name": "editor.open", "arguments": {"path": "a.py"}}
    assert reply.tool_uses[1]["input"] == {
        "name": "editor.open",
        "arguments": {"path": "b.py"},
        "call_id": "call-b",
    }
    assert [s["contentBlockIndex"] for s in reply.of("contentBlockStop")] == [0, 1, 2]
    assert reply.stop_reason == "tool_use"


def test_a_tool_other_than_the_wrapper(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message(ToolUse("get_weather", {"city": "Paris"})))

    (use,) = converse("weather?").tool_uses

    assert use["name"] == "get_weather"
    assert use["input"] == {"city": "Paris"}
    assert use["toolUseId"].startswith("tooluse_")


def test_malformed_tool_input_is_sent_verbatim(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message(ToolUse("tool_call", '{"name": "editor.open", "argu', parts=2)))

    reply = converse("hi")

    deltas = [d["delta"]["toolUse"]["input"] for d in reply.of("contentBlockDelta")]
    assert "".join(deltas) == '{"name": "editor.open", "argu'
    assert len(deltas) == 2


def test_the_stop_reason_can_be_chosen(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message("cut", stop_reason="max_tokens"))

    assert converse("hi").stop_reason == "max_tokens"


def test_unique_tool_use_ids_by_default() -> None:
    assert tool_call("a", {}).tool_use_id != tool_call("a", {}).tool_use_id


# ---- errors -------------------------------------------------------------------------------


def test_throttling_before_the_stream_is_retried_by_botocore(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, no_backoff: None
) -> None:
    responder.push(throttled(), throttled(), message("finally"))
    client = make_client(bedrock.url, total_attempts=3)

    reply = read_stream(client.converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"])

    assert reply.text == "finally"
    assert len(bedrock.requests) == 3


def test_throttling_surfaces_as_client_error_once_retries_run_out(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, no_backoff: None
) -> None:
    responder.push(throttled("slow down"), throttled("slow down"), message("never read"))
    client = make_client(bedrock.url, total_attempts=2)

    with pytest.raises(ClientError) as caught:
        client.converse_stream(modelId=MODEL_ID, messages=USER_HI)

    error = caught.value.response
    assert error["Error"] == {"Code": "ThrottlingException", "Message": "slow down"}
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert error["ResponseMetadata"]["RetryAttempts"] == 1
    assert isinstance(caught.value, client.exceptions.ThrottlingException)
    assert len(responder.requests) == 2
    assert responder.pending == 1


def test_a_validation_rejection_is_not_retried(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, no_backoff: None
) -> None:
    responder.push(RejectRequest(400, "ValidationException", "maxTokens is too big"))
    client = make_client(bedrock.url, total_attempts=3)

    with pytest.raises(client.exceptions.ValidationException, match="maxTokens is too big"):
        client.converse_stream(modelId=MODEL_ID, messages=USER_HI)
    assert len(bedrock.requests) == 1


def test_model_stream_error_mid_stream(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message("I was saying", interrupted_by=model_stream_error("the model broke")))

    reply = converse("hi")

    assert reply.text_deltas == ["I", " was", " saying"]
    assert "contentBlockStop" not in reply.kinds
    assert "messageStop" not in reply.kinds
    assert reply.error is not None
    assert reply.error.response["Error"] == {"Code": "modelStreamErrorException", "Message": "the model broke"}


def test_throttling_mid_stream(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push([message_start(), text_delta(0, "Hel"), stream_throttling("too many tokens")])

    reply = converse("hi")

    assert reply.text == "Hel"
    assert reply.error is not None
    assert reply.error.response["Error"]["Code"] == "throttlingException"


def test_the_stream_ends_at_an_exception(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push([message_start(), RaiseInStream("internalServerException", "oops"), text_delta(0, "never")])

    reply = converse("hi")

    assert reply.kinds == ["messageStart"]
    assert reply.error is not None
    assert reply.error.response["Error"]["Code"] == "internalServerException"


def test_a_request_with_nothing_queued_gets_a_clear_500(responder: ScriptedResponder, client: Any) -> None:
    with pytest.raises(client.exceptions.InternalServerException) as caught:
        client.converse_stream(modelId=MODEL_ID, messages=USER_HI)

    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert "no script queued for request #1" in caught.value.response["Error"]["Message"]


def test_a_failing_responder_gets_a_500(client: Any) -> None:
    def broken(model_id: str, request: dict[str, Any]) -> list[Step]:
        raise RuntimeError("responder bug")

    with LocalBedrockServer(broken) as server:
        failing_client = make_client(server.url)
        with pytest.raises(failing_client.exceptions.InternalServerException, match="responder bug"):
            failing_client.converse_stream(modelId=MODEL_ID, messages=USER_HI)


def test_a_broken_script_step_ends_the_stream_with_an_exception(
    responder: ScriptedResponder, converse: Converse
) -> None:
    responder.push([message_start(), {"contentBlockDelta": {}, "extra": {}}])

    reply = converse("hi")

    assert reply.kinds == ["messageStart"]
    assert reply.error is not None
    assert reply.error.response["Error"]["Code"] == "internalServerException"
    assert "exactly one key" in reply.error.response["Error"]["Message"]


# ---- requests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model_id",
    [
        "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
    ],
)
def test_model_ids_arrive_decoded(responder: ScriptedResponder, converse: Converse, model_id: str) -> None:
    responder.push(message("ok"))

    assert converse("hi", model_id=model_id).text == "ok"
    assert [r.model_id for r in responder.requests] == [model_id]


def test_requests_are_recorded_as_boto3_sent_them(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, converse: Converse
) -> None:
    responder.push(message("ok"))

    converse("open main.py")

    (recorded,) = bedrock.requests
    assert recorded == responder.requests[0]
    assert recorded.body["messages"] == [{"role": "user", "content": [{"text": "open main.py"}]}]
    assert recorded.body["system"] == [{"text": "You are the VoiceIDE assistant."}]
    assert recorded.body["toolConfig"] == WRAPPER_TOOL_CONFIG
    assert recorded.body["inferenceConfig"] == {"maxTokens": 512, "temperature": 0.2}


def test_the_endpoint_variable_points_boto3_here(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
    responder.push(message("via the environment"))
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")

    reply = read_stream(session.client("bedrock-runtime").converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"])

    assert reply.text == "via the environment"


def test_an_invalid_conversation_is_rejected_like_bedrock(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any
) -> None:
    responder.push(message("unused"))
    unanswered = [
        {"role": "user", "content": [{"text": "open a"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu1", "name": "tool_call", "input": {}}}]},
        {"role": "user", "content": [{"text": "never mind"}]},
    ]

    with pytest.raises(client.exceptions.ValidationException, match="tu1"):
        client.converse_stream(modelId=MODEL_ID, messages=unanswered, toolConfig=WRAPPER_TOOL_CONFIG)
    assert responder.pending == 1
    assert len(bedrock.requests) == 1


def test_validation_can_be_turned_off() -> None:
    responder = ScriptedResponder(message("anything goes"))
    with LocalBedrockServer(responder, validate_requests=False) as server:
        assistant_first = [{"role": "assistant", "content": [{"text": "hello"}]}]
        stream = make_client(server.url).converse_stream(modelId=MODEL_ID, messages=assistant_first)["stream"]
        assert read_stream(stream).text == "anything goes"


def _use(tool_id: str) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_id, "name": "tool_call", "input": {"name": "x", "arguments": {}}}}


def _result(tool_id: str) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_id, "content": [{"text": "ok"}]}}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "must start with a user message"),
        ([{"role": "assistant", "content": [{"text": "hi"}]}], "must start with a user message"),
        (
            [{"role": "user", "content": [{"text": "a"}]}, {"role": "user", "content": [{"text": "b"}]}],
            "must alternate",
        ),
        ([{"role": "user", "content": []}], "messages.0 is empty"),
        ([{"role": "user", "content": [{"text": "  "}]}], "messages.0.content.0 is blank"),
        (
            [
                {"role": "user", "content": [{"text": "a"}]},
                {"role": "assistant", "content": [_use("t1"), _use("t2")]},
                {"role": "user", "content": [_result("t1")]},
            ],
            "following Ids: t2",
        ),
        (
            [
                {"role": "user", "content": [{"text": "a"}]},
                {"role": "assistant", "content": [_use("t1")]},
                {"role": "user", "content": [_result("t1"), _result("t9")]},
            ],
            "exceeds the number of toolUse blocks",
        ),
        ([{"role": "user", "content": [_result("t1")]}], "exceeds the number of toolUse blocks"),
    ],
)
def test_conversation_rules(messages: list[dict[str, Any]], problem: str) -> None:
    error = converse_validation_error({"messages": messages, "toolConfig": WRAPPER_TOOL_CONFIG})

    assert error is not None
    assert problem in error


def test_a_complete_tool_round_is_valid_and_needs_a_tool_config() -> None:
    messages = [
        {"role": "user", "content": [{"text": "a"}]},
        {"role": "assistant", "content": [{"text": "sure"}, _use("t1"), _use("t2")]},
        {"role": "user", "content": [_result("t2"), _result("t1"), {"text": "and b"}]},
        {"role": "assistant", "content": [_use("t3")]},
    ]

    assert converse_validation_error({"messages": messages, "toolConfig": WRAPPER_TOOL_CONFIG}) is None
    assert "toolConfig" in (converse_validation_error({"messages": messages}) or "")


# ---- streaming and lifecycle --------------------------------------------------------------


def test_each_event_is_delivered_before_the_next_is_produced(responder: ScriptedResponder, client: Any) -> None:
    first_delta_read = threading.Event()

    def script() -> Iterator[Step]:
        yield message_start()
        yield text_delta(0, "first")
        # Produced only once the client has read "first": a buffered response would stall here.
        yield text_delta(0, " second" if first_delta_read.wait(timeout=10) else " (buffered)")

    responder.push(script())
    texts = []
    for event in client.converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"]:
        if "contentBlockDelta" in event:
            texts.append(event["contentBlockDelta"]["delta"]["text"])
            first_delta_read.set()

    assert texts == ["first", " second"]


def test_pauses_are_real_between_deltas(responder: ScriptedResponder, converse: Converse) -> None:
    responder.push(message(Text("one two three four", pause=0.05)))

    reply = converse("hi")

    assert reply.text == "one two three four"
    assert reply.delta_offsets[0] >= 0.05  # even the first delta waits
    assert reply.delta_offsets[-1] >= 0.2


def test_stop_is_prompt_mid_stream(responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any) -> None:
    responder.push([message_start(), text_delta(0, "hi"), Pause(60), text_delta(0, " never")])
    events = iter(client.converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"])
    assert next(events) == {"messageStart": {"role": "assistant"}}
    assert "contentBlockDelta" in next(events)

    started = time.monotonic()
    bedrock.stop()

    assert time.monotonic() - started < 2
    with pytest.raises(ProtocolError):
        next(events)


def test_a_client_leaving_mid_stream_does_not_hurt_the_server(responder: ScriptedResponder, client: Any) -> None:
    responder.push(message(Text("a b c d e f g h", pause=0.02)), message("still here"))
    stream = client.converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"]
    events = iter(stream)
    next(events)
    next(events)
    stream.close()

    reply = read_stream(client.converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"])

    assert reply.text == "still here"


def test_concurrent_requests_each_get_their_own_script(responder: ScriptedResponder, client: Any) -> None:
    answers = {f"answer {i}" for i in range(8)}
    responder.push(*(message(Text(answer, pause=0.01)) for answer in sorted(answers)))

    def ask(_: int) -> str:
        return read_stream(client.converse_stream(modelId=MODEL_ID, messages=USER_HI)["stream"]).text

    with ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(ask, range(8)))

    assert set(texts) == answers
    assert len(responder.requests) == 8


def test_the_server_refuses_a_second_start_and_stops_twice_quietly() -> None:
    server = LocalBedrockServer(ScriptedResponder())
    with pytest.raises(RuntimeError):
        _ = server.url
    server.start()
    assert server.url.startswith("http://127.0.0.1:")
    with pytest.raises(RuntimeError):
        server.start()
    server.stop()
    server.stop()


def test_unknown_paths_get_404(bedrock: LocalBedrockServer) -> None:
    import urllib.request

    request = urllib.request.Request(f"{bedrock.url}/model/m/invoke", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 404
    assert caught.value.headers["x-amzn-ErrorType"] == "UnknownOperationException"


# ---- builders -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "per_delta", "pieces"),
    [
        ("a b  c", 1, ["a", " b", "  c"]),
        ("  lead and trail ", 2, ["  lead and", " trail "]),
        ("", 1, []),
        ("   ", 1, ["   "]),
    ],
)
def test_split_words_keeps_every_character(text: str, per_delta: int, pieces: list[str]) -> None:
    assert split_words(text, per_delta) == pieces


@pytest.mark.parametrize(("length", "parts", "count"), [(10, 3, 3), (2, 5, 2), (1, 1, 1)])
def test_split_parts(length: int, parts: int, count: int) -> None:
    text = "abcdefghij"[:length]
    pieces = split_parts(text, parts)
    assert "".join(pieces) == text
    assert len(pieces) == count
    assert all(pieces)


# ---- the context window -------------------------------------------------------------------


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messages": messages,
        "system": [{"text": "You are the VoiceIDE assistant."}],
        "toolConfig": WRAPPER_TOOL_CONFIG,
    }


def _compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def test_input_tokens_are_estimated_from_system_messages_and_tool_config() -> None:
    body = _body(USER_HI)
    chars = _compact(body["system"]) + _compact(USER_HI) + _compact(WRAPPER_TOOL_CONFIG)

    assert estimate_input_tokens(body) == -(-chars // 4)
    assert estimate_input_tokens({**body, "inferenceConfig": {"maxTokens": 9}}) == estimate_input_tokens(body)
    assert estimate_input_tokens({"messages": USER_HI}) == -(-_compact(USER_HI) // 4)
    assert estimate_input_tokens({"messages": [{"role": "user", "content": [{"text": "é" * 400}]}]}) > 100


def _converse(client: Any, messages: list[dict[str, Any]]) -> Any:
    body = _body(messages)
    return client.converse_stream(
        modelId=MODEL_ID, messages=messages, system=body["system"], toolConfig=WRAPPER_TOOL_CONFIG
    )


def test_a_request_over_the_context_limit_is_refused_before_any_stream(no_backoff: None) -> None:
    responder = ScriptedResponder(message("never sent"))
    limit = estimate_input_tokens(_body(USER_HI)) - 1
    with LocalBedrockServer(responder, max_input_tokens=limit) as server:
        client = make_client(server.url, total_attempts=3)
        with pytest.raises(ClientError) as caught:
            _converse(client, USER_HI)

        assert isinstance(caught.value, client.exceptions.ValidationException)
        error = caught.value.response
        assert error["Error"] == {"Code": "ValidationException", "Message": "Input is too long for requested model."}
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert error["ResponseMetadata"]["RetryAttempts"] == 0
        assert len(server.requests) == 1  # recorded, not retried
        assert responder.pending == 1  # the responder never saw it


def test_a_request_exactly_at_the_limit_is_served() -> None:
    responder = ScriptedResponder(message("fits"))
    with LocalBedrockServer(responder, max_input_tokens=estimate_input_tokens(_body(USER_HI))) as server:
        assert read_stream(_converse(make_client(server.url), USER_HI)["stream"]).text == "fits"


def test_the_context_limit_can_be_changed_while_running(
    responder: ScriptedResponder, bedrock: LocalBedrockServer
) -> None:
    client = make_client(bedrock.url)
    responder.push(message("the model's window"), message("roomy again"))
    assert bedrock.max_input_tokens == "model"
    assert read_stream(_converse(client, USER_HI)["stream"]).text == "the model's window"

    bedrock.max_input_tokens = 10
    with pytest.raises(client.exceptions.ValidationException, match="Input is too long for requested model"):
        _converse(client, USER_HI)

    bedrock.max_input_tokens = None
    assert read_stream(_converse(client, USER_HI)["stream"]).text == "roomy again"


def test_the_context_limit_applies_with_validation_off() -> None:
    with (
        LocalBedrockServer(ScriptedResponder(), validate_requests=False, max_input_tokens=1) as server,
        pytest.raises(ClientError, match="Input is too long"),
    ):
        make_client(server.url).converse_stream(modelId=MODEL_ID, messages=USER_HI)


@pytest.mark.parametrize("limit", [0, -5, 2.5, True, "100"])
def test_the_context_limit_must_be_a_positive_int(limit: Any) -> None:
    server = LocalBedrockServer(ScriptedResponder())
    with pytest.raises(ValueError, match="max_input_tokens"):
        server.max_input_tokens = limit
    with pytest.raises(ValueError, match="max_input_tokens"):
        LocalBedrockServer(ScriptedResponder(), max_input_tokens=limit)


def _user_of(tokens: int) -> list[dict[str, Any]]:
    """A one-message conversation of about ``tokens`` estimated input tokens."""
    return [{"role": "user", "content": [{"text": "x" * (tokens * 4)}]}]


@pytest.mark.parametrize(
    ("model_id", "window"),
    [
        (MODEL_ID, 200_000),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 200_000),
        ("amazon.nova-micro-v1:0", 128_000),
        ("eu.amazon.nova-pro-v1:0", 300_000),
        ("amazon.nova-premier-v1:0", 1_000_000),
        ("global.amazon.nova-2-lite-v1:0", 1_000_000),
        ("meta.llama3-70b-instruct-v1:0", DEFAULT_CONTEXT_WINDOW),
    ],
)
def test_each_model_has_its_context_window(model_id: str, window: int) -> None:
    assert context_window(model_id) == window


def test_the_model_context_window_is_enforced_by_default() -> None:
    """A conversation over 200k tokens is refused for Claude as Bedrock refuses it; Nova Premier
    takes it."""
    responder = ScriptedResponder(message("a million tokens fit"))
    big = _user_of(250_000)
    with LocalBedrockServer(responder) as server:
        client = make_client(server.url)
        with pytest.raises(client.exceptions.ValidationException, match="Input is too long for requested model"):
            client.converse_stream(modelId=MODEL_ID, messages=big)
        reply = client.converse_stream(modelId="amazon.nova-premier-v1:0", messages=big)
        assert read_stream(reply["stream"]).text == "a million tokens fit"
        assert server.input_limit(MODEL_ID) == 200_000
        assert server.input_limit(None) == DEFAULT_CONTEXT_WINDOW
    assert server.refusal({"messages": _user_of(199_000)}, MODEL_ID) is None


@pytest.mark.parametrize(("setting", "limit"), [("1234", 1234), ("none", None), ("model", 200_000), ("Off", None)])
def test_the_environment_overrides_the_default_window(
    monkeypatch: pytest.MonkeyPatch, setting: str, limit: int | None
) -> None:
    monkeypatch.setenv("LOCAL_BEDROCK_MAX_INPUT_TOKENS", setting)
    assert LocalBedrockServer(ScriptedResponder()).input_limit(MODEL_ID) == limit
    # A value given to the constructor wins over the environment.
    assert LocalBedrockServer(ScriptedResponder(), max_input_tokens=77).input_limit(MODEL_ID) == 77
    assert LocalBedrockServer(ScriptedResponder(), max_input_tokens=None).input_limit(MODEL_ID) is None


@pytest.mark.parametrize("setting", ["0", "lots", "-3"])
def test_a_bad_environment_window_is_refused(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("LOCAL_BEDROCK_MAX_INPUT_TOKENS", setting)
    with pytest.raises(ValueError, match="LOCAL_BEDROCK_MAX_INPUT_TOKENS"):
        LocalBedrockServer(ScriptedResponder())


# ---- Converse (non-streaming) ---------------------------------------------------------------


def test_converse_assembles_the_script_into_one_response(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, client: Any
) -> None:
    use = tool_call("editor.readFile", {"path": "a.swift"}, tool_use_id="tooluse_read1", parts=4)
    responder.push(message(Text("Let me read it now.", words_per_delta=2), use, input_tokens=321, output_tokens=17))

    reply = client.converse(
        modelId=MODEL_ID, messages=USER_HI, system=[{"text": "VoiceIDE"}], toolConfig=WRAPPER_TOOL_CONFIG
    )

    assert reply["output"]["message"] == {
        "role": "assistant",
        "content": [
            {"text": "Let me read it now."},
            {
                "toolUse": {
                    "toolUseId": "tooluse_read1",
                    "name": "tool_call",
                    "input": {"name": "editor.readFile", "arguments": {"path": "a.swift"}},
                }
            },
        ],
    }
    assert reply["stopReason"] == "tool_use"
    assert reply["usage"] == {"inputTokens": 321, "outputTokens": 17, "totalTokens": 338}
    assert reply["metrics"] == {"latencyMs": 250}
    assert bedrock.operations == ["Converse"]
    assert responder.requests[0].body["messages"] == USER_HI


def test_converse_reasoning_comes_back_as_one_block(responder: ScriptedResponder, client: Any) -> None:
    def reasoning(**delta: str) -> dict[str, Any]:
        return {"contentBlockDelta": {"delta": {"reasoningContent": delta}, "contentBlockIndex": 0}}

    steps: list[Step] = [message_start(), reasoning(text="Think "), reasoning(text="twice."), reasoning(signature="s1")]
    steps += [{"contentBlockStop": {"contentBlockIndex": 0}}, text_delta(1, "Done.")]
    steps += [{"contentBlockStop": {"contentBlockIndex": 1}}, {"messageStop": {"stopReason": "end_turn"}}]
    responder.push(steps)

    reply = client.converse(modelId=MODEL_ID, messages=USER_HI)

    assert reply["output"]["message"]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "Think twice.", "signature": "s1"}}},
        {"text": "Done."},
    ]
    # No metadata event: usage and latency are estimated.
    usage = reply["usage"]
    assert usage["inputTokens"] == estimate_input_tokens({"messages": USER_HI})
    assert usage["outputTokens"] == 4 and usage["totalTokens"] == usage["inputTokens"] + 4
    assert reply["metrics"]["latencyMs"] >= 1


def test_converse_is_validated_like_the_stream(responder: ScriptedResponder, client: Any) -> None:
    assistant_first = [{"role": "assistant", "content": [{"text": "hi"}]}]
    with pytest.raises(client.exceptions.ValidationException, match="must start with a user message"):
        client.converse(modelId=MODEL_ID, messages=assistant_first)
    with pytest.raises(client.exceptions.ValidationException, match="Input is too long for requested model"):
        client.converse(modelId=MODEL_ID, messages=_user_of(200_001))
    assert responder.requests == []


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (model_stream_error("the model broke"), "ModelErrorException", 424),
        (stream_throttling("slow down"), "ThrottlingException", 429),
        (RaiseInStream("internalServerException", "oops"), "InternalServerException", 500),
        (RaiseInStream("serviceUnavailableException", "away"), "ServiceUnavailableException", 503),
    ],
)
def test_a_script_error_is_the_converse_error(
    responder: ScriptedResponder, client: Any, error: RaiseInStream, code: str, status: int
) -> None:
    responder.push(message("half an", interrupted_by=error))
    with pytest.raises(ClientError) as caught:
        client.converse(modelId=MODEL_ID, messages=USER_HI)
    assert caught.value.response["Error"] == {"Code": code, "Message": error.message}
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status


def test_a_rejection_and_a_cut_script_are_converse_errors(responder: ScriptedResponder, client: Any) -> None:
    responder.push(RejectRequest(403, "AccessDeniedException", "no access"), [message_start(), text_delta(0, "a")])
    with pytest.raises(client.exceptions.AccessDeniedException, match="no access"):
        client.converse(modelId=MODEL_ID, messages=USER_HI)
    with pytest.raises(client.exceptions.InternalServerException, match="ended before it was complete"):
        client.converse(modelId=MODEL_ID, messages=USER_HI)


# ---- the API model's constraints -----------------------------------------------------------


def _unchecked_client(url: str) -> Any:
    """The real client with botocore's own parameter checks off, so only the server judges."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(parameter_validation=False, retries={"mode": "standard", "total_max_attempts": 1}),
    )


def _tool_config(name: str) -> dict[str, Any]:
    spec = WRAPPER_TOOL_CONFIG["tools"][0]["toolSpec"]
    return {"tools": [{"toolSpec": {**spec, "name": name}}]}


def _round(tool_use_id: str, name: str = "tool_call", result_id: str | None = None) -> list[dict[str, Any]]:
    use = {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": {}}}
    result = {"toolResult": {"toolUseId": result_id or tool_use_id, "content": [{"text": "ok"}]}}
    return [
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [{"text": "sure"}, use]},
        {"role": "user", "content": [result]},
    ]


FAILED = "failed to satisfy constraint: Member must"
NAME_PATTERN = f"{FAILED} satisfy regular expression pattern: [a-zA-Z0-9_-]+"
ID_PATTERN = f"{FAILED} satisfy regular expression pattern: [a-zA-Z0-9_.:-]+"
AT_MOST_64 = f"{FAILED} have length less than or equal to 64"
USE_ID_AT = "Value at 'messages.2.member.content.2.member.toolUse.toolUseId'"
RESULT_ID_AT = "Value at 'messages.3.member.content.1.member.toolResult.toolUseId'"


@pytest.mark.parametrize(
    ("fields", "problems"),
    [
        (
            {"toolConfig": _tool_config("editor.open")},
            [f"Value 'editor.open' at 'toolConfig.tools.1.member.toolSpec.name' {NAME_PATTERN}"],
        ),
        (
            {"toolConfig": _tool_config("t" * 65)},
            [f"Value '{'t' * 65}' at 'toolConfig.tools.1.member.toolSpec.name' {AT_MOST_64}"],
        ),
        (
            {"toolConfig": {"tools": []}},
            [f"Value '[]' at 'toolConfig.tools' {FAILED} have length greater than or equal to 1"],
        ),
        (
            {"messages": _round("tu_1", name="editor.open")},
            [f"Value at 'messages.2.member.content.2.member.toolUse.name' {NAME_PATTERN}"],
        ),
        ({"messages": _round("tu 1")}, [f"{USE_ID_AT} {ID_PATTERN}", f"{RESULT_ID_AT} {ID_PATTERN}"]),
        ({"messages": _round("x" * 65)}, [f"{USE_ID_AT} {AT_MOST_64}", f"{RESULT_ID_AT} {AT_MOST_64}"]),
        (
            {"inferenceConfig": {"maxTokens": 0}},
            [f"Value '0' at 'inferenceConfig.maxTokens' {FAILED} have value greater than or equal to 1"],
        ),
        (
            {"inferenceConfig": {"temperature": 1.5, "topP": -0.5}},
            [
                f"Value '1.5' at 'inferenceConfig.temperature' {FAILED} have value less than or equal to 1",
                f"Value '-0.5' at 'inferenceConfig.topP' {FAILED} have value greater than or equal to 0",
            ],
        ),
        (
            {"inferenceConfig": {"stopSequences": ["x"] * 2501}},
            [f"Value at 'inferenceConfig.stopSequences' {FAILED} have length less than or equal to 2500"],
        ),
    ],
)
def test_model_constraints_are_enforced_in_bedrocks_words(
    responder: ScriptedResponder, bedrock: LocalBedrockServer, fields: dict[str, Any], problems: list[str]
) -> None:
    responder.push(message("never sent"))
    client = _unchecked_client(bedrock.url)

    with pytest.raises(client.exceptions.ValidationException) as caught:
        client.converse_stream(modelId=MODEL_ID, **{"messages": USER_HI, "toolConfig": WRAPPER_TOOL_CONFIG, **fields})

    count = "1 validation error" if len(problems) == 1 else f"{len(problems)} validation errors"
    assert caught.value.response["Error"]["Message"] == f"{count} detected: " + "; ".join(problems)
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert responder.pending == 1


def test_names_and_ids_within_the_constraints_pass() -> None:
    fields = {
        "messages": _round("tooluse_Ab-9.x:1", name="Tool-name_9"),
        "toolConfig": _tool_config("t" * 64),
        "inferenceConfig": {"maxTokens": 1, "temperature": 1, "topP": 0, "stopSequences": ["x"] * 2500},
    }

    assert constraint_violation(fields) is None


def test_constraints_are_not_checked_with_validation_off() -> None:
    with LocalBedrockServer(ScriptedResponder(message("unchecked")), validate_requests=False) as server:
        stream = _unchecked_client(server.url).converse_stream(
            modelId=MODEL_ID, messages=USER_HI, inferenceConfig={"temperature": 7}
        )["stream"]
        assert read_stream(stream).text == "unchecked"
