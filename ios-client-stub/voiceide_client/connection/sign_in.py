"""Sign-in as the iOS app does it: Cognito ``InitiateAuth`` (``USER_PASSWORD_AUTH``), then the ID token
as ``Authorization: Bearer <token>`` on every WebSocket handshake.

``InitiateAuth`` is a public Cognito API: it takes no AWS credentials, so the call is unsigned.
The token is kept until it is within ``refresh_margin`` seconds of its ``exp``; the next
handshake (a reconnect) then signs in again. Tokens and passwords never appear in a repr, an
error message or a log line.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

logger = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"
REFRESH_MARGIN_S = 60.0
"""Sign in again when the token has less than this left: a handshake must not race its expiry."""
_BAD_CREDENTIALS = {"NotAuthorizedException", "UserNotFoundException"}

Clock = Callable[[], float]


class SignInError(ConnectionError):
    """Signing in failed; the message is one line for the user, with no secret in it.

    A ``ConnectionError``, so a sign-in that fails on a reconnect counts as a failed attempt.
    """


@dataclass(frozen=True)
class IdToken:
    value: str = field(repr=False)
    expires_at: float


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT, read without verifying it (the server verifies; the client
    only needs to know when to sign in again); None if it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) else None


def cognito_client(region: str | None = None, endpoint_url: str | None = None) -> Any:
    """An unsigned cognito-idp client: ``InitiateAuth`` needs no AWS credentials."""
    return boto3.client(
        "cognito-idp",
        region_name=region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION,
        endpoint_url=endpoint_url,
        config=Config(signature_version=UNSIGNED, retries={"max_attempts": 2, "mode": "standard"}),
    )


class CognitoSignIn:
    """Signs a user in to a Cognito app client and keeps a valid ID token for the handshakes.

    ``headers()`` is the ``ConductorClient``'s ``handshake_headers``. ``clock`` (seconds since the
    epoch, like ``exp``) is injectable so expiry can be tested without waiting.
    """

    def __init__(
        self,
        client_id: str,
        username: str,
        password: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        cognito: Any = None,
        clock: Clock = time.time,
        refresh_margin: float = REFRESH_MARGIN_S,
    ) -> None:
        self.client_id = client_id
        self.username = username
        self._password = password
        self.endpoint_url = endpoint_url
        self._cognito = cognito or cognito_client(region, endpoint_url)
        self._clock = clock
        self.refresh_margin = refresh_margin
        self._token: IdToken | None = None
        self.sign_ins = 0
        """How many times ``InitiateAuth`` succeeded."""

    def __repr__(self) -> str:
        return f"CognitoSignIn(client_id={self.client_id!r}, username={self.username!r})"

    def sign_in(self) -> str:
        """Sign in now (blocking) and return the new ID token; raises SignInError."""
        try:
            response = self._cognito.initiate_auth(
                AuthFlow="USER_PASSWORD_AUTH",
                ClientId=self.client_id,
                AuthParameters={"USERNAME": self.username, "PASSWORD": self._password},
            )
        except ClientError as exc:
            raise SignInError(self._refusal(exc)) from None
        except BotoCoreError as exc:
            raise SignInError(self._unreachable(exc)) from None
        result = response.get("AuthenticationResult")
        if not result or not result.get("IdToken"):
            challenge = response.get("ChallengeName", "none")
            raise SignInError(f"sign-in for {self.username!r} asks for a step this client lacks ({challenge})")
        token = result["IdToken"]
        expires_at = token_expiry(token) or self._clock() + float(result.get("ExpiresIn", 3600))
        self._token = IdToken(token, expires_at)
        self.sign_ins += 1
        logger.info("signed in as %s (token valid for %.0f s)", self.username, expires_at - self._clock())
        return token

    def id_token(self) -> str:
        """A valid ID token: the current one, or a new sign-in when it is close to expiry (blocking)."""
        token = self._token
        if token is None or token.expires_at - self._clock() <= self.refresh_margin:
            return self.sign_in()
        return token.value

    async def headers(self) -> Mapping[str, str]:
        """The handshake's ``Authorization`` header (signing in off the event loop when needed)."""
        token = await asyncio.to_thread(self.id_token)
        return {"Authorization": f"Bearer {token}"}

    def _unreachable(self, exc: BotoCoreError) -> str:
        where = self.endpoint_url or getattr(exc, "kwargs", {}).get("endpoint_url") or "Cognito"
        message = f"could not reach Cognito at {str(where).rstrip('/')} ({type(exc).__name__})"
        if self.endpoint_url is None:
            message += (
                "; the local stack's user pool is on its own endpoint: pass --cognito-endpoint "
                "(or VOICEIDE_COGNITO_ENDPOINT) as its banner's `try it` line does"
            )
        return message

    def _refusal(self, exc: ClientError) -> str:
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        if code in _BAD_CREDENTIALS:
            return f"sign-in refused for {self.username!r}: incorrect username or password"
        if code == "UserNotConfirmedException":
            return f"sign-in refused for {self.username!r}: the user is not confirmed"
        if code == "ResourceNotFoundException":
            return f"sign-in refused: no app client {self.client_id!r} in this user pool"
        message = error.get("Message") or "no message"
        return f"sign-in failed: {code or 'error'}: {message}"
