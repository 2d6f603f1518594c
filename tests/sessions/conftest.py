"""The sessions Lambda, run as API Gateway's HTTP API (payload format 2.0) runs it, on moto.

DynamoDB is moto in this process (the table as the infrastructure defines it, with the by-owner
index); the WebSocket management API is a fake gateway that records posts and closes. Sessions are
seeded through the real store, as the WebSocket side commits them.
"""

from __future__ import annotations

import base64
import functools
import json
import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from moto import mock_aws

from conductor_local.dynamodb.tables import create_tables
from conductor_local.lambda_runtime.context import LocalLambdaContext
from lambdas import runtime, sessions_api
from shared.adapters.store import SessionStore
from shared.core.history_ops import AppendMessage
from shared.core.messages import INTERRUPTED_MARKER, Block, text_block, tool_result_block, tool_use_block
from shared.core.state import SessionState

TABLE = "voiceide-sessions-test"
CALLBACK_URL = "https://ws123.execute-api.us-east-1.amazonaws.com/dev"
RETENTION_SECONDS = 2 * 24 * 3600
CURSOR_KEY = secrets.token_hex(32)  # as the local stack makes one per process
PERSON = "person-a"
OTHER = "person-b"


@dataclass
class FakeGateway:
    posts: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    closes: list[tuple[str, str]] = field(default_factory=list)

    def post(self, endpoint: str, connection_id: str, frame: str) -> bool:
        self.posts.append((endpoint, connection_id, json.loads(frame)))
        return True

    def close(self, endpoint: str, connection_id: str) -> bool:
        self.closes.append((endpoint, connection_id))
        return True


def route_of(method: str, path: str) -> tuple[str, dict[str, str] | None]:
    parts = path.strip("/").split("/")
    if len(parts) == 1:
        return f"{method} /sessions", None
    template = "/sessions/{id}" + ("/end" if len(parts) == 3 else "")
    return f"{method} {template}", {"id": parts[1]}


def http_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: Any = None,
    sub: str | None = PERSON,
    headers: dict[str, str] | None = None,
    base64_body: bool = False,
) -> dict[str, Any]:
    """An HTTP API payload 2.0 event as API Gateway sends it to a Lambda integration."""
    route_key, path_parameters = route_of(method, path)
    raw_body = body if isinstance(body, str) or body is None else json.dumps(body)
    all_headers = {"host": "abc123.execute-api.us-east-1.amazonaws.com", "user-agent": "pytest", **(headers or {})}
    if raw_body is not None and "content-type" not in all_headers:
        all_headers["content-type"] = "application/json"
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "abc123",
        "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
        "domainPrefix": "abc123",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.7",
            "userAgent": "pytest",
        },
        "requestId": uuid.uuid4().hex[:16],
        "routeKey": route_key,
        "stage": "$default",
        "time": "24/Nov/2026:16:02:11 +0000",
        "timeEpoch": int(time.time() * 1000),
    }
    if sub is not None:
        claims = {
            "sub": sub,
            "iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_test",
            "token_use": "access",
        }
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": all_headers,
        "requestContext": context,
        "isBase64Encoded": base64_body,
    }
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = path_parameters
    if raw_body is not None:
        event["body"] = base64.b64encode(raw_body.encode()).decode() if base64_body else raw_body
    return event


@dataclass
class Api:
    client: Any
    store: SessionStore
    gateway: FakeGateway

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        response = sessions_api.handler(
            http_event(method, path, **kwargs), LocalLambdaContext(function_name="sessions")
        )
        body = response.get("body") or ""
        return response["statusCode"], json.loads(body) if body else None

    def seed(
        self,
        owner: str | None = PERSON,
        *,
        session_id: str | None = None,
        last_active: float = 1_790_000_000.0,
        messages: Sequence[tuple[str, list[Block]]] = (),
        **fields: Any,
    ) -> SessionState:
        """A session as the WebSocket side commits it (its history in the same write); one request
        made unless ``turn_count`` says otherwise (0: an empty session, which is not listed)."""
        fields.setdefault("turn_count", 1)
        state = SessionState(
            session_id=session_id or str(uuid.uuid4()),
            principal=owner,
            created_at=last_active - 60,
            last_active_at=last_active,
            **fields,
        )
        ops = [AppendMessage(seq, role, content) for seq, (role, content) in enumerate(messages)]  # type: ignore[arg-type]
        if ops:
            state.history_len, state.last_role = len(ops), ops[-1].role
        return self.store.commit(state, ops)

    def items(self, session_id: str | None = None) -> list[dict[str, Any]]:
        items = self.client.scan(TableName=TABLE)["Items"]
        if session_id is None:
            return items
        return [
            item for item in items if session_id in item["pk"]["S"] or item.get("session_id", {}).get("S") == session_id
        ]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "CONDUCTOR_TABLE": TABLE,
        "CONDUCTOR_REQUIRE_PRINCIPAL": "true",
        "CONDUCTOR_WEBSOCKET_CALLBACK_URL": CALLBACK_URL,
        "CONDUCTOR_ENDED_RETENTION_SECONDS": str(RETENTION_SECONDS),
        "POWERTOOLS_METRICS_NAMESPACE": "VoiceIDETest",
        "CONDUCTOR_CURSOR_KEY": CURSOR_KEY,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("CONDUCTOR_CURSOR_SECRET_ARN", raising=False)
    sessions_api.cursor_seal.cache_clear()
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, TABLE)
        runtime.reset()
        gateway = FakeGateway()
        # The service's management API (a cached builder, as runtime's own: reset() clears it).
        monkeypatch.setattr(runtime, "gateway", functools.cache(lambda: gateway))
        yield Api(client, SessionStore(client, TABLE, ttl_seconds=7 * 24 * 3600), gateway)
        runtime.reset()
    sessions_api.cursor_seal.cache_clear()


def error_code(body: dict[str, object]) -> str:
    assert set(body) == {"error"}
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message"} and error["message"]
    return str(error["code"])


def conversation() -> list[tuple[str, list[dict[str, object]]]]:
    return [
        ("user", [text_block("open the readme")]),
        (
            "assistant",
            [
                text_block("Opening it."),
                tool_use_block(
                    "tu-1",
                    "tool_call",
                    {"name": "editor.openFile", "arguments": {"path": "README.md"}, "call_id": "c1"},
                ),
            ],
        ),
        ("user", [tool_result_block("tu-1", '{"opened":true}', error=False)]),
        ("assistant", [text_block(f"The readme says the project {INTERRUPTED_MARKER}")]),
        ("user", [text_block("thanks")]),
        ("assistant", [text_block("You're welcome.")]),
    ]
