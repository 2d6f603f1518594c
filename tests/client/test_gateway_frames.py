"""The client on API Gateway's terms: frames of at most 32 KB out, the gateway's own frames ignored."""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from conductor_local.gateway.server import LocalApiGateway, RouteHandlers
from shared.wire.protocol import Event, ToolCall, ToolResult, make_event, parse_event
from voiceide_client.connection.link import MAX_FRAME_BYTES, frames_of
from voiceide_client.conversation.client import ConductorClient

from .fake_conductor import FakeConductor, FakeSession, async_test, standard_turn

KB = 1024
WAIT_S = 5.0


class RecordingRoutes:
    """Stand-in route handlers for a real local API Gateway: they record what reaches them."""

    def __init__(self) -> None:
        self.connects: queue.Queue[dict[str, Any]] = queue.Queue()
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.disconnects: queue.Queue[dict[str, Any]] = queue.Queue()

    def handlers(self) -> RouteHandlers:
        return RouteHandlers(self._record(self.connects), self._record(self.messages), self._record(self.disconnects))

    @staticmethod
    def _record(events: queue.Queue[dict[str, Any]]) -> Any:
        def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
            events.put(event)
            return {"statusCode": 200}

        return handler


@pytest.fixture
def routes() -> RecordingRoutes:
    return RecordingRoutes()


@pytest.fixture
def gateway(routes: RecordingRoutes) -> Iterator[LocalApiGateway]:
    gw = LocalApiGateway(routes.handlers(), "127.0.0.1", 0).start()
    try:
        yield gw
    finally:
        gw.stop()


def test_long_text_is_cut_into_frames_of_at_most_32_kb_between_characters() -> None:
    assert MAX_FRAME_BYTES == 32 * KB
    short = "é" * (16 * KB)  # exactly 32 KB in UTF-8
    assert frames_of(short) == short
    long = "a" + "é" * (40 * KB)  # every boundary falls inside a two-byte character
    fragments = frames_of(long)
    assert isinstance(fragments, list) and "".join(fragments) == long
    assert len(fragments) == 3 and all(len(fragment.encode()) <= 32 * KB for fragment in fragments)
    assert frames_of("x" * 10, 4) == ["xxxx", "xxxx", "xx"]


def test_a_40_kb_tool_result_crosses_the_gateway_as_parts_of_one_frame_each(
    gateway: LocalApiGateway, routes: RecordingRoutes
) -> None:
    content = "".join(f"line {n}: let value = {n}\n" for n in range(2_000))
    assert len(content) > 40 * KB
    management = boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=gateway.callback_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )

    async def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"path": arguments["path"], "content": content}

    async def exchange() -> tuple[ConductorClient, list[ToolResult], list[int]]:
        async with ConductorClient(gateway.url, tools={"editor.readFile": read_file}, ready_timeout=0.1) as client:
            connected = await asyncio.to_thread(routes.connects.get, timeout=WAIT_S)
            start = await asyncio.to_thread(routes.messages.get, timeout=WAIT_S)
            assert parse_event(start["body"]).kind_name == "sessionStart"
            call = make_event(ToolCall(call_id="c-read", name="editor.readFile", arguments='{"path": "main.swift"}'))
            connection_id = connected["requestContext"]["connectionId"]
            await asyncio.to_thread(management.post_to_connection, ConnectionId=connection_id, Data=call.to_json())
            parts: list[ToolResult] = []
            sizes: list[int] = []
            while not parts or len(parts) < (parts[0].parts or 1):
                answer = await asyncio.to_thread(routes.messages.get, timeout=WAIT_S)
                sizes.append(len(answer["body"].encode()))
                outcome = parse_event(answer["body"])
                assert isinstance(outcome, Event) and isinstance(outcome.payload, ToolResult)
                parts.append(outcome.payload)
            assert client.connected and client.errors == []
            return client, parts, sizes

    client, parts, sizes = asyncio.run(asyncio.wait_for(exchange(), 10))
    # Each frame runs in its own invocation, as on API Gateway: they may be handled in either order.
    parts.sort(key=lambda part: part.part or 0)
    assert len(parts) == 2 and [part.part for part in parts] == [0, 1] and {part.parts for part in parts} == {2}
    assert all(size <= 32 * KB for size in sizes)  # every event one frame: what a browser or iOS app can send
    assert all(part.call_id == "c-read" and part.error is None for part in parts)
    assert json.loads("".join(part.result or "" for part in parts)) == {"path": "main.swift", "content": content}
    assert [event.payload.part for event in client.sent[-2:]] == [0, 1]
    assert routes.disconnects.get(timeout=WAIT_S)["requestContext"]["disconnectStatusCode"] == 1000


@async_test
async def test_the_gateways_own_frames_are_ignored_and_the_turn_completes() -> None:
    timed_out = {"message": "Endpoint request timed out", "connectionId": "Llf4ceE2NjMCF7w=", "requestId": "r1="}
    failed = {"message": "Internal server error", "connectionId": "Llf4ceE2NjMCF7w=", "requestId": "r2="}

    async def turn(session: FakeSession, text: str) -> None:
        await session.send_raw(
            '{"message": "Endpoint request timed out", "connectionId":"Llf4ceE2NjMCF7w=", "requestId":"r1="}'
        )
        await session.send_raw(json.dumps(failed))
        await standard_turn("Still here.")(session, text)

    async with FakeConductor(turn) as fake, ConductorClient(fake.url) as client:
        result = await client.say("are you there")

    assert result.completed and result.final_text == "Still here."
    assert client.errors == [] and result.errors == []
    assert client.gateway_frames == [timed_out, failed]
    assert all(event.kind_name != "error" for event in client.events)
