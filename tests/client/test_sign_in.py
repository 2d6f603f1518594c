"""Signing in: Cognito ``InitiateAuth`` against a moto server, the ID token on every handshake.

The user pool is the local stack's (``conductor_local.cognito.user_pool``) on a moto server of its own; the
conductor is the fake one, which keeps each handshake's request, so the headers sent are read
as the server received them.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from conductor_local.cognito.user_pool import LocalUserPool, add_user, create_user_pool
from conductor_local.dynamodb.server import LocalMotoServer
from shared.wire.protocol import ErrorCode
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK, EXIT_SIGN_IN_FAILED, SIGN_IN_ENV
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.connection.sign_in import CognitoSignIn, SignInError, token_expiry
from voiceide_client.conversation.client import ConductorClient

from .fake_conductor import FakeConductor, async_test
from .test_connect import unused_port

REGION = "us-east-1"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server = LocalMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _admin(endpoint: str) -> Any:
    return boto3.client(
        "cognito-idp",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


@pytest.fixture
def pool(moto_endpoint: str) -> LocalUserPool:
    """A fresh pool per test, so a test changing a password affects no other."""
    return create_user_pool(_admin(moto_endpoint), moto_endpoint, REGION)


class FakeClock:
    """Seconds since the epoch, moved by hand (``exp`` is compared against it)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _sign_in(pool: LocalUserPool, **kwargs: Any) -> CognitoSignIn:
    return CognitoSignIn(pool.client_id, pool.username, pool.password, endpoint_url=pool.endpoint, **kwargs)


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _authorization(fake: FakeConductor, index: int) -> str | None:
    request = fake.connections[index].ws.request
    assert request is not None
    return request.headers.get("Authorization")


def test_sign_in_gets_the_users_id_token_for_the_app_client(pool: LocalUserPool) -> None:
    sign_in = _sign_in(pool)

    token = sign_in.sign_in()

    claims = _claims(token)
    assert claims["token_use"] == "id"
    assert claims["aud"] == pool.client_id
    assert claims["sub"] == pool.test_user_sub
    assert claims["iss"] == pool.issuer
    assert token_expiry(token) == claims["exp"]
    assert sign_in.id_token() == token  # still valid: no second sign-in
    assert sign_in.sign_ins == 1
    assert pool.password not in repr(sign_in) and token not in repr(sign_in)


def test_the_sign_in_call_is_unsigned(pool: LocalUserPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """InitiateAuth is public: no AWS credentials anywhere, and it still works."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")

    assert _claims(_sign_in(pool).sign_in())["sub"] == pool.test_user_sub


@pytest.mark.parametrize(
    ("username", "password", "expected"),
    [
        ("dev", "wrong-Password-1", "sign-in refused for 'dev': incorrect username or password"),
        ("nobody", "wrong-Password-1", "sign-in refused for 'nobody': incorrect username or password"),
    ],
)
def test_bad_credentials_are_refused_in_one_line(
    pool: LocalUserPool, username: str, password: str, expected: str
) -> None:
    sign_in = CognitoSignIn(pool.client_id, username, password, endpoint_url=pool.endpoint)
    with pytest.raises(SignInError) as refused:
        sign_in.sign_in()
    assert str(refused.value) == expected
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_an_unknown_app_client_or_an_unreachable_endpoint_is_said_plainly(pool: LocalUserPool) -> None:
    with pytest.raises(SignInError, match="no app client 'not-a-client'"):
        CognitoSignIn("not-a-client", pool.username, pool.password, endpoint_url=pool.endpoint).sign_in()
    nowhere = f"http://127.0.0.1:{unused_port()}"
    with pytest.raises(SignInError, match=f"could not reach Cognito at {nowhere}"):
        CognitoSignIn(pool.client_id, pool.username, pool.password, endpoint_url=nowhere).sign_in()


@async_test
async def test_every_handshake_carries_the_id_token_reconnects_included(pool: LocalUserPool) -> None:
    sign_in = _sign_in(pool)
    async with (
        FakeConductor() as fake,
        ConductorClient(fake.url, handshake_headers=sign_in.headers, backoff=scaled_backoff(0.01)) as client,
    ):
        await fake.wait_until(lambda: len(fake.connections) == 1)
        await client.drop_connection()
        await client.wait_connected()
        await fake.wait_until(lambda: len(fake.connections) == 2)
        result = await client.say("hello")

    assert result.completed
    first, second = _authorization(fake, 0), _authorization(fake, 1)
    assert first is not None and first.startswith("Bearer ")
    assert _claims(first.removeprefix("Bearer "))["sub"] == pool.test_user_sub
    assert second == first  # the token was still good: no new sign-in
    assert sign_in.sign_ins == 1


@async_test
async def test_a_reconnect_signs_in_again_when_the_token_is_within_a_minute_of_expiry(pool: LocalUserPool) -> None:
    clock = FakeClock(0.0)
    sign_in = _sign_in(pool, clock=clock)
    token = await asyncio.to_thread(sign_in.sign_in)
    exp = token_expiry(token)
    assert exp is not None
    clock.now = exp - 61  # more than a minute left: the token is used as it is
    async with (
        FakeConductor() as fake,
        ConductorClient(fake.url, handshake_headers=sign_in.headers, backoff=scaled_backoff(0.01)) as client,
    ):
        await fake.wait_until(lambda: len(fake.connections) == 1)
        clock.now = exp - 59  # now less than a minute is left
        await client.drop_connection()
        await client.wait_connected()
        await fake.wait_until(lambda: len(fake.connections) == 2)

    assert _authorization(fake, 0) == f"Bearer {token}"
    renewed = _authorization(fake, 1)
    assert renewed is not None and renewed != f"Bearer {token}"
    assert _claims(renewed.removeprefix("Bearer "))["sub"] == pool.test_user_sub
    assert sign_in.sign_ins == 2


@async_test
async def test_a_reconnect_whose_sign_in_is_refused_counts_as_a_failed_attempt(pool: LocalUserPool) -> None:
    clock = FakeClock(0.0)
    sign_in = _sign_in(pool, clock=clock)
    admin = _admin(pool.endpoint)
    async with (
        FakeConductor() as fake,
        ConductorClient(
            fake.url, handshake_headers=sign_in.headers, backoff=scaled_backoff(0.01), max_attempts=2
        ) as client,
    ):
        await fake.wait_until(lambda: len(fake.connections) == 1)
        await asyncio.to_thread(
            admin.admin_set_user_password,
            UserPoolId=pool.user_pool_id,
            Username=pool.username,
            Password="Changed-elsewhere-2",
            Permanent=True,
        )
        clock.now = float("inf")  # the token has expired: the next handshake must sign in again
        await client.drop_connection()
        await client.wait_until(lambda: client.offline, timeout=5)

    assert len(fake.connections) == 1  # no handshake without a token
    assert client.reconnect_attempts == 2
    assert client.error_codes == [ErrorCode.WS_ERROR, ErrorCode.RECONNECT_FAILED]
    assert "incorrect username or password" in client.errors[-1].payload.message


# ---- the command line ----------------------------------------------------------------------------


def _sign_in_args(pool: LocalUserPool, password: str | None = None) -> list[str]:
    return [
        "--username",
        pool.username,
        "--password",
        password or pool.password,
        "--client-id",
        pool.client_id,
        "--cognito-endpoint",
        pool.endpoint,
    ]


@async_test
async def test_the_cli_signs_in_and_never_shows_the_token(
    pool: LocalUserPool, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="voiceide_client")
    script = tmp_path / "script.txt"
    script.write_text("hello\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor() as fake:
        argv = ["--url", fake.url, "--script", str(script), "--timeout", "5", *_sign_in_args(pool)]
        code = await cli.run(argv, stdout=out, stderr=err)

    assert code == EXIT_OK, err.getvalue()
    header = _authorization(fake, 0)
    assert header is not None and header.startswith("Bearer ")
    token = header.removeprefix("Bearer ")
    assert _claims(token)["sub"] == pool.test_user_sub
    for shown in (out.getvalue(), err.getvalue(), caplog.text):
        assert token not in shown and pool.password not in shown


@async_test
async def test_the_cli_takes_the_sign_in_options_from_the_environment(
    pool: LocalUserPool, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for option, value in (
        ("username", pool.username),
        ("password", pool.password),
        ("client_id", pool.client_id),
        ("cognito_endpoint", pool.endpoint),
        ("region", REGION),
    ):
        monkeypatch.setenv(SIGN_IN_ENV[option], value)
    script = tmp_path / "script.txt"
    script.write_text("hello\n", encoding="utf-8")
    err = io.StringIO()
    async with FakeConductor() as fake:
        code = await cli.run(["--url", fake.url, "--script", str(script), "--quiet"], stderr=err)

    assert code == EXIT_OK, err.getvalue()
    header = _authorization(fake, 0)
    assert header is not None and _claims(header.removeprefix("Bearer "))["aud"] == pool.client_id


@async_test
async def test_a_second_user_signs_in_as_themselves(pool: LocalUserPool, tmp_path: Any) -> None:
    sub = await asyncio.to_thread(add_user, _admin(pool.endpoint), pool.user_pool_id, "ada", "Second-user-1")
    script = tmp_path / "script.txt"
    script.write_text("hello\n", encoding="utf-8")
    async with FakeConductor() as fake:
        argv = ["--url", fake.url, "--script", str(script), "--quiet", *_sign_in_args(pool)]
        argv[argv.index("--username") + 1] = "ada"
        argv[argv.index("--password") + 1] = "Second-user-1"
        assert await cli.run(argv) == EXIT_OK

    header = _authorization(fake, 0)
    assert header is not None
    assert sub != pool.test_user_sub and _claims(header.removeprefix("Bearer "))["sub"] == sub


@async_test
async def test_a_wrong_password_exits_with_one_clear_line_and_no_traceback(pool: LocalUserPool) -> None:
    async with FakeConductor() as fake:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "voiceide_client",
            "--url",
            fake.url,
            *_sign_in_args(pool, password="Not-the-password-9"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 8)

    assert proc.returncode == EXIT_SIGN_IN_FAILED
    assert stdout == b""
    assert stderr.decode().splitlines() == [
        "voiceide-client: sign-in refused for 'dev': incorrect username or password"
    ]
    assert fake.handshakes == 0  # never tried to connect without a token


@pytest.mark.parametrize(
    "argv",
    [
        ["--username", "dev", "--password", "x"],  # no --client-id
        ["--username", "dev", "--client-id", "c"],  # no password and stdin is not a terminal
        ["--password", "x", "--client-id", "c"],  # no --username
    ],
)
def test_incomplete_sign_in_options_are_a_usage_error(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SIGN_IN_ENV.values():
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exited:
        asyncio.run(cli.run(["--url", f"ws://127.0.0.1:{unused_port()}/", *argv], stdin=io.StringIO()))
    assert exited.value.code == 2
