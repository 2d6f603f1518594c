"""The envelope and the fifteen kinds, as the spec spells them; the exported JSON Schema."""

from __future__ import annotations

import json
import uuid

import jsonschema
import pytest

from shared.wire.protocol import (
    KINDS,
    ErrorCode,
    Event,
    IgnoredEvent,
    ProtocolError,
    SessionStart,
    ToolCall,
    ToolResult,
    make_event,
    parse_event,
)
from shared.wire.schema_export import DEFAULT_PATH, render
from shared.wire.wire_formats import is_uuid_v4

SPEC_EXAMPLES = {
    "sessionStart": {"sessionId": "abc123"},
    "userAudioTranscriptPartial": {"text": "Hello wor"},
    "userAudioTranscriptFinal": {"text": "Hello world"},
    "assistantSpeechPartial": {"text": "I can help you"},
    "assistantSpeechFinal": {"text": "I can help you with that. Let me check the code."},
    "assistantUIPatch": {"patch": '{"op":"add","path":"/cards/0","value":{"type":"diff","file":"main.swift"}}'},
    "toolCall": {"callId": "call-abc123", "name": "tts.speak", "arguments": '{"text":"Hello there!"}'},
    "toolResult": {"callId": "call-abc123", "result": '{"spoken":true}', "error": None},
    "error": {"code": "tts_failed", "message": "ElevenLabs returned HTTP 401"},
}


def frame(kind: str, payload: object, **extra: object) -> str:
    envelope = {"id": "550e8400-e29b-41d4-a716-446655440000", "timestamp": "2025-01-15T10:30:00.000Z"}
    envelope.update(extra)
    envelope["kind"] = {kind: payload}
    return json.dumps(envelope)


def test_the_nine_kinds_are_spelled_as_the_spec_and_the_extensions_added() -> None:
    assert set(KINDS) - set(SPEC_EXAMPLES) == {
        "sessionReady",
        "toolProgress",
        "toolCancel",
        "turnUsage",
        "devicesChanged",
        "confirmChange",
        "workspaceContext",
        "workspaceNames",
        "vocabulary",
        "namesHeard",
    }
    assert set(SPEC_EXAMPLES) <= set(KINDS)


@pytest.mark.parametrize("kind", sorted(SPEC_EXAMPLES))
def test_every_spec_example_round_trips(kind: str) -> None:
    parsed = parse_event(frame(kind, SPEC_EXAMPLES[kind]))
    assert isinstance(parsed, Event)
    wire = parsed.to_wire()
    assert wire["kind"] == {kind: SPEC_EXAMPLES[kind]} or kind == "sessionStart"
    assert wire["id"] == "550e8400-e29b-41d4-a716-446655440000"
    assert wire["timestamp"] == "2025-01-15T10:30:00.000Z"


def test_made_events_have_uuid_ids_and_millisecond_utc_timestamps() -> None:
    event = make_event(ToolCall(callId="c", name="tts.speak", arguments="{}"), seq=7)
    wire = json.loads(event.to_json())
    assert uuid.UUID(wire["id"]).version == 4
    assert wire["timestamp"].endswith("Z") and len(wire["timestamp"]) == len("2025-01-15T10:30:00.000Z")
    assert wire["seq"] == 7
    assert isinstance(parse_event(event.to_json()), Event)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{", ErrorCode.INVALID_JSON),
        (b"\xff\xfe", ErrorCode.INVALID_JSON),
        ("[1]", ErrorCode.INVALID_EVENT),
        ('{"timestamp":"2025-01-15T10:30:00.000Z","kind":{"error":{"code":"x"}}}', ErrorCode.INVALID_EVENT),
        (frame("toolResult", {"callId": 1}), ErrorCode.INVALID_EVENT),
        (frame("toolCall", {"callId": "c", "name": "n", "arguments": {"a": 1}}), ErrorCode.INVALID_EVENT),
        (frame("userAudioTranscriptFinal", "hello"), ErrorCode.INVALID_EVENT),
        (frame("sessionStart", {"sessionId": "s", "lastSeq": -1}), ErrorCode.INVALID_EVENT),
        (
            '{"id":"550e8400-e29b-41d4-a716-446655440000","timestamp":"2025-13-15T10:30:00.000Z","kind":{}}',
            ErrorCode.INVALID_EVENT,
        ),
    ],
)
def test_bad_frames_get_the_spec_error_code(raw: str | bytes, code: ErrorCode) -> None:
    parsed = parse_event(raw)
    assert isinstance(parsed, ProtocolError) and parsed.code == code


def test_two_kinds_in_one_event_is_invalid() -> None:
    raw = json.dumps(
        {
            "id": str(uuid.uuid4()),
            "timestamp": "2025-01-15T10:30:00.000Z",
            "kind": {"userAudioTranscriptFinal": {"text": "a"}, "toolResult": {"callId": "c"}},
        }
    )
    assert isinstance(parse_event(raw), ProtocolError)


def test_unknown_kind_is_ignored_not_an_error() -> None:
    assert isinstance(parse_event(frame("assistantHaptics", {"pattern": "tap"})), IgnoredEvent)


def test_extra_payload_fields_from_newer_clients_are_tolerated() -> None:
    parsed = parse_event(frame("toolResult", {"callId": "c", "result": "1", "durationMs": 12}))
    assert isinstance(parsed, Event) and isinstance(parsed.payload, ToolResult)


def test_session_start_carries_the_optional_last_seq() -> None:
    parsed = parse_event(frame("sessionStart", {"sessionId": "s", "lastSeq": 12}))
    assert isinstance(parsed, Event) and isinstance(parsed.payload, SessionStart)
    assert parsed.payload.last_seq == 12


def test_uuid_v4_check() -> None:
    assert is_uuid_v4(str(uuid.uuid4()))
    assert is_uuid_v4(str(uuid.uuid4()).upper())
    assert not is_uuid_v4(str(uuid.uuid1()))
    assert not is_uuid_v4(uuid.uuid4().hex)
    assert not is_uuid_v4(None)


def test_checked_in_schema_is_in_sync() -> None:
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(), "run: make schema"


@pytest.mark.parametrize("kind", sorted(SPEC_EXAMPLES))
def test_spec_examples_validate_against_the_exported_schema(kind: str) -> None:
    schema = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(json.loads(frame(kind, SPEC_EXAMPLES[kind])), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(frame(kind, SPEC_EXAMPLES[kind], timestamp="yesterday")), schema)
