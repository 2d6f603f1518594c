"""``voiceide-client sessions …``, ``--resume`` and the end of a session from the client's side,
against a stand-in sessions API (canned answers) and the fake conductor; the real API over the local
stack is driven in ``tests/e2e/test_sessions_api.py``."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shared.wire.protocol import ErrorCode, ErrorPayload
from voiceide_client.command_line import cli
from voiceide_client.command_line.sessions import entry_line
from voiceide_client.connection.link import Link, scaled_backoff
from voiceide_client.connection.sessions_api import (
    SessionsApi,
    SessionsApiError,
    normalize_sessions_url,
    sessions_url_for,
)
from voiceide_client.conversation.client import ConductorClient

from .fake_conductor import FakeConductor, FakeSession, async_test, standard_turn

FAST = scaled_backoff(0.01)
FIRST, SECOND = str(uuid.uuid4()), str(uuid.uuid4())


def session(session_id: str, title: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "id": session_id,
        "title": title,
        "createdAt": "2026-11-24T16:02:11.408Z",
        "lastActiveAt": "2026-11-24T16:31:52.013Z",
        "turns": 7,
        "status": "idle",
        "origin": "voice",
        "lastUtterance": "run the tests again",
        **extra,
    }


@dataclass
class StandInApi:
    """A sessions API on a free port answering from ``answers`` (``"METHOD /path"`` → (status, body))."""

    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sessions"


@pytest.fixture
def api() -> Iterator[StandInApi]:
    stand_in = StandInApi()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            stand_in.requests.append((self.command, self.path, dict(self.headers), body))
            path = self.path.split("?")[0]
            status, answer = stand_in.answers.get(f"{self.command} {path}", (404, {"message": "Not Found"}))
            data = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_POST = do_DELETE = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


def run_cli(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    """The CLI's exit code, stdout and stderr (usage errors exit as argparse does, on stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = asyncio.run(cli.run(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err, backoff=FAST))
        except SystemExit as exit:
            code = int(exit.code or 0)
    return code, out.getvalue(), err.getvalue()


# ---- URLs ------------------------------------------------------------------------------------------


def test_the_sessions_url_is_derived_from_the_websocket_url() -> None:
    assert sessions_url_for("ws://127.0.0.1:8080") == "http://127.0.0.1:8080/sessions"
    assert sessions_url_for(f"ws://127.0.0.1:8080/?sessionId={FIRST}") == "http://127.0.0.1:8080/sessions"
    assert sessions_url_for("wss://conductor.example.com/") == "https://conductor.example.com/sessions"
    with pytest.raises(ValueError, match="--sessions-url"):
        sessions_url_for("wss://abc123.execute-api.eu-west-1.amazonaws.com/prod")
    assert normalize_sessions_url("https://h.execute-api.eu-west-1.amazonaws.com") == (
        "https://h.execute-api.eu-west-1.amazonaws.com/sessions"
    )
    assert normalize_sessions_url("http://127.0.0.1:8080/sessions/") == "http://127.0.0.1:8080/sessions"
    with pytest.raises(ValueError):
        normalize_sessions_url("ws://127.0.0.1:8080")


def test_a_deployed_websocket_url_needs_the_sessions_url() -> None:
    code, _, err = run_cli("sessions", "list", "--url", "wss://abc.execute-api.eu-west-1.amazonaws.com/prod")
    assert code == 2 and "--sessions-url" in err
    code, _, err = run_cli("sessions", "list")
    assert code == 2 and "--url" in err


# ---- the commands --------------------------------------------------------------------------------


def test_list_prints_a_table_and_the_next_cursor(api: StandInApi) -> None:
    api.answers["GET /sessions"] = (200, {"sessions": [session(FIRST, "Fixing the login test"), session(SECOND, None)]})
    api.answers["GET /sessions"][1]["nextCursor"] = "abc"
    code, out, err = run_cli("sessions", "list", "--sessions-url", api.url, "--status", "idle", "--limit", "2")

    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "TURNS", "LAST", "ACTIVE", "(UTC)", "TITLE"]
    assert lines[1].split()[:5] == [FIRST, "idle", "7", "2026-11-24", "16:31"]
    assert lines[1].endswith("Fixing the login test")
    assert lines[2].endswith('(untitled) "run the tests again"')
    assert "--cursor abc" in lines[3]
    method, path, headers, _ = api.requests[0]
    assert (method, path) == ("GET", "/sessions?status=idle&limit=2")
    assert "Authorization" not in headers


def test_list_all_follows_the_cursor(api: StandInApi) -> None:
    pages = iter(
        [
            {"sessions": [session(FIRST, "one")], "nextCursor": "page2"},
            {"sessions": [session(SECOND, "two")], "nextCursor": None},
        ]
    )

    class Pages(dict[str, tuple[int, Any]]):
        def get(self, key: str, default: Any = None) -> Any:
            return (200, next(pages)) if key == "GET /sessions" else default

    api.answers = Pages()
    code, out, _ = run_cli("sessions", "list", "--all", "--url", f"ws://127.0.0.1:{api.port}")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == [FIRST, SECOND]
    assert [path for _, path, _, _ in api.requests] == ["/sessions", "/sessions?cursor=page2"]


def test_show_prints_the_transcript(api: StandInApi) -> None:
    transcript = [
        {"seq": 0, "at": None, "role": "user", "text": "open the login test"},
        {
            "seq": 1,
            "at": None,
            "role": "tool",
            "name": "editor.openFile",
            "arguments": {"path": "LoginTests.swift"},
            "callId": "c1",
            "outcome": "ok",
            "result": '{"opened":true}',
        },
        {"seq": 2, "at": None, "role": "assistant", "text": "It is open", "interrupted": True},
        {"seq": 3, "at": None, "role": "assistant", "text": "Anything else?", "interrupted": False},
    ]
    api.answers[f"GET /sessions/{FIRST}"] = (
        200,
        {"session": session(FIRST, "Login test"), "transcript": transcript, "nextCursor": None},
    )
    code, out, err = run_cli("sessions", "show", FIRST, "--sessions-url", api.url)
    assert code == 0, err
    assert out.splitlines()[0] == "Login test"
    assert out.splitlines()[2:] == [
        "you: open the login test",
        'tool editor.openFile {"path":"LoginTests.swift"} → ok: {"opened":true}',
        "assistant [interrupted; heard: 'It is open']",
        "assistant: Anything else?",
    ]


def test_rename_end_and_erase(api: StandInApi) -> None:
    api.answers[f"PATCH /sessions/{FIRST}"] = (200, session(FIRST, "New name"))
    api.answers[f"POST /sessions/{FIRST}/end"] = (200, session(FIRST, "New name", status="ended"))
    api.answers[f"DELETE /sessions/{FIRST}"] = (204, None)

    assert run_cli("sessions", "rename", FIRST, "New name", "--sessions-url", api.url)[:2] == (
        0,
        f"renamed {FIRST}: New name\n",
    )
    assert run_cli("sessions", "end", FIRST, "--sessions-url", api.url)[:2] == (0, f"ended {FIRST} (ended)\n")
    assert run_cli("sessions", "erase", FIRST, "--sessions-url", api.url)[:2] == (0, f"erased {FIRST}\n")
    rename = api.requests[0]
    assert rename[0] == "PATCH" and json.loads(rename[3]) == {"title": "New name"}
    assert rename[2]["Content-Type"] == "application/json"
    assert [(m, p) for m, p, _, _ in api.requests[1:]] == [
        ("POST", f"/sessions/{FIRST}/end"),
        ("DELETE", f"/sessions/{FIRST}"),
    ]


@pytest.mark.parametrize(
    ("status", "body", "exit_code", "message"),
    [
        (401, {"message": "Unauthorized"}, 4, "not signed in, or the sign-in expired"),
        (404, {"error": {"code": "not_found", "message": "no such session"}}, 6, "no such session (or not yours)"),
        (400, {"error": {"code": "bad_request", "message": "the title is too long"}}, 2, "the title is too long"),
        (500, {"error": {"code": "internal_error", "message": "boom (req-1)"}}, 5, "HTTP 500: boom (req-1)"),
    ],
)
def test_failures_are_one_clear_line(api: StandInApi, status: int, body: Any, exit_code: int, message: str) -> None:
    api.answers[f"PATCH /sessions/{FIRST}"] = (status, body)
    code, out, err = run_cli("sessions", "rename", FIRST, "x" * 61, "--sessions-url", api.url)
    assert code == exit_code and out == ""
    assert err.startswith("voiceide-client: ") and message in err and len(err.splitlines()) == 1


def test_an_unreachable_api_exits_3() -> None:
    code, _, err = run_cli("sessions", "list", "--sessions-url", "http://127.0.0.1:9/sessions")
    assert code == 3 and "not reachable" in err


def test_the_bearer_token_is_sent(api: StandInApi) -> None:
    api.answers["GET /sessions"] = (200, {"sessions": [], "nextCursor": None})
    with pytest.raises(SessionsApiError) as missing:
        SessionsApi(api.url, lambda: "tok").show(FIRST)
    assert SessionsApi(api.url, lambda: "tok").list() == {"sessions": [], "nextCursor": None}
    assert missing.value.status == 404
    assert api.requests[-1][2]["Authorization"] == "Bearer tok"


def test_entry_lines() -> None:
    assert (
        entry_line({"role": "assistant", "text": "", "interrupted": True}) == "assistant [interrupted; heard nothing]"
    )
    long = entry_line({"role": "tool", "name": "t", "arguments": {}, "outcome": "timeout", "result": "r" * 500})
    assert long.startswith("tool t {} → timeout: rrr") and long.endswith("…") and len(long) < 240


# ---- --resume --------------------------------------------------------------------------------------


@async_test
async def test_resume_lists_the_sessions_and_connects_to_the_one_picked(api: StandInApi, tmp_path: Path) -> None:
    api.answers["GET /sessions"] = (200, {"sessions": [session(FIRST, "one"), session(SECOND, "two")]})
    async with FakeConductor(standard_turn("Welcome back.")) as fake:
        out, err = io.StringIO(), io.StringIO()
        argv = ["--url", fake.url, "--resume", "--sessions-url", api.url, "--workspace", str(tmp_path), "--quiet"]
        code = await cli.run(argv, stdin=io.StringIO("2\nhello\n"), stdout=out, stderr=err, backoff=FAST)

    assert code == 0, err.getvalue()
    assert fake.connections[0].session_id == SECOND
    assert "  #  ID" in out.getvalue() and f"resuming {SECOND}: two" in out.getvalue()
    assert fake.sessions[SECOND].transcripts() == ["hello"]


@pytest.mark.parametrize(("pick", "answer", "exit_code"), [("7\n", None, 2), ("", None, 2), ("1\n", [], 6)])
def test_resume_refuses_a_bad_pick_or_nothing_to_pick(api: StandInApi, pick: str, answer: Any, exit_code: int) -> None:
    sessions = [session(FIRST, "one")] if answer is None else answer
    api.answers["GET /sessions"] = (200, {"sessions": sessions, "nextCursor": None})
    code, _, err = run_cli("--url", "ws://127.0.0.1:9", "--resume", "--sessions-url", api.url, stdin=pick)
    assert code == exit_code and err.startswith("voiceide-client: --resume: ")


def test_resume_and_session_do_not_go_together() -> None:
    code, _, err = run_cli("--url", "ws://127.0.0.1:9", "--resume", "--session", FIRST)
    assert code == 2 and "--resume" in err


# ---- session_ended / session_erased: no reconnect ----------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.SESSION_ENDED, ErrorCode.SESSION_ERASED])
@async_test
async def test_a_session_ended_or_erased_closes_the_client_without_reconnecting(code: ErrorCode) -> None:
    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.send(ErrorPayload(code=str(code), message="closed from the sessions API"), seq=False)
        assert session.connection is not None
        await session.connection.ws.close(1000)

    progress: list[str] = []
    async with FakeConductor(turn) as fake:
        client = ConductorClient(fake.url, backoff=FAST, ready_timeout=0.1, on_progress=progress.append)
        await client.connect()
        turn_result = await client.say("hello", timeout=5)
        await client.wait_until(lambda: client.link is Link.CLOSED)
        await asyncio.sleep(0.2)  # room for a reconnect that must not happen
        await client.close()

    assert client.closed_by_server == code
    assert not turn_result.completed and [e.code for e in turn_result.errors] == [code]
    assert client.connections == 1 and len(fake.connections) == 1 and client.reconnect_attempts == 0
    assert ErrorCode.WS_ERROR not in client.error_codes
    assert any("not reconnecting" in line for line in progress)
