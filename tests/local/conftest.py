"""Fixtures for the local Bedrock endpoint: a server per test and the real boto3 client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EventStreamError

from conductor_local.bedrock.server import LocalBedrockServer, Responder, ScriptedResponder

MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
WRAPPER_TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": "tool_call",
                "description": "Run one of the app's tools.",
                "inputSchema": {
                    "json": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
                        "required": ["name", "arguments"],
                    }
                },
            }
        }
    ]
}


@dataclass
class Reply:
    """The parsed events of one ConverseStream call, each with its arrival time after the request."""

    events: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[float] = field(default_factory=list)
    error: EventStreamError | None = None

    @property
    def delta_offsets(self) -> list[float]:
        return [t for t, event in zip(self.offsets, self.events, strict=True) if "contentBlockDelta" in event]

    @property
    def kinds(self) -> list[str]:
        return [next(iter(event)) for event in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event[kind] for event in self.events if kind in event]

    @property
    def text_deltas(self) -> list[str]:
        return [e["delta"]["text"] for e in self.of("contentBlockDelta") if "text" in e["delta"]]

    @property
    def text(self) -> str:
        return "".join(self.text_deltas)

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        """Each tool use: index, id, name, the input deltas and the reassembled input."""
        uses = {}
        for start in self.of("contentBlockStart"):
            tool = start["start"]["toolUse"]
            uses[start["contentBlockIndex"]] = {
                "index": start["contentBlockIndex"],
                "toolUseId": tool["toolUseId"],
                "name": tool["name"],
                "deltas": [],
            }
        for delta in self.of("contentBlockDelta"):
            if "toolUse" in delta["delta"]:
                uses[delta["contentBlockIndex"]]["deltas"].append(delta["delta"]["toolUse"]["input"])
        for use in uses.values():
            use["input"] = json.loads("".join(use["deltas"]))
        return list(uses.values())

    @property
    def stop_reason(self) -> str | None:
        stops = self.of("messageStop")
        return stops[-1]["stopReason"] if stops else None


def make_client(url: str, *, total_attempts: int = 1) -> Any:
    """The real client; ``total_attempts`` counts the first try (botocore's ``max_attempts`` does not)."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(
            connect_timeout=2, read_timeout=10, retries={"mode": "standard", "total_max_attempts": total_attempts}
        ),
    )


def read_stream(stream: Any, sent_at: float | None = None) -> Reply:
    """Every event of ``stream``; a mid-stream error is kept in ``error``."""
    sent_at = time.monotonic() if sent_at is None else sent_at
    reply = Reply()
    try:
        for event in stream:
            reply.events.append(event)
            reply.offsets.append(time.monotonic() - sent_at)
    except EventStreamError as error:
        reply.error = error
    return reply


@pytest.fixture
def responder() -> Responder:
    return ScriptedResponder()


@pytest.fixture
def bedrock(responder: Responder) -> Iterator[LocalBedrockServer]:
    with LocalBedrockServer(responder) as server:
        yield server


@pytest.fixture
def client(bedrock: LocalBedrockServer) -> Any:
    return make_client(bedrock.url)


Converse = Callable[..., Reply]


@pytest.fixture
def converse(client: Any) -> Converse:
    """Send ``messages`` (or one user ``text``) the way the conductor does and read the whole stream."""

    def run(
        text: str | None = None, *, messages: list[dict[str, Any]] | None = None, model_id: str = MODEL_ID
    ) -> Reply:
        if messages is None:
            messages = [{"role": "user", "content": [{"text": text}]}]
        sent_at = time.monotonic()
        response = client.converse_stream(
            modelId=model_id,
            messages=messages,
            system=[{"text": "You are the VoiceIDE assistant."}],
            toolConfig=WRAPPER_TOOL_CONFIG,
            inferenceConfig={"maxTokens": 512, "temperature": 0.2},
        )
        return read_stream(response["stream"], sent_at)

    return run
