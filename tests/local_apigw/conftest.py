"""Fixtures for the local API Gateway: stand-in route handlers that record their events."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from conductor_local.gateway.server import LocalApiGateway, RouteHandlers

WAIT_S = 5.0

Event = dict[str, Any]


class StandInRoutes:
    """Route handlers that queue every event; ``on_*`` hooks decide what each one returns."""

    def __init__(self) -> None:
        self.connects: queue.Queue[Event] = queue.Queue()
        self.messages: queue.Queue[Event] = queue.Queue()
        self.disconnects: queue.Queue[Event] = queue.Queue()
        self.on_connect: Callable[[Event], Any] = lambda event: {"statusCode": 200}
        self.on_message: Callable[[Event], Any] = lambda event: {"statusCode": 200}

    def handlers(self) -> RouteHandlers:
        return RouteHandlers(self._connect, self._message, self._disconnect)

    def _connect(self, event: Event, context: Any) -> Any:
        self.connects.put(event)
        return self.on_connect(event)

    def _message(self, event: Event, context: Any) -> Any:
        try:
            return self.on_message(event)
        finally:
            self.messages.put(event)

    def _disconnect(self, event: Event, context: Any) -> Any:
        self.disconnects.put(event)
        return {"statusCode": 200}


def next_event(events: queue.Queue[Event]) -> Event:
    return events.get(timeout=WAIT_S)


@pytest.fixture
def routes() -> StandInRoutes:
    return StandInRoutes()


@pytest.fixture
def log_lines() -> list[str]:
    return []


@pytest.fixture
def gateway(routes: StandInRoutes, log_lines: list[str]) -> Iterator[LocalApiGateway]:
    gw = LocalApiGateway(routes.handlers(), "127.0.0.1", 0, on_log=log_lines.append).start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def session_url(gateway: LocalApiGateway) -> str:
    return f"{gateway.url}?sessionId={uuid.uuid4()}"


@pytest.fixture
def management(gateway: LocalApiGateway) -> Any:
    """The real boto3 management API client, pointed at the gateway."""
    return boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=gateway.callback_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
