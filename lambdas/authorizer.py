"""``$connect`` REQUEST authorizer: checks the signed ``token`` query string parameter.

API Gateway calls it with the ``token`` and ``sessionId`` query string parameters (its identity
sources; a WebSocket upgrade from a browser or URLSession cannot always carry headers). A valid
token yields an IAM policy allowing ``execute-api:Invoke`` on the request's ``methodArn``, with
``principalId`` and ``sessionId`` in the authorizer context, which reaches the connect handler
as ``requestContext.authorizer.principalId`` / ``.sessionId``. A missing token is answered
``Unauthorized`` (401), a bad or expired one with a Deny policy (403). The token is never logged.

The signing secret is read from Secrets Manager (``CONDUCTOR_AUTH_SECRET_ARN``) through the
Powertools Parameters utility, which caches it for ``SECRET_MAX_AGE_SECONDS``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import APIGatewayAuthorizerRequestEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.auth_tokens import TokenError, verify_token

SECRET_ARN_ENV = "CONDUCTOR_AUTH_SECRET_ARN"
SECRET_MAX_AGE_SECONDS = 300
MAX_SESSION_ID_LENGTH = 128
DENIED_PRINCIPAL = "unauthorized"

logger = Logger()


class Unauthorized(Exception):
    """Raised with the message ``Unauthorized`` so that API Gateway answers 401."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def signing_secret() -> str:
    """The token signing secret (cached by Powertools Parameters)."""
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


def authorize(event: APIGatewayAuthorizerRequestEvent, secret: str, now: float) -> dict[str, Any]:
    """Decide on one ``$connect`` request (pure: no I/O)."""
    query = event.get("queryStringParameters") or {}
    token = query.get("token")
    session_id = query.get("sessionId")
    if not token or not session_id:
        logger.info("Connect refused: token or sessionId missing")
        raise Unauthorized()
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        logger.info("Connect denied: sessionId too long")
        return policy(DENIED_PRINCIPAL, "Deny", event.method_arn)
    try:
        principal = verify_token(secret, token, now)
    except TokenError as exc:
        logger.info("Connect denied: invalid token", extra={"reason": type(exc).__name__, "sessionId": session_id})
        return policy(DENIED_PRINCIPAL, "Deny", event.method_arn)
    logger.info("Connect allowed", extra={"principalId": principal, "sessionId": session_id})
    return policy(principal, "Allow", event.method_arn, {"principalId": principal, "sessionId": session_id})


@logger.inject_lambda_context(clear_state=True, log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point of the ``$connect`` authorizer."""
    request = APIGatewayAuthorizerRequestEvent(event)
    logger.append_keys(connectionId=(event.get("requestContext") or {}).get("connectionId"))
    return authorize(request, signing_secret(), time.time())
