"""The $connect authorizer in ``dev-signed-token`` mode (the HMAC tokens of dev/CI stages), with the
secret fetched through a mocked Parameters provider. The ``cognito`` mode: test_cognito.py; here, its
time claims, which must be finite JSON numbers."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jwt import api_jws
from moto.server import ThreadedMotoServer

from conductor_local.lambda_runtime.context import LocalLambdaContext
from lambdas import authorizer
from shared.adapters.auth_tokens import issue_token
from shared.adapters.jwt_auth import CognitoVerifier, TokenRejected
from tests.infra.test_cognito import POOL_KID, Pool, claims_of, make_pool, pool_private_key, resign

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


# ---- cognito: the time claims must be numbers ----------------------------------------------------


@pytest.fixture(scope="module")
def signed_in() -> Iterator[tuple[Pool, str, str]]:
    """A pool on moto (as test_cognito.py makes it), its user's sub and ID token."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    pool = make_pool(f"http://{host}:{port}")
    sub = pool.add_user("alice@example.com")
    yield pool, sub, pool.sign_in("alice@example.com")["IdToken"]
    server.stop()


def resigned_raw(token: str, payload: bytes) -> str:
    """``payload`` exactly as given (any JSON text), signed as the pool signs its tokens."""
    return api_jws.encode(payload, pool_private_key(), algorithm="RS256", headers={"kid": POOL_KID, "typ": "JWT"})


def test_a_pool_token_with_numeric_time_claims_is_accepted(signed_in: tuple[Pool, str, str]) -> None:
    pool, sub, token = signed_in
    verifier = CognitoVerifier(pool.settings())
    claims = claims_of(token)
    assert isinstance(claims["exp"], int) and isinstance(claims["auth_time"], int)
    assert verifier.verify(token).principal == sub
    assert verifier.verify(resign(token, nbf=claims["iat"] - 0.5)).principal == sub


@pytest.mark.parametrize("claim", ["exp", "iat", "nbf", "auth_time"])
@pytest.mark.parametrize("kind", ["string", "bool", "list", "infinite", "nan"])
def test_a_time_claim_that_is_not_a_finite_number_is_refused(
    signed_in: tuple[Pool, str, str], claim: str, kind: str
) -> None:
    pool, _, token = signed_in
    verifier = CognitoVerifier(pool.settings())
    now = int(time.time())
    value = {
        "string": str(now + 3600 if claim == "exp" else now - 10),
        "bool": True,
        "list": [now],
        "infinite": float("inf"),
        "nan": float("nan"),
    }[kind]
    with pytest.raises(TokenRejected) as rejected:
        verifier.verify(resign(token, **{claim: value}))
    # NaN and Infinity are not JSON at all: the payload is malformed before its claims are read
    assert rejected.value.reason == ("malformed" if kind in ("infinite", "nan") else "claim_type")


@pytest.mark.parametrize(
    "payload",
    [
        '{"sub": "x", "exp": 1e999}',
        '{"sub": "x", "exp": ' + "9" * 300 + "}",
        '{"sub": "x", "deep": ' + "[" * 2_000 + "]" * 2_000 + "}",
    ],
)
def test_a_signed_payload_past_the_json_bounds_is_malformed(signed_in: tuple[Pool, str, str], payload: str) -> None:
    pool, _, token = signed_in
    verifier = CognitoVerifier(pool.settings())
    with pytest.raises(TokenRejected) as rejected:
        verifier.verify(resigned_raw(token, payload.encode()))
    assert rejected.value.reason == "malformed"


def test_a_string_exp_is_denied_at_connect(signed_in: tuple[Pool, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    pool, _, token = signed_in
    for name, value in pool.env().items():
        monkeypatch.setenv(name, value)
    authorizer.verifier_for.cache_clear()
    token = resign(token, exp=str(int(time.time()) + 3600))
    response = authorizer.handler(
        event({"Authorization": f"Bearer {token}"}, sessionId=SESSION), LocalLambdaContext(function_name="authorizer")
    )
    assert response["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    authorizer.verifier_for.cache_clear()
