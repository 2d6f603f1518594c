"""Fixtures for the local AgentCore Memory: one server per module (emptied before each test) and the
real boto3 ``bedrock-agentcore`` client, with dummy credentials, as the handlers use it."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config

from conductor_local.agentcore_memory import LOCAL_MEMORY_ID, LocalAgentCoreMemoryServer

MEMORY = LOCAL_MEMORY_ID
ACTOR = "3f1c2a9e-0b7d-4c55-9a8e-2d6f0e4b1a77"  # a Cognito sub
OTHER_ACTOR = "8a2e44b0-51c9-4f0e-b3d2-7c1e9f5a6d20"
SESSION = "5b0e8f4c-2d3a-4e61-9f7b-1c2d3e4f5a6b"
PROJECT = "voiceide"
T0 = datetime(2026, 11, 1, 9, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def memory_server() -> Iterator[LocalAgentCoreMemoryServer]:
    with LocalAgentCoreMemoryServer() as server:
        yield server


@pytest.fixture
def server(memory_server: LocalAgentCoreMemoryServer) -> LocalAgentCoreMemoryServer:
    memory_server.clear()
    return memory_server


def _client(url: str, *, client_validation: bool = True) -> Any:
    return boto3.client(
        "bedrock-agentcore",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"max_attempts": 1}, parameter_validation=client_validation),
    )


@pytest.fixture
def client(server: LocalAgentCoreMemoryServer) -> Any:
    return _client(server.url)


@pytest.fixture
def raw_client(server: LocalAgentCoreMemoryServer) -> Any:
    """A client that sends what botocore itself would refuse (its own checks off), for the service's."""
    return _client(server.url, client_validation=False)


def user_turn(text: str, answer: str = "OK.") -> list[dict[str, Any]]:
    return [
        {"conversational": {"content": {"text": text}, "role": "USER"}},
        {"conversational": {"content": {"text": answer}, "role": "ASSISTANT"}},
    ]


def say(client: Any, text: str, *, actor: str = ACTOR, session: str = SESSION, when: float = 0, **extra: Any) -> Any:
    """A committed turn as the conductor sends it (``extractionConfig`` with the project)."""
    request = {
        "memoryId": MEMORY,
        "actorId": actor,
        "sessionId": session,
        "eventTimestamp": at(when),
        "payload": user_turn(text),
        "extractionConfig": {"namespaceVariables": {"project": PROJECT}},
        **extra,
    }
    return client.create_event(**request)["event"]


def write(client: Any, text: str, namespace: str, *, name: str = "r1", when: float = 0, **record: Any) -> str:
    answer = client.batch_create_memory_records(
        memoryId=MEMORY,
        records=[
            {
                "requestIdentifier": name,
                "namespaces": [namespace],
                "content": {"text": text},
                "timestamp": at(when),
                **record,
            }
        ],
    )
    assert answer["failedRecords"] == [], answer["failedRecords"]
    return str(answer["successfulRecords"][0]["memoryRecordId"])


def preferences(actor: str = ACTOR) -> str:
    return f"/people/{actor}/preferences"


def project_namespace(actor: str = ACTOR, project: str = PROJECT) -> str:
    return f"/people/{actor}/projects/{project}"


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def raw_request(server: LocalAgentCoreMemoryServer, method: str, path: str, body: bytes | None = None) -> RawAnswer:
    """One HTTP request as is (no botocore between), to see the wire."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return RawAnswer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()
