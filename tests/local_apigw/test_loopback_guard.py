"""Every loopback endpoint of the local stack as a web page meets it: another origin and a re-bound
``Host`` are refused (403, no CORS header) at DynamoDB, the user pool, Lambda, Bedrock, the gateway's
HTTP side and its WebSocket handshake; native clients and the console keep working."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from conductor_local.loopback_guard import LoopbackGuard
from conductor_local.stack import LocalStack
from tests.local_apigw.conftest import WAIT_S

EVIL = "http://evil.example"


@dataclass(frozen=True)
class Probe:
    """One request to one endpoint, and the status a native client gets for it."""

    name: str
    method: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


PROBES = (
    Probe(
        "dynamodb",
        "POST",
        "/",
        (("X-Amz-Target", "DynamoDB_20120810.Scan"), ("Content-Type", "application/x-amz-json-1.0")),
        b'{"TableName": "voiceide-conductor-local"}',
    ),
    Probe(
        "user pool admin",
        "POST",
        "/",
        (
            ("X-Amz-Target", "AWSCognitoIdentityProviderService.ListUsers"),
            ("Content-Type", "application/x-amz-json-1.1"),
        ),
        b'{"UserPoolId": "%(pool)s"}',
    ),
    Probe(
        "lambda",
        "POST",
        "/2015-03-31/functions/voiceide-conductor-turn/invocations",
        (("X-Amz-Invocation-Type", "DryRun"),),
        b"{}",
    ),
    Probe("bedrock", "POST", "/model/any/converse", (("Content-Type", "application/json"),), b"{}"),
    Probe("console config", "GET", "/console/config.json"),
    Probe("sessions API", "GET", "/sessions"),
    Probe("management API", "GET", "/local/@connections/abc"),
    Probe(
        "websocket handshake",
        "GET",
        "/?sessionId=00000000-0000-4000-8000-000000000000",
        (
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ),
    ),
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack("127.0.0.1", 0, quiet=True, auth="cognito") as running:
        yield running


def port_of(stack: LocalStack, probe: Probe) -> int:
    if probe.name in ("dynamodb", "user pool admin"):
        url = stack.dynamodb_endpoint
    elif probe.name == "lambda":
        url = stack.lambda_server.url
    elif probe.name == "bedrock":
        url = stack.bedrock_endpoint or ""
    else:
        return stack.port
    port = urlsplit(url).port
    assert port is not None
    return port


def send(
    stack: LocalStack, probe: Probe, *, host: str | None = None, origin: str | None = None, method: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """The probe over a raw socket (any ``Host``, any method): status, headers (lower-cased), body."""
    port = port_of(stack, probe)
    assert stack.user_pool is not None
    body = probe.body.replace(b"%(pool)s", stack.user_pool.user_pool_id.encode())
    lines = [f"{method or probe.method} {probe.path} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}"]
    if method != "OPTIONS":  # a preflight carries none of the request's own headers
        lines += [f"{name}: {value}" for name, value in probe.headers]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    if method == "OPTIONS":
        lines += ["Access-Control-Request-Method: POST", "Access-Control-Request-Headers: content-type,x-amz-target"]
    if body and method != "OPTIONS":
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + (body if method != "OPTIONS" else b"")
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
        conn.sendall(raw)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
        if answer.startswith(b"HTTP/1.1 101"):
            conn.close()
    head, _, rest = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, rest


def cors_headers(headers: dict[str, str]) -> list[str]:
    return [name for name in headers if name.startswith("access-control-allow")]


@pytest.mark.parametrize("probe", PROBES, ids=[probe.name for probe in PROBES])
def test_native_clients_are_answered(stack: LocalStack, probe: Probe) -> None:
    status, _, _ = send(stack, probe)
    assert status != 403
    assert status < 500
    for name in ("localhost", "[::1]"):  # every loopback spelling, with the port
        assert send(stack, probe, host=f"{name}:{port_of(stack, probe)}")[0] == status


@pytest.mark.parametrize("probe", PROBES, ids=[probe.name for probe in PROBES])
def test_another_origin_is_refused_without_cors_headers(stack: LocalStack, probe: Probe) -> None:
    status, headers, _ = send(stack, probe, origin=EVIL)
    assert status == 403
    assert cors_headers(headers) == []


@pytest.mark.parametrize("probe", PROBES, ids=[probe.name for probe in PROBES])
def test_a_cors_preflight_from_another_origin_is_refused(stack: LocalStack, probe: Probe) -> None:
    status, headers, _ = send(stack, probe, origin=EVIL, method="OPTIONS")
    assert status == 403
    assert cors_headers(headers) == []


@pytest.mark.parametrize("probe", PROBES, ids=[probe.name for probe in PROBES])
@pytest.mark.parametrize(
    "host", ["attacker.example:{port}", "localhost.attacker.example:{port}", "127.0.0.1:1", "localhost"]
)
def test_a_rebound_host_is_refused(stack: LocalStack, probe: Probe, host: str) -> None:
    status, headers, body = send(stack, probe, host=host.format(port=port_of(stack, probe)))
    assert status == 403
    assert cors_headers(headers) == []
    assert b"VoiceIDE-local" not in body  # the test password never leaves


def test_the_console_config_with_the_test_password_goes_to_the_console_only(stack: LocalStack) -> None:
    probe = next(p for p in PROBES if p.name == "console config")
    own = f"http://localhost:{stack.port}"
    status, _, body = send(stack, probe, origin=own)
    assert status == 200 and json.loads(body)["testUser"]["password"]
    for origin in (EVIL, "null", f"http://127.0.0.1:{stack.port + 1}"):
        status, _, body = send(stack, probe, origin=origin)
        assert status == 403 and b"password" not in body


def test_the_console_signs_in_at_the_user_pool_and_does_nothing_else_there(stack: LocalStack) -> None:
    pool = stack.user_pool
    assert pool is not None
    console = f"http://localhost:{stack.port}"
    sign_in = Probe(
        "dynamodb",  # the moto server's port
        "POST",
        "/",
        (
            ("X-Amz-Target", "AWSCognitoIdentityProviderService.InitiateAuth"),
            ("Content-Type", "application/x-amz-json-1.1"),
        ),
        json.dumps(
            {
                "AuthFlow": "USER_PASSWORD_AUTH",
                "ClientId": pool.client_id,
                "AuthParameters": {"USERNAME": pool.username, "PASSWORD": pool.password},
            }
        ).encode(),
    )
    status, headers, _ = send(stack, sign_in, method="OPTIONS", origin=console)
    assert status == 200 and headers["access-control-allow-origin"] == console
    status, headers, _ = send(stack, sign_in, origin=console)
    assert status == 200 and headers["access-control-allow-origin"] == console  # its own origin, never *
    assert send(stack, sign_in, origin=EVIL)[0] == 403
    for probe in PROBES[:2]:  # the tables and the admin API are not the console's business
        status, headers, _ = send(stack, probe, origin=console)
        assert status == 403 and cors_headers(headers) == []


def test_lambda_bedrock_and_the_management_api_answer_no_browser_at_all(stack: LocalStack) -> None:
    console = f"http://127.0.0.1:{stack.port}"
    for name in ("lambda", "bedrock", "management API"):
        probe = next(p for p in PROBES if p.name == name)
        assert send(stack, probe, origin=console)[0] == 403


def test_the_console_origin_opens_a_session(stack: LocalStack) -> None:
    probe = next(p for p in PROBES if p.name == "websocket handshake")
    status, _, _ = send(stack, probe, origin=f"http://localhost:{stack.port}")
    assert status == 401  # past the Origin check: the authorizer wants a token


def test_boto3_still_reaches_every_service(stack: LocalStack) -> None:
    assert "voiceide-conductor-local" in stack.dynamodb_client().list_tables()["TableNames"]
    assert stack.user_pool is not None
    users = stack.cognito_client().list_users(UserPoolId=stack.user_pool.user_pool_id)["Users"]
    assert [user["Username"] for user in users] == [stack.user_pool.username]
    client = http.client.HTTPConnection("localhost", stack.port, timeout=WAIT_S)
    client.request("GET", "/console/config.json")
    assert client.getresponse().status == 200


# ---- the rules themselves -------------------------------------------------------------------------


def test_a_specific_bind_answers_its_own_address_too() -> None:
    guard = LoopbackGuard(bind="192.168.1.5")
    assert guard.host_refusal("192.168.1.5:8080", 8080) is None
    assert guard.host_refusal("127.0.0.1:8080", 8080) is None
    assert guard.host_refusal("192.168.1.6:8080", 8080) is not None
    assert guard.host_refusal("rebound.example:8080", 8080) is not None


def test_a_wildcard_bind_answers_addresses_never_names() -> None:
    guard = LoopbackGuard(bind="0.0.0.0")
    for host in ("192.168.1.5:8080", "[fe80::1]:8080", "[::1]:8080", "localhost:8080"):
        assert guard.host_refusal(host, 8080) is None, host
    for host in ("rebound.example:8080", "192.168.1.5:80", "192.168.1.5", None, "", "a@b:8080", "[::1:8080"):
        assert guard.host_refusal(host, 8080) is not None, host


def test_origins_are_matched_exactly() -> None:
    guard = LoopbackGuard(origins=frozenset({"http://localhost:8080"}))
    assert guard.origin_refusal([]) is None
    assert guard.origin_refusal(["http://localhost:8080"]) is None
    assert guard.origin_refusal(["HTTP://LOCALHOST:8080/"]) is None
    for origins in (["http://localhost:8081"], ["null"], ["http://localhost:8080", "http://localhost:8080"]):
        assert guard.origin_refusal(origins) is not None
    assert LoopbackGuard(origins=frozenset({"*"})).origin_refusal([EVIL]) is None
