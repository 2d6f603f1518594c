"""The local API Gateway's ``$connect`` REQUEST authorizer: its identity sources and its answer.

A handshake missing an identity source is refused without calling the authorizer; the
authorizer's answer (a policy, or ``Exception("Unauthorized")``) is checked against API
Gateway's result quota and evaluated as IAM evaluates it, and decides the handshake's status
and the ``requestContext.authorizer`` every route of the connection then sees.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from websockets.http11 import Request

from conductor_local.gateway.events import Invocation

logger = logging.getLogger(__name__)

MAX_AUTHORIZER_RESULT_BYTES = 8 * 1024
"""API Gateway's Lambda authorizer result size quota."""


class AuthorizerError(Exception):
    """The authorizer's answer is not a valid policy: API Gateway answers 500."""


def authorizer_decision(invocation: Invocation, method_arn: str) -> tuple[int, dict[str, Any] | None]:
    """The handshake status an authorizer invocation leads to, and (if allowed) the
    ``requestContext.authorizer`` every route of the connection then sees.

    ``Exception("Unauthorized")`` → 401; a policy that does not allow ``execute-api:Invoke`` on
    ``method_arn`` (an explicit Deny, or no matching Allow) → 403; anything malformed → 500.
    """
    if invocation.error is not None:
        return (401 if str(invocation.error) == "Unauthorized" else 500), None
    try:
        principal_id, document, context = _parse_authorizer_result(invocation.value)
        allowed = policy_allows(document, method_arn)
    except AuthorizerError as exc:
        logger.error("the $connect authorizer answered an invalid policy: %s", exc)
        return 500, None
    if not allowed:
        return 403, None
    strings = {key: _context_string(value) for key, value in context.items()}
    return 200, {**strings, "principalId": principal_id, "integrationLatency": invocation.latency_ms}


def _parse_authorizer_result(result: Any) -> tuple[str, Mapping[str, Any], Mapping[str, Any]]:
    if not isinstance(result, Mapping):
        raise AuthorizerError("not a JSON object")
    try:
        size = len(json.dumps(result, separators=(",", ":")).encode())
    except (TypeError, ValueError) as exc:
        raise AuthorizerError(f"not serializable: {exc}") from None
    if size > MAX_AUTHORIZER_RESULT_BYTES:
        raise AuthorizerError(f"{size} bytes, over the {MAX_AUTHORIZER_RESULT_BYTES} byte quota")
    principal_id = result.get("principalId")
    document = result.get("policyDocument")
    context = result.get("context") or {}
    if not isinstance(principal_id, str) or not principal_id:
        raise AuthorizerError("no principalId")
    if not isinstance(document, Mapping):
        raise AuthorizerError("no policyDocument")
    if not isinstance(context, Mapping):
        raise AuthorizerError("context is not an object")
    for key, value in context.items():
        if not isinstance(value, str | int | float | bool):
            raise AuthorizerError(f"context value of {key!r} is not a string, number or boolean")
    return principal_id, document, context


def policy_allows(document: Mapping[str, Any], resource: str, action: str = "execute-api:Invoke") -> bool:
    """IAM evaluation of one policy document for one action on one resource: an explicit Deny wins,
    else some Allow must match; ``*`` and ``?`` are wildcards (actions match case-insensitively)."""
    statements = document.get("Statement")
    if isinstance(statements, Mapping):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise AuthorizerError("policyDocument has no Statement")
    allowed = False
    for statement in statements:
        if not isinstance(statement, Mapping) or statement.get("Effect") not in ("Allow", "Deny"):
            raise AuthorizerError("a Statement without an Allow or Deny Effect")
        actions, resources = _strings(statement.get("Action")), _strings(statement.get("Resource"))
        if not any(_wildcard_match(pattern, action, ignore_case=True) for pattern in actions):
            continue
        if not any(_wildcard_match(pattern, resource) for pattern in resources):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = True
    return allowed


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise AuthorizerError("Action and Resource must be strings or lists of strings")


def _wildcard_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL) is not None


def _context_string(value: str | float | bool) -> str:
    """Authorizer context values reach the routes as strings (``true``, ``123``)."""
    return value if isinstance(value, str) else json.dumps(value)


def identity_value(request: Request, source: str) -> str | None:
    """The value of one identity source (``route.request.header.X`` / ``route.request.querystring.X``)."""
    kind, _, name = source.removeprefix("route.request.").partition(".")
    if kind == "header":
        values = request.headers.get_all(name)
        return values[-1] if values else None
    if kind == "querystring":
        query = dict(parse_qsl(urlsplit(request.path).query, keep_blank_values=True))
        return query.get(name)
    raise ValueError(f"unsupported identity source {source!r}")
