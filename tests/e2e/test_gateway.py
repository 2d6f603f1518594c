"""The WebSocket handshake and the management API, as a client and the handlers meet them."""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import boto3
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from conductor_local.stack import LocalStack
from shared.wire.protocol import AssistantSpeechFinal, make_event
from tests.e2e.conftest import HANDSHAKE_WAIT_S, WAIT_S, async_test, client_for, session_store

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("?sessionId=not-a-uuid", id="not-a-uuid"),
        pytest.param(f"?sessionId={uuid.uuid1()}", id="uuid-v1"),
        pytest.param("?sessionId=", id="empty"),
        pytest.param("", id="missing"),
        pytest.param(f"?session={uuid.uuid4()}", id="misspelled-parameter"),
    ],
)
def test_the_handshake_refuses_a_connection_without_a_valid_session_id(stack: LocalStack, query: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(stack.ws_url + query, open_timeout=HANDSHAKE_WAIT_S)
    assert refused.value.response.status_code == 400


def test_the_handshake_accepts_a_uuid_v4_session_id(stack: LocalStack) -> None:
    """The control case for the refusals above: same client, same gateway, a valid sessionId."""
    with connect(stack.session_url(str(uuid.uuid4())), open_timeout=HANDSHAKE_WAIT_S) as ws:
        assert ws.response is not None and ws.response.status_code == 101


def management_client(stack: LocalStack) -> Any:
    """The real boto3 management API client, pointed at the local gateway (dummy credentials)."""
    return boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=stack.callback_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


@async_test
async def test_a_post_to_a_closed_connection_is_answered_410_gone(stack: LocalStack) -> None:
    management = management_client(stack)
    hello = make_event(AssistantSpeechFinal(text="posted through the management API"))

    async with client_for(stack) as client:
        state = await asyncio.to_thread(session_store(stack).load, client.session_id)
        assert state is not None and state.connection_id, "the $connect handler bound the session"
        connection_id = state.connection_id
        # While the connection is open, a post reaches the app: the id and the endpoint are right.
        await asyncio.to_thread(
            management.post_to_connection,
            ConnectionId=connection_id,
            Data=hello.to_json().encode(),
        )
        received = await client.wait_for(lambda e: e.id == hello.id, WAIT_S)
        assert received.payload == AssistantSpeechFinal(text="posted through the management API")

    with pytest.raises(management.exceptions.GoneException) as gone:
        await asyncio.to_thread(
            management.post_to_connection,
            ConnectionId=connection_id,
            Data=hello.to_json().encode(),
        )
    assert gone.value.response["Error"]["Code"] == "GoneException"
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 410


def test_management_requests_share_one_kept_alive_connection(stack: LocalStack) -> None:
    """As API Gateway's management API: one TCP connection carries request after request (a
    Lambda's client posts every event of a turn on it); ``Connection: close`` ends it."""
    gone = f"/{stack.gateway.stage if stack.gateway else 'local'}/@connections/{uuid.uuid4().hex}"
    host, port = stack.gateway.domain_name.rsplit(":", 1) if stack.gateway else ("127.0.0.1", "0")
    request = f"GET {gone} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 0\r\n\r\n".encode()
    last = request.replace(b"Content-Length: 0", b"Connection: close\r\nContent-Length: 0")
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(request)
        first = _read_response(sock)
        sock.sendall(request + last)  # two at once: answered in order
        second, third = _read_response(sock), _read_response(sock)
        assert sock.recv(1) == b"", "Connection: close did not close the connection"
    for head in (first, second, third):
        assert head.startswith(b"HTTP/1.1 410"), head
    assert b"Connection: close" not in first and b"Connection: close" in third


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body), read byte by byte off the socket."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        assert byte, f"the connection closed mid-response: {head!r}"
        head += byte
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return head + body
