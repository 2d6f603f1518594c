"""The $connect authorizer in ``dev-signed-token`` mode (the HMAC tokens of dev/CI stages), with the
secret fetched through a mocked Parameters provider. The ``cognito`` mode: test_cognito.py."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from conductor_local.lambda_context import LocalLambdaContext
from lambdas import authorizer
from shared.auth_tokens import issue_token

SECRET = "s" * 64
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:conductor-token-key-AbCdEf"
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/$connect"
SESSION = "0b6c7a5e-6f0e-4c5e-9a53-0d7f7c0f4b1e"


@pytest.fixture
def fetched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    calls: list[tuple[str, int | None]] = []

    def get_secret(name: str, max_age: int | None = None, **_: Any) -> str:
        calls.append((name, max_age))
        return SECRET

    monkeypatch.setenv("CONDUCTOR_AUTH_MODE", "dev-signed-token")
    monkeypatch.setenv("CONDUCTOR_AUTH_SECRET_ARN", SECRET_ARN)
    monkeypatch.setattr(authorizer.parameters, "get_secret", get_secret)
    return calls


def event(headers: dict[str, str] | None = None, **query: str) -> dict[str, Any]:
    return {
        "type": "REQUEST",
        "methodArn": METHOD_ARN,
        "headers": headers or {},
        "queryStringParameters": query or None,
        "requestContext": {"routeKey": "$connect", "eventType": "CONNECT", "connectionId": "conn-1"},
    }


def invoke(evt: dict[str, Any]) -> dict[str, Any]:
    return authorizer.handler(evt, LocalLambdaContext("authorizer"))


def test_valid_token_allows_with_principal_and_session(fetched: list[tuple[str, int | None]]) -> None:
    token = issue_token(SECRET, "alice", 300, time.time())
    response = invoke(event(token=token, sessionId=SESSION))
    assert response == {
        "principalId": "alice",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": METHOD_ARN}],
        },
        "context": {"principalId": "alice", "sessionId": SESSION},
    }
    assert fetched == [(SECRET_ARN, authorizer.SECRET_MAX_AGE_SECONDS)]


def test_the_token_may_come_as_a_bearer_header(fetched: list[tuple[str, int | None]]) -> None:
    token = issue_token(SECRET, "ci-bot", 300, time.time())
    response = invoke(event({"authorization": f"Bearer {token}"}, sessionId=SESSION))
    assert response["principalId"] == "ci-bot"
    assert response["context"] == {"principalId": "ci-bot", "sessionId": SESSION}


@pytest.mark.parametrize(
    "token",
    [
        issue_token("x" * 64, "alice", 300, time.time()),
        issue_token(SECRET, "alice", 60, time.time() - 120),
        "v1.garbage.token",
    ],
    ids=["wrong-secret", "expired", "malformed"],
)
def test_bad_tokens_are_denied(fetched: list[tuple[str, int | None]], token: str) -> None:
    response = invoke(event(token=token, sessionId=SESSION))
    assert response["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert response["policyDocument"]["Statement"][0]["Resource"] == METHOD_ARN
    assert "context" not in response


@pytest.mark.parametrize("query", [{}, {"sessionId": SESSION}, {"token": "v1.a.b"}])
def test_missing_token_or_session_is_unauthorized(fetched: list[tuple[str, int | None]], query: dict[str, str]) -> None:
    with pytest.raises(authorizer.Unauthorized, match=r"^Unauthorized$"):
        invoke(event(**query))


def test_overlong_session_id_is_denied(fetched: list[tuple[str, int | None]]) -> None:
    token = issue_token(SECRET, "alice", 300, time.time())
    response = invoke(event(token=token, sessionId="x" * 200))
    assert response["policyDocument"]["Statement"][0]["Effect"] == "Deny"


def test_the_token_is_never_logged(
    fetched: list[tuple[str, int | None]], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    good = issue_token(SECRET, "alice", 300, time.time())
    bad = issue_token("x" * 64, "mallory", 300, time.time())
    invoke(event(token=good, sessionId=SESSION))
    invoke(event(token=bad, sessionId=SESSION))
    output = capsys.readouterr()
    logged = output.out + output.err + caplog.text
    assert "Connect allowed" in logged and "Connect denied" in logged
    assert good not in logged and bad not in logged
    assert good.split(".")[2] not in logged


def test_an_empty_secret_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_AUTH_SECRET_ARN", SECRET_ARN)
    monkeypatch.setattr(authorizer.parameters, "get_secret", lambda *_a, **_k: "")
    with pytest.raises(RuntimeError, match="signing secret"):
        authorizer.signing_secret()
