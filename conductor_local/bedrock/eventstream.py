"""Encoder for the ``application/vnd.amazon.eventstream`` binary framing used by Bedrock streams.

One message on the wire::

    total length (uint32) | headers length (uint32) | prelude CRC32 (uint32)
    headers | payload | message CRC32 (uint32)

Every integer is big-endian; the prelude CRC covers the first 8 bytes and the message CRC
covers everything before it. Only string headers (type 7) are produced: they are all a
ConverseStream response needs.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any
from zlib import crc32

CONTENT_TYPE = "application/vnd.amazon.eventstream"

_STRING_HEADER_TYPE = 7
_PRELUDE_LENGTH = 12
_CRC_LENGTH = 4
# Limits of the format (and of botocore's decoder).
MAX_HEADER_NAME_BYTES = 255
MAX_HEADER_VALUE_BYTES = 32767
MAX_HEADERS_BYTES = 128 * 1024
MAX_PAYLOAD_BYTES = 24 * 1024 * 1024


def _encode_headers(headers: Mapping[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        raw_value = value.encode("utf-8")
        if not 0 < len(raw_name) <= MAX_HEADER_NAME_BYTES:
            raise ValueError(f"header name {name!r} must be 1..{MAX_HEADER_NAME_BYTES} bytes")
        if len(raw_value) > MAX_HEADER_VALUE_BYTES:
            raise ValueError(f"header {name!r} value exceeds {MAX_HEADER_VALUE_BYTES} bytes")
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING_HEADER_TYPE, len(raw_value)) + raw_value
    if len(out) > MAX_HEADERS_BYTES:
        raise ValueError(f"headers exceed {MAX_HEADERS_BYTES} bytes")
    return bytes(out)


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One complete event-stream message with string ``headers`` and a raw ``payload``."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload exceeds {MAX_PAYLOAD_BYTES} bytes")
    encoded_headers = _encode_headers(headers)
    total_length = _PRELUDE_LENGTH + len(encoded_headers) + len(payload) + _CRC_LENGTH
    prelude = struct.pack(">II", total_length, len(encoded_headers))
    prelude += struct.pack(">I", crc32(prelude))
    body = prelude + encoded_headers + payload
    return body + struct.pack(">I", crc32(body))


def _json_bytes(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def event_message(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """An ``event`` message: ``payload`` is the event's JSON body (e.g. ``{"role": "assistant"}``)."""
    headers = {
        ":event-type": event_type,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return encode_message(headers, _json_bytes(payload))


def exception_message(exception_type: str, message: str, **fields: Any) -> bytes:
    """An ``exception`` message, the way a stream reports a modeled error after it started.

    ``exception_type`` is the member name in the stream's union (``modelStreamErrorException``,
    ``throttlingException``, ...); ``fields`` are extra members of that exception's shape.
    """
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, _json_bytes({"message": message, **fields}))
