"""The integration timeout and failing integrations, as a client of API Gateway sees them."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from conductor_local.gateway.server import INTEGRATION_TIMEOUT_S, LocalApiGateway
from tests.local_apigw.conftest import WAIT_S, StandInRoutes, next_event

SHORT_TIMEOUT_S = 0.3


@pytest.fixture
def impatient_gateway(routes: StandInRoutes) -> Iterator[LocalApiGateway]:
    """A gateway whose integration timeout is short enough to pass within a test."""
    gw = LocalApiGateway(routes.handlers(), "127.0.0.1", 0, integration_timeout=SHORT_TIMEOUT_S).start()
    try:
        yield gw
    finally:
        gw.stop()


def _expected(message: str, connection_id: str, request_id: str) -> str:
    return f'{{"message": "{message}", "connectionId":"{connection_id}", "requestId":"{request_id}"}}'


def test_the_integration_timeout_is_api_gateways(routes: StandInRoutes) -> None:
    assert INTEGRATION_TIMEOUT_S == 29.0
    assert LocalApiGateway(routes.handlers()).integration_timeout == 29.0


def test_a_slow_default_route_gets_the_timeout_frame_and_runs_on(
    impatient_gateway: LocalApiGateway, routes: StandInRoutes
) -> None:
    release = threading.Event()
    started: list[dict[str, Any]] = []

    def slow(event: dict[str, Any]) -> dict[str, Any]:
        started.append(event)
        release.wait(WAIT_S)
        return {"statusCode": 200}

    routes.on_message = slow
    with connect(f"{impatient_gateway.url}?sessionId={uuid.uuid4()}") as ws:
        connection_id = next_event(routes.connects)["requestContext"]["connectionId"]
        ws.send("take your time")
        frame = ws.recv(timeout=WAIT_S)
        assert routes.messages.empty()  # the handler is still running
        release.set()
        finished = next_event(routes.messages)

    assert finished is started[0]
    assert frame == _expected("Endpoint request timed out", connection_id, finished["requestContext"]["requestId"])
    assert list(json.loads(frame)) == ["message", "connectionId", "requestId"]


@pytest.mark.parametrize("failure", ["raise", 500, 502])
def test_a_failing_default_route_gets_the_internal_server_error_frame(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, failure: str | int
) -> None:
    def fail(event: dict[str, Any]) -> dict[str, Any]:
        if failure == "raise":
            raise RuntimeError("stand-in failure")
        return {"statusCode": failure}

    routes.on_message = fail
    with connect(session_url) as ws:
        connection_id = next_event(routes.connects)["requestContext"]["connectionId"]
        ws.send("hello")
        request_id = next_event(routes.messages)["requestContext"]["requestId"]
        assert ws.recv(timeout=WAIT_S) == _expected("Internal server error", connection_id, request_id)


@pytest.mark.parametrize("answer", [{"statusCode": 200}, {"statusCode": 400}, None])
def test_a_default_route_that_does_not_fail_sends_nothing(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any, answer: Any
) -> None:
    routes.on_message = lambda event: answer
    with connect(session_url) as ws:
        connection_id = next_event(routes.connects)["requestContext"]["connectionId"]
        ws.send("hello")
        next_event(routes.messages)
        ws.send("again")  # its invocation starts after the first one was answered
        next_event(routes.messages)
        management.post_to_connection(ConnectionId=connection_id, Data=b"from the handler")
        assert ws.recv(timeout=WAIT_S) == "from the handler"


def test_a_slow_connect_route_refuses_the_handshake_with_504(
    impatient_gateway: LocalApiGateway, routes: StandInRoutes
) -> None:
    release = threading.Event()
    finished = threading.Event()

    def slow(event: dict[str, Any]) -> dict[str, Any]:
        release.wait(WAIT_S)
        finished.set()
        return {"statusCode": 200}

    routes.on_connect = slow
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{impatient_gateway.url}?sessionId={uuid.uuid4()}")
    release.set()
    assert finished.wait(WAIT_S)  # the handler itself ran to its end
    assert refused.value.response.status_code == 504
    assert json.loads(refused.value.response.body) == {"message": "Endpoint request timed out"}
    assert routes.disconnects.empty()
