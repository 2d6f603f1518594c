"""``$connect`` REQUEST authorizer: who is opening this WebSocket, and for which session.

API Gateway calls it with the handshake's headers and query string (``?sessionId=<uuid>``). The
token is read from ``Authorization: Bearer <token>``, else from the ``token`` query string
parameter (a WebSocket upgrade cannot always carry headers). ``CONDUCTOR_AUTH_MODE`` picks how it
is checked:

* ``cognito`` (the default, the product's sign-in): an ID or access token of the stage's Cognito
  user pool, verified against the pool's public JWKS (:mod:`shared.adapters.jwt_auth`); the principal is
  the user's ``sub``.
* ``dev-signed-token``: development and CI only, an HMAC token of :mod:`shared.adapters.auth_tokens` signed
  with the key in Secrets Manager (``CONDUCTOR_AUTH_SECRET_ARN``, cached by Powertools Parameters
  for ``SECRET_MAX_AGE_SECONDS``).

A valid token yields an IAM policy allowing ``execute-api:Invoke`` on the request's
``methodArn``, with ``principalId`` and ``sessionId`` in the authorizer context, which reaches the
connect handler as ``requestContext.authorizer.principalId`` / ``.sessionId`` (the connect handler
binds a new session to its principal and refuses any other principal with 403). A missing token
or sessionId is answered ``Unauthorized`` (401), a bad or expired token with a Deny policy (403).
When the pool's JWKS cannot be fetched the function fails, so API Gateway answers 500 and the
authorizer's error alarm fires, rather than telling every user they are forbidden. The token is
never logged, not even on failure: only a short reason code is.
"""

from __future__ import annotations

import os
import time
from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import APIGatewayAuthorizerRequestEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.adapters import auth_tokens
from shared.adapters.jwt_auth import CognitoSettings, CognitoVerifier, KeysUnavailable, TokenRejected

AUTH_MODE_ENV = "CONDUCTOR_AUTH_MODE"
COGNITO = "cognito"
DEV_SIGNED_TOKEN = "dev-signed-token"
AUTH_MODES = (COGNITO, DEV_SIGNED_TOKEN)
SECRET_ARN_ENV = "CONDUCTOR_AUTH_SECRET_ARN"
SECRET_MAX_AGE_SECONDS = 300
MAX_SESSION_ID_LENGTH = 128
DENIED_PRINCIPAL = "unauthorized"
BEARER = "bearer"

logger = Logger()


class Unauthorized(Exception):
    """Raised with the message ``Unauthorized`` so that API Gateway answers 401."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def auth_mode() -> str:
    mode = os.environ.get(AUTH_MODE_ENV, COGNITO).strip() or COGNITO
    if mode not in AUTH_MODES:
        raise RuntimeError(f"{AUTH_MODE_ENV} must be one of {', '.join(AUTH_MODES)}, not {mode!r}")
    return mode


@lru_cache(maxsize=4)
def verifier_for(settings: CognitoSettings) -> CognitoVerifier:
    """One verifier (and so one cached JWKS) per pool configuration, for the container's lifetime."""
    return CognitoVerifier(settings)


def signing_secret() -> str:
    """The dev token signing secret (cached by Powertools Parameters)."""
    secret = parameters.get_secret(os.environ[SECRET_ARN_ENV], max_age=SECRET_MAX_AGE_SECONDS)
    if not isinstance(secret, str) or not secret:
        raise RuntimeError("the token signing secret is empty or not a string")
    return secret


def policy(principal_id: str, effect: str, method_arn: str, context: dict[str, str] | None = None) -> dict[str, Any]:
    """An authorizer response with one ``execute-api:Invoke`` statement on ``method_arn``."""
    response: dict[str, Any] = {
        "principalId": principal_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": method_arn}],
        },
    }
    if context:
        response["context"] = context
    return response


def bearer_token(event: APIGatewayAuthorizerRequestEvent) -> str | None:
    """``Authorization: Bearer <token>``, else the ``token`` query string parameter."""
    header = (event.get("headers") and event.headers.get("Authorization")) or ""
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() == BEARER and credentials.strip():
        return credentials.strip()
    query = event.get("queryStringParameters") or {}
    return query.get("token") or None


def principal_of(token: str, mode: str) -> str:
    """The principal ``token`` proves; raises :class:`TokenRejected` (or :class:`KeysUnavailable`)."""
    if mode == COGNITO:
        return verifier_for(CognitoSettings.from_env()).verify(token).principal
    try:
        return auth_tokens.verify_token(signing_secret(), token, time.time())
    except auth_tokens.TokenError as exc:
        raise TokenRejected(type(exc).__name__) from exc


def authorize(event: APIGatewayAuthorizerRequestEvent, mode: str) -> dict[str, Any]:
    """Decide on one ``$connect`` request."""
    token = bearer_token(event)
    session_id = (event.get("queryStringParameters") or {}).get("sessionId")
    if not token or not session_id:
        logger.info("Connect refused: token or sessionId missing", extra={"authMode": mode})
        raise Unauthorized()
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        logger.info("Connect denied: sessionId too long", extra={"authMode": mode})
        return policy(DENIED_PRINCIPAL, "Deny", event.method_arn)
    try:
        principal = principal_of(token, mode)
    except TokenRejected as exc:
        logger.info(
            "Connect denied: invalid token", extra={"reason": exc.reason, "authMode": mode, "sessionId": session_id}
        )
        return policy(DENIED_PRINCIPAL, "Deny", event.method_arn)
    except KeysUnavailable:
        logger.error("Connect failed: the user pool's signing keys are unavailable", extra={"authMode": mode})
        raise
    logger.info("Connect allowed", extra={"principalId": principal, "sessionId": session_id, "authMode": mode})
    return policy(principal, "Allow", event.method_arn, {"principalId": principal, "sessionId": session_id})


@logger.inject_lambda_context(clear_state=True, log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point of the ``$connect`` authorizer."""
    request = APIGatewayAuthorizerRequestEvent(event)
    logger.append_keys(connectionId=(event.get("requestContext") or {}).get("connectionId"))
    return authorize(request, auth_mode())
