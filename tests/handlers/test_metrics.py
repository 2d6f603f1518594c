"""What the handlers emit for operations: one count per error event sent (by code), turns, Bedrock
tokens, the time to the first partial (read from Powertools' EMF output), and X-Ray subsegments of
the adapters' calls (through the X-Ray SDK's own recorder, no daemon)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aws_xray_sdk import global_sdk_config
from aws_xray_sdk.core.models.segment import Segment
from aws_xray_sdk.core.recorder import AWSXRayRecorder

from conductor_local.bedrock.server import LocalBedrockServer, message, model_stream_error, tool_call
from lambdas import runtime
from shared.adapters.gateway import callback_endpoint
from shared.adapters.store import VersionConflict
from shared.core.state import SessionState
from shared.flows.commit import ERROR_EVENTS_METRIC, error_metric_name
from shared.wire.protocol import now_timestamp
from tests.handlers.conftest import STAGE, Connection, Harness


class Emf:
    """Every EMF document printed so far: values summed per metric name, units as declared."""

    def __init__(self, out: str) -> None:
        self.values: dict[str, list[float]] = {}
        self.units: dict[str, str] = {}
        self.dimensions: set[tuple[str, ...]] = set()
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            document = json.loads(line)
            if "_aws" not in document:
                continue
            for directive in document["_aws"]["CloudWatchMetrics"]:
                self.dimensions |= {tuple(names) for names in directive["Dimensions"]}
                for metric in directive["Metrics"]:
                    value = document[metric["Name"]]
                    self.values.setdefault(metric["Name"], []).extend(value if isinstance(value, list) else [value])
                    self.units[metric["Name"]] = metric["Unit"]

    def total(self, name: str) -> float:
        return sum(self.values.get(name, []))

    def error_codes(self) -> Counter[str]:
        prefix = f"{ERROR_EVENTS_METRIC}."
        return Counter(
            {name.removeprefix(prefix): int(self.total(name)) for name in self.values if name.startswith(prefix)}
        )


def emitted(capsys: pytest.CaptureFixture[str]) -> Emf:
    return Emf(capsys.readouterr().out)


def codes_heard(conductor: Harness, conn: Connection) -> Counter[str]:
    return Counter(e.payload.code for e in conductor.events(conn) if e.kind_name == "error")


def test_every_error_event_the_app_hears_is_counted_once_by_code(
    conductor: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = conductor.connect()
    capsys.readouterr()
    conductor.send_raw(conn, "{not json")  # a frame error (Delivery.reply)
    conductor.answer(conn, "call-that-was-never-made")  # decided by the core, committed
    conductor.script.push(message(tool_call("editor.openFile", "not json at all")), message("Hmm."))
    conductor.say(conn, "open")  # invalid_tool_call, from the turn runner's commit
    conductor.finish_turn(conn)
    conductor.script.push(message("a", interrupted_by=model_stream_error()))
    conductor.say(conn, "x")  # bedrock_error, from the runner ending the turn

    heard = codes_heard(conductor, conn)
    assert set(heard) >= {"invalid_json", "no_pending_tool_call", "invalid_tool_call", "bedrock_error"}
    emf = emitted(capsys)
    assert emf.error_codes() == heard
    assert all(emf.units[error_metric_name(code)] == "Count" for code in heard)
    assert ("service",) in emf.dimensions
    assert emf.total("Turns") == 2
    assert emf.total("BedrockErrors") == 1


def test_the_last_resort_handler_error_is_counted(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = conductor.connect()
    monkeypatch.setenv("CONDUCTOR_TABLE", "no-such-table")
    runtime.reset()
    capsys.readouterr()
    frame = {
        "id": str(uuid.uuid4()),
        "timestamp": now_timestamp(),
        "kind": {"userAudioTranscriptFinal": {"text": "hi"}},
    }
    assert conductor.send_raw(conn, json.dumps(frame)) == {"statusCode": 200}
    assert codes_heard(conductor, conn) == Counter({"handler_error": 1})
    assert emitted(capsys).error_codes() == Counter({"handler_error": 1})
    monkeypatch.setenv("CONDUCTOR_TABLE", "voiceide-conductor-test")
    runtime.reset()


def test_tokens_of_every_model_message_and_the_time_to_the_first_partial(
    conductor: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    call = tool_call("git.status", {})
    conductor.script.push(
        message(call, input_tokens=120, output_tokens=30),  # no text: nothing to time
        message("All clean.", input_tokens=180, output_tokens=7),
    )
    conn = conductor.connect()
    capsys.readouterr()
    conductor.say(conn, "status")
    conductor.answer(conn, call.tool_use_id)
    assert ("final", "All clean.") in conductor.summary(conn)

    emf = emitted(capsys)
    assert (emf.total("InputTokens"), emf.total("OutputTokens")) == (300, 37)
    assert emf.units["InputTokens"] == emf.units["OutputTokens"] == "Count"
    assert len(emf.values["FirstPartialMs"]) == 1  # one runner invocation spoke
    assert emf.units["FirstPartialMs"] == emf.units["ModelFirstTokenMs"] == "Milliseconds"
    assert emf.values["FirstPartialMs"][0] > 0
    assert len(emf.values["ModelFirstTokenMs"]) == 1  # the tool-call message wrote no text
    # one record per runner invocation (the tool call, then the answer), one per completed tool round
    assert len(emf.values["TurnRunMs"]) == len(emf.values["DynamoDBRequests"]) == len(emf.values["Posts"]) == 2
    assert all(count > 0 for count in emf.values["DynamoDBRequests"] + emf.values["Posts"])
    assert len(emf.values["ToolRoundTripMs"]) == 1 and emf.values["ToolRoundTripMs"][0] >= 0
    assert emf.error_codes() == Counter()


# ---- tracing ----------------------------------------------------------------------------------


class CollectingEmitter:
    """Keeps the segments the recorder would send to the X-Ray daemon."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send_entity(self, entity: Any) -> None:
        self.sent.append(entity)

    def set_daemon_address(self, address: str | None) -> None:
        return None


@contextmanager
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[AWSXRayRecorder]:
    """Tracing on, as in Lambda: the X-Ray SDK enabled and its recorder as the handlers' tracer's
    provider, sending to a list instead of a daemon. The adapters built meanwhile are traced."""
    was_enabled = global_sdk_config.sdk_enabled()
    global_sdk_config.set_sdk_enabled(True)
    xray = AWSXRayRecorder()
    xray.configure(
        emitter=CollectingEmitter(), sampling=False, context_missing="IGNORE_ERROR", streaming_threshold=10_000
    )
    with monkeypatch.context() as patch:
        patch.setattr(runtime.tracer, "disabled", False)
        patch.setattr(runtime.tracer, "provider", xray)
        runtime.reset()
        try:
            yield xray
        finally:
            global_sdk_config.set_sdk_enabled(was_enabled)
    runtime.reset()


def test_adapters_are_left_alone_when_tracing_is_disabled(conductor: Harness) -> None:
    assert runtime.tracer.disabled  # locally and in tests: POWERTOOLS_TRACE_DISABLED or not in Lambda
    assert not hasattr(runtime.store().load, "__wrapped__")
    assert not hasattr(runtime.turn_runner().brain.stream, "__wrapped__")


def test_a_trace_shows_each_store_model_and_post_call(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = conductor.connect()
    conductor.script.push(message("Traced words."))
    with recording(monkeypatch) as recorder:
        store, brain, gateway = runtime.store(), runtime.turn_runner().brain, runtime.gateway()
        assert hasattr(runtime.service().launcher.launch, "__wrapped__")

        segment: Segment = recorder.begin_segment("turn")
        state = store.load(conn.session_id)
        assert state is not None
        words = list(brain.stream([{"role": "user", "content": [{"text": "hello"}]}]))
        assert words
        gateway.post(callback_endpoint(conductor.management.domain, STAGE), conn.connection_id, '{"probe":true}')
        stale = SessionState.model_validate({**state.model_dump(), "version": state.version - 1})
        with pytest.raises(VersionConflict):
            store.commit(stale)
        recorder.end_segment()

    subsegments = {sub.name: sub.to_dict() for sub in segment.subsegments}
    assert list(subsegments) == [
        "SessionStore.load",
        "BedrockBrain.stream",
        "ConnectionGateway.post",
        "SessionStore.commit",
    ]
    assert all("metadata" not in sub and not sub["in_progress"] for sub in subsegments.values())  # nothing said kept
    conflict = subsegments["SessionStore.commit"]
    assert conflict["fault"] is True
    assert conflict["cause"]["exceptions"][0]["type"] == "VersionConflict"
    assert "fault" not in subsegments["BedrockBrain.stream"]


def test_prompt_cache_reads_and_writes_are_counted_per_turn(
    conductor: Harness,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    bedrock_server: tuple[LocalBedrockServer, object],
) -> None:
    # The short test prompt is under the model's real minimum; caching every checkpoint shows the counting.
    monkeypatch.setattr(bedrock_server[0].prompt_cache, "min_tokens", 0)
    monkeypatch.setenv("BEDROCK_PROMPT_CACHE", "on")
    runtime.reset()
    conductor.script.push(message("First answer."), message("Second answer."))
    conn = conductor.connect()
    conductor.start_session(conn)
    capsys.readouterr()
    conductor.say(conn, "first")
    conductor.finish_turn(conn)
    first = emitted(capsys)
    conductor.say(conn, "second")
    second = emitted(capsys)
    assert first.total("CacheWriteInputTokens") > 0  # tools and system prompt written to the cache
    assert second.total("CacheReadInputTokens") >= first.total("CacheWriteInputTokens")  # and read back
    request = conductor.script.requests[-1].body
    assert {"cachePoint": {"type": "default"}} in request["system"]
