"""Sign-in for the local stack: a Cognito user pool, app client and test user in moto's cognito-idp.

The stack's moto server answers every AWS service moto implements, cognito-idp included. Its
tokens are RS256 JWTs signed with one fixed key, carrying the issuer Cognito itself would put
there (``https://cognito-idp.<region>.amazonaws.com/<user pool id>``); the matching JWKS is served
by the moto server at ``/<user pool id>/.well-known/jwks.json``. So the ``$connect`` authorizer
verifies local tokens exactly as deployed ones, only fetching the keys from the local endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TEST_USERNAME = "dev"
TEST_PASSWORD = "VoiceIDE-local-1"
"""The test user's permanent password: it meets Cognito's default password policy (8+ characters,
upper and lower case, a digit, a symbol) and needs no quoting in a shell."""
POOL_NAME = "voiceide-conductor-local"
CLIENT_NAME = "voiceide-ios"
ID_TOKEN_VALIDITY_MINUTES = 60


@dataclass(frozen=True)
class LocalUserPool:
    """Where the local user pool lives and how to sign in to it."""

    endpoint: str
    """The cognito-idp endpoint (the moto server): ``voiceide-client --cognito-endpoint``."""
    region: str
    user_pool_id: str
    client_id: str
    username: str
    password: str = field(repr=False)
    test_user_sub: str

    @property
    def issuer(self) -> str:
        """The ``iss`` of the pool's tokens: Cognito's own form, which moto uses too."""
        return f"https://cognito-idp.{self.region}.amazonaws.com/{self.user_pool_id}"

    @property
    def jwks_url(self) -> str:
        return f"{self.endpoint}/{self.user_pool_id}/.well-known/jwks.json"

    def authorizer_env(self) -> dict[str, str]:
        """The ``$connect`` authorizer's configuration (``CONDUCTOR_AUTH_MODE=cognito``) for this pool."""
        return {
            "CONDUCTOR_AUTH_MODE": "cognito",
            "CONDUCTOR_COGNITO_ISSUER": self.issuer,
            "CONDUCTOR_COGNITO_CLIENT_IDS": self.client_id,
            "CONDUCTOR_COGNITO_JWKS_URL": self.jwks_url,
        }


def create_user_pool(
    cognito: Any,
    endpoint: str,
    region: str,
    *,
    username: str = TEST_USERNAME,
    password: str = TEST_PASSWORD,
) -> LocalUserPool:
    """Create the pool, an app client as the iOS app uses it (no secret; password and refresh-token
    sign-in) and a confirmed test user with a permanent password, through ``cognito`` (a boto3
    cognito-idp client on ``endpoint``)."""
    pool = cognito.create_user_pool(
        PoolName=POOL_NAME,
        Policies={
            "PasswordPolicy": {
                "MinimumLength": 8,
                "RequireUppercase": True,
                "RequireLowercase": True,
                "RequireNumbers": True,
                "RequireSymbols": True,
            }
        },
    )["UserPool"]
    client = cognito.create_user_pool_client(
        UserPoolId=pool["Id"],
        ClientName=CLIENT_NAME,
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        IdTokenValidity=ID_TOKEN_VALIDITY_MINUTES,
        AccessTokenValidity=ID_TOKEN_VALIDITY_MINUTES,
        TokenValidityUnits={"IdToken": "minutes", "AccessToken": "minutes"},
        PreventUserExistenceErrors="ENABLED",
    )["UserPoolClient"]
    sub = add_user(cognito, pool["Id"], username, password)
    return LocalUserPool(
        endpoint=endpoint,
        region=region,
        user_pool_id=pool["Id"],
        client_id=client["ClientId"],
        username=username,
        password=password,
        test_user_sub=sub,
    )


def add_user(cognito: Any, user_pool_id: str, username: str, password: str) -> str:
    """A confirmed user with a permanent password (no welcome message, no forced change); its ``sub``."""
    user = cognito.admin_create_user(UserPoolId=user_pool_id, Username=username, MessageAction="SUPPRESS")["User"]
    cognito.admin_set_user_password(UserPoolId=user_pool_id, Username=username, Password=password, Permanent=True)
    return next(attribute["Value"] for attribute in user["Attributes"] if attribute["Name"] == "sub")
