"""The gateway adapter over the real management-API client, against the recording management API."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from shared.adapters import gateway
from shared.adapters.gateway import ConnectionGateway
from tests.handlers.conftest import Harness


def test_a_gone_connection_is_not_posted_again_and_the_memory_of_gone_ones_is_bounded(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway, "GONE_REMEMBERED", 2)
    endpoint = f"http://{conductor.management.domain}/test"
    clients: list[str] = []

    def client(url: str) -> Any:
        clients.append(url)
        return boto3.client("apigatewaymanagementapi", endpoint_url=url)

    posts = ConnectionGateway(client)
    frame = '{"hello":"app"}'
    for name in ("a", "b", "c"):
        conductor.management.gone.add(name)
        assert posts.post(endpoint, name, frame) is False  # 410 GoneException
    conductor.management.gone.clear()
    assert posts.post(endpoint, "c", frame) is False  # remembered as gone: not tried
    assert conductor.management.frames["c"] == []
    assert posts.post(endpoint, "a", frame) is True  # the oldest was forgotten: tried, and delivered
    assert conductor.management.frames["a"] == [frame]
    assert clients == [endpoint]  # one client per endpoint
