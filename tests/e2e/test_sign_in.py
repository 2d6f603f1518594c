"""Sign-in end to end: ``LocalStack(auth="cognito")``, the deployed authorizer in front of ``$connect``,
the client stub signing in to the local user pool, and ``voiceide-conductor local --auth cognito``.

The stack is this module's own (the package's stack has no authorizer); its user pool lives in
the stack's moto server, and the authorizer verifies tokens against the JWKS that server serves.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from conductor_local.cognito.user_pool import LocalUserPool, add_user
from conductor_local.stack import LocalStack
from tests.e2e.conftest import (
    HANDSHAKE_WAIT_S,
    STACK_ENV,
    TURN_TIMEOUT_S,
    async_test,
    client_for,
    session_store,
)
from voiceide_client.connection.link import ConductorUnavailable
from voiceide_client.connection.sign_in import CognitoSignIn

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SECOND_USER = ("ada", "Second-user-1")


@pytest.fixture(scope="module")
def auth_stack() -> Iterator[LocalStack]:
    with LocalStack(port=0, quiet=True, env=STACK_ENV, auth="cognito") as local:
        assert local.user_pool is not None
        add_user(local.cognito_client(), local.user_pool.user_pool_id, *SECOND_USER)
        yield local


def pool_of(stack: LocalStack) -> LocalUserPool:
    assert stack.user_pool is not None
    return stack.user_pool


def sign_in_as(stack: LocalStack, username: str | None = None, password: str | None = None) -> CognitoSignIn:
    pool = pool_of(stack)
    return CognitoSignIn(
        pool.client_id, username or pool.username, password or pool.password, endpoint_url=pool.endpoint
    )


async def handshake_status(url: str, headers: dict[str, str] | None = None) -> int:
    """The HTTP status of a raw WebSocket handshake (101 when it opened)."""
    try:
        async with connect(url, additional_headers=headers, open_timeout=HANDSHAKE_WAIT_S):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


@async_test
async def test_a_signed_in_client_completes_a_turn_as_its_user(auth_stack: LocalStack) -> None:
    sign_in = sign_in_as(auth_stack)
    async with client_for(auth_stack, handshake_headers=sign_in.headers) as client:
        turn = await client.say("hello", timeout=TURN_TIMEOUT_S)

    assert turn.completed and turn.finals == ["You said: hello"]
    state = await asyncio.to_thread(session_store(auth_stack).load, client.session_id)
    assert state is not None and state.principal == pool_of(auth_stack).test_user_sub


@async_test
async def test_another_user_is_refused_a_session_bound_to_someone_else(auth_stack: LocalStack) -> None:
    session_id = str(uuid.uuid4())
    owner = sign_in_as(auth_stack)
    async with client_for(auth_stack, session_id, handshake_headers=owner.headers) as client:
        await client.say("mine", timeout=TURN_TIMEOUT_S)

    other = sign_in_as(auth_stack, *SECOND_USER)
    other_headers = await other.headers()
    assert await handshake_status(auth_stack.session_url(session_id), dict(other_headers)) == 403
    # the owner gets back in, and the other user has sessions of their own
    assert await handshake_status(auth_stack.session_url(session_id), dict(await owner.headers())) == 101
    assert await handshake_status(auth_stack.session_url(str(uuid.uuid4())), dict(other_headers)) == 101


@async_test
async def test_no_token_is_401_and_a_bad_token_is_403(auth_stack: LocalStack) -> None:
    url = auth_stack.session_url(str(uuid.uuid4()))
    token = (await sign_in_as(auth_stack).headers())["Authorization"].removeprefix("Bearer ")
    header, payload, signature = token.split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}{'AAAA' if signature[-4:] != 'AAAA' else 'BBBB'}"

    assert await handshake_status(url) == 401
    assert await handshake_status(url, {"Authorization": "Bearer "}) == 401
    assert await handshake_status(url, {"Authorization": f"Bearer {tampered}"}) == 403
    assert await handshake_status(url, {"Authorization": "Bearer not-a-jwt"}) == 403
    assert await handshake_status(url, {"Authorization": f"Bearer {token}"}) == 101
    assert await handshake_status(f"{url}&token={token}") == 101  # the query string, for clients without headers


@async_test
async def test_a_client_without_sign_in_cannot_connect(auth_stack: LocalStack) -> None:
    with pytest.raises(ConductorUnavailable, match="HTTP 401"):
        await client_for(auth_stack).connect()


@async_test
async def test_the_banner_of_local_auth_cognito_prints_a_sign_in_command_that_works(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "conductor_local",
        "local",
        "--auth",
        "cognito",
        "--port",
        "0",
        "--quiet",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    try:
        banner = await read_banner(server)
        command = next(line for line in banner if line.startswith("  try it: ")).removeprefix("  try it: ")
        command = command.split("    (Ctrl-C")[0]
        argv = shlex.split(command)
        # The client script installed beside the Python running the conductor (whichever virtualenv),
        # shown relative to the checkout when it is inside it.
        script = Path(sys.executable).parent / "voiceide-client"
        assert REPO / argv[0] == script
        assert Path(argv[0]).is_absolute() is not script.is_relative_to(REPO)
        assert any(line.startswith("  test user: dev / password ") for line in banner)

        client = await asyncio.create_subprocess_exec(
            *argv,
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(client.communicate(b"hello\n"), 20)
    finally:
        server.send_signal(signal.SIGINT)
        await asyncio.wait_for(server.wait(), 15)

    assert client.returncode == 0, err.decode()
    assert "assistant: You said: hello" in out.decode().splitlines()
    assert server.returncode == 0


async def read_banner(server: asyncio.subprocess.Process) -> list[str]:
    """The conductor's start-up lines, up to the ``try it`` line (bounded)."""
    assert server.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(20):
        while not lines or not lines[-1].startswith("  try it: "):
            line = await server.stdout.readline()
            if not line:
                assert server.stderr is not None
                raise AssertionError(f"the conductor exited: {(await server.stderr.read()).decode()}")
            lines.append(line.decode().rstrip("\n"))
    return lines
