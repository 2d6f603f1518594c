"""The Lambda proxy integration's shapes, as the local API Gateway WebSocket API builds them.

The events API Gateway hands the route Lambdas (``$connect``, ``$default``, ``$disconnect``) and
the ``$connect`` REQUEST authorizer, their common ``requestContext``, and what one invocation came
to (``Invocation``). The builders read the API (stage, domain, id, port, ``methodArn``) and the
connection (id, times, caller identity, the authorizer's context) through the small protocols
below, so they know nothing of the gateway's sockets.
"""

from __future__ import annotations

import base64
import copy
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from websockets.http11 import Request

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_HOP_BY_HOP = {"connection", "upgrade"}


class ApiFacts(Protocol):
    """What an event tells of the API a connection belongs to."""

    @property
    def stage(self) -> str: ...
    @property
    def api_id(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def domain_name(self) -> str: ...
    @property
    def connect_method_arn(self) -> str: ...


class ConnectionFacts(Protocol):
    """What an event tells of one WebSocket connection (set once its handshake reaches ``$connect``)."""

    @property
    def connection_id(self) -> str: ...
    @property
    def connected_at(self) -> float: ...
    @property
    def source_ip(self) -> str: ...
    @property
    def user_agent(self) -> str | None: ...
    @property
    def authorizer(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Invocation:
    """What one Lambda invocation came to: its return value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None
    latency_ms: int = 0

    @property
    def status(self) -> int:
        """The HTTP status API Gateway takes from a proxy integration's answer."""
        if self.error is not None:
            return 500
        if isinstance(self.value, Mapping):
            try:
                return int(self.value.get("statusCode", 200))
            except (TypeError, ValueError):
                return 502
        return 200


def aws_id() -> str:
    """An id shaped like API Gateway's connection, request and message ids (16 chars, ``=``)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(11)).decode("ascii")


def _clf_time(epoch: float) -> str:
    t = time.gmtime(epoch)
    return f"{t.tm_mday:02d}/{_MONTHS[t.tm_mon - 1]}/{t.tm_year}:{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} +0000"


def _multi_value(pairs: list[tuple[str, str]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """API Gateway's ``headers``/``multiValueHeaders`` pair: the last value wins in the former."""
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    return {name: values[-1] for name, values in multi.items()}, multi


def request_context(api: ApiFacts, ws: ConnectionFacts, route_key: str, event_type: str) -> dict[str, Any]:
    now = time.time()
    request_id = aws_id()
    identity: dict[str, str] = {"sourceIp": ws.source_ip}
    if ws.user_agent is not None:
        identity["userAgent"] = ws.user_agent
    return {
        "routeKey": route_key,
        "eventType": event_type,
        "extendedRequestId": request_id,
        "requestTime": _clf_time(now),
        "messageDirection": "IN",
        "stage": api.stage,
        "connectedAt": int(ws.connected_at * 1000),
        "requestTimeEpoch": int(now * 1000),
        "identity": identity,
        "requestId": request_id,
        "domainName": api.domain_name,
        "connectionId": ws.connection_id,
        "apiId": api.api_id,
        **({"authorizer": dict(ws.authorizer)} if ws.authorizer is not None else {}),
    }


def _forwarded_headers(
    api: ApiFacts, ws: ConnectionFacts, request: Request, *, hop_by_hop: bool
) -> list[tuple[str, str]]:
    pairs = [(name, value) for name, value in request.headers.raw_items()]
    if not hop_by_hop:
        pairs = [(name, value) for name, value in pairs if name.lower() not in _HOP_BY_HOP]
    return [
        *pairs,
        ("X-Amzn-Trace-Id", f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)}"),
        ("X-Forwarded-For", ws.source_ip),
        ("X-Forwarded-Port", str(api.port)),
        ("X-Forwarded-Proto", "http"),
    ]


def connect_event(api: ApiFacts, ws: ConnectionFacts, request: Request, context: dict[str, Any]) -> dict[str, Any]:
    headers, multi_value_headers = _multi_value(_forwarded_headers(api, ws, request, hop_by_hop=False))
    event: dict[str, Any] = {"headers": headers, "multiValueHeaders": multi_value_headers}
    query = parse_qsl(urlsplit(request.path).query, keep_blank_values=True)
    if query:
        event["queryStringParameters"], event["multiValueQueryStringParameters"] = _multi_value(query)
    event["requestContext"] = context
    event["isBase64Encoded"] = False
    return event


def authorizer_event(api: ApiFacts, ws: ConnectionFacts, request: Request, context: dict[str, Any]) -> dict[str, Any]:
    """API Gateway's WebSocket REQUEST authorizer input: the handshake's headers (the
    upgrade ones too) and query string, and the ``$connect`` request context."""
    headers, multi_value_headers = _multi_value(_forwarded_headers(api, ws, request, hop_by_hop=True))
    event: dict[str, Any] = {
        "type": "REQUEST",
        "methodArn": api.connect_method_arn,
        "headers": headers,
        "multiValueHeaders": multi_value_headers,
    }
    query = parse_qsl(urlsplit(request.path).query, keep_blank_values=True)
    if query:
        event["queryStringParameters"], event["multiValueQueryStringParameters"] = _multi_value(query)
    event["stageVariables"] = {}
    event["requestContext"] = copy.deepcopy(context)
    return event


def message_event(api: ApiFacts, ws: ConnectionFacts, message: str) -> dict[str, Any]:
    context = request_context(api, ws, "$default", "MESSAGE")
    context["messageId"] = aws_id()
    return {"requestContext": context, "body": message, "isBase64Encoded": False}


def disconnect_event(api: ApiFacts, ws: ConnectionFacts, code: int, reason: str) -> dict[str, Any]:
    headers, multi_value_headers = _multi_value(
        [("Host", api.domain_name), ("x-api-key", ""), ("X-Forwarded-For", ""), ("x-restapi", "")]
    )
    context = request_context(api, ws, "$disconnect", "DISCONNECT")
    context["disconnectStatusCode"] = code
    context["disconnectReason"] = reason
    return {
        "headers": headers,
        "multiValueHeaders": multi_value_headers,
        "requestContext": context,
        "isBase64Encoded": False,
    }
