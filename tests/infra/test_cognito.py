"""The ``$connect`` authorizer in ``cognito`` mode, with real tokens of a user pool.

moto's cognito-idp (server mode) holds the pool, its app client and users; ``InitiateAuth`` signs
them in and the server publishes the pool's JWKS at ``/<pool id>/.well-known/jwks.json``, which
the authorizer fetches over HTTP as it fetches Cognito's over HTTPS. Tokens the pool would never
issue (expired, another issuer, another client, ...) are re-signed with the pool's own private key
(moto ships it), so only the claim under test is wrong.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from moto.server import ThreadedMotoServer
from moto.utilities.utils import load_resource

from conductor_local.lambda_runtime.context import LocalLambdaContext
from lambdas import authorizer
from shared.adapters.jwt_auth import CognitoSettings, CognitoVerifier, KeysUnavailable, TokenRejected

REGION = "us-east-1"
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/$connect"
PASSWORD = "Correct-Horse-42!"
POOL_KID = "dummy"  # the key id of moto's pool key (its jwks-public.json)


@dataclass
class Pool:
    """A user pool on the moto server, its app client and how to sign users in."""

    url: str
    pool_id: str
    client_id: str
    client: Any

    @property
    def issuer(self) -> str:
        return f"https://cognito-idp.{REGION}.amazonaws.com/{self.pool_id}"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/{self.pool_id}/.well-known/jwks.json"

    def settings(self, jwks_url: str | None = None) -> CognitoSettings:
        return CognitoSettings.of(self.issuer, [self.client_id], jwks_url or self.jwks_url)

    def env(self) -> dict[str, str]:
        return {
            "CONDUCTOR_AUTH_MODE": "cognito",
            "CONDUCTOR_COGNITO_ISSUER": self.issuer,
            "CONDUCTOR_COGNITO_CLIENT_IDS": self.client_id,
            "CONDUCTOR_COGNITO_JWKS_URL": self.jwks_url,
        }

    def add_user(self, username: str) -> str:
        """Create a confirmed user with a permanent password; returns its ``sub``."""
        self.client.admin_create_user(UserPoolId=self.pool_id, Username=username, MessageAction="SUPPRESS")
        self.client.admin_set_user_password(
            UserPoolId=self.pool_id, Username=username, Password=PASSWORD, Permanent=True
        )
        attributes = self.client.admin_get_user(UserPoolId=self.pool_id, Username=username)["UserAttributes"]
        return next(a["Value"] for a in attributes if a["Name"] == "sub")

    def sign_in(self, username: str) -> dict[str, str]:
        result = self.client.initiate_auth(
            ClientId=self.client_id,
            AuthFlow="USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": username, "PASSWORD": PASSWORD},
        )
        return result["AuthenticationResult"]


def make_pool(url: str) -> Pool:
    client = boto3.client(
        "cognito-idp", endpoint_url=url, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    pool_id = client.create_user_pool(PoolName=f"voiceide-{uuid.uuid4().hex[:8]}")["UserPool"]["Id"]
    # dev's app client (infra/constructs/auth.py): the app's SRP, and the plain password flow of the
    # command-line client (cognito.password_sign_in), which signs these users in. A retaining stage's client
    # allows SRP and refresh only; its tokens are the same tokens, which is what the authorizer checks.
    client_id = client.create_user_pool_client(
        UserPoolId=pool_id,
        ClientName="voiceide-ios",
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_SRP_AUTH", "ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    return Pool(url, pool_id, client_id, client)


def pool_private_key() -> Any:
    """The private key moto signs every pool's tokens with."""
    return jwt.PyJWK(load_resource("cognitoidp/resources/jwks-private.json")).key


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def resign(token: str, key: Any = None, kid: str = POOL_KID, **changes: Any) -> str:
    """``token`` with ``changes`` to its claims (None removes one), signed RS256 with ``key``."""
    claims = {**claims_of(token), **changes}
    claims = {name: value for name, value in claims.items() if value is not None}
    return jwt.encode(claims, key or pool_private_key(), algorithm="RS256", headers={"kid": kid})


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def pool(moto_server: str) -> Pool:
    return make_pool(moto_server)


@pytest.fixture(scope="module")
def alice(pool: Pool) -> tuple[str, dict[str, str]]:
    return pool.add_user("alice@example.com"), pool.sign_in("alice@example.com")


@pytest.fixture
def cognito_env(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pool]:
    for name, value in pool.env().items():
        monkeypatch.setenv(name, value)
    authorizer.verifier_for.cache_clear()
    yield pool
    authorizer.verifier_for.cache_clear()


def connect_event(
    *, header: str | None = None, token: str | None = None, session_id: str | None = "s-1"
) -> dict[str, Any]:
    query = {name: value for name, value in (("token", token), ("sessionId", session_id)) if value is not None}
    return {
        "type": "REQUEST",
        "methodArn": METHOD_ARN,
        "headers": {"Authorization": header} if header is not None else {},
        "queryStringParameters": query or None,
        "requestContext": {"routeKey": "$connect", "eventType": "CONNECT", "connectionId": "conn-1"},
    }


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    return authorizer.handler(event, LocalLambdaContext("authorizer"))


def effect(response: dict[str, Any]) -> str:
    [statement] = response["policyDocument"]["Statement"]
    assert statement["Resource"] == METHOD_ARN and statement["Action"] == "execute-api:Invoke"
    return statement["Effect"]


# --- allowed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["IdToken", "AccessToken"])
@pytest.mark.parametrize("where", ["header", "query"])
def test_a_signed_in_users_tokens_open_connect_as_their_sub(
    cognito_env: Pool, alice: tuple[str, dict[str, str]], kind: str, where: str
) -> None:
    sub, tokens = alice
    assert claims_of(tokens[kind])["token_use"] == ("id" if kind == "IdToken" else "access")
    event = connect_event(header=f"Bearer {tokens[kind]}") if where == "header" else connect_event(token=tokens[kind])
    response = invoke(event)
    assert effect(response) == "Allow"
    assert response["principalId"] == sub
    assert response["context"] == {"principalId": sub, "sessionId": "s-1"}


def test_the_header_wins_over_the_query_parameter(cognito_env: Pool, alice: tuple[str, dict[str, str]]) -> None:
    sub, tokens = alice
    assert effect(invoke(connect_event(header=f"bearer {tokens['IdToken']}", token="garbage"))) == "Allow"
    assert effect(invoke(connect_event(header=f"Bearer {tokens['IdToken']}x", token=tokens["IdToken"]))) == "Deny"
    # Another scheme is no bearer token: the query parameter is used.
    assert invoke(connect_event(header="Basic YWxpY2U6cHc=", token=tokens["IdToken"]))["principalId"] == sub


def test_expiry_allows_a_minute_of_clock_skew(cognito_env: Pool, alice: tuple[str, dict[str, str]]) -> None:
    sub, tokens = alice
    now = int(time.time())
    within = resign(tokens["IdToken"], iat=now - 3600, exp=now - 30)
    assert invoke(connect_event(token=within))["principalId"] == sub


# --- denied -----------------------------------------------------------------------------------------


def public_key_pem() -> bytes:
    return (
        pool_private_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def forged(tokens: dict[str, str]) -> dict[str, Callable[[], str]]:
    """Tokens that must be denied, each wrong in one way, by name."""
    id_token, access_token = tokens["IdToken"], tokens["AccessToken"]
    now = int(time.time())
    header, payload, signature = id_token.split(".")
    other_claims = {**claims_of(id_token), "sub": "mallory"}
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "expired": lambda: resign(id_token, iat=now - 7200, exp=now - 120),
        "wrong-issuer": lambda: resign(id_token, iss="https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Other"),
        "issuer-with-trailing-slash": lambda: resign(id_token, iss=claims_of(id_token)["iss"] + "/"),
        "wrong-audience": lambda: resign(id_token, aud="another-app-client"),
        "audience-list-without-ours": lambda: resign(id_token, aud=["another-app-client"]),
        "wrong-access-client": lambda: resign(access_token, client_id="another-app-client"),
        "access-token-with-only-aud": lambda: resign(
            access_token, client_id=None, aud=claims_of(access_token)["client_id"]
        ),
        "id-token-with-only-client-id": lambda: resign(id_token, aud=None, client_id=claims_of(id_token)["aud"]),
        "refresh-token-use": lambda: resign(id_token, token_use="refresh"),
        "no-token-use": lambda: resign(id_token, token_use=None),
        "no-exp": lambda: resign(id_token, exp=None),
        "no-sub": lambda: resign(id_token, sub=None),
        "tampered-payload": lambda: f"{header}.{b64(json.dumps(other_claims).encode())}.{signature}",
        "tampered-signature": lambda: (
            f"{header}.{payload}.{signature[:-6]}{'A' * 6 if signature[-6:] != 'A' * 6 else 'B' * 6}"
        ),
        "signed-by-another-key": lambda: resign(id_token, key=stranger),
        "unknown-kid": lambda: resign(id_token, key=stranger, kid="rotated-1"),
        "alg-none": lambda: jwt.encode(claims_of(id_token), None, algorithm="none", headers={"kid": POOL_KID}),
        "hs256-with-the-public-key": lambda: _hs256(claims_of(id_token), public_key_pem()),
        "not-a-jwt": lambda: "not.a.jwt",
        "two-parts": lambda: f"{header}.{payload}",
    }


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    """The algorithm-confusion forgery: HMAC keyed with the RSA public key's PEM."""
    import hashlib
    import hmac

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": POOL_KID}).encode())
    body = b64(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


_SAMPLE = jwt.encode({"sub": "sample"}, "k" * 32, algorithm="HS256")
FORGERIES = list(forged({"IdToken": _SAMPLE, "AccessToken": _SAMPLE}))  # the names only


@pytest.mark.parametrize("name", FORGERIES)
def test_forged_or_foreign_tokens_are_denied(cognito_env: Pool, alice: tuple[str, dict[str, str]], name: str) -> None:
    token = forged(alice[1])[name]()
    response = invoke(connect_event(header=f"Bearer {token}"))
    assert effect(response) == "Deny"
    assert response["principalId"] == authorizer.DENIED_PRINCIPAL
    assert "context" not in response


@pytest.mark.parametrize(
    "event",
    [
        connect_event(),
        connect_event(header="Bearer "),
        connect_event(header="Bearer", token=""),
        connect_event(token="x", session_id=None),
    ],
    ids=["no-token", "empty-bearer", "empty-query-token", "no-session"],
)
def test_a_missing_token_or_session_is_unauthorized(cognito_env: Pool, event: dict[str, Any]) -> None:
    with pytest.raises(authorizer.Unauthorized, match=r"^Unauthorized$"):
        invoke(event)


def test_denial_reasons_name_the_failed_check(pool: Pool, alice: tuple[str, dict[str, str]]) -> None:
    verifier = CognitoVerifier(pool.settings())
    tokens = forged(alice[1])
    expected = {
        "expired": "expired",
        "wrong-issuer": "issuer",
        "wrong-audience": "audience",
        "wrong-access-client": "audience",
        "refresh-token-use": "token_use",
        "no-token-use": "missing_claim",
        "tampered-payload": "signature",
        "tampered-signature": "signature",
        "unknown-kid": "unknown_key",
        "alg-none": "algorithm",
        "hs256-with-the-public-key": "algorithm",
        "not-a-jwt": "malformed",
    }
    reasons = {}
    for name in expected:
        with pytest.raises(TokenRejected) as rejected:
            verifier.verify(tokens[name]())
        reasons[name] = rejected.value.reason
    assert reasons == expected


# --- the pool's keys --------------------------------------------------------------------------------


class CountingFetches:
    def __init__(self, verifier: CognitoVerifier) -> None:
        self.count = 0
        fetch = verifier.keys.fetch_data

        def counted() -> Any:
            self.count += 1
            return fetch()

        verifier.keys.fetch_data = counted  # type: ignore[method-assign]


def test_keys_are_fetched_once_and_kept(pool: Pool, alice: tuple[str, dict[str, str]]) -> None:
    verifier = CognitoVerifier(pool.settings())
    fetches = CountingFetches(verifier)
    for _ in range(5):
        assert verifier.verify(alice[1]["IdToken"]).principal == alice[0]
        assert verifier.verify(alice[1]["AccessToken"]).token_use == "access"
    assert fetches.count == 1


def test_an_unknown_kid_refreshes_the_keys_once_then_is_denied(pool: Pool, alice: tuple[str, dict[str, str]]) -> None:
    verifier = CognitoVerifier(pool.settings(), refresh_cooldown_seconds=0)
    fetches = CountingFetches(verifier)
    assert verifier.verify(alice[1]["IdToken"]).principal == alice[0]
    assert fetches.count == 1
    unknown = forged(alice[1])["unknown-kid"]()
    with pytest.raises(TokenRejected, match="unknown_key"):
        verifier.verify(unknown)
    assert fetches.count == 2  # one refresh, no retry loop


def test_made_up_kids_cannot_make_it_fetch_the_keys_on_every_request(
    pool: Pool, alice: tuple[str, dict[str, str]]
) -> None:
    verifier = CognitoVerifier(pool.settings())  # the default refresh cooldown
    fetches = CountingFetches(verifier)
    assert verifier.verify(alice[1]["IdToken"]).principal == alice[0]
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for index in range(20):
        with pytest.raises(TokenRejected, match="unknown_key"):
            verifier.verify(resign(alice[1]["IdToken"], key=stranger, kid=f"made-up-{index}"))
    assert fetches.count == 1


class JwksServer:
    """Serves a JWKS that a test can change, as a pool whose keys are rotated."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps({"keys": owner.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks.json"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def public_jwk(key: Any, kid: str) -> dict[str, Any]:
    return {
        **json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())),
        "kid": kid,
        "alg": "RS256",
        "use": "sig",
    }


def test_a_rotated_pool_key_is_picked_up_by_one_refresh(pool: Pool, alice: tuple[str, dict[str, str]]) -> None:
    jwks = JwksServer([public_jwk(pool_private_key(), POOL_KID)])
    try:
        verifier = CognitoVerifier(pool.settings(jwks.url), refresh_cooldown_seconds=0)
        assert verifier.verify(alice[1]["IdToken"]).principal == alice[0]
        new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        rotated = resign(alice[1]["IdToken"], key=new_key, kid="rotated-1")
        with pytest.raises(TokenRejected, match="unknown_key"):
            verifier.verify(rotated)
        jwks.keys = [*jwks.keys, public_jwk(new_key, "rotated-1")]
        assert verifier.verify(rotated).principal == alice[0]
        # A JWKS key of another type under the token's kid is not used for RS256.
        jwks.keys = [{"kty": "oct", "kid": "hmac-1", "k": b64(b"k" * 32)}]
        with pytest.raises(TokenRejected, match="key_type"):
            verifier.verify(resign(alice[1]["IdToken"], key=new_key, kid="hmac-1"))
    finally:
        jwks.close()


def test_unreachable_keys_fail_the_invocation_instead_of_denying(
    pool: Pool, alice: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()
    with pytest.raises(KeysUnavailable):
        CognitoVerifier(pool.settings(f"http://127.0.0.1:{port}/jwks.json")).verify(alice[1]["IdToken"])
    for name, value in pool.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CONDUCTOR_COGNITO_JWKS_URL", f"http://127.0.0.1:{port}/jwks.json")
    authorizer.verifier_for.cache_clear()
    try:
        with pytest.raises(KeysUnavailable):  # API Gateway answers 500; the authorizer's error alarm counts it
            invoke(connect_event(token=alice[1]["IdToken"]))
    finally:
        authorizer.verifier_for.cache_clear()


# --- settings and logs ------------------------------------------------------------------------------


def test_settings_from_the_environment() -> None:
    issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbC123"
    settings = CognitoSettings.from_env(
        {"CONDUCTOR_COGNITO_ISSUER": issuer, "CONDUCTOR_COGNITO_CLIENT_IDS": " ios1 ,web2,, "}
    )
    assert settings.client_ids == frozenset({"ios1", "web2"})
    assert settings.jwks_url == f"{issuer}/.well-known/jwks.json"
    with pytest.raises(ValueError, match="CONDUCTOR_COGNITO_ISSUER"):
        CognitoSettings.from_env({"CONDUCTOR_COGNITO_CLIENT_IDS": "ios1"})
    with pytest.raises(ValueError, match="app client id"):
        CognitoSettings.from_env({"CONDUCTOR_COGNITO_ISSUER": issuer, "CONDUCTOR_COGNITO_CLIENT_IDS": ""})
    with pytest.raises(ValueError, match="trailing"):
        CognitoSettings.of(issuer + "/", ["ios1"])


def test_an_unknown_auth_mode_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_AUTH_MODE", "none")
    with pytest.raises(RuntimeError, match="CONDUCTOR_AUTH_MODE"):
        invoke(connect_event(token="x"))


class CapturedLines(logging.Handler):
    """The authorizer's log lines as Lambda prints them (Powertools JSON, every extra key)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(authorizer.logger.registered_formatter)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_tokens_are_never_logged(
    cognito_env: Pool, alice: tuple[str, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    captured = CapturedLines()
    level = authorizer.logger.log_level
    authorizer.logger.addHandler(captured)
    authorizer.logger.setLevel("DEBUG")
    try:
        tokens = alice[1]
        bad = forged(tokens)
        sent = [tokens["IdToken"], tokens["AccessToken"], bad["expired"](), bad["wrong-audience"](), bad["alg-none"]()]
        for token in sent:
            invoke(connect_event(header=f"Bearer {token}"))
            invoke(connect_event(token=token))
    finally:
        authorizer.logger.removeHandler(captured)
        authorizer.logger.setLevel(level)
    logged = "\n".join(captured.lines) + caplog.text
    reasons = [json.loads(line).get("reason") for line in captured.lines]
    assert reasons.count("expired") == 2 and reasons.count("audience") == 2 and reasons.count("algorithm") == 2
    assert sum("Connect allowed" in line for line in captured.lines) == 4
    for token in sent:
        for part in token.split("."):
            if part:
                assert part not in logged
