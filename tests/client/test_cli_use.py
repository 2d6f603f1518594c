"""``voiceide-client`` as a person meets it: bad input, a conductor not up yet, lost, refusing, or erring."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from conductor_local.cli import client_command
from shared.wire.protocol import ErrorPayload
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import (
    EXIT_CODES,
    EXIT_OK,
    EXIT_SERVER_ERROR,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    build_parser,
)
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.connection.local_stub import OFFLINE_REPLY
from voiceide_client.conversation.client import ConductorClient

from .fake_conductor import FakeConductor, FakeSession, async_test, speak, standard_turn
from .test_connect import unused_port

FAST = [0.01] * 5


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


class FakeConductorOn(FakeConductor):
    """The fake conductor on a port chosen beforehand (to come up while a client is retrying)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    async def __aenter__(self) -> FakeConductorOn:
        self._server = await serve(self._handle, "127.0.0.1", self.port, process_request=self._process_request)
        return self


class RefusingConductor(FakeConductor):
    """Answers every handshake as the conductor's ``$connect`` does a bad request."""

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        self.handshakes += 1
        body = b'{"message":"sessionId must be a UUID v4"}'
        return Response(HTTPStatus.BAD_REQUEST, "Bad Request", Headers({"Content-Type": "application/json"}), body)


class Lines(io.StringIO):
    """stderr that wakes a waiter when a line containing ``text`` is written."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = asyncio.Event()

    def write(self, s: str) -> int:
        if self.text in s:
            self.seen.set()
        return super().write(s)


def _script(tmp_path: Path, text: str = "hello\n") -> Path:
    path = tmp_path / "script.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--url", "http://127.0.0.1:8080"], "use ws://127.0.0.1:8080"),
        (["--url", "https://abc.execute-api.eu-west-1.amazonaws.com/dev"], "use wss://abc.execute-api"),
        (["--url", "127.0.0.1:8080"], "has no scheme: use ws://127.0.0.1:8080"),
        (["--url", "ws://127.0.0.1:70000"], "port 70000 is not in the range 1-65535"),
        (["--url", "ws://127.0.0.1:0/"], "port 0 is not in the range 1-65535"),
        (["--url", "ws://127.0.0.1:8080/?sessionId=abc"], "sessionId must be a UUID v4"),
        (["--url", "ws://127.0.0.1:8080", "--timeout", "abc"], "--timeout: 'abc' is not a number of seconds"),
        (["--url", "ws://127.0.0.1:8080", "--timeout", "-1"], "greater than 0"),
        (["--url", "ws://127.0.0.1:8080", "--barge-in-after", "x"], "'x' is not a whole number"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(argv: list[str], expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "voiceide_client", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == EXIT_USAGE == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("voiceide-client: ")
    assert expected in lines[0]


def test_help_documents_every_exit_code() -> None:
    text = build_parser().format_help()
    for code, meaning in EXIT_CODES.items():
        assert f"  {code}  {meaning}" in text


@async_test
async def test_the_first_connection_is_retried_until_the_conductor_comes_up(tmp_path: Path) -> None:
    port = unused_port()
    err = Lines("retrying in")
    out = io.StringIO()
    argv = ["--url", f"ws://127.0.0.1:{port}", "--script", str(_script(tmp_path)), "--timeout", "5"]
    run = asyncio.create_task(cli.run(argv, stdout=out, stderr=err, backoff=[0.2] * 5))
    await asyncio.wait_for(err.seen.wait(), 5)
    async with FakeConductorOn(port) as fake:
        fake.turn = standard_turn("Up now.")
        code = await asyncio.wait_for(run, 10)

    assert code == EXIT_OK, err.getvalue()
    notices = err.getvalue().splitlines()
    assert notices[0] == (
        f"conductor not reachable at ws://127.0.0.1:{port}: nothing is listening (connection refused); "
        "is `make run` running? retrying in 0.2 s (1/5)"
    )
    assert notices[-1] == f"connected to ws://127.0.0.1:{port}"
    assert "assistant: Up now." in out.getvalue().splitlines()


@async_test
async def test_a_refused_handshake_is_not_retried_and_shows_the_servers_reason(tmp_path: Path) -> None:
    err = io.StringIO()
    async with RefusingConductor() as fake:
        argv = ["--url", fake.url, "--script", str(_script(tmp_path)), "--quiet"]
        code = await cli.run(argv, stdout=io.StringIO(), stderr=err, backoff=FAST)
        handshakes = fake.handshakes

    assert code == EXIT_UNREACHABLE
    assert handshakes == 1
    lines = err.getvalue().splitlines()
    assert lines[-1].startswith(
        f"voiceide-client: conductor not reachable at {fake.url}: the server refused the connection: "
        "HTTP 400 Bad Request (sessionId must be a UUID v4)"
    )


@async_test
async def test_a_turn_that_ends_in_a_server_error_exits_5_and_quiet_still_prints_the_error(tmp_path: Path) -> None:
    async def limited(session: FakeSession, text: str) -> None:
        if text == "again":
            await session.send(ErrorPayload(code="rate_limited", message="too many turns; wait a few seconds"))
        else:
            await speak(session, "Sure.")
        await session.call_nowait("convo.setState", {"state": "idle"})

    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor(limited) as fake:
        argv = ["--url", fake.url, "--script", str(_script(tmp_path, "hello\nagain\nbye\n")), "--quiet"]
        code = await cli.run(argv, stdout=out, stderr=err, backoff=FAST)
        session = next(iter(fake.sessions.values()))

    assert code == EXIT_SERVER_ERROR == 5
    assert session.transcripts() == ["hello", "again", "bye"]  # the script goes on
    assert out.getvalue() == ""
    assert err.getvalue().splitlines() == [
        "[error] rate_limited: too many turns; wait a few seconds",
        "voiceide-client: the conductor answered a turn with an error (exit code 5)",
    ]


@async_test
async def test_reconnect_progress_and_the_conductor_being_back() -> None:
    notices: list[str] = []
    async with FakeConductor() as fake:
        client = ConductorClient(fake.url, backoff=scaled_backoff(0.01), on_progress=notices.append)
        await client.connect()
        fake.refuse_handshakes = 2
        await client.drop_connection()
        await client.wait_until(lambda: client.connections == 2)
        await client.close()

    assert notices[0] == "connection to the conductor lost; reconnecting in 0.01 s (1/5)"
    assert notices[1] == (
        "reconnect failed (the server refused the connection: HTTP 503 Service Unavailable (busy)); "
        "retrying in 0.02 s (2/5)"
    )
    assert notices[2].endswith("retrying in 0.04 s (3/5)")
    assert notices[3] == "the conductor is back (reconnected on attempt 3/5)"


@async_test
async def test_the_cli_says_when_the_offline_stub_takes_over() -> None:
    read_end, write_end = os.pipe()
    out, err = io.StringIO(), Lines("offline stub")
    with os.fdopen(read_end, encoding="utf-8") as stdin, os.fdopen(write_end, "w", encoding="utf-8") as typed:
        async with FakeConductor() as fake:
            argv = ["--url", fake.url, "--timeout", "5"]
            client_run = asyncio.create_task(cli.run(argv, stdin=stdin, stdout=out, stderr=err, backoff=FAST))
            await fake.wait_until(lambda: bool(fake.connections) and fake.connections[0].session_start is not None)
            fake.refuse_handshakes = 10
            await fake.connections[0].ws.close()
            try:
                await asyncio.wait_for(err.seen.wait(), 5)
            except TimeoutError:
                raise AssertionError(err.getvalue()) from None
        typed.write("hello\n")
        typed.close()
        code = await asyncio.wait_for(client_run, 10)

    assert code == EXIT_UNREACHABLE
    notices = err.getvalue().splitlines()
    assert notices[0] == "connection to the conductor lost; reconnecting in 0.01 s (1/5)"
    assert "conductor unreachable after 5 attempts: the offline stub answers from now on" in notices
    assert notices[-1] == "voiceide-client: lost the conductor; answers came from the offline stub"
    assert f"assistant: {OFFLINE_REPLY}" in out.getvalue().splitlines()


def test_the_banner_prints_a_client_command_that_exists_from_where_the_stack_was_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Path(sys.executable).parent / "voiceide-client"
    assert script.is_file()  # installed next to this Python, as `make run` does
    monkeypatch.chdir(script.parent.parent.parent)
    assert client_command() == str(script.relative_to(script.parent.parent.parent))
    monkeypatch.chdir(tmp_path)
    assert client_command() == str(script)
