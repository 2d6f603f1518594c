"""Development and CI only: HMAC-SHA256 signed tokens for a stage with ``auth: dev-signed-token``.

The product's sign-in is the stage's Cognito user pool (:mod:`shared.adapters.jwt_auth`). This scheme is
for test rigs and CI that need a principal without a user pool: whoever holds the stage's signing
secret can mint a token for any principal, so no real user's stage uses it.

A token is ``v1.<payload>.<signature>``: the payload is base64url JSON ``{"sub": principal,
"iat": issued_at, "exp": expires_at}`` (the time claims are JSON numbers, ``exp`` an integer:
anything else is malformed) and the signature is HMAC-SHA256 over ``v1.<payload>``
with the stage's signing secret, base64url without padding. Pure: no AWS, no clock of its own
(``now`` is passed in), so the same code issues tokens on a laptop and checks them in Lambda.

Issue one from the command line (the secret is read from ``CONDUCTOR_AUTH_SECRET`` or stdin)::

    python -m shared.adapters.auth_tokens --principal ci-bot --ttl 3600
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import sys
import time

from shared.wire import bounded_json

VERSION = "v1"
MAX_PRINCIPAL_LENGTH = 128
MAX_TOKEN_LENGTH = 2048
MAX_TTL_SECONDS = 366 * 24 * 3600
# Time claims: where present, JSON numbers (not strings, not booleans, finite); ``exp`` an integer.
NUMERIC_CLAIMS = ("exp", "iat", "nbf", "auth_time")
CLAIMS_MAX_DEPTH = 4


class TokenError(Exception):
    """Base class: the token is not acceptable."""


class MalformedTokenError(TokenError):
    """The token is not of the ``v1.<payload>.<signature>`` form or its payload is invalid."""


class InvalidSignatureError(TokenError):
    """The signature does not match (wrong secret or tampered token)."""


class ExpiredTokenError(TokenError):
    """The token was valid but its expiry time has passed."""


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64decode(text: str) -> bytes:
    if not text or not _B64URL.issuperset(text):
        raise MalformedTokenError("token part is not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise MalformedTokenError("token part is not base64url") from exc


def _key(secret: str | bytes) -> bytes:
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    if len(key) < 32:
        raise ValueError("the signing secret must be at least 32 bytes")
    return key


def _signature(key: bytes, signing_input: str) -> bytes:
    return hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()


def _check_principal(principal: object) -> str:
    if (
        not isinstance(principal, str)
        or not principal
        or len(principal) > MAX_PRINCIPAL_LENGTH
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in principal)
    ):
        raise ValueError(f"principal must be 1-{MAX_PRINCIPAL_LENGTH} printable characters")
    return principal


def issue_token(secret: str | bytes, principal: str, ttl_seconds: int, now: float) -> str:
    """A token for ``principal`` valid from ``now`` (epoch seconds) for ``ttl_seconds``."""
    key = _key(secret)
    _check_principal(principal)
    if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise ValueError(f"ttl_seconds must be an integer in 1..{MAX_TTL_SECONDS}")
    issued_at = int(now)
    claims = {"sub": principal, "iat": issued_at, "exp": issued_at + ttl_seconds}
    payload = _b64encode(json.dumps(claims, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    signing_input = f"{VERSION}.{payload}"
    return f"{signing_input}.{_b64encode(_signature(key, signing_input))}"


def verify_token(secret: str | bytes, token: str, now: float) -> str:
    """The principal of ``token`` if its signature is valid and it has not expired at ``now``.

    Raises :class:`MalformedTokenError`, :class:`InvalidSignatureError` or
    :class:`ExpiredTokenError` (all :class:`TokenError`). The signature is checked, in constant
    time, before anything in the payload is trusted.
    """
    key = _key(secret)
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
        raise MalformedTokenError("token is empty or too long")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise MalformedTokenError(f"token is not of the form {VERSION}.<payload>.<signature>")
    _, payload, signature = parts
    if not payload or not _B64URL.issuperset(payload):
        raise MalformedTokenError("token payload is not base64url")
    given = _b64decode(signature)
    expected = _signature(key, f"{VERSION}.{payload}")
    if not hmac.compare_digest(given, expected):
        raise InvalidSignatureError("token signature does not match")
    try:
        claims = bounded_json.loads(_b64decode(payload), max_depth=CLAIMS_MAX_DEPTH)
    except bounded_json.JsonRefused as exc:
        raise MalformedTokenError("token payload is not JSON") from exc
    if not isinstance(claims, dict):
        raise MalformedTokenError("token payload is not an object")
    expires_at = claims.get("exp")
    if not isinstance(expires_at, int) or isinstance(expires_at, bool):
        raise MalformedTokenError("token has no integer 'exp'")
    for name in NUMERIC_CLAIMS:
        value = claims.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise MalformedTokenError(f"token claim {name!r} is not a number")
    try:
        principal = _check_principal(claims.get("sub"))
    except ValueError as exc:
        raise MalformedTokenError(f"token subject is invalid: {exc}") from exc
    if now >= expires_at:
        raise ExpiredTokenError("token has expired")
    return principal


def main(argv: list[str] | None = None) -> int:
    """Print a dev/CI token for ``--principal`` (stages with ``auth: dev-signed-token`` only); the
    secret comes from CONDUCTOR_AUTH_SECRET or stdin."""
    parser = argparse.ArgumentParser(prog="python -m shared.adapters.auth_tokens", description=main.__doc__)
    parser.add_argument("--principal", required=True, help="who the token identifies (e.g. a user id)")
    parser.add_argument("--ttl", type=int, default=86_400, help="lifetime in seconds (default: 1 day)")
    args = parser.parse_args(argv)
    secret = os.environ.get("CONDUCTOR_AUTH_SECRET") or sys.stdin.readline().strip()
    if not secret:
        parser.error("no secret: set CONDUCTOR_AUTH_SECRET or pipe the secret on stdin")
    try:
        print(issue_token(secret, args.principal, args.ttl, time.time()))
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
