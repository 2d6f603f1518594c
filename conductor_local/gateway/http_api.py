"""The local API Gateway's HTTP API: the sessions API beside the WebSocket, on the same host and port.

A deployed stage serves ``/sessions`` from an API Gateway HTTP API (its own host) in front of the
sessions Lambda; locally the gateway's port answers it too. Each plain HTTP request whose path
starts with ``/sessions`` becomes a Lambda proxy event of payload format 2.0, as API Gateway
builds it (``version``, ``routeKey``, ``rawPath``, ``rawQueryString``, lower-cased ``headers``,
``queryStringParameters``, ``pathParameters``, ``body``/``isBase64Encoded`` and the
``requestContext``), and the handler's answer is written back as API Gateway reads a 2.0 answer:
``statusCode``/``headers``/``cookies``/``body``, or any other JSON value as a 200 JSON body.

As API Gateway does: a method and path matching no route answers ``404 {"message":"Not Found"}``;
a body over 10 MB ``413``; a handler that raises or answers something unreadable ``500
{"message":"Internal Server Error"}``; one that takes longer than the 30 s integration timeout
``503 {"message":"Service Unavailable"}`` (it runs on). With a JWT authorizer (sign-in), a request
without a valid token in ``Authorization`` (with or without ``Bearer``) is answered ``401
{"message":"Unauthorized"}`` before the handler runs; a valid one reaches it as
``requestContext.authorizer.jwt`` (``claims`` as strings, ``scopes`` from ``scope``). Tokens are
verified as the WebSocket's ``$connect`` authorizer verifies them (``shared.adapters.jwt_auth``): issuer,
app client, expiry, signature against the user pool's JWKS.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import http
import json
import logging
import re
import secrets
import string
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import jwt

from conductor_local.gateway.events import Invocation, aws_id
from conductor_local.gateway.management import ManagementRequest
from conductor_local.lambda_runtime.context import LocalLambdaContext
from shared.adapters.jwt_auth import CognitoSettings, CognitoVerifier, KeysUnavailable, TokenRejected
from shared.wire.log_safety import safe_text

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]

SESSIONS_PATH = "/sessions"
SESSIONS_ROUTES: tuple[str, ...] = (
    "GET /sessions",
    "GET /sessions/{id}",
    "PATCH /sessions/{id}",
    "POST /sessions/{id}/end",
    "DELETE /sessions/{id}",
    "GET /memories",
    "DELETE /memories",
    "DELETE /memories/{id}",
)
"""The sessions API's routes, as its HTTP API declares them (docs/sessions-api.md): the person's
sessions, and what the conductor remembers of them."""
HTTP_INTEGRATION_TIMEOUT_S = 30.0
"""An HTTP API's integration timeout (its maximum, and its default for Lambda)."""
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
"""An HTTP API's payload quota."""
FUNCTION_NAME = "voiceide-conductor-sessions-api"
FUNCTION_TIMEOUT_S = 29.0
_REQUEST_LINE = re.compile(rb"^[A-Z]+ /(?:sessions|memories)(?:[/?# ]|$)")
_TEXT_TYPES = re.compile(
    r"^(text/|application/(json|xml|javascript|x-www-form-urlencoded)|application/[^;]*\+(json|xml))"
)
_TOKEN_PROBLEMS = {
    "expired": "the token has expired",
    "issuer": "the token does not have a valid issuer",
    "audience": "the token does not have a valid audience",
    "signature": "the token does not have a valid signature",
    "not_yet_valid": "the token is not valid yet",
}


def is_http_api_request_line(line: bytes) -> bool:
    """Whether an HTTP request line addresses the sessions API (any method, ``/sessions…``, ``/memories…``)."""
    return _REQUEST_LINE.match(line) is not None


def match_route(
    method: str, path: str, route_keys: Sequence[str] = SESSIONS_ROUTES
) -> tuple[str, dict[str, str]] | None:
    """The route key a request matches and its path parameters (URL-decoded), or None.

    A ``{name}`` segment matches one non-empty path segment; everything else matches exactly, as
    an HTTP API's routes do (no greedy ``{proxy+}`` here)."""
    segments = path.split("/")
    for key in route_keys:
        route_method, template = key.split(" ", 1)
        parts = template.split("/")
        if route_method != method or len(parts) != len(segments):
            continue
        parameters: dict[str, str] = {}
        for part, segment in zip(parts, segments, strict=True):
            if part.startswith("{") and part.endswith("}"):
                if not segment:
                    break
                parameters[part[1:-1]] = unquote(segment)
            elif part != segment:
                break
        else:
            return key, parameters
    return None


def _clf_time(epoch: float) -> str:
    return time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(epoch))


def claim_strings(claims: Mapping[str, Any]) -> dict[str, str]:
    """JWT claims as an HTTP API hands them to the integration: every value a string, lists as
    ``[a b]``."""

    def text(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return "[" + " ".join(text(item) for item in value) + "]"
        if isinstance(value, dict):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    return {name: text(value) for name, value in claims.items()}


class Refused(Exception):
    """The JWT authorizer refused the request: 401, with the ``www-authenticate`` challenge."""

    def __init__(self, challenge: str) -> None:
        super().__init__("Unauthorized")
        self.challenge = challenge


class JwtAuthorizer:
    """API Gateway's JWT authorizer for a Cognito user pool, verifying as the ``$connect`` authorizer does.

    ``authorize`` blocks (it may fetch the JWKS): run it off the event loop."""

    def __init__(self, settings: CognitoSettings) -> None:
        self.settings = settings
        self.verifier = CognitoVerifier(settings)

    def authorize(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """``requestContext.authorizer`` for a request with these (lower-cased) headers; raises
        ``Refused``, or ``KeysUnavailable`` when the pool's keys cannot be fetched."""
        value = headers.get("authorization", "").strip()
        scheme, _, rest = value.partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else value
        if not token:
            raise Refused("Bearer")
        try:
            self.verifier.verify(token)
        except TokenRejected as rejected:
            problem = _TOKEN_PROBLEMS.get(rejected.reason, "the token is not valid")
            raise Refused(f'Bearer scope="" error="invalid_token" error_description="{problem}"') from None
        claims = jwt.decode(token, options={"verify_signature": False})
        scope = claims.get("scope")
        scopes = scope.split() if isinstance(scope, str) and scope.strip() else None
        return {"jwt": {"claims": claim_strings(claims), "scopes": scopes}}


@dataclass(frozen=True)
class HttpAnswer:
    """What goes back to the client: status, headers (besides the gateway's own) and body."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def to_bytes(self, request_id: str) -> bytes:
        try:
            phrase = http.HTTPStatus(self.status).phrase
        except ValueError:
            phrase = ""
        lines = [
            f"HTTP/1.1 {self.status} {phrase}",
            f"Date: {email.utils.formatdate(usegmt=True)}",
            "Connection: close",
            f"apigw-requestid: {request_id}",
        ]
        for name, value in self.headers:
            lines.append(f"{_header_text(name)}: {_header_text(value)}")
        body = b"" if self.status in (204, 304) or self.status < 200 else self.body
        if self.status not in (204, 304):
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body


def _header_text(value: str) -> str:
    """A header name or value that cannot break the response head (no CR, LF or other controls)."""
    return "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in value)


def gateway_answer(status: int, message: str, *extra: tuple[str, str]) -> HttpAnswer:
    """An answer of API Gateway itself: ``{"message": ...}``."""
    body = json.dumps({"message": message}, separators=(",", ":")).encode()
    return HttpAnswer(status, (("Content-Type", "application/json"), *extra), body)


NOT_FOUND = gateway_answer(404, "Not Found")
INTERNAL_ERROR = gateway_answer(500, "Internal Server Error")
SERVICE_UNAVAILABLE = gateway_answer(503, "Service Unavailable")
TOO_LARGE = gateway_answer(413, "Request Entity Too Large")


def integration_answer(invocation: Invocation) -> HttpAnswer:
    """How API Gateway reads a payload-2.0 Lambda answer; anything unreadable is a 500."""
    if invocation.error is not None:
        return INTERNAL_ERROR
    value = invocation.value
    if not (isinstance(value, Mapping) and "statusCode" in value):
        # any other JSON: a 200 whose body is that JSON (a string is the body as it is)
        try:
            body = value if isinstance(value, str) else json.dumps(value)
        except (TypeError, ValueError):
            return INTERNAL_ERROR
        return HttpAnswer(200, (("Content-Type", "application/json"),), body.encode("utf-8", "replace"))
    try:
        return _proxy_answer(value)
    except (TypeError, ValueError) as problem:
        logger.error("the sessions API's Lambda answered a malformed response: %s", problem)
        return INTERNAL_ERROR


def _proxy_answer(value: Mapping[str, Any]) -> HttpAnswer:
    status = value["statusCode"]
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise ValueError(f"statusCode {status!r}")
    headers = value.get("headers") or {}
    cookies = value.get("cookies") or []
    if not isinstance(headers, Mapping) or not isinstance(cookies, list):
        raise TypeError("headers must be an object and cookies a list")
    pairs = [(str(name), _scalar(item)) for name, item in headers.items()]
    pairs += [("Set-Cookie", str(cookie)) for cookie in cookies]
    if not any(name.lower() == "content-type" for name, _ in pairs):
        pairs.append(("Content-Type", "text/plain; charset=utf-8"))
    body = value.get("body")
    if body is None:
        data = b""
    elif not isinstance(body, str):
        raise TypeError("body must be a string")
    elif value.get("isBase64Encoded"):
        data = base64.b64decode(body, validate=True)
    else:
        data = body.encode("utf-8", "replace")
    return HttpAnswer(status, tuple(pairs), data)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise TypeError("header values must be strings, numbers or booleans")


class HttpApi:
    """The sessions API's HTTP API: routes, the optional JWT authorizer, and the Lambda behind them.

    ``handler`` is the sessions Lambda's handler (``lambdas.sessions_api.handler`` in the stack), run
    in a worker thread per request as the gateway runs its WebSocket routes' handlers (a Lambda
    invocation: a fresh ``context_factory()`` context; past ``integration_timeout`` the client
    gets 503 and the invocation runs on). Invocations run one at a time, as in one warm container:
    a Lambda's module state is never shared by two requests at once (Powertools' resolver keeps
    the current event on its app). ``authorizer`` (None: no sign-in) checks each request first.
    """

    def __init__(
        self,
        handler: Handler | None,
        *,
        authorizer: JwtAuthorizer | None = None,
        route_keys: Sequence[str] = SESSIONS_ROUTES,
        integration_timeout: float = HTTP_INTEGRATION_TIMEOUT_S,
        context_factory: Callable[[], Any] | None = None,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        on_log: Callable[[str], None] | None = None,
    ) -> None:
        self.handler = handler
        self.authorizer = authorizer
        self.route_keys = tuple(route_keys)
        self.integration_timeout = integration_timeout
        self.api_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))
        self.region = region
        self.account_id = account_id
        self._context_factory = context_factory or (lambda: LocalLambdaContext(FUNCTION_NAME, FUNCTION_TIMEOUT_S))
        self.on_log = on_log
        self._container = threading.Lock()

    async def answer(self, request: ManagementRequest, *, source_ip: str, domain_name: str, port: int) -> bytes:
        """The complete HTTP response to one request (never raises for what a client sends)."""
        request_id = aws_id()
        target = urlsplit(request.target)
        try:
            answer = await self._answer(request, request_id, source_ip, domain_name, port)
        except Exception:
            logger.exception("the HTTP API failed on %s %s", safe_text(request.method, 16), safe_text(target.path, 120))
            answer = INTERNAL_ERROR
        self._log(f"  http {safe_text(request.method, 16)} {safe_text(target.path, 120)} → {answer.status}")
        if request.method == "HEAD":  # never a body, whatever the answer
            answer = HttpAnswer(answer.status, answer.headers)
        return answer.to_bytes(request_id)

    async def _answer(
        self, request: ManagementRequest, request_id: str, source_ip: str, domain_name: str, port: int
    ) -> HttpAnswer:
        path = urlsplit(request.target).path
        route = match_route(request.method, path, self.route_keys) if self.handler is not None else None
        if route is None:
            return NOT_FOUND
        if len(request.body) > MAX_PAYLOAD_BYTES:
            return TOO_LARGE
        authorizer: dict[str, Any] | None = None
        if self.authorizer is not None:
            try:
                authorizer = await asyncio.to_thread(self.authorizer.authorize, request.headers)
            except Refused as refused:
                return gateway_answer(401, "Unauthorized", ("www-authenticate", refused.challenge))
            except KeysUnavailable:
                logger.exception("the JWT authorizer cannot fetch the user pool's keys")
                return INTERNAL_ERROR
        route_key, parameters = route
        event = self.event(request, route_key, parameters, request_id, source_ip, domain_name, port, authorizer)
        assert self.handler is not None
        invocation = await self._integrate(self.handler, event)
        return SERVICE_UNAVAILABLE if invocation is None else integration_answer(invocation)

    def event(
        self,
        request: ManagementRequest,
        route_key: str,
        parameters: Mapping[str, str],
        request_id: str,
        source_ip: str,
        domain_name: str,
        port: int,
        authorizer: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The payload-2.0 event API Gateway hands the integration for this request."""
        now = time.time()
        target = urlsplit(request.target)
        headers = {name.lower(): value for name, value in request.headers.items() if name.lower() != "cookie"}
        headers.setdefault("host", domain_name)
        headers |= {
            "x-amzn-trace-id": f"Root=1-{int(now):08x}-{secrets.token_hex(12)}",
            "x-forwarded-for": source_ip,
            "x-forwarded-port": str(port),
            "x-forwarded-proto": "http",
        }
        headers.pop("connection", None)
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": target.path,
            "rawQueryString": target.query,
        }
        cookie = request.headers.get("cookie")
        if cookie:
            event["cookies"] = [part.strip() for part in cookie.split(";") if part.strip()]
        event["headers"] = headers
        query = parse_qsl(target.query, keep_blank_values=True)
        if query:
            joined: dict[str, str] = {}
            for name, value in query:
                joined[name] = f"{joined[name]},{value}" if name in joined else value
            event["queryStringParameters"] = joined
        context: dict[str, Any] = {
            "accountId": self.account_id,
            "apiId": self.api_id,
        }
        if authorizer is not None:
            context["authorizer"] = dict(authorizer)
        context |= {
            "domainName": domain_name,
            "domainPrefix": domain_name.split(".")[0].split(":")[0],
            "http": {
                "method": request.method,
                "path": target.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": request.headers.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route_key,
            "stage": "$default",
            "time": _clf_time(now),
            "timeEpoch": int(now * 1000),
        }
        event["requestContext"] = context
        if parameters:
            event["pathParameters"] = dict(parameters)
        if request.body:
            event["body"], event["isBase64Encoded"] = _body(request.body, request.headers.get("content-type", ""))
        else:
            event["isBase64Encoded"] = False
        return event

    async def _integrate(self, handler: Handler, event: dict[str, Any]) -> Invocation | None:
        """Invoke ``handler`` in its own worker thread; None past the integration timeout (it runs on)."""
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[Invocation] = loop.create_future()

        def resolve(result: Invocation) -> None:
            if not outcome.done():
                outcome.set_result(result)

        def work() -> None:
            started = time.monotonic()
            try:
                with self._container:
                    result = Invocation(value=handler(event, self._context_factory()))
            except Exception as exc:
                logger.exception("the sessions API's handler failed on %s", event["routeKey"])
                result = Invocation(error=exc)
            result = Invocation(result.value, result.error, int((time.monotonic() - started) * 1000))
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for it
                loop.call_soon_threadsafe(resolve, result)

        threading.Thread(target=work, name=f"lambda {event['routeKey']}", daemon=True).start()
        try:
            return await asyncio.wait_for(asyncio.shield(outcome), self.integration_timeout)
        except TimeoutError:
            return None

    def _log(self, line: str) -> None:
        if self.on_log is not None:
            try:
                self.on_log(line)
            except Exception:
                logger.warning("could not write a log line", exc_info=True)


def _body(data: bytes, content_type: str) -> tuple[str, bool]:
    """The event's ``body`` and ``isBase64Encoded``: text as it is, anything else base64."""
    if not content_type or _TEXT_TYPES.match(content_type.strip().lower()):
        try:
            return data.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), True
