"""The local API Gateway against stand-in handlers, real WebSocket clients and the real boto3 client."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import (
    APIGatewayWebSocketConnectEventModel,
    APIGatewayWebSocketDisconnectEventModel,
    APIGatewayWebSocketMessageEventModel,
)
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidStatus
from websockets.sync.client import connect

from conductor_local.gateway.server import LocalApiGateway, summarize
from tests.local_apigw.conftest import WAIT_S, StandInRoutes, next_event


def _connection_id(routes: StandInRoutes) -> str:
    return next_event(routes.connects)["requestContext"]["connectionId"]


def test_handshake_invokes_connect_with_an_api_gateway_event(gateway: LocalApiGateway, routes: StandInRoutes) -> None:
    session_id = str(uuid.uuid4())
    with connect(f"{gateway.url}?sessionId={session_id}&tag=a&tag=b", user_agent_header="VoiceIDE/1.0"):
        event = next_event(routes.connects)

    parsed = APIGatewayWebSocketConnectEventModel.model_validate(event)
    context = parsed.request_context
    assert (context.route_key, context.event_type, context.message_direction) == ("$connect", "CONNECT", "IN")
    assert context.stage == "local"
    assert context.domain_name == f"127.0.0.1:{gateway.port}" == gateway.domain_name
    assert len(context.connection_id) == 16 and context.connection_id.endswith("=")
    assert context.identity.user_agent == "VoiceIDE/1.0"
    assert str(context.identity.source_ip.network_address) == "127.0.0.1"
    assert event["queryStringParameters"] == {"sessionId": session_id, "tag": "b"}
    assert event["multiValueQueryStringParameters"] == {"sessionId": [session_id], "tag": ["a", "b"]}
    assert event["headers"]["Host"] == f"127.0.0.1:{gateway.port}"
    assert event["headers"]["X-Forwarded-For"] == "127.0.0.1"
    assert event["multiValueHeaders"]["Sec-WebSocket-Version"] == ["13"]
    assert "Connection" not in event["headers"] and "Upgrade" not in event["headers"]
    assert isinstance(event["requestContext"]["connectedAt"], int)
    assert event["requestContext"]["requestTimeEpoch"] >= event["requestContext"]["connectedAt"]
    assert event["isBase64Encoded"] is False


@pytest.mark.parametrize(("outcome", "status"), [(400, 400), (403, 403), ("raise", 500)])
def test_connect_handler_refusal_is_the_handshake_status(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, outcome: int | str, status: int
) -> None:
    def refuse(event: dict[str, Any]) -> dict[str, Any]:
        if outcome == "raise":
            raise RuntimeError("stand-in failure")
        return {"statusCode": outcome, "body": "no"}

    routes.on_connect = refuse
    with pytest.raises(InvalidStatus) as refused:
        connect(session_url)
    assert refused.value.response.status_code == status
    assert routes.disconnects.empty()


def test_messages_reach_the_default_route(gateway: LocalApiGateway, routes: StandInRoutes, session_url: str) -> None:
    with connect(session_url) as ws:
        connection_id = _connection_id(routes)
        ws.send('{"kind": {"sessionStart": {"sessionId": "s"}}}')
        first = next_event(routes.messages)
        ws.send("second")
        second = next_event(routes.messages)

    for event in (first, second):
        parsed = APIGatewayWebSocketMessageEventModel.model_validate(event)
        assert parsed.request_context.route_key == "$default"
        assert parsed.request_context.event_type == "MESSAGE"
        assert parsed.request_context.connection_id == connection_id
        assert event["isBase64Encoded"] is False
        assert "authorizer" not in event["requestContext"]  # no authorizer configured
    assert first["body"] == '{"kind": {"sessionStart": {"sessionId": "s"}}}' and second["body"] == "second"
    assert first["requestContext"]["messageId"] != second["requestContext"]["messageId"]


def test_frames_of_one_connection_are_handled_concurrently(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str
) -> None:
    second_done = threading.Event()
    first_saw_second: list[bool] = []

    def handle(event: dict[str, Any]) -> dict[str, Any]:
        if event["body"] == "first":
            first_saw_second.append(second_done.wait(WAIT_S))
        else:
            second_done.set()
        return {"statusCode": 200}

    routes.on_message = handle
    with connect(session_url) as ws:
        ws.send("first")
        ws.send("second")
        finished = [next_event(routes.messages)["body"], next_event(routes.messages)["body"]]
    assert finished == ["second", "first"]
    assert first_saw_second == [True]


def test_a_failing_message_handler_leaves_the_connection_open(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    def handle(event: dict[str, Any]) -> dict[str, Any]:
        if event["body"] == "boom":
            raise RuntimeError("stand-in failure")
        return {"statusCode": 200}

    routes.on_message = handle
    with connect(session_url) as ws:
        connection_id = _connection_id(routes)
        ws.send("boom")
        request_id = next_event(routes.messages)["requestContext"]["requestId"]
        assert ws.recv(timeout=WAIT_S) == (
            f'{{"message": "Internal server error", "connectionId":"{connection_id}", "requestId":"{request_id}"}}'
        )
        ws.send("fine")
        assert next_event(routes.messages)["body"] == "fine"
        management.post_to_connection(ConnectionId=connection_id, Data=b"still here")
        assert ws.recv(timeout=WAIT_S) == "still here"


def test_post_to_connection_delivers_frames_in_order(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any, log_lines: list[str]
) -> None:
    frames = [json.dumps({"kind": {"assistantSpeechPartial": {"text": "word " * n}}}) for n in range(1, 21)]
    with connect(session_url) as ws:
        connection_id = _connection_id(routes)
        for frame in frames:
            management.post_to_connection(ConnectionId=connection_id, Data=frame.encode())
        management.post_to_connection(ConnectionId=connection_id, Data=b"\xff\x00")
        received = [ws.recv(timeout=WAIT_S) for _ in range(len(frames) + 1)]
    assert received == [*frames, b"\xff\x00"]
    assert f'← conn {connection_id} assistantSpeechPartial "word "' in log_lines


def test_get_connection_reports_the_connection(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    with connect(session_url, user_agent_header="VoiceIDE/1.0"):
        connection = management.get_connection(ConnectionId=_connection_id(routes))
    assert connection["Identity"] == {"SourceIp": "127.0.0.1", "UserAgent": "VoiceIDE/1.0"}
    assert connection["LastActiveAt"] >= connection["ConnectedAt"]


def test_delete_connection_closes_the_socket_and_fires_disconnect(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    with connect(session_url) as ws:
        connection_id = _connection_id(routes)
        management.delete_connection(ConnectionId=connection_id)
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=WAIT_S)
        with pytest.raises(management.exceptions.GoneException):
            management.post_to_connection(ConnectionId=connection_id, Data=b"late")

    event = next_event(routes.disconnects)
    parsed = APIGatewayWebSocketDisconnectEventModel.model_validate(event)
    assert parsed.request_context.connection_id == connection_id
    assert parsed.request_context.disconnect_status_code == 1000


def test_client_close_fires_disconnect_with_its_code(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    with connect(session_url) as ws:
        connection_id = _connection_id(routes)
        ws.close(4000, "bye")
    event = next_event(routes.disconnects)
    APIGatewayWebSocketDisconnectEventModel.model_validate(event)
    assert event["requestContext"]["connectionId"] == connection_id
    assert (event["requestContext"]["disconnectStatusCode"], event["requestContext"]["disconnectReason"]) == (
        4000,
        "bye",
    )
    with pytest.raises(management.exceptions.GoneException) as gone:
        management.post_to_connection(ConnectionId=connection_id, Data=b"late")
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 410


@pytest.mark.parametrize("connection_id", ["AAAAAAAAAAAAAAA=", "a/b+c="])
def test_unknown_connections_are_gone(gateway: LocalApiGateway, management: Any, connection_id: str) -> None:
    with pytest.raises(management.exceptions.GoneException):
        management.post_to_connection(ConnectionId=connection_id, Data=b"x")
    with pytest.raises(management.exceptions.GoneException):
        management.get_connection(ConnectionId=connection_id)
    with pytest.raises(management.exceptions.GoneException):
        management.delete_connection(ConnectionId=connection_id)


def test_oversized_posts_and_other_stages_are_refused(
    gateway: LocalApiGateway, routes: StandInRoutes, session_url: str, management: Any
) -> None:
    other_stage = boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=f"http://{gateway.domain_name}/prod",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    with connect(session_url):
        connection_id = _connection_id(routes)
        with pytest.raises(management.exceptions.PayloadTooLargeException):
            management.post_to_connection(ConnectionId=connection_id, Data=b"x" * (128 * 1024 + 1))
        with pytest.raises(other_stage.exceptions.ForbiddenException):
            other_stage.post_to_connection(ConnectionId=connection_id, Data=b"x")


def test_stop_disconnects_every_client(routes: StandInRoutes) -> None:
    gw = LocalApiGateway(routes.handlers(), "127.0.0.1", 0).start()
    with contextlib.ExitStack() as opened:
        clients = [opened.enter_context(connect(f"{gw.url}?sessionId={uuid.uuid4()}")) for _ in range(2)]
        ids = {_connection_id(routes) for _ in clients}
        gw.stop()

        assert {next_event(routes.disconnects)["requestContext"]["connectionId"] for _ in clients} == ids
        for client in clients:
            with pytest.raises(ConnectionClosed) as closed:
                client.recv(timeout=WAIT_S)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


def test_summaries_are_one_readable_line() -> None:
    def event(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"id": "1", "timestamp": "t", "kind": {kind: payload}})

    assert summarize(event("userAudioTranscriptFinal", {"text": "open main"})) == 'userAudioTranscriptFinal "open main"'
    tool_call = event("toolCall", {"callId": "c1", "name": "tts.speak", "arguments": '{"text":"Hi"}'})
    assert summarize(tool_call) == 'toolCall tts.speak {"text":"Hi"} (c1)'
    result = event("toolResult", {"callId": "c1", "result": '{"spoken":true}', "error": None})
    assert summarize(result) == 'toolResult callId=c1 result={"spoken":true}'
    assert summarize("not json") == '"not json"'
    assert summarize(b"\x00\x01") == "<2 bytes binary>"
    long_line = summarize(event("assistantSpeechPartial", {"text": "x" * 500}))
    assert len(long_line.encode("utf-8")) == 120 and long_line.endswith("…")  # a bound in bytes
