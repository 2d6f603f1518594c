"""The local stack runs the memory beside its other services and points the handlers at it through
``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`` and ``CONDUCTOR_MEMORY_ID``; without memory, neither is set."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import boto3
import pytest

from conductor_local.agentcore_memory import LOCAL_MEMORY_ID
from conductor_local.service_process import ServiceProcess
from conductor_local.stack import LocalStack
from tests.local_agentcore_memory.conftest import ACTOR, SESSION, user_turn


def test_the_stack_gives_the_handlers_its_memory() -> None:
    before = os.environ.get("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE")
    with LocalStack(port=0, quiet=True) as stack:
        assert os.environ["CONDUCTOR_MEMORY_ID"] == LOCAL_MEMORY_ID == "voiceide_local-0123456789"
        assert os.environ["AWS_ENDPOINT_URL_BEDROCK_AGENTCORE"] == stack.memory_endpoint
        client = boto3.client("bedrock-agentcore", region_name=stack.region)  # as a handler builds it
        client.create_event(
            memoryId=os.environ["CONDUCTOR_MEMORY_ID"],
            actorId=ACTOR,
            sessionId=SESSION,
            eventTimestamp=datetime.now(UTC),
            payload=user_turn("I prefer tabs over spaces."),
        )
        assert [r["content"]["text"] for r in stack.memory_server.store.records()] == ["you prefer tabs over spaces"]
    assert os.environ.get("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE") == before
    assert stack.memory_server is None


def test_a_stack_without_memory_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_MEMORY_ID", "left_over-0123456789")
    with LocalStack(port=0, quiet=True, memory=False) as stack:
        assert stack.memory_server is None and stack.memory_endpoint is None
        assert "CONDUCTOR_MEMORY_ID" not in os.environ
        assert "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE" not in os.environ
    assert os.environ["CONDUCTOR_MEMORY_ID"] == "left_over-0123456789"


def test_the_memory_as_a_service_process() -> None:
    service = ServiceProcess("memory").start()
    try:
        client = boto3.client(
            "bedrock-agentcore",
            endpoint_url=service.url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        answer = client.list_memory_records(memoryId=LOCAL_MEMORY_ID, namespacePath="/")
        assert answer["memoryRecordSummaries"] == []
    finally:
        service.stop()
