"""The local gateway's HTTP API (``/sessions…`` beside the WebSocket): payload-2.0 events, API Gateway's
own answers, the Lambda's answers as API Gateway writes them, and the JWT authorizer under sign-in.

A stand-in handler records the events; the sessions Lambda itself is driven in ``tests/e2e``.
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from websockets.sync.client import connect

from conductor_local.gateway.http_api import HttpApi, claim_strings, match_route
from conductor_local.gateway.server import LocalApiGateway
from conductor_local.stack import LocalStack
from tests.local_apigw.conftest import WAIT_S, StandInRoutes

Event = dict[str, Any]


class StandInSessions:
    """A sessions handler that queues its events; ``answer`` decides what it returns."""

    def __init__(self) -> None:
        self.events: queue.Queue[Event] = queue.Queue()
        self.contexts: list[Any] = []
        self.answer: Callable[[Event], Any] = lambda event: {
            "statusCode": 200,
            "headers": {"content-type": "application/json"},
            "body": json.dumps({"route": event["routeKey"]}),
        }

    def __call__(self, event: Event, context: Any) -> Any:
        self.events.put(event)
        self.contexts.append(context)
        return self.answer(event)

    def next(self) -> Event:
        return self.events.get(timeout=WAIT_S)


@dataclasses.dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    port: int, method: str, target: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        response = conn.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        conn.close()


@pytest.fixture
def sessions() -> StandInSessions:
    return StandInSessions()


@pytest.fixture
def api_gateway(sessions: StandInSessions, log_lines: list[str]) -> Iterator[LocalApiGateway]:
    handlers = dataclasses.replace(StandInRoutes().handlers(), sessions=sessions)
    gw = LocalApiGateway(handlers, "127.0.0.1", 0, on_log=log_lines.append).start()
    try:
        yield gw
    finally:
        gw.stop()


def test_routes_match_as_the_http_api_declares_them() -> None:
    session_id = str(uuid.uuid4())
    assert match_route("GET", "/sessions") == ("GET /sessions", {})
    assert match_route("GET", f"/sessions/{session_id}") == ("GET /sessions/{id}", {"id": session_id})
    assert match_route("PATCH", "/sessions/a%20b") == ("PATCH /sessions/{id}", {"id": "a b"})
    assert match_route("POST", f"/sessions/{session_id}/end") == ("POST /sessions/{id}/end", {"id": session_id})
    assert match_route("DELETE", f"/sessions/{session_id}") == ("DELETE /sessions/{id}", {"id": session_id})
    for method, path in [
        ("PUT", "/sessions"),
        ("POST", "/sessions"),
        ("DELETE", "/sessions"),
        ("GET", "/sessions/"),
        ("GET", f"/sessions/{session_id}/end"),
        ("POST", f"/sessions/{session_id}/end/more"),
        ("GET", "/sessionsx"),
        ("HEAD", "/sessions"),
    ]:
        assert match_route(method, path) is None, (method, path)


def test_a_list_request_becomes_a_payload_2_event(api_gateway: LocalApiGateway, sessions: StandInSessions) -> None:
    reply = request(
        api_gateway.port,
        "GET",
        "/sessions?limit=2&status=idle&status=ended",
        headers={"User-Agent": "tests/1.0", "X-Custom": "Yes", "Cookie": "a=1; b=2"},
    )
    event = sessions.next()

    assert reply.status == 200 and reply.json() == {"route": "GET /sessions"}
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["apigw-requestid"] == event["requestContext"]["requestId"]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "GET /sessions"
    assert event["rawPath"] == "/sessions"
    assert event["rawQueryString"] == "limit=2&status=idle&status=ended"
    assert event["queryStringParameters"] == {"limit": "2", "status": "idle,ended"}
    assert "pathParameters" not in event and "body" not in event
    assert event["isBase64Encoded"] is False
    assert event["cookies"] == ["a=1", "b=2"]
    headers = event["headers"]
    assert all(name == name.lower() for name in headers)
    assert headers["x-custom"] == "Yes" and headers["user-agent"] == "tests/1.0"
    assert headers["x-forwarded-for"] == "127.0.0.1" and headers["x-forwarded-proto"] == "http"
    assert headers["x-forwarded-port"] == str(api_gateway.port) and headers["x-amzn-trace-id"].startswith("Root=1-")
    assert "cookie" not in headers
    context = event["requestContext"]
    assert context["http"] == {
        "method": "GET",
        "path": "/sessions",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "tests/1.0",
    }
    assert context["routeKey"] == "GET /sessions" and context["stage"] == "$default"
    assert context["domainName"] == api_gateway.domain_name
    assert context["apiId"] == api_gateway.http_api.api_id != api_gateway.api_id
    assert context["accountId"] == api_gateway.account_id
    assert abs(context["timeEpoch"] / 1000 - time.time()) < 5 and context["time"].endswith(" +0000")
    assert "authorizer" not in context
    assert sessions.contexts[0].function_name == "voiceide-conductor-sessions-api"


def test_a_json_body_and_the_path_parameter_reach_the_handler(
    api_gateway: LocalApiGateway, sessions: StandInSessions
) -> None:
    session_id = str(uuid.uuid4())
    body = json.dumps({"title": "Fixing the login test ✓"}).encode()
    reply = request(api_gateway.port, "PATCH", f"/sessions/{session_id}", body, {"Content-Type": "application/json"})
    event = sessions.next()

    assert reply.status == 200
    assert event["routeKey"] == "PATCH /sessions/{id}"
    assert event["pathParameters"] == {"id": session_id}
    assert event["rawQueryString"] == "" and "queryStringParameters" not in event
    assert event["isBase64Encoded"] is False
    assert json.loads(event["body"]) == {"title": "Fixing the login test ✓"}

    request(api_gateway.port, "POST", f"/sessions/{session_id}/end")
    assert sessions.next()["routeKey"] == "POST /sessions/{id}/end"


def test_a_binary_body_is_base64(api_gateway: LocalApiGateway, sessions: StandInSessions) -> None:
    data = b"\xff\x00\x01"
    request(api_gateway.port, "PATCH", f"/sessions/{uuid.uuid4()}", data, {"Content-Type": "application/octet-stream"})
    event = sessions.next()
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == data


def test_a_204_has_no_body(api_gateway: LocalApiGateway, sessions: StandInSessions) -> None:
    sessions.answer = lambda event: {"statusCode": 204, "body": "ignored"}
    reply = request(api_gateway.port, "DELETE", f"/sessions/{uuid.uuid4()}")
    assert sessions.next()["routeKey"] == "DELETE /sessions/{id}"
    assert reply.status == 204 and reply.body == b""


@pytest.mark.parametrize(
    ("method", "target"),
    [("PUT", "/sessions"), ("GET", "/sessions/a/b"), ("GET", "/sessions/"), ("OPTIONS", "/sessions")],
)
def test_what_matches_no_route_is_api_gateways_404(
    api_gateway: LocalApiGateway, sessions: StandInSessions, method: str, target: str
) -> None:
    reply = request(api_gateway.port, method, target, b"{}" if method == "PUT" else None)
    assert reply.status == 404 and reply.json() == {"message": "Not Found"}
    assert reply.headers["content-type"] == "application/json"
    assert sessions.events.empty()


def test_without_a_sessions_handler_every_sessions_path_is_404(routes: StandInRoutes) -> None:
    with LocalApiGateway(routes.handlers(), "127.0.0.1", 0) as gw:
        reply = request(gw.port, "GET", "/sessions")
    assert reply.status == 404 and reply.json() == {"message": "Not Found"}


@pytest.mark.parametrize(
    ("answer", "status", "body"),
    [
        ({"statusCode": 400, "body": '{"error":{"code":"bad_request"}}'}, 400, b'{"error":{"code":"bad_request"}}'),
        ({"sessions": [], "nextCursor": None}, 200, b'{"sessions": [], "nextCursor": null}'),
        ({"statusCode": 200, "body": base64.b64encode(b"\x00").decode(), "isBase64Encoded": True}, 200, b"\x00"),
        ({"statusCode": "200"}, 500, b'{"message":"Internal Server Error"}'),
        ({"statusCode": 200, "body": {"not": "a string"}}, 500, b'{"message":"Internal Server Error"}'),
        ({"statusCode": 200, "headers": ["x"]}, 500, b'{"message":"Internal Server Error"}'),
    ],
)
def test_the_handlers_answer_is_read_as_api_gateway_reads_it(
    api_gateway: LocalApiGateway, sessions: StandInSessions, answer: Any, status: int, body: bytes
) -> None:
    sessions.answer = lambda event: answer
    reply = request(api_gateway.port, "GET", "/sessions")
    assert (reply.status, reply.body) == (status, body)


def test_headers_and_cookies_of_the_answer_are_written_and_cannot_break_the_head(
    api_gateway: LocalApiGateway, sessions: StandInSessions
) -> None:
    sessions.answer = lambda event: {
        "statusCode": 200,
        "headers": {"X-Count": 3, "X-Evil": "a\r\nInjected: yes"},
        "cookies": ["c=1"],
        "body": "plain",
    }
    reply = request(api_gateway.port, "GET", "/sessions")
    assert reply.status == 200 and reply.body == b"plain"
    assert reply.headers["x-count"] == "3" and reply.headers["set-cookie"] == "c=1"
    assert "injected" not in reply.headers and reply.headers["x-evil"] == "a  Injected: yes"
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"


def test_a_failing_handler_is_a_500(api_gateway: LocalApiGateway, sessions: StandInSessions) -> None:
    def fail(event: Event) -> Any:
        raise RuntimeError("stand-in failure")

    sessions.answer = fail
    reply = request(api_gateway.port, "GET", f"/sessions/{uuid.uuid4()}")
    assert reply.status == 500 and reply.json() == {"message": "Internal Server Error"}


def test_a_slow_handler_is_a_503_and_runs_on(routes: StandInRoutes, sessions: StandInSessions) -> None:
    release, finished = threading.Event(), threading.Event()

    def slow(event: Event) -> Any:
        release.wait(WAIT_S)
        finished.set()
        return {"statusCode": 200}

    sessions.answer = slow
    handlers = dataclasses.replace(routes.handlers(), sessions=sessions)
    with LocalApiGateway(handlers, "127.0.0.1", 0, http_api=HttpApi(sessions, integration_timeout=0.3)) as gw:
        reply = request(gw.port, "GET", "/sessions")
        assert not finished.is_set()
        release.set()
        assert finished.wait(WAIT_S)
    assert reply.status == 503 and reply.json() == {"message": "Service Unavailable"}


def test_a_body_over_10_mb_is_refused_with_413(api_gateway: LocalApiGateway, sessions: StandInSessions) -> None:
    body = b"x" * (10 * 1024 * 1024 + 1)
    reply = request(api_gateway.port, "PATCH", f"/sessions/{uuid.uuid4()}", body, {"Content-Type": "text/plain"})
    assert reply.status == 413 and reply.json() == {"message": "Request Entity Too Large"}
    assert sessions.events.empty()


def test_malformed_requests_do_not_break_the_gateway(api_gateway: LocalApiGateway, sessions: StandInSessions) -> None:
    for raw in [
        b"PATCH /sessions/x HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"PATCH /sessions/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /sessions HTTP/1.1\r\nbroken header\r\n\r\n",
    ]:
        with socket.create_connection(("127.0.0.1", api_gateway.port), timeout=WAIT_S) as sock:
            sock.sendall(raw)
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert sessions.events.empty()
    # the gateway still answers both APIs
    assert request(api_gateway.port, "GET", "/sessions").status == 200
    with connect(f"{api_gateway.url}?sessionId={uuid.uuid4()}") as ws:
        assert ws.ping().wait(WAIT_S)


def test_the_gateway_logs_each_request(
    api_gateway: LocalApiGateway, sessions: StandInSessions, log_lines: list[str]
) -> None:
    request(api_gateway.port, "GET", "/sessions?limit=1")
    request(api_gateway.port, "GET", "/sessions/a/b")
    assert "  http GET /sessions → 200" in log_lines
    assert "  http GET /sessions/a/b → 404" in log_lines
    assert api_gateway.sessions_url == f"http://127.0.0.1:{api_gateway.port}/sessions"


def test_claims_reach_the_integration_as_strings() -> None:
    claims = {"sub": "abc", "exp": 1700000000, "email_verified": True, "cognito:groups": ["a", "b"]}
    assert claim_strings(claims) == {
        "sub": "abc",
        "exp": "1700000000",
        "email_verified": "true",
        "cognito:groups": "[a b]",
    }


# ---- the stack's wiring: the JWT authorizer under sign-in, the callback URL -----------------------


def _id_token(stack: LocalStack, username: str, password: str) -> str:
    pool = stack.user_pool
    assert pool is not None
    cognito = boto3.client(
        "cognito-idp", endpoint_url=pool.endpoint, region_name=pool.region, config=Config(signature_version=UNSIGNED)
    )
    result = cognito.initiate_auth(
        AuthFlow="USER_PASSWORD_AUTH",
        ClientId=pool.client_id,
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )
    return result["AuthenticationResult"]["IdToken"]


def test_under_sign_in_the_jwt_authorizer_answers_401_before_the_handler(sessions: StandInSessions) -> None:
    handlers = dataclasses.replace(StandInRoutes().handlers(), sessions=sessions)
    with LocalStack(port=0, quiet=True, handlers=handlers, auth="cognito") as stack:
        pool = stack.user_pool
        assert pool is not None
        token = _id_token(stack, pool.username, pool.password)
        header, payload, signature = token.split(".")
        tampered = f"{header}.{payload}.{signature[:-4]}{'AAAA' if signature[-4:] != 'AAAA' else 'BBBB'}"
        refusals = {
            name: request(stack.port, "GET", "/sessions", headers=headers)
            for name, headers in {
                "none": {},
                "empty": {"Authorization": "Bearer "},
                "tampered": {"Authorization": f"Bearer {tampered}"},
                "garbage": {"Authorization": "Bearer not-a-jwt"},
            }.items()
        }
        allowed = request(stack.port, "GET", "/sessions", headers={"Authorization": f"Bearer {token}"})
        bare = request(stack.port, "GET", "/sessions", headers={"Authorization": token})
        assert stack.sessions_url == f"http://127.0.0.1:{stack.port}/sessions"

    for name, reply in refusals.items():
        assert reply.status == 401, name
        assert reply.json() == {"message": "Unauthorized"}, name
        assert reply.headers["www-authenticate"].startswith("Bearer"), name
    assert 'error="invalid_token"' in refusals["tampered"].headers["www-authenticate"]
    assert allowed.status == 200 and bare.status == 200
    event = sessions.next()
    assert sessions.events.get(timeout=WAIT_S)["routeKey"] == "GET /sessions"  # the bare token's
    assert sessions.events.empty()  # the refused ones never reached it
    authorizer = event["requestContext"]["authorizer"]
    claims = authorizer["jwt"]["claims"]
    assert claims["sub"] == pool.test_user_sub and claims["token_use"] == "id"
    assert claims["aud"] == pool.client_id and claims["exp"].isdigit()
    assert authorizer["jwt"]["scopes"] is None


def test_the_stack_gives_the_sessions_lambda_the_management_endpoint(sessions: StandInSessions) -> None:
    before = os.environ.get("CONDUCTOR_WEBSOCKET_CALLBACK_URL")
    seen: list[str | None] = []
    sessions.answer = lambda event: (
        seen.append(os.environ.get("CONDUCTOR_WEBSOCKET_CALLBACK_URL")) or {"statusCode": 200}
    )
    handlers = dataclasses.replace(StandInRoutes().handlers(), sessions=sessions)
    with LocalStack(port=0, quiet=True, handlers=handlers) as stack:
        reply = request(stack.port, "GET", "/sessions")
        callback, port = stack.callback_url, stack.port
        assert "authorizer" not in sessions.next()["requestContext"]
    assert reply.status == 200
    assert seen == [callback] and callback == f"http://127.0.0.1:{port}/local"
    assert os.environ.get("CONDUCTOR_WEBSOCKET_CALLBACK_URL") == before  # restored on stop


def test_invocations_run_one_at_a_time_as_in_one_warm_container(
    api_gateway: LocalApiGateway, sessions: StandInSessions
) -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def busy(event: Event) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return {"statusCode": 200}

    sessions.answer = busy
    replies: list[Reply] = []
    threads = [
        threading.Thread(target=lambda: replies.append(request(api_gateway.port, "GET", "/sessions"))) for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert [reply.status for reply in replies] == [200] * 5
    assert most == 1


def test_a_head_request_gets_no_body(api_gateway: LocalApiGateway) -> None:
    reply = request(api_gateway.port, "HEAD", "/sessions")
    assert reply.status == 404 and reply.body == b""
