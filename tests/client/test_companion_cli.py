"""``voiceide-client companion`` from the command line, against the fake conductor and a stand-in
sessions API: the session is checked before connecting (an unknown id is refused, never joined as
a new empty session), the workspace must be a folder, the session's tools run until it ends, and a
connection taken over by another one stops in one line without reconnecting."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shared.wire.protocol import ErrorCode, ErrorPayload
from voiceide_client.command_line import cli
from voiceide_client.companion.device import companion_device
from voiceide_client.companion.session import TAKEN_OVER, Companion
from voiceide_client.connection.link import scaled_backoff

from .fake_conductor import FakeConductor, async_test

FAST = scaled_backoff(0.01)
SESSION = "0b5f6f64-8c43-4c0e-9a64-9d0c2f6e2a11"
UNKNOWN = "7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918"
TAKEN_OVER_MESSAGE = "another connection took this session over: this one hears nothing more of it"


@dataclass
class StandInApi:
    """A sessions API on a free port that knows the sessions in ``known``."""

    known: set[str] = field(default_factory=set)
    asked: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sessions"


@pytest.fixture
def api() -> Iterator[StandInApi]:
    stand_in = StandInApi(known={SESSION})

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            stand_in.asked.append(self.path)
            session_id = self.path.split("?")[0].removeprefix("/sessions/")
            if session_id in stand_in.known:
                status, body = 200, {"session": {"id": session_id, "status": "idle"}, "transcript": []}
            else:
                status, body = 404, {"error": {"code": "not_found", "message": "no such session"}}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


def argv_for(fake: FakeConductor, api: StandInApi, workspace: Path, session: str = SESSION) -> list[str]:
    return [
        "companion", "--url", fake.url, "--sessions-url", api.url, "--session", session,
        "--workspace", str(workspace), "--state-dir", str(workspace.parent / "state"),
    ]  # fmt: skip


@async_test
async def test_an_unknown_session_is_refused_in_one_line_before_connecting(tmp_path: Path, api: StandInApi) -> None:
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor() as fake:
        argv = argv_for(fake, api, tmp_path, UNKNOWN)
        code = await cli.run(argv, stdin=io.StringIO(), stdout=out, stderr=err, backoff=FAST)
    assert code == 6 and fake.handshakes == 0 and out.getvalue() == ""
    assert err.getvalue() == (
        f"voiceide-client: --session {UNKNOWN}: no session of yours has this id (check the id, or use --latest)\n"
    )
    assert api.asked == [f"/sessions/{UNKNOWN}?limit=1"]


def test_a_workspace_that_is_a_file_is_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_text("x\n")
    for workspace, why in ((plain, f"{plain} is not a folder"), (tmp_path / "nowhere", "no such folder")):
        argv = ["companion", "--url", "ws://127.0.0.1:9/", "--session", SESSION, "--workspace", str(workspace)]
        with pytest.raises(SystemExit) as exited:
            asyncio.run(cli.run(argv, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()))
        assert exited.value.code == 2
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and why in lines[0]


@async_test
async def test_the_command_runs_the_sessions_tools_until_the_session_ends(tmp_path: Path, api: StandInApi) -> None:
    (tmp_path / "README.md").write_text("# App\n")
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor() as fake:
        argv = argv_for(fake, api, tmp_path)
        running = asyncio.create_task(cli.run(argv, stdin=io.StringIO(), stdout=out, stderr=err, backoff=FAST))
        session = fake.session(SESSION)
        await fake.wait_until(lambda: session.connection is not None)
        read = await session.call("editor.readFile", {"path": "README.md"})
        await session.send(ErrorPayload(code=str(ErrorCode.SESSION_ENDED), message="ended"), seq=False)
        assert session.connection is not None
        await session.connection.ws.close(1000)
        code = await asyncio.wait_for(running, 5)
    assert code == 5 and json.loads(read.result or "")["text"] == "# App\n"
    assert api.asked == [f"/sessions/{SESSION}?limit=1"]
    shown = out.getvalue()
    assert f"on session {SESSION}" in shown and "no .voiceide.toml" in shown
    assert '→ tool editor.readFile {"path": "README.md"}' in shown and "← result editor.readFile" in shown


@async_test
async def test_a_companion_taken_over_stops_and_never_reconnects(tmp_path: Path) -> None:
    device = companion_device(tmp_path, display=True, machine="test-machine")
    async with FakeConductor() as fake:
        session = fake.session(SESSION)
        async with Companion(fake.url, SESSION, tmp_path, device=device, backoff=FAST) as companion:
            running = asyncio.create_task(companion.run())
            await session.send(ErrorPayload(code=str(ErrorCode.TAKEN_OVER), message=TAKEN_OVER_MESSAGE), seq=False)
            assert session.connection is not None
            await session.connection.ws.close(1000)
            assert await asyncio.wait_for(running, 5) == TAKEN_OVER
        assert fake.handshakes == 1 and companion.client.reconnect_attempts == 0
    assert companion.taken_over == TAKEN_OVER_MESSAGE


@async_test
async def test_the_command_says_it_was_taken_over_in_one_line_and_exits(tmp_path: Path, api: StandInApi) -> None:
    workspace = tmp_path / "app"
    workspace.mkdir()
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor() as fake:
        argv = [*argv_for(fake, api, workspace), "--name", "Mac — app"]
        running = asyncio.create_task(cli.run(argv, stdin=io.StringIO(), stdout=out, stderr=err, backoff=FAST))
        session = fake.session(SESSION)
        async with asyncio.timeout(5):
            while "ready: " not in out.getvalue():  # connected: its sessionStart answered
                await asyncio.sleep(0.02)
        await session.send(ErrorPayload(code=str(ErrorCode.TAKEN_OVER), message=TAKEN_OVER_MESSAGE), seq=False)
        assert session.connection is not None
        await session.connection.ws.close(1000)
        code = await asyncio.wait_for(running, 5)
        assert fake.handshakes == 1
    assert code == 5
    said = out.getvalue() + err.getvalue()
    assert err.getvalue() == "voiceide-client: another connection took this session over as Mac — app: stopping\n"
    assert "taken_over" not in said and "reconnect" not in said and "closed by the conductor" not in said


@async_test
async def test_a_companion_refused_as_a_fifth_device_never_says_ready(tmp_path: Path, api: StandInApi) -> None:
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor() as fake:
        fake.full = True
        argv = argv_for(fake, api, tmp_path)
        code = await asyncio.wait_for(cli.run(argv, stdin=io.StringIO(), stdout=out, stderr=err, backoff=FAST), 5)
    assert code == 5 and fake.handshakes == 1  # never tries again on its own
    assert "ready" not in out.getvalue()
    assert err.getvalue().splitlines() == [
        "voiceide-client: the session already has four devices: close one and start the companion again"
    ]
