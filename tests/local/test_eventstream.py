"""The event-stream encoder, checked by decoding with botocore's own parser."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer, EventStreamMessage
from hypothesis import given, settings
from hypothesis import strategies as st

from conductor_local.bedrock.eventstream import (
    MAX_HEADER_VALUE_BYTES,
    encode_message,
    event_message,
    exception_message,
)


def decode(data: bytes, *, piece: int | None = None) -> list[EventStreamMessage]:
    """All messages in ``data``, fed to botocore whole or ``piece`` bytes at a time."""
    buffer = EventStreamBuffer()
    messages: list[EventStreamMessage] = []
    step = piece or len(data) or 1
    for start in range(0, len(data), step):
        buffer.add_data(data[start : start + step])
        messages.extend(buffer)
    return messages


def test_a_message_decodes_to_its_headers_and_payload() -> None:
    data = encode_message({":event-type": "messageStart", "x-custom": "väl"}, b'{"role":"assistant"}')

    (message,) = decode(data)

    assert message.headers == {":event-type": "messageStart", "x-custom": "väl"}
    assert message.payload == b'{"role":"assistant"}'
    assert message.prelude.total_length == len(data)


def test_messages_fed_byte_by_byte_decode_in_order() -> None:
    data = b"".join(encode_message({"n": str(i)}, f"payload {i}".encode()) for i in range(3))

    messages = decode(data, piece=1)

    assert [m.headers["n"] for m in messages] == ["0", "1", "2"]
    assert [m.payload for m in messages] == [b"payload 0", b"payload 1", b"payload 2"]


def test_empty_headers_and_payload_are_valid() -> None:
    (message,) = decode(encode_message({}, b""))

    assert message.headers == {}
    assert message.payload == b""


@pytest.mark.parametrize("offset", [5, 14, -2])  # in the prelude, the headers, the message CRC
def test_a_corrupted_byte_fails_botocores_checksum(offset: int) -> None:
    data = bytearray(encode_message({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}'))
    data[offset] ^= 0x01

    with pytest.raises(ChecksumMismatch):
        decode(bytes(data))


def test_event_message_carries_type_content_type_and_json() -> None:
    (message,) = decode(event_message("contentBlockDelta", {"delta": {"text": "héllo"}, "contentBlockIndex": 0}))

    assert message.headers == {
        ":event-type": "contentBlockDelta",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert json.loads(message.payload) == {"delta": {"text": "héllo"}, "contentBlockIndex": 0}
    assert message.to_response_dict()["status_code"] == 200


def test_exception_message_is_an_error_for_botocore() -> None:
    data = exception_message("modelStreamErrorException", "boom", originalStatusCode=500)

    (message,) = decode(data)

    assert message.headers == {
        ":exception-type": "modelStreamErrorException",
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    assert json.loads(message.payload) == {"message": "boom", "originalStatusCode": 500}
    assert message.to_response_dict()["status_code"] == 400


def test_a_header_value_over_the_limit_is_refused() -> None:
    encode_message({"h": "x" * MAX_HEADER_VALUE_BYTES}, b"")  # the limit itself is fine
    with pytest.raises(ValueError, match="exceeds"):
        encode_message({"h": "x" * (MAX_HEADER_VALUE_BYTES + 1)}, b"")


@pytest.mark.parametrize("name", ["", "n" * 256])
def test_a_header_name_must_be_1_to_255_bytes(name: str) -> None:
    with pytest.raises(ValueError, match="header name"):
        encode_message({name: "v"}, b"")


@settings(max_examples=60, deadline=None)
@given(
    headers=st.dictionaries(st.text(min_size=1, max_size=40), st.text(max_size=200), max_size=5),
    payload=st.binary(max_size=2000),
    piece=st.integers(min_value=1, max_value=64),
)
def test_any_headers_and_payload_round_trip(headers: dict[str, str], payload: bytes, piece: int) -> None:
    data = encode_message(headers, payload) + encode_message({"next": "1"}, b"tail")

    first, second = decode(data, piece=piece)

    assert first.headers == headers
    assert first.payload == payload
    assert (second.headers, second.payload) == ({"next": "1"}, b"tail")
