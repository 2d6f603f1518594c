"""API Gateway's frame and message quotas, over real WebSockets: 32 KB frames, 128 KB text messages."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import ClientConnection, connect

from conductor_local.gateway.server import MAX_FRAME_BYTES, MAX_MESSAGE_BYTES, LocalApiGateway, split_frames
from tests.local_apigw.conftest import WAIT_S, StandInRoutes, next_event

KB = 1024


def _fragments(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _closed_with(ws: ClientConnection) -> int:
    """Wait for the gateway to close the connection; the close code it sent."""
    with pytest.raises(ConnectionClosedError) as closed:
        ws.recv(timeout=WAIT_S)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


def _disconnect_status(routes: StandInRoutes) -> tuple[int, str]:
    context = next_event(routes.disconnects)["requestContext"]
    return context["disconnectStatusCode"], context["disconnectReason"]


def test_the_quotas_are_api_gateways() -> None:
    assert (MAX_FRAME_BYTES, MAX_MESSAGE_BYTES) == (32_768, 131_072)


def test_a_frame_of_exactly_32_kb_is_one_message(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str
) -> None:
    body = "x" * (32 * KB)
    with connect(session_url) as ws:
        ws.send(body)
        assert next_event(routes.messages)["body"] == body


def test_a_frame_over_32_kb_closes_the_connection_with_1009(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str
) -> None:
    with connect(session_url) as ws:
        ws.send("x" * (40 * KB))
        assert _closed_with(ws) == 1009
    code, reason = _disconnect_status(routes)
    assert code == 1009 and str(32 * KB) in reason
    assert routes.messages.empty()


def test_a_fragmented_message_reaches_default_whole(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str
) -> None:
    body = "".join(chr(ord("a") + i % 26) for i in range(100 * KB))
    with connect(session_url) as ws:
        ws.send(_fragments(body, 32 * KB))  # four frames: 32 + 32 + 32 + 4 KB
        event = next_event(routes.messages)
        ws.send("after")
        assert next_event(routes.messages)["body"] == "after"
    assert event["body"] == body and event["isBase64Encoded"] is False


def test_a_message_of_exactly_128_kb_is_accepted(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str
) -> None:
    body = "m" * (128 * KB)
    with connect(session_url) as ws:
        ws.send(_fragments(body, 32 * KB))
        assert next_event(routes.messages)["body"] == body


def test_a_message_over_128_kb_closes_the_connection_with_1009(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str
) -> None:
    with connect(session_url) as ws:
        ws.send(_fragments("m" * (129 * KB), 32 * KB))  # every frame within 32 KB, the message not
        assert _closed_with(ws) == 1009
    assert _disconnect_status(routes)[0] == 1009
    assert routes.messages.empty()


@pytest.mark.parametrize("message", [b"\x00\xffbinary", [b"\x01" * 10, b"\x02" * 10]])
def test_binary_frames_close_the_connection_with_1003(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, message: Any
) -> None:
    with connect(session_url) as ws:
        ws.send("text first")
        assert next_event(routes.messages)["body"] == "text first"
        # The gateway closes on the first binary frame: a fragmented message's next frame may meet
        # the closed connection (the close, asserted below, is what is tested).
        with contextlib.suppress(ConnectionClosedError):
            ws.send(message)
        assert _closed_with(ws) == 1003
    assert _disconnect_status(routes) == (1003, "Binary frames are not supported")
    assert routes.messages.empty()


def test_posts_over_32_kb_reach_the_client_in_frames_of_at_most_32_kb(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    # Three-byte characters make every 32 KB boundary fall inside a character.
    text = "€" * (40 * KB) + "end"
    with connect(session_url) as ws:
        connection_id = next_event(routes.connects)["requestContext"]["connectionId"]
        management.post_to_connection(ConnectionId=connection_id, Data=text.encode())
        fragments = list(ws.recv_streaming())
        management.post_to_connection(ConnectionId=connection_id, Data=b"small")
        small = list(ws.recv_streaming())
    assert "".join(fragments) == text
    assert len([fragment for fragment in fragments if fragment]) == 4  # websockets ends with an empty frame
    assert all(len(fragment.encode()) <= 32 * KB for fragment in fragments)
    assert small == ["small"]


@pytest.mark.parametrize("limit", [4, 5, 6, 7])
def test_split_frames_cuts_between_characters(limit: int) -> None:
    text = "a€𝄞bc€" * 7
    fragments = split_frames(text, limit)
    assert "".join(fragments) == text
    assert all(0 < len(fragment.encode()) <= limit for fragment in fragments)
    assert split_frames(b"\x00" * 9, 4) == [b"\x00" * 4, b"\x00" * 4, b"\x00"]
    assert split_frames("", 4) == [""]


def test_posts_of_up_to_128_kb_are_delivered_and_larger_ones_are_413(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    with connect(session_url) as ws:
        connection_id = next_event(routes.connects)["requestContext"]["connectionId"]
        management.post_to_connection(ConnectionId=connection_id, Data=b"p" * (128 * KB))
        assert ws.recv(timeout=WAIT_S) == "p" * (128 * KB)
        with pytest.raises(management.exceptions.PayloadTooLargeException) as too_large:
            management.post_to_connection(ConnectionId=connection_id, Data=b"p" * (128 * KB + 1))
    error = too_large.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert error["Error"]["Code"] == "PayloadTooLargeException" and error["Error"]["Message"]
