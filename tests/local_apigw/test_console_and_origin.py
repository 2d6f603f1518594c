"""The local gateway as a browser meets it: the console over plain HTTP on the WebSocket's port, the
``Origin`` check at the handshake, and a lone surrogate that never breaks a connection or its log."""

from __future__ import annotations

import http.client
import io
import json
import socket
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from conductor_local import cli
from conductor_local import stack as stack_module
from conductor_local.gateway.console import CONSOLE_DIR, normalize_origin
from conductor_local.gateway.frames import summarize
from conductor_local.gateway.server import LocalApiGateway
from conductor_local.stack import LocalStack
from tests.local_apigw.conftest import WAIT_S, StandInRoutes, next_event

# What JavaScript's JSON.stringify writes for "fix the bug 😀".slice(0, -1): a lone high surrogate.
LONE_SURROGATE_FRAME = (
    '{"id":"%s","timestamp":"2026-11-25T10:00:00.000Z",'
    '"kind":{"userAudioTranscriptFinal":{"text":"fix the bug \\ud83d"}}}'
)


@pytest.fixture
def console_gateway(routes: StandInRoutes, log_lines: list[str]) -> Iterator[LocalApiGateway]:
    gw = LocalApiGateway(
        routes.handlers(),
        "127.0.0.1",
        0,
        on_log=log_lines.append,
        console_dir=CONSOLE_DIR,
        console_config={"auth": "none"},
        allowed_origins=("https://allowed.example",),
    ).start()
    try:
        yield gw
    finally:
        gw.stop()


def get(gateway: LocalApiGateway, path: str) -> http.client.HTTPResponse:
    client = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=WAIT_S)
    client.request("GET", path)
    return client.getresponse()


# ---- the console's files --------------------------------------------------------------------------


def test_the_console_is_served_on_the_gateways_own_port(console_gateway: LocalApiGateway) -> None:
    page = get(console_gateway, "/console/")
    assert page.status == 200 and page.getheader("Content-Type") == "text/html; charset=utf-8"
    assert b"VoiceIDE console" in page.read()
    assert "script-src 'self'" in (page.getheader("Content-Security-Policy") or "")
    modules = sorted(file.name for file in CONSOLE_DIR.glob("*.js"))
    assert "main.js" in modules
    for name in modules:  # ES modules: a browser runs them only with a JavaScript type
        script = get(console_gateway, f"/console/{name}")
        assert script.status == 200 and script.getheader("Content-Type") == "text/javascript; charset=utf-8"
        script.read()
    vendored = get(console_gateway, "/console/vendor/fast-json-patch-3.1.1.min.js")
    assert vendored.status == 200 and vendored.read().startswith(b"/*! fast-json-patch, version: 3.1.1 */")
    config = get(console_gateway, "/console/config.json")
    assert json.loads(config.read()) == {"auth": "none"}
    for path in ("/", "/console"):
        moved = get(console_gateway, f"{path}?token=abc")
        assert moved.status == 302 and moved.getheader("Location") == "/console/?token=abc"
    assert console_gateway.console_url == f"http://127.0.0.1:{console_gateway.port}/console/"


def test_nothing_outside_the_console_folder_is_served(console_gateway: LocalApiGateway) -> None:
    assert get(console_gateway, "/console/nope.js").status == 404
    assert get(console_gateway, "/elsewhere").status == 404
    with socket.create_connection(("127.0.0.1", console_gateway.port), timeout=WAIT_S) as raw:
        raw.sendall(f"GET /console/../apigw.py HTTP/1.1\r\nHost: localhost:{console_gateway.port}\r\n\r\n".encode())
        assert raw.recv(200).startswith(b"HTTP/1.1 404")


def test_a_gateway_without_a_console_answers_plain_requests_as_before(gateway: LocalApiGateway) -> None:
    assert get(gateway, "/console/").status == 426  # websockets' own "Upgrade Required"


# ---- Origin ---------------------------------------------------------------------------------------


def url(gateway: LocalApiGateway) -> str:
    return f"{gateway.url}?sessionId={uuid.uuid4()}"


@pytest.mark.parametrize("origin", [None, "own", "http://localhost:{port}", "https://allowed.example"])
def test_native_apps_the_console_and_allowed_origins_connect(
    console_gateway: LocalApiGateway, routes: StandInRoutes, origin: str | None
) -> None:
    if origin == "own":
        origin = f"http://{console_gateway.domain_name}"
    elif origin is not None:
        origin = origin.format(port=console_gateway.port)
    with connect(url(console_gateway), origin=origin, open_timeout=WAIT_S):  # type: ignore[arg-type]
        next_event(routes.connects)


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "http://127.0.0.1:1", "null", "https://127.0.0.1:{port}", "http://x.localhost:{port}"],
)
def test_any_other_origin_is_refused_before_connect(
    console_gateway: LocalApiGateway, routes: StandInRoutes, log_lines: list[str], origin: str
) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(url(console_gateway), origin=origin.format(port=console_gateway.port), open_timeout=WAIT_S)  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    assert json.loads(refused.value.response.body) == {"message": "Forbidden"}
    assert routes.connects.empty()  # $connect never ran
    assert any("refused → 403" in line for line in log_lines)


def test_any_origin_may_be_allowed(routes: StandInRoutes) -> None:
    gw = LocalApiGateway(routes.handlers(), "127.0.0.1", 0, allowed_origins=("*",))
    with gw, connect(url(gw), origin="http://evil.example", open_timeout=WAIT_S):  # type: ignore[arg-type]
        next_event(routes.connects)


def test_allowed_origins_are_checked_when_given() -> None:
    assert normalize_origin("HTTP://Example.com:8000/") == "http://example.com:8000"
    for bad in ("example.com", "ftp://example.com", "http://example.com/path", "http://u@example.com"):
        with pytest.raises(ValueError):
            normalize_origin(bad)
    assert cli.main(["local", "--allow-origin", "example.com"]) == 2


# ---- lone surrogates ------------------------------------------------------------------------------


def test_a_lone_surrogate_is_logged_as_its_escape() -> None:
    line = summarize(LONE_SURROGATE_FRAME % uuid.uuid4())
    assert line == 'userAudioTranscriptFinal "fix the bug \\ud83d"'
    line.encode("utf-8")  # writable


def test_a_log_line_that_cannot_be_written_never_breaks_the_connection(
    routes: StandInRoutes,
) -> None:
    def strict(line: str) -> None:
        raise UnicodeEncodeError("utf-8", line, 0, 1, "a log that cannot write this")

    routes.on_message = lambda event: {"statusCode": 200}
    with LocalApiGateway(routes.handlers(), "127.0.0.1", 0, on_log=strict) as gw, connect(url(gw)) as ws:
        ws.send("one")
        ws.send("two")
        assert [next_event(routes.messages)["body"] for _ in range(2)] == ["one", "two"]


def test_print_line_escapes_what_stdout_cannot_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # strict, as a misconfigured terminal
    monkeypatch.setattr(sys, "stdout", out)
    stack_module._print_line('→ conn x userAudioTranscriptFinal "fix the bug \ud83d"')
    out.flush()
    assert out.buffer.getvalue() == b'\\u2192 conn x userAudioTranscriptFinal "fix the bug \\ud83d"\n'  # type: ignore[attr-defined]


def receive_until(ws: ClientConnection, kind: str) -> dict[str, Any]:
    while True:
        event = json.loads(ws.recv(timeout=WAIT_S))
        if kind in event.get("kind", {}):
            return event["kind"][kind]


@pytest.mark.parametrize("quiet", [False, True], ids=["logging", "quiet"])
def test_a_lone_surrogate_is_refused_and_the_connection_goes_on_answering(
    quiet: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # stdout as `make run` has it: UTF-8, strict (printing a lone surrogate there raised before)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict"))
    with LocalStack("127.0.0.1", 0, quiet=quiet) as stack, connect(stack.session_url(str(uuid.uuid4()))) as ws:
        ws.send(LONE_SURROGATE_FRAME % uuid.uuid4())
        error = receive_until(ws, "error")
        assert error == {"code": "invalid_event", "message": "strings must be valid Unicode (no lone surrogates)"}
        hello = {
            "id": str(uuid.uuid4()),
            "timestamp": "2026-11-25T10:00:01Z",
            "kind": {"userAudioTranscriptFinal": {"text": "hello"}},
        }
        ws.send(json.dumps(hello))
        assert receive_until(ws, "assistantSpeechFinal") == {"text": "You said: hello"}
        sys.stdout.flush()
        printed = sys.stdout.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    assert ("fix the bug \\ud83d" in printed) is not quiet
