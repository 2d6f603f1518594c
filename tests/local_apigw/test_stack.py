"""The local stack wires handlers to moto, the local Bedrock endpoint and the gateway via the environment."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from conductor_local.bedrock.server import message
from conductor_local.gateway.server import AUTHORIZER_ROUTE, RouteHandlers
from conductor_local.stack import LocalStack, lambda_context
from tests.local_apigw.conftest import WAIT_S, StandInRoutes, next_event

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


# ---- sign-in (auth="cognito") --------------------------------------------------------------------

AUTH_VARS = (
    "CONDUCTOR_AUTH_MODE",
    "CONDUCTOR_COGNITO_ISSUER",
    "CONDUCTOR_COGNITO_CLIENT_IDS",
    "CONDUCTOR_COGNITO_JWKS_URL",
    "CONDUCTOR_REQUIRE_PRINCIPAL",
)


def _id_token(stack: LocalStack, username: str, password: str) -> str:
    pool = stack.user_pool
    assert pool is not None
    cognito = boto3.client(
        "cognito-idp", endpoint_url=pool.endpoint, region_name=pool.region, config=Config(signature_version=UNSIGNED)
    )
    result = cognito.initiate_auth(
        AuthFlow="USER_PASSWORD_AUTH",
        ClientId=pool.client_id,
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )
    return result["AuthenticationResult"]["IdToken"]


def test_the_authorizer_gets_its_own_context_as_deployed() -> None:
    context = lambda_context(AUTHORIZER_ROUTE)
    assert context.function_name == "voiceide-conductor-authorizer"
    assert context.timeout_seconds == 10.0
    assert lambda_context("$connect").function_name == "voiceide-conductor-connect"


def test_auth_must_be_a_known_mode() -> None:
    with pytest.raises(ValueError, match="auth must be one of none, cognito"):
        LocalStack(port=0, quiet=True, auth="signed")  # type: ignore[arg-type]


def test_without_auth_there_is_no_pool_and_no_authorizer(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in AUTH_VARS:
        monkeypatch.delenv(name, raising=False)
    routes = StandInRoutes()
    with LocalStack(port=0, quiet=True, handlers=routes.handlers()) as stack:
        assert stack.user_pool is None
        assert stack._running_gateway().handlers.authorizer is None
        assert not any(name in os.environ for name in AUTH_VARS)
        with connect(stack.session_url(str(uuid.uuid4()))) as ws:
            assert ws.ping().wait(WAIT_S)
        assert "authorizer" not in next_event(routes.connects)["requestContext"]


def test_cognito_auth_puts_the_deployed_authorizer_before_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in AUTH_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    routes = StandInRoutes()
    session_id = str(uuid.uuid4())

    with LocalStack(port=0, quiet=True, handlers=routes.handlers(), auth="cognito") as stack:
        pool = stack.user_pool
        assert pool is not None
        assert os.environ["CONDUCTOR_AUTH_MODE"] == "cognito"
        assert os.environ["CONDUCTOR_COGNITO_ISSUER"] == (
            f"https://cognito-idp.eu-west-1.amazonaws.com/{pool.user_pool_id}"
        )
        assert os.environ["CONDUCTOR_COGNITO_CLIENT_IDS"] == pool.client_id
        assert os.environ["CONDUCTOR_COGNITO_JWKS_URL"] == (
            f"{stack.dynamodb_endpoint}/{pool.user_pool_id}/.well-known/jwks.json"
        )
        assert os.environ["CONDUCTOR_REQUIRE_PRINCIPAL"] == "true"
        assert stack._running_gateway().connect_method_arn.startswith("arn:aws:execute-api:eu-west-1:")
        client = stack.cognito_client().describe_user_pool_client(UserPoolId=pool.user_pool_id, ClientId=pool.client_id)
        assert "ClientSecret" not in client["UserPoolClient"]
        assert set(client["UserPoolClient"]["ExplicitAuthFlows"]) == {
            "ALLOW_USER_PASSWORD_AUTH",
            "ALLOW_REFRESH_TOKEN_AUTH",
        }

        with pytest.raises(InvalidStatus) as refused:
            connect(stack.session_url(session_id))
        assert refused.value.response.status_code == 401
        assert routes.connects.empty()  # $connect never ran

        token = _id_token(stack, pool.username, pool.password)
        with connect(stack.session_url(session_id), additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            ws.send("hello")
            message = next_event(routes.messages)

    connect_event = next_event(routes.connects)
    for event in (connect_event, message):
        authorizer = event["requestContext"]["authorizer"]
        assert authorizer["principalId"] == pool.test_user_sub
        assert authorizer["sessionId"] == session_id
    for name in AUTH_VARS:
        assert name not in os.environ
