"""What the local stack logs of what clients send: never a token or a password (with and without
``--quiet``), and never an exception, however deeply a frame nests: the client hears an error event
and its connection goes on answering."""

from __future__ import annotations

import http.client
import importlib
import io
import json
import logging
import secrets
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from conductor_local.stack import LocalStack
from tests.local_apigw.conftest import WAIT_S

CURSOR_ENV = {"CONDUCTOR_CURSOR_KEY": secrets.token_hex(32)}
"""The sessions API's key for its list cursors."""


def receive_until(ws: ClientConnection, kind: str) -> dict[str, Any]:
    while True:
        event = json.loads(ws.recv(timeout=WAIT_S))
        if kind in event.get("kind", {}):
            return event["kind"][kind]


def event(kind: str, payload: Any) -> str:
    return json.dumps(
        {"id": str(uuid.uuid4()), "timestamp": "2026-11-25T10:00:00Z", "kind": {kind: payload}}, ensure_ascii=False
    )


def id_token(stack: LocalStack) -> str:
    pool = stack.user_pool
    assert pool is not None
    cognito = boto3.client(
        "cognito-idp", endpoint_url=pool.endpoint, region_name=pool.region, config=Config(signature_version=UNSIGNED)
    )
    result = cognito.initiate_auth(
        AuthFlow="USER_PASSWORD_AUTH",
        ClientId=pool.client_id,
        AuthParameters={"USERNAME": pool.username, "PASSWORD": pool.password},
    )
    return str(result["AuthenticationResult"]["IdToken"])


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


STACK_LOGGERS = ("conductor_local", "shared", "lambdas", "werkzeug")
"""The loggers of the stack and the handlers (not the test's own clients: boto3 logs its requests'
bodies at DEBUG, websockets' client its request line)."""


@contextmanager
def every_log_line() -> Iterator[_Lines]:
    """Every record the stack's loggers write meanwhile, at DEBUG, and anything at WARNING or above."""
    handler = _Lines()
    root = logging.getLogger()
    loggers = [logging.getLogger(name) for name in STACK_LOGGERS]
    levels = [logger.level for logger in loggers]
    root.addHandler(handler)
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextmanager
def powertools_lines(handler: _Lines) -> Iterator[None]:
    runtime = importlib.import_module("lambdas.runtime")
    powertools = runtime.logger
    own = _Lines()
    own.setFormatter(powertools.registered_formatter)
    own.lines = handler.lines
    level = powertools.log_level
    powertools._logger.addHandler(own)
    powertools.setLevel("DEBUG")
    try:
        yield
    finally:
        powertools._logger.removeHandler(own)
        powertools.setLevel(level)


@pytest.mark.parametrize("quiet", [False, True], ids=["logging", "quiet"])
def test_no_token_or_password_is_ever_logged(quiet: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stdout)
    session_id = str(uuid.uuid4())
    with every_log_line() as logged, LocalStack("127.0.0.1", 0, quiet=quiet, auth="cognito", env=CURSOR_ENV) as stack:
        pool = stack.user_pool
        assert pool is not None
        token = id_token(stack)
        with powertools_lines(logged):
            with connect(f"{stack.session_url(session_id)}&token={token}") as ws:
                ws.send(event("userAudioTranscriptFinal", {"text": "hello"}))
                assert receive_until(ws, "assistantSpeechFinal") == {"text": "You said: hello"}
                ws.send(f"token={token}&password={pool.password}")  # not an event: logged as sent
                assert receive_until(ws, "error")["code"] == "invalid_json"
            # the same token in a header, at the sessions API, and a refused one
            for value, status in ((f"Bearer {token}", 200), (f"Bearer {token[:-4]}AAAA", 401)):
                client = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=WAIT_S)
                client.request("GET", "/sessions", headers={"Authorization": value})
                assert client.getresponse().status == status
            with pytest.raises(InvalidStatus) as refused:  # a forged token: the authorizer denies it
                connect(f"{stack.session_url(str(uuid.uuid4()))}&token={token[:-4]}AAAA", open_timeout=WAIT_S)
            assert refused.value.response.status_code == 403
    stdout.flush()
    printed = stdout.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    everything = printed + "\n".join(logged.lines)
    signature = token.rsplit(".", 1)[1]
    payload = token.split(".")[1]
    for secret in (token, payload, signature, pool.password):
        assert secret not in everything
    if not quiet:  # the lines are there, with the token redacted
        assert f"$connect /?sessionId={session_id}&token=*** → 200" in printed
        assert "token=***&password=***" in printed
    else:
        assert "$connect" not in printed


# ---- deeply nested frames -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def logging_stack() -> Iterator[tuple[LocalStack, list[str]]]:
    lines: list[str] = []
    with LocalStack("127.0.0.1", 0, on_log=lines.append) as stack:
        yield stack, lines


NESTED = {
    "arrays": "[" * 4500 + "]" * 4500,
    "objects": '{"a":' * 4500 + "1" + "}" * 4500,
    "in an event": event("userAudioTranscriptFinal", {"text": "x"}).replace('"x"', "[" * 900 + "]" * 900),
    "in a tool result": event("toolResult", {"callId": "c1", "result": {"a": 1}}).replace(
        '{"a": 1}', '{"a":' * 2000 + "1" + "}" * 2000
    ),
}


@pytest.mark.parametrize("frame", NESTED.values(), ids=NESTED.keys())
def test_a_deeply_nested_frame_is_answered_and_the_connection_goes_on(
    logging_stack: tuple[LocalStack, list[str]], frame: str
) -> None:
    stack, lines = logging_stack
    assert len(frame.encode()) <= 32 * 1024  # one frame
    with connect(stack.session_url(str(uuid.uuid4()))) as ws:
        logged = len(lines)
        ws.send(frame)
        error = receive_until(ws, "error")
        assert error["code"] in ("invalid_json", "invalid_event")
        ws.send(event("userAudioTranscriptFinal", {"text": "still here"}))
        assert receive_until(ws, "assistantSpeechFinal") == {"text": "You said: still here"}
    frame_lines = [line for line in lines[logged:] if line.startswith("→ conn")]
    assert frame_lines and all(len(line.encode()) < 300 for line in frame_lines)
