"""ConnectionGateway.close: the management API's DeleteConnection; a gone connection is closed."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError

from shared.adapters.gateway import ConnectionGateway


class StubClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[tuple[str, str]] = []

    def delete_connection(self, ConnectionId: str) -> dict[str, Any]:
        self.calls.append(("delete", ConnectionId))
        if self.error is not None:
            raise self.error
        return {}

    def post_to_connection(self, ConnectionId: str, Data: bytes) -> dict[str, Any]:
        self.calls.append(("post", ConnectionId))
        return {}


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "DeleteConnection")


def test_close_deletes_the_connection_and_posts_to_it_no_more() -> None:
    client = StubClient()
    gateway = ConnectionGateway(lambda endpoint: client)
    assert gateway.close("https://ws.example/dev", "c-1") is True
    assert gateway.post("https://ws.example/dev", "c-1", "{}") is False
    assert client.calls == [("delete", "c-1")]


def test_a_gone_connection_counts_as_closed() -> None:
    gateway = ConnectionGateway(lambda endpoint: StubClient(client_error("GoneException")))
    assert gateway.close("https://ws.example/dev", "c-1") is True


def test_a_failed_close_says_so() -> None:
    for error in (client_error("ForbiddenException"), EndpointConnectionError(endpoint_url="https://ws.example")):
        gateway = ConnectionGateway(lambda endpoint, error=error: StubClient(error))
        assert gateway.close("https://ws.example/dev", "c-1") is False
