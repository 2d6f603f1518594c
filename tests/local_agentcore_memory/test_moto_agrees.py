"""The event requests the conductor sends (one ``CreateEvent`` per committed turn; ``ListEvents`` without
payloads and ``DeleteEvent`` each when a session is erased) are accepted by moto's ``bedrock-agentcore``
as by the local memory, and answered with the same members.

moto covers only these event calls: no memory resource behind them (any memory id is taken), no
constraint but required members, no client-token idempotency, no pagination, events oldest first
(the service and the local memory list newest first), and no ``ListSessions``, no long-term records
(``RetrieveMemoryRecords``, ``ListMemoryRecords``, ``Get``/``Delete``/``BatchCreate``/``BatchDelete``),
no extraction. Those are checked against the local memory alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.local_agentcore_memory.conftest import ACTOR, MEMORY, PROJECT, SESSION, at, user_turn


def turn_event(n: int) -> dict[str, Any]:
    """``CreateEvent`` as the turn runner sends it (``shared.adapters.agentcore_memory``)."""
    return {
        "memoryId": MEMORY,
        "actorId": ACTOR,
        "sessionId": SESSION,
        "eventTimestamp": at(n),
        "payload": user_turn(f"I prefer option {n}.", f"Noted, option {n}."),
        "clientToken": f"{n:064x}",
        "extractionConfig": {"namespaceVariables": {"project": PROJECT}},
    }


@pytest.fixture(params=["moto", "local"])
def events_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    if request.param == "local":
        yield request.getfixturevalue("client")
        return
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.client("bedrock-agentcore", region_name="us-east-1")


def test_the_conductors_event_requests_are_accepted_alike(events_client: Any) -> None:
    made = [events_client.create_event(**turn_event(n))["event"] for n in range(2)]
    for event in made:
        assert {"memoryId", "actorId", "sessionId", "eventId", "eventTimestamp", "payload"} <= set(event)
        assert event["payload"][0]["conversational"]["role"] == "USER"
    keys = {"memoryId": MEMORY, "actorId": ACTOR, "sessionId": SESSION}
    got = events_client.get_event(**keys, eventId=made[0]["eventId"])["event"]
    assert got["payload"] == made[0]["payload"]

    listed = events_client.list_events(**keys, includePayloads=False, maxResults=100)["events"]
    assert sorted(event["eventId"] for event in listed) == sorted(event["eventId"] for event in made)
    assert all("payload" not in event for event in listed)
    for event in listed:
        assert events_client.delete_event(**keys, eventId=event["eventId"])["eventId"] == event["eventId"]
    assert events_client.list_events(**keys, maxResults=100)["events"] == []
    with pytest.raises(events_client.exceptions.ResourceNotFoundException):
        events_client.get_event(**keys, eventId=made[0]["eventId"])
