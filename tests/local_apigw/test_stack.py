"""The local stack wires handlers to moto, the local Bedrock endpoint and the gateway via the environment."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import boto3
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from conductor_local.apigw import RouteHandlers
from conductor_local.bedrock_server import message
from conductor_local.stack import LocalStack
from tests.local_apigw.conftest import WAIT_S

ENDPOINT_VARS = (
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_ENDPOINT_URL_LAMBDA",
    "CONDUCTOR_TABLE",
    "CONDUCTOR_TURN_FUNCTION",
)


def _connect(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Stores connection → session the way a handler does: clients configured by the environment only."""
    boto3.client("dynamodb").put_item(
        TableName=os.environ["CONDUCTOR_TABLE"],
        Item={
            "pk": {"S": "CONN#" + event["requestContext"]["connectionId"]},
            "sk": {"S": "CONN"},
            "session": {"S": event["queryStringParameters"]["sessionId"]},
        },
    )
    return {"statusCode": 200}


def _message(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Asks the model and answers the client with the session id and the model's text."""
    request = event["requestContext"]
    item = boto3.client("dynamodb").get_item(
        TableName=os.environ["CONDUCTOR_TABLE"],
        Key={"pk": {"S": "CONN#" + request["connectionId"]}, "sk": {"S": "CONN"}},
    )["Item"]
    stream = boto3.client("bedrock-runtime").converse_stream(
        modelId="stand-in", messages=[{"role": "user", "content": [{"text": event["body"]}]}]
    )["stream"]
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in stream if "contentBlockDelta" in e)
    callback = boto3.client(
        "apigatewaymanagementapi", endpoint_url=f"http://{request['domainName']}/{request['stage']}"
    )
    reply = {"session": item["session"]["S"], "text": text, "remaining_ms": context.get_remaining_time_in_millis()}
    callback.post_to_connection(ConnectionId=request["connectionId"], Data=json.dumps(reply).encode())
    return {"statusCode": 200}


def _disconnect(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200}


STAND_INS = RouteHandlers(_connect, _message, _disconnect)


def _echo_brain(model_id: str, request: dict[str, Any]) -> Any:
    return message("brain heard " + request["messages"][-1]["content"][0]["text"])


def test_handlers_reach_every_local_service_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "the-users-token")
    session_id = str(uuid.uuid4())

    with LocalStack(port=0, quiet=True, handlers=STAND_INS, brain_responder=_echo_brain) as stack:
        assert stack.ws_url == f"ws://127.0.0.1:{stack.port}/"
        assert "AWS_SESSION_TOKEN" not in os.environ
        with connect(stack.session_url(session_id)) as ws:
            ws.send("hello")
            reply = json.loads(ws.recv(timeout=WAIT_S))

    assert reply["session"] == session_id
    assert reply["text"] == "brain heard hello"
    assert 20_000 < reply["remaining_ms"] <= 29_000  # the message function's deployed timeout
    for name in ENDPOINT_VARS:
        assert name not in os.environ
    assert os.environ["AWS_SESSION_TOKEN"] == "the-users-token"


def test_real_bedrock_keeps_the_users_credentials_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "the-users-key")
    monkeypatch.delenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", raising=False)

    with LocalStack(port=0, quiet=True, handlers=STAND_INS, use_real_bedrock=True) as stack:
        assert stack.bedrock_endpoint is None
        assert os.environ["AWS_ACCESS_KEY_ID"] == "the-users-key"
        assert "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" not in os.environ
        assert os.environ["AWS_ENDPOINT_URL_DYNAMODB"] == stack.dynamodb_endpoint


@pytest.mark.e2e
def test_the_deployed_handlers_run_on_the_stack() -> None:
    """Smoke test of the default wiring: the real ``$connect`` handler binds sessions in the stack's table."""
    with LocalStack(port=0, quiet=True) as stack:
        with pytest.raises(InvalidStatus) as refused:
            connect(f"{stack.ws_url}?sessionId=not-a-uuid")
        assert refused.value.response.status_code == 400
        with connect(stack.session_url(str(uuid.uuid4()))) as ws:
            assert ws.ping().wait(WAIT_S)
