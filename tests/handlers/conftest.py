"""Drive the three Lambdas with API-Gateway-shaped events over real wire protocols.

DynamoDB is moto in server mode, Bedrock is the local eventstream endpoint with scripted
streams, posts go through the real ``apigatewaymanagementapi`` client to a recording endpoint,
and ``$default`` launches the turn runner through the real ``lambda`` client on the local Lambda
endpoint (asynchronous invocations, as deployed). ``Harness.send`` returns once the frame's
invocation and every turn it launched have ended, so a test reads a whole turn's events after
one call. After every test, every touched session's stored history must be valid for Bedrock.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from conductor_local.bedrock.offline_recall import answering_summaries
from conductor_local.bedrock.server import LocalBedrockServer, ScriptedResponder
from conductor_local.dynamodb.server import LocalMotoServer
from conductor_local.dynamodb.tables import create_tables
from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.lambda_runtime.server import LocalLambdaServer
from conductor_local.lambda_runtime.turn_functions import TURN_FUNCTION, turn_functions
from lambdas import connect, disconnect, message, runtime
from shared.wire.protocol import Event, now_timestamp
from tests.handlers.recording_management_api import RecordingManagementApi
from tests.history_check import assert_valid_history
from tests.net import free_port

TABLE = "voiceide-conductor-test"
STAGE = "test"


class _SwitchableResponder:
    """The Bedrock server lives for the session; each test brings its own script."""

    def __init__(self) -> None:
        self.current = ScriptedResponder()

    def __call__(self, model_id: str, request: dict[str, Any]) -> Any:
        return self.current(model_id, request)


def _dynamodb(url: str) -> Any:
    return boto3.client(
        "dynamodb", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    port = free_port()
    server = LocalMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    create_tables(_dynamodb(url), TABLE)
    yield url
    server.stop()


@pytest.fixture(scope="session")
def bedrock_server() -> Iterator[tuple[LocalBedrockServer, _SwitchableResponder]]:
    responder = _SwitchableResponder()
    # The rolling summary's calls (after a turn) are answered as the offline brain does; tests'
    # scripts are for the conversation.
    with LocalBedrockServer(answering_summaries(responder)) as server:
        yield server, responder


@pytest.fixture(scope="session")
def lambda_server() -> Iterator[LocalLambdaServer]:
    with LocalLambdaServer(turn_functions()) as server:
        yield server


@pytest.fixture(scope="session")
def management() -> Iterator[RecordingManagementApi]:
    api = RecordingManagementApi().start()
    yield api
    api.stop()


@dataclass
class Connection:
    connection_id: str
    session_id: str
    status: int


@dataclass
class Harness:
    management: RecordingManagementApi
    script: ScriptedResponder
    lambdas: LocalLambdaServer
    sessions: set[str] = field(default_factory=set)

    # ---- API Gateway events ----------------------------------------------------------------

    def _context(self, connection_id: str, route: str, event_type: str) -> dict[str, Any]:
        now_ms = 1_763_000_000_000
        return {
            "routeKey": route,
            "eventType": event_type,
            "extendedRequestId": uuid.uuid4().hex,
            "requestTime": "21/Nov/2026:10:00:00 +0000",
            "messageDirection": "IN",
            "stage": STAGE,
            "connectedAt": now_ms,
            "requestTimeEpoch": now_ms,
            "identity": {"sourceIp": "127.0.0.1", "userAgent": "pytest"},
            "requestId": uuid.uuid4().hex,
            "domainName": self.management.domain,
            "connectionId": connection_id,
            "apiId": "testapi",
        }

    def connect(
        self, session_id: str | None = None, *, principal: str | None = None, query: dict[str, str] | None = None
    ) -> Connection:
        session_id = session_id or str(uuid.uuid4())
        connection_id = base64.b64encode(uuid.uuid4().bytes[:12]).decode()
        context = self._context(connection_id, "$connect", "CONNECT")
        if principal:
            context["authorizer"] = {"principalId": principal, "sessionId": session_id}
        event = {
            "headers": {"Host": self.management.domain},
            "multiValueHeaders": {"Host": [self.management.domain]},
            "queryStringParameters": query if query is not None else {"sessionId": session_id},
            "requestContext": context,
            "isBase64Encoded": False,
        }
        response = connect.handler(event, LocalLambdaContext(function_name="connect"))
        if response["statusCode"] == 200:
            self.sessions.add(session_id.lower())
        return Connection(connection_id, session_id, response["statusCode"])

    def disconnect(self, conn: Connection) -> dict[str, Any]:
        context = self._context(conn.connection_id, "$disconnect", "DISCONNECT")
        context.update(disconnectStatusCode=1001, disconnectReason="Going away")
        event = {"headers": {}, "multiValueHeaders": {}, "requestContext": context, "isBase64Encoded": False}
        return disconnect.handler(event, LocalLambdaContext(function_name="disconnect"))

    def send_raw(
        self, conn: Connection, body: str | None, *, is_base64: bool = False, timeout_s: float = 900
    ) -> dict[str, Any]:
        context = self._context(conn.connection_id, "$default", "MESSAGE")
        context["messageId"] = uuid.uuid4().hex[:16]
        event = {"requestContext": context, "body": body, "isBase64Encoded": is_base64}
        mark = self.lambdas.started
        response = message.handler(event, LocalLambdaContext(function_name="message", timeout_seconds=timeout_s))
        self.wait_for_turns(since=mark)
        return response

    def wait_for_turns(self, *, since: int = 0, timeout: float = 60) -> None:
        """Wait until every turn-runner invocation launched after mark ``since`` has ended."""
        assert self.lambdas.wait_idle(timeout, since=since), "a turn runner is still running"

    def send(self, conn: Connection, kind: str, payload: dict[str, Any], event_id: str | None = None) -> str:
        event_id = event_id or str(uuid.uuid4())
        frame = {"id": event_id, "timestamp": now_timestamp(), "kind": {kind: payload}}
        response = self.send_raw(conn, json.dumps(frame))
        assert response == {"statusCode": 200}
        return event_id

    def send_in_background(self, conn: Connection, kind: str, payload: dict[str, Any]) -> threading.Thread:
        thread = threading.Thread(target=self.send, args=(conn, kind, payload), daemon=True)
        thread.start()
        return thread

    # ---- client events -------------------------------------------------------------------

    def say(self, conn: Connection, text: str) -> str:
        return self.send(conn, "userAudioTranscriptFinal", {"text": text})

    def answer(
        self, conn: Connection, call_id: str, result: str | None = '{"ok":true}', error: str | None = None
    ) -> str:
        return self.send(conn, "toolResult", {"callId": call_id, "result": result, "error": error})

    def barge_in(self, conn: Connection) -> str:
        return self.send(conn, "error", {"code": "audio.output.interrupted", "message": "user spoke"})

    def start_session(self, conn: Connection) -> str:
        return self.send(conn, "sessionStart", {"sessionId": conn.session_id})

    # ---- what the app saw ------------------------------------------------------------------

    def events(self, conn: Connection) -> list[Event]:
        """What the app saw, less the ``sessionReady`` answering each sessionStart (``all_events``
        keeps it: test_session_ready.py checks it), so a test reads a turn's events alone."""
        return [event for event in self.all_events(conn) if event.kind_name != "sessionReady"]

    def all_events(self, conn: Connection) -> list[Event]:
        return self.management.events(conn.connection_id)

    def wait_for(self, conn: Connection, predicate: Callable[[list[Event]], bool], timeout: float = 10) -> list[Event]:
        return self.management.wait_for(conn.connection_id, predicate, timeout)

    def summary(self, conn: Connection) -> list[tuple[Any, ...]]:
        return summarize(self.events(conn))

    def call_id(self, conn: Connection, name: str, nth: int = 0) -> str:
        calls = [e.payload.call_id for e in self.events(conn) if e.kind_name == "toolCall" and e.payload.name == name]
        return calls[nth]

    def finish_turn(self, conn: Connection) -> None:
        """Answer the conductor's own tts.speak (the app spoke it), which ends the turn."""
        speaks = [e for e in self.events(conn) if e.kind_name == "toolCall" and e.payload.name == "tts.speak"]
        self.answer(conn, speaks[-1].payload.call_id, '{"spoken":true}')

    def history(self, session_id: str) -> list[dict[str, Any]]:
        return runtime.store().messages(session_id.lower())


def summarize(events: list[Event]) -> list[tuple[Any, ...]]:
    """Events as short tuples, so a whole turn reads as one list in a test (without the
    ``sessionReady`` that answers each ``sessionStart``: test_session_ready.py checks it, nor the
    ``turnUsage`` after each turn: test_turn_usage.py checks it)."""
    out: list[tuple[Any, ...]] = []
    for event in events:
        payload = event.payload
        if event.kind_name in ("sessionReady", "turnUsage"):
            continue
        if event.kind_name == "toolCall":
            arguments = json.loads(payload.arguments)
            out.append(("toolCall", payload.name, arguments))
        elif event.kind_name == "error":
            out.append(("error", payload.code))
        elif event.kind_name in ("assistantSpeechPartial", "assistantSpeechFinal"):
            out.append(("partial" if event.kind_name == "assistantSpeechPartial" else "final", payload.text))
        else:
            out.append((event.kind_name,))
    return out


@pytest.fixture
def conductor(
    moto_url: str,
    bedrock_server: tuple[LocalBedrockServer, _SwitchableResponder],
    management: RecordingManagementApi,
    lambda_server: LocalLambdaServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Harness]:
    server, responder = bedrock_server
    for name, value in {
        "AWS_ENDPOINT_URL_DYNAMODB": moto_url,
        "AWS_ENDPOINT_URL_LAMBDA": lambda_server.url,
        "CONDUCTOR_TURN_FUNCTION": TURN_FUNCTION,
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": server.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "CONDUCTOR_TABLE": TABLE,
        "CONDUCTOR_TURN_RESERVE_MS": "1000",
        "BEDROCK_MAX_ATTEMPTS": "2",
        "POWERTOOLS_METRICS_NAMESPACE": "VoiceIDETest",
        # One partial per model delta, so tests can assert exact sequences; coalescing has its own tests.
        "CONDUCTOR_PARTIAL_FLUSH_MS": "0",
        "CONDUCTOR_PARTIAL_GROWTH": "0",
        "CONDUCTOR_SPEAK_INTERVAL_MS": "0",
        # Requests exactly as built, without cachePoints; prompt caching has its own tests.
        "BEDROCK_PROMPT_CACHE": "off",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # moto's backends are shared by every moto server and mock of this process: a test elsewhere
    # that resets them (a mock_aws block ending, moto's reset API) takes the table with it.
    create_tables(_dynamodb(moto_url), TABLE)
    runtime.reset()
    responder.current = ScriptedResponder()
    harness = Harness(management=management, script=responder.current, lambdas=lambda_server)
    yield harness
    lambda_server.wait_idle(30)
    for session_id in harness.sessions:
        assert_valid_history(harness.history(session_id))
    runtime.reset()
