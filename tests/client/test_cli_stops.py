"""The conductor stops a client: another connection took the session over (``taken_over``), or the
session already has four devices (``too_many_devices``). The client says so in one line, does not
reconnect, and ends, with no Ctrl-D needed."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import TextIO

import pytest

from shared.wire.protocol import ErrorCode, ErrorPayload
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_SERVER_ERROR
from voiceide_client.connection.link import Link, scaled_backoff
from voiceide_client.conversation.client import ConductorClient

from .fake_conductor import FakeConductor, FakeSession, async_test, speak

FAST = scaled_backoff(0.01)
TAKEN_OVER_LINE = "another connection took this session over: stopping"
REFUSED_LINE = "not added to the session: a session has at most 4 devices at once; stopping"


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


class TypedLines(io.TextIOWrapper):
    """A pipe's read end that says it is a terminal: a person typing, who never presses Ctrl-D."""

    def isatty(self) -> bool:
        return True


def _typing() -> tuple[TextIO, TextIO]:
    read_end, write_end = os.pipe()
    return TypedLines(io.FileIO(read_end, "r"), encoding="utf-8"), os.fdopen(write_end, "w", encoding="utf-8")


def _taken_over() -> ErrorPayload:
    return ErrorPayload(code=str(ErrorCode.TAKEN_OVER), message="another connection took this session over")


async def _answer_then_get_taken_over(session: FakeSession, text: str) -> None:
    await session.call_nowait("convo.setState", {"state": "thinking"})
    if text == "hello":
        await speak(session, "Hi.")
        await session.call_nowait("convo.setState", {"state": "idle"})
        return
    await session.send(_taken_over(), seq=False)  # mid-turn: the conductor closes this connection next
    if session.connection is not None:
        await session.connection.ws.close(1000)


@async_test
async def test_a_client_taken_over_says_so_once_and_ends_without_ctrl_d() -> None:
    stdin, typed = _typing()
    out, err = io.StringIO(), io.StringIO()
    try:
        async with FakeConductor(_answer_then_get_taken_over) as fake:
            argv = ["--url", fake.url, "--no-partials", "--speech-rate", "0"]
            run = asyncio.create_task(cli.run(argv, stdin=stdin, stdout=out, stderr=err, backoff=FAST))
            typed.write("hello\n")
            typed.flush()
            await fake.wait_until(lambda: "🔊 Hi." in out.getvalue())
            typed.write("and now\n")
            typed.flush()
            code = await asyncio.wait_for(run, 5)  # the input is still open: no Ctrl-D
            connections = len(fake.connections)
    finally:
        typed.close()
        stdin.close()

    assert code == EXIT_SERVER_ERROR
    assert connections == 1  # never reconnected
    printed = out.getvalue().splitlines() + err.getvalue().splitlines()
    assert printed.count(TAKEN_OVER_LINE) == 1
    assert not any("taken_over" in line or "ws_error" in line or "reconnect" in line for line in printed), printed


@async_test
async def test_the_library_stops_at_once_on_taken_over_and_finishes_the_open_turn() -> None:
    progress: list[str] = []
    async with FakeConductor(_answer_then_get_taken_over) as fake:
        client = ConductorClient(fake.url, backoff=FAST, on_progress=progress.append)
        await client.connect()
        turn = await client.say("and now", timeout=5)
        await client.wait_until(lambda: client.link is Link.CLOSED)
        await asyncio.sleep(0.2)  # room for a reconnect that must not happen
        await client.close()

    assert client.closed_by_server == ErrorCode.TAKEN_OVER
    assert client.closed_message == "another connection took this session over"
    assert not turn.completed and [error.code for error in turn.errors] == [ErrorCode.TAKEN_OVER]
    assert client.connections == 1 and client.reconnect_attempts == 0 and len(fake.connections) == 1
    assert progress == [TAKEN_OVER_LINE]


@async_test
async def test_a_refused_fifth_device_says_one_line_and_stops_with_no_ready_line() -> None:
    stdin, typed = _typing()
    out, err = io.StringIO(), io.StringIO()
    try:
        async with FakeConductor() as fake:
            fake.answers_session_start = False  # the conductor answers this sessionStart with the refusal
            argv = ["--url", fake.url, "--no-partials"]
            run = asyncio.create_task(cli.run(argv, stdin=stdin, stdout=out, stderr=err, backoff=FAST))
            await fake.wait_until(lambda: bool(fake.connections) and fake.connections[0].session_start is not None)
            session = fake.session(fake.connections[0].session_id or "")
            refusal = ErrorPayload(
                code=str(ErrorCode.TOO_MANY_DEVICES), message="a session has at most 4 devices at once"
            )
            await session.send(refusal, seq=False)  # the connection is left open, as the conductor does
            code = await asyncio.wait_for(run, 8)  # the input is still open: no Ctrl-D
            await fake.wait_until(lambda: session.connection is None)  # the client closed it
            connections = len(fake.connections)
    finally:
        typed.close()
        stdin.close()

    assert code == EXIT_SERVER_ERROR
    assert connections == 1
    printed = out.getvalue().splitlines() + err.getvalue().splitlines()
    assert printed == [REFUSED_LINE]  # no "type what you would say", no error line besides it


@async_test
async def test_connect_returns_at_once_when_refused() -> None:
    async with FakeConductor() as fake:
        fake.answers_session_start = False
        client = ConductorClient(fake.url, backoff=FAST, ready_timeout=30)

        async def refuse() -> None:
            await fake.wait_until(lambda: bool(fake.connections) and fake.connections[0].session_start is not None)
            session = fake.session(client.session_id)
            await session.send(ErrorPayload(code=str(ErrorCode.TOO_MANY_DEVICES), message="full"), seq=False)

        refusing = asyncio.create_task(refuse())
        await asyncio.wait_for(client.connect(), 5)  # not the 30 s ready_timeout
        await refusing
        assert client.link is Link.CLOSED and client.closed_by_server == ErrorCode.TOO_MANY_DEVICES
        await client.close()
