"""Frames that nest deeply or carry numbers no client writes: refused as invalid_json, by the parser
and through ``$default``, before anything recurses."""

from __future__ import annotations

import json
import uuid

import pytest

from shared.wire.protocol import MAX_FRAME_DEPTH, ErrorCode, Event, ProtocolError, parse_event
from tests.handlers.conftest import Harness


def frame(kind: str, payload: str) -> str:
    return f'{{"id":"{uuid.uuid4()}","timestamp":"2025-01-15T10:30:00.000Z","kind":{{"{kind}":{payload}}}}}'


def utterance_with(extra: str) -> str:
    """A final transcript with an extra field (ignored when the frame is read) of ``extra``."""
    return frame("userAudioTranscriptFinal", f'{{"text":"hi","extra":{extra}}}')


def schema_of_depth(levels: int) -> dict[str, object]:
    """An object schema whose properties nest ``levels`` objects deep."""
    schema: dict[str, object] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


TEN_KB_NESTED = [
    "[" * 5_000 + "]" * 5_000,
    '{"a":' * 2_000 + "1" + "}" * 2_000,
    utterance_with("[" * 5_000 + "]" * 5_000),
    "[" * 10_000,
]


@pytest.mark.parametrize("text", TEN_KB_NESTED)
def test_a_deeply_nested_frame_is_invalid_json(text: str) -> None:
    parsed = parse_event(text)
    assert isinstance(parsed, ProtocolError)
    assert parsed.code is ErrorCode.INVALID_JSON
    assert parsed.message == f"the JSON nests deeper than {MAX_FRAME_DEPTH} levels"


def test_the_frame_depth_is_inclusive() -> None:
    # the envelope, kind and payload are 3 levels: the extra field holds the rest
    at_most = utterance_with("[" * (MAX_FRAME_DEPTH - 3) + "]" * (MAX_FRAME_DEPTH - 3))
    assert isinstance(parse_event(at_most), Event)
    over = utterance_with("[" * (MAX_FRAME_DEPTH - 2) + "]" * (MAX_FRAME_DEPTH - 2))
    assert isinstance(parse_event(over), ProtocolError)


def test_a_declared_tool_with_a_deep_arguments_schema_is_read() -> None:
    tool = {"name": "deep", "description": "a deep schema", "arguments": schema_of_depth(20)}
    start = frame("sessionStart", json.dumps({"sessionId": str(uuid.uuid4()), "tools": [tool]}))
    parsed = parse_event(start)
    assert isinstance(parsed, Event), parsed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("1" * 5_000, "a number in the JSON is longer than 100 characters"),
        ("NaN", "NaN is not JSON"),
        ("-Infinity", "-Infinity is not JSON"),
        ("1e999", "a number in the JSON is too large"),
    ],
)
def test_numbers_no_client_writes_are_invalid_json(extra: str, message: str) -> None:
    parsed = parse_event(utterance_with(extra))
    assert parsed == ProtocolError(code=ErrorCode.INVALID_JSON, message=message)


def test_text_that_is_not_json_keeps_its_message() -> None:
    assert parse_event("{not json") == ProtocolError(
        code=ErrorCode.INVALID_JSON, message="message body is not valid JSON"
    )


@pytest.mark.parametrize("text", TEN_KB_NESTED)
def test_default_answers_a_10_kb_nested_frame_with_the_error_event(conductor: Harness, text: str) -> None:
    conn = conductor.connect()
    assert len(text.encode()) >= 10_000
    assert conductor.send_raw(conn, text) == {"statusCode": 200}
    errors = [event.payload for event in conductor.events(conn) if event.kind_name == "error"]
    assert [(error.code, error.message) for error in errors] == [
        ("invalid_json", f"the JSON nests deeper than {MAX_FRAME_DEPTH} levels")
    ]
