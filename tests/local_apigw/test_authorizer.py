"""The ``$connect`` REQUEST authorizer: its event, its answers and the context every route then sees."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerRequestEvent,
)
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from conductor_local.gateway.server import AuthorizerError, LocalApiGateway, RouteHandlers, policy_allows
from lambdas.authorizer import DEV_SIGNED_TOKEN, authorize
from shared.adapters.auth_tokens import issue_token
from tests.local_apigw.conftest import WAIT_S, Event, StandInRoutes, next_event

ARN = "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/local/$connect"


def policy(effect: str, resource: str, context: dict[str, Any] | None = None, principal: str = "user-1") -> Event:
    answer: Event = {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}],
        },
    }
    if context is not None:
        answer["context"] = context
    return answer


class StandInAuthorizer:
    """Records its events; ``decide`` answers each (a policy, or an exception to raise)."""

    def __init__(self) -> None:
        self.events: queue.Queue[Event] = queue.Queue()
        self.decide: Callable[[Event], Any] = lambda event: policy("Allow", event["methodArn"])

    def __call__(self, event: Event, context: Any) -> Any:
        self.events.put(event)
        return self.decide(event)


@pytest.fixture
def authorizer() -> StandInAuthorizer:
    return StandInAuthorizer()


def _gateway(routes: StandInRoutes, authorizer: Any, **options: Any) -> LocalApiGateway:
    handlers = RouteHandlers(**{**routes.handlers().__dict__, "authorizer": authorizer})
    return LocalApiGateway(handlers, "127.0.0.1", 0, **options).start()


@pytest.fixture
def guarded(routes: StandInRoutes, authorizer: StandInAuthorizer) -> Iterator[LocalApiGateway]:
    gw = _gateway(routes, authorizer, region="eu-west-1", account_id="111122223333")
    try:
        yield gw
    finally:
        gw.stop()


def _refusal(url: str) -> tuple[int, Any]:
    with pytest.raises(InvalidStatus) as refused:
        connect(url)
    response = refused.value.response
    return response.status_code, json.loads(response.body)


def test_allow_passes_the_policy_context_to_every_route(
    guarded: LocalApiGateway, routes: StandInRoutes, authorizer: StandInAuthorizer
) -> None:
    authorizer.decide = lambda event: policy(
        "Allow", event["methodArn"], {"sessionId": "s-1", "tier": 3, "beta": True, "ratio": 0.5}
    )
    session_id = str(uuid.uuid4())
    with connect(f"{guarded.url}?sessionId={session_id}&token=t", user_agent_header="VoiceIDE/1.0") as ws:
        asked = next_event(authorizer.events)
        connected = next_event(routes.connects)
        ws.send("hello")
        message = next_event(routes.messages)
    disconnected = next_event(routes.disconnects)

    expected = {"sessionId": "s-1", "tier": "3", "beta": "true", "ratio": "0.5", "principalId": "user-1"}
    for event in (connected, message, disconnected):
        context = dict(event["requestContext"]["authorizer"])
        assert isinstance(context.pop("integrationLatency"), int)
        assert context == expected

    assert asked["type"] == "REQUEST"
    assert asked["methodArn"] == f"arn:aws:execute-api:eu-west-1:111122223333:{guarded.api_id}/local/$connect"
    assert asked["methodArn"] == guarded.connect_method_arn
    assert asked["queryStringParameters"] == {"sessionId": session_id, "token": "t"}
    assert asked["multiValueQueryStringParameters"] == {"sessionId": [session_id], "token": ["t"]}
    assert asked["stageVariables"] == {}
    assert asked["headers"]["Upgrade"] == "websocket" and asked["headers"]["User-Agent"] == "VoiceIDE/1.0"
    assert asked["multiValueHeaders"]["Sec-WebSocket-Version"] == ["13"]
    assert asked["headers"]["X-Forwarded-For"] == "127.0.0.1"
    request_context = asked["requestContext"]
    assert (request_context["routeKey"], request_context["eventType"]) == ("$connect", "CONNECT")
    assert request_context["connectionId"] == connected["requestContext"]["connectionId"]
    assert request_context["requestId"] == connected["requestContext"]["requestId"]
    assert "authorizer" not in request_context
    parsed = APIGatewayAuthorizerRequestEvent(asked)
    assert parsed.parsed_arn.api_id == guarded.api_id and parsed.parsed_arn.stage == "local"


@pytest.mark.parametrize(
    "answer",
    [
        lambda event: policy("Deny", event["methodArn"]),
        lambda event: policy("Allow", "arn:aws:execute-api:eu-west-1:111122223333:otherapi/local/$connect"),
    ],
    ids=["deny", "allow-elsewhere"],
)
def test_a_policy_that_does_not_allow_the_connect_is_403_forbidden(
    guarded: LocalApiGateway, routes: StandInRoutes, authorizer: StandInAuthorizer, answer: Any
) -> None:
    authorizer.decide = answer
    assert _refusal(f"{guarded.url}?sessionId={uuid.uuid4()}") == (403, {"message": "Forbidden"})
    next_event(authorizer.events)
    assert routes.connects.empty() and routes.disconnects.empty()


def test_raising_unauthorized_is_401(
    guarded: LocalApiGateway, routes: StandInRoutes, authorizer: StandInAuthorizer
) -> None:
    def refuse(event: Event) -> Event:
        raise Exception("Unauthorized")

    authorizer.decide = refuse
    assert _refusal(f"{guarded.url}?sessionId={uuid.uuid4()}") == (401, {"message": "Unauthorized"})
    assert routes.connects.empty()


@pytest.mark.parametrize(
    "answer",
    [
        lambda event: {"principalId": "user-1"},  # no policy
        lambda event: policy("Allow", event["methodArn"], {"nested": {"a": 1}}),  # context values are scalars
        lambda event: policy("Allow", event["methodArn"], {"big": "x" * 9000}),  # over the 8 KB result quota
        lambda event: policy("Allow", event["methodArn"], principal=""),
        lambda event: (_ for _ in ()).throw(RuntimeError("authorizer crashed")),
    ],
    ids=["no-policy", "nested-context", "too-large", "no-principal", "crash"],
)
def test_an_authorizer_that_fails_is_500(
    guarded: LocalApiGateway, routes: StandInRoutes, authorizer: StandInAuthorizer, answer: Any
) -> None:
    authorizer.decide = answer
    assert _refusal(f"{guarded.url}?sessionId={uuid.uuid4()}")[0] == 500
    assert routes.connects.empty()


def test_a_missing_identity_source_is_401_without_calling_the_authorizer(
    routes: StandInRoutes, authorizer: StandInAuthorizer
) -> None:
    gw = _gateway(
        routes,
        authorizer,
        authorizer_identity_source=("route.request.querystring.token", "route.request.header.X-Device"),
    )
    try:
        assert _refusal(f"{gw.url}?sessionId={uuid.uuid4()}")[0] == 401
        assert _refusal(f"{gw.url}?sessionId={uuid.uuid4()}&token=")[0] == 401
        with pytest.raises(InvalidStatus):
            connect(f"{gw.url}?token=t")  # the header is missing
        assert authorizer.events.empty()
        with connect(f"{gw.url}?token=t", additional_headers={"X-Device": "phone"}):
            assert next_event(authorizer.events)["headers"]["X-Device"] == "phone"
    finally:
        gw.stop()


def test_a_slow_authorizer_refuses_the_handshake(routes: StandInRoutes, authorizer: StandInAuthorizer) -> None:
    release = threading.Event()
    authorizer.decide = lambda event: release.wait(WAIT_S) and policy("Allow", event["methodArn"])
    gw = _gateway(routes, authorizer, integration_timeout=0.3)
    try:
        assert _refusal(f"{gw.url}?sessionId={uuid.uuid4()}")[0] == 500
    finally:
        release.set()
        gw.stop()
    assert routes.connects.empty()


def test_the_conductors_own_authorizer_admits_a_signed_token(
    routes: StandInRoutes, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "local-signing-secret-of-at-least-32-bytes"
    monkeypatch.setattr("lambdas.authorizer.signing_secret", lambda: secret)

    def conductor_authorizer(event: Event, context: Any) -> Any:
        return authorize(APIGatewayAuthorizerRequestEvent(event), DEV_SIGNED_TOKEN)

    gw = _gateway(routes, conductor_authorizer)
    try:
        session_id = str(uuid.uuid4())
        token = issue_token(secret, "user-42", 300, time.time())
        with connect(f"{gw.url}?sessionId={session_id}&token={token}"):
            authorized = next_event(routes.connects)["requestContext"]["authorizer"]
        assert (authorized["principalId"], authorized["sessionId"]) == ("user-42", session_id)
        forged = issue_token("another-signing-secret-of-32-bytes-or-more", "user-42", 300, time.time())
        assert _refusal(f"{gw.url}?sessionId={session_id}&token={forged}") == (403, {"message": "Forbidden"})
        assert _refusal(f"{gw.url}?sessionId={session_id}") == (401, {"message": "Unauthorized"})
    finally:
        gw.stop()


def _document(*statements: Event) -> Event:
    return {"Version": "2012-10-17", "Statement": list(statements)}


@pytest.mark.parametrize(
    ("statements", "allowed"),
    [
        ([{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": ARN}], True),
        ([{"Effect": "Allow", "Action": "execute-api:*", "Resource": "arn:aws:execute-api:*:*:*/local/*"}], True),
        ([{"Effect": "Allow", "Action": ["s3:GetObject", "EXECUTE-API:invoke"], "Resource": ["*"]}], True),
        ([{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:*:*:*/prod/*"}], False),
        ([{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}], False),
        (
            [
                {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"},
                {"Effect": "Deny", "Action": "execute-api:Invoke", "Resource": ARN},
            ],
            False,
        ),
        ([{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:us-east-1:?*"}], True),
    ],
)
def test_policy_evaluation(statements: list[Event], allowed: bool) -> None:
    assert policy_allows(_document(*statements), ARN) is allowed


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"Statement": []},
        _document({"Effect": "Maybe", "Action": "*", "Resource": "*"}),
        _document({"Effect": "Allow"}),
    ],
)
def test_malformed_policies_are_errors(document: Event) -> None:
    with pytest.raises(AuthorizerError):
        policy_allows(document, ARN)
