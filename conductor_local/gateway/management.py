"""The wire side of API Gateway's management API (``/{stage}/@connections/{connectionId}``).

Sans-I/O: an incremental reader turns bytes into one request, helpers turn a status into
response bytes. Errors carry ``x-amzn-ErrorType`` and a ``{"message": ...}`` body, which is
how the real ``apigatewaymanagementapi`` client picks the exception to raise (410 →
``GoneException``). Connections are kept alive between requests, as API Gateway's are (a
Lambda's client posts many events on one connection); a bad request or ``Connection: close``
closes it.
"""

from __future__ import annotations

import http
import json
import re
import uuid
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 128 * 1024
"""API Gateway's limit for one message posted to a connection (larger posts get 413)."""
_MAX_READ_BYTES = 16 * 1024 * 1024

_REQUEST_LINE = re.compile(rb"^[A-Z]+ /(?:[^/?# ]+/)?@connections(?:[/? ]|$)")
_TARGET = re.compile(r"^/(?:(?P<stage>[^/]+)/)?@connections/(?P<id>[^/]+)$")


class BadRequest(Exception):
    """A management request that cannot be parsed."""


@dataclass(frozen=True)
class ManagementRequest:
    method: str
    target: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes


def is_management_request_line(line: bytes) -> bool:
    """Whether an HTTP request line addresses ``@connections`` (rather than a WebSocket upgrade)."""
    return _REQUEST_LINE.match(line) is not None


def connection_id_of(target: str, stage: str) -> str | None:
    """The URL-decoded connectionId a request target names, or None if it is not this stage's."""
    match = _TARGET.match(urlsplit(target).path)
    if match is None or (match["stage"] is not None and unquote(match["stage"]) != stage):
        return None
    return unquote(match["id"])


class RequestReader:
    """Accumulates bytes until one complete request (head plus ``Content-Length`` body)."""

    def __init__(self, data: bytes = b"") -> None:
        self._buffer = bytearray(data)
        self.rest = b""
        """What came after the complete request (the start of the next one)."""

    def feed(self, data: bytes) -> ManagementRequest | None:
        """Add bytes; returns the request once complete. Raises ``BadRequest``."""
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise BadRequest("request head too large")
            return None
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            raise BadRequest("malformed request line") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise BadRequest("malformed header line")
            headers[name.strip().lower()] = value.strip()
        if "transfer-encoding" in headers:
            raise BadRequest("transfer codings are not supported; send Content-Length")
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise BadRequest("malformed Content-Length") from None
        if length > _MAX_READ_BYTES:
            raise BadRequest("request body too large")
        body = bytes(self._buffer[end + 4 : end + 4 + length])
        if len(body) < length:
            return None
        self.rest = bytes(self._buffer[end + 4 + length :])
        return ManagementRequest(method, target, headers, body)


def wants_close(request: ManagementRequest) -> bool:
    """Whether the client asked to close the connection after this request."""
    return request.headers.get("connection", "").strip().lower() == "close"


def response(
    status: int,
    body: bytes = b"",
    *,
    content_type: str = "application/json",
    headers: tuple[str, ...] = (),
    close: bool = False,
) -> bytes:
    """A complete HTTP/1.1 response; with ``close``, it says the connection closes after it."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    head = [
        f"HTTP/1.1 {status} {phrase}",
        f"x-amzn-RequestId: {uuid.uuid4()}",
        *(["Connection: close"] if close else []),
        f"Content-Length: {len(body)}",
        *([f"Content-Type: {content_type}"] if body else []),
        *headers,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def closing(answer: bytes) -> bytes:
    """``answer`` saying that the connection closes after it."""
    if b"\r\nConnection: close\r\n" in answer.split(b"\r\n\r\n", 1)[0] + b"\r\n":
        return answer
    return answer.replace(b"\r\n", b"\r\nConnection: close\r\n", 1)


def error_response(status: int, error_type: str, message: str, *, close: bool = False) -> bytes:
    body = json.dumps({"message": message}).encode()
    return response(status, body, headers=(f"x-amzn-ErrorType: {error_type}",), close=close)


def gone(connection_id: str) -> bytes:
    return error_response(410, "GoneException", f"Connection {connection_id} is gone")
