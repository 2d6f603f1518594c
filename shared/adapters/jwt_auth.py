"""Verification of Amazon Cognito user pool tokens (RS256 JWTs) for the ``$connect`` authorizer.

A token is accepted when all of these hold:

* its header names ``alg: RS256`` (``none``, HS256 and every other algorithm are refused before any
  key is looked up) and a ``kid`` found in the pool's JWKS;
* its signature verifies with that key;
* ``exp`` (with :data:`LEEWAY_SECONDS` of clock skew), ``iat``, ``iss`` (the pool's issuer) and
  ``sub`` are present and valid;
* the time claims (:data:`NUMERIC_CLAIMS`: ``exp``, ``iat``, ``nbf``, ``auth_time``), where present,
  are JSON numbers: not strings (PyJWT would read ``"exp": "9999999999"`` as a number), not
  booleans, finite;
* ``token_use`` is ``id`` (then ``aud`` is one of the accepted app client ids) or ``access`` (then
  ``client_id`` is one of them).

The JWKS is fetched over HTTPS by PyJWT's :class:`jwt.PyJWKClient` and cached with the verifier (a
module-level verifier lives as long as the Lambda container). A ``kid`` not in the cached set
refreshes it once; a refresh happens at most once per :data:`REFRESH_COOLDOWN_SECONDS`, so tokens
with made-up key ids cannot make the authorizer fetch the JWKS on every request. No AWS API call
is made: the JWKS is public.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt import api_jws

from shared.wire import bounded_json

ALGORITHM = "RS256"
LEEWAY_SECONDS = 60
TOKEN_USES = frozenset({"id", "access"})
MAX_TOKEN_LENGTH = 16 * 1024
MAX_PRINCIPAL_LENGTH = 128
JWKS_CACHE_SECONDS = 3600
REFRESH_COOLDOWN_SECONDS = 30.0
JWKS_TIMEOUT_SECONDS = 3.0
REQUIRED_CLAIMS = ("exp", "iat", "iss", "sub", "token_use")
NUMERIC_CLAIMS = ("exp", "iat", "nbf", "auth_time")
CLAIMS_MAX_DEPTH = 16  # Cognito's claims are flat but for lists (cognito:groups) and a custom claim or two

ISSUER_ENV = "CONDUCTOR_COGNITO_ISSUER"
CLIENT_IDS_ENV = "CONDUCTOR_COGNITO_CLIENT_IDS"
JWKS_URL_ENV = "CONDUCTOR_COGNITO_JWKS_URL"


class TokenRejected(Exception):
    """The token is not acceptable; ``reason`` is a short code safe to log (never the token)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeysUnavailable(Exception):
    """The JWKS could not be fetched: nothing can be verified until it can."""


@dataclass(frozen=True)
class CognitoSettings:
    """Which pool's tokens are accepted, for which app clients, and where its keys are."""

    issuer: str
    client_ids: frozenset[str]
    jwks_url: str

    def __post_init__(self) -> None:
        if not self.issuer.startswith(("https://", "http://")) or self.issuer.endswith("/"):
            raise ValueError(f"the issuer must be an http(s) URL without a trailing '/': {self.issuer!r}")
        if not self.client_ids or not all(self.client_ids):
            raise ValueError("at least one app client id is required")

    @classmethod
    def of(cls, issuer: str, client_ids: Iterable[str], jwks_url: str | None = None) -> CognitoSettings:
        issuer = issuer.strip()
        return cls(
            issuer=issuer,
            client_ids=frozenset(client_id.strip() for client_id in client_ids if client_id.strip()),
            jwks_url=(jwks_url or "").strip() or f"{issuer}/.well-known/jwks.json",
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CognitoSettings:
        """From ``CONDUCTOR_COGNITO_ISSUER``, ``…_CLIENT_IDS`` (comma-separated) and ``…_JWKS_URL``."""
        env = os.environ if env is None else env
        issuer = env.get(ISSUER_ENV, "")
        if not issuer:
            raise ValueError(f"{ISSUER_ENV} is not set")
        return cls.of(issuer, env.get(CLIENT_IDS_ENV, "").split(","), env.get(JWKS_URL_ENV))


def numeric_claims_are_numbers(claims: Mapping[str, Any]) -> bool:
    """Whether every time claim present is a finite JSON number (``int`` or ``float``, not ``bool``)."""
    for name in NUMERIC_CLAIMS:
        if name not in claims:
            continue
        value = claims[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
    return True


@dataclass(frozen=True)
class Identity:
    """Who a verified token identifies."""

    principal: str  # the user's ``sub``: stable for the user's lifetime in the pool
    token_use: str
    client_id: str


class CognitoVerifier:
    """Verifies tokens of one user pool; keeps the pool's JWKS cached between calls."""

    def __init__(
        self,
        settings: CognitoSettings,
        *,
        refresh_cooldown_seconds: float = REFRESH_COOLDOWN_SECONDS,
        leeway_seconds: int = LEEWAY_SECONDS,
    ) -> None:
        self.settings = settings
        self.leeway_seconds = leeway_seconds
        self.keys = jwt.PyJWKClient(
            settings.jwks_url,
            cache_jwk_set=True,
            lifespan=JWKS_CACHE_SECONDS,
            timeout=JWKS_TIMEOUT_SECONDS,
            cooldown_duration=refresh_cooldown_seconds,
        )

    def verify(self, token: str) -> Identity:
        """The identity of ``token``; raises :class:`TokenRejected` or :class:`KeysUnavailable`."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            raise TokenRejected("malformed")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise TokenRejected("malformed") from exc
        if header.get("alg") != ALGORITHM:
            raise TokenRejected("algorithm")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRejected("no_key_id")
        key = self._signing_key(kid)
        self._check_claim_types(token, key)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                issuer=self.settings.issuer,
                leeway=self.leeway_seconds,
                options={"require": list(REQUIRED_CLAIMS), "verify_aud": False},
            )
        except jwt.ExpiredSignatureError as exc:
            raise TokenRejected("expired") from exc
        except jwt.InvalidIssuerError as exc:
            raise TokenRejected("issuer") from exc
        except jwt.InvalidSignatureError as exc:
            raise TokenRejected("signature") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRejected("missing_claim") from exc
        except jwt.ImmatureSignatureError as exc:
            raise TokenRejected("not_yet_valid") from exc
        except jwt.InvalidTokenError as exc:
            raise TokenRejected("invalid") from exc
        return self._identity(claims)

    @staticmethod
    def _check_claim_types(token: str, key: Any) -> None:
        """The signature verified, the payload read with bounds and its time claims checked for
        type, before PyJWT validates them (it takes ``"9999999999"`` for a number, and an
        infinite one would overflow its checks)."""
        try:
            payload = api_jws.decode_complete(token, key, algorithms=[ALGORITHM])["payload"]
        except jwt.InvalidSignatureError as exc:
            raise TokenRejected("signature") from exc
        except jwt.InvalidTokenError as exc:
            raise TokenRejected("malformed") from exc
        try:
            claims = bounded_json.loads(payload, max_depth=CLAIMS_MAX_DEPTH)
        except bounded_json.JsonRefused as exc:
            raise TokenRejected("malformed") from exc
        if not isinstance(claims, dict) or not numeric_claims_are_numbers(claims):
            raise TokenRejected("claim_type")

    def _signing_key(self, kid: str) -> Any:
        unavailable = f"the JWKS at {self.settings.jwks_url} could not be fetched or holds no signing key"
        try:
            self.keys.get_signing_keys()  # the cached set; fetched when absent or older than its lifespan
        except (jwt.PyJWKClientError, jwt.PyJWKSetError, ValueError) as exc:
            raise KeysUnavailable(unavailable) from exc
        try:
            jwk = self.keys.get_signing_key(kid)  # refreshes the set once for an unknown kid
        except jwt.PyJWKClientConnectionError as exc:
            raise KeysUnavailable(unavailable) from exc
        except (jwt.PyJWKClientError, jwt.PyJWKSetError, ValueError) as exc:
            raise TokenRejected("unknown_key") from exc
        if jwk.key_type != "RSA" or jwk.algorithm_name != ALGORITHM:
            raise TokenRejected("key_type")
        return jwk.key

    def _identity(self, claims: dict[str, Any]) -> Identity:
        token_use = claims["token_use"]
        if token_use not in TOKEN_USES:
            raise TokenRejected("token_use")
        # ID tokens name the app client in ``aud``; access tokens in ``client_id`` (and have no ``aud``).
        client_id = claims.get("aud") if token_use == "id" else claims.get("client_id")
        if not isinstance(client_id, str) or client_id not in self.settings.client_ids:
            raise TokenRejected("audience")
        principal = claims["sub"]
        if (
            not isinstance(principal, str)
            or not principal
            or len(principal) > MAX_PRINCIPAL_LENGTH
            or not principal.isprintable()
        ):
            raise TokenRejected("subject")
        return Identity(principal=principal, token_use=token_use, client_id=client_id)
