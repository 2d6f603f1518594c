"""Sign-in: the stage's Cognito user pool and the iOS app's client (``auth: cognito``), or the dev
HMAC signing secret (``auth: dev-signed-token``), and what the ``$connect`` authorizer is told."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import removal_policy

MIN_PASSWORD_LENGTH = 12
# Cognito's defaults for ID/access tokens are one hour; the app signs in again with its refresh
# token, which lasts 30 days (then the user signs in again).
TOKEN_VALIDITY = Duration.hours(1)
REFRESH_TOKEN_VALIDITY = Duration.days(30)
OAUTH_SCOPES = (cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE)
# cognito.threat_protection -> the pool's threat protection of password sign-in (Plus plan only).
THREAT_MODES = {
    "off": cognito.StandardThreatProtectionMode.NO_ENFORCEMENT,
    "audit": cognito.StandardThreatProtectionMode.AUDIT_ONLY,
    "full": cognito.StandardThreatProtectionMode.FULL_FUNCTION,
}


def pool_email(config: StageConfig) -> cognito.UserPoolEmail | None:
    """The pool's e-mail sender: Amazon SES from the stage's verified identity (``cognito.ses_*``), or
    None for Cognito's built-in e-mail (a few dozen a day: development stages only)."""
    settings = config.cognito
    if settings.ses_from_email is None:
        return None
    return cognito.UserPoolEmail.with_ses(
        from_email=settings.ses_from_email,
        from_name=settings.ses_from_name,
        reply_to=settings.ses_reply_to,
        ses_region=settings.ses_region or config.region,
        ses_verified_domain=settings.ses_verified_domain,
    )


class ConductorUserPool(Construct):
    """The user pool the app signs in to and the app client it signs in with.

    Created by the stack unless the stage names an existing pool (``cognito.user_pool_id`` and
    ``client_ids``). The app client is public (no secret: it ships in the app) and allows SRP (the
    app's sign-in screen) and refresh-token sign-in; a development stage with ``cognito.password_sign_in``
    also allows the plain password flow the command-line client (voiceide-client) uses. With
    ``cognito.ses_from_email`` the pool sends its e-mail (invitations, password resets) through Amazon SES.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        settings = config.cognito
        self.pool: cognito.IUserPool
        self.cfn_pool: cognito.CfnUserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        self.domain: cognito.UserPoolDomain | None = None
        stack = Stack.of(self)
        if settings.user_pool_id is not None:
            self.pool = cognito.UserPool.from_user_pool_id(self, "Pool", settings.user_pool_id)
            self.client_ids: list[str] = list(settings.client_ids)
            # An existing pool may live in another region: its issuer names the pool's region.
            self.issuer = f"https://cognito-idp.{settings.pool_region}.{stack.url_suffix}/{settings.user_pool_id}"
            return
        plus = settings.feature_plan == "plus"
        pool = cognito.UserPool(
            self,
            "Pool",
            user_pool_name=f"voiceide-conductor-{config.name}",
            self_sign_up_enabled=settings.self_sign_up,
            sign_in_aliases=cognito.SignInAliases(email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            keep_original=cognito.KeepOriginalAttrs(email=True),
            standard_attributes=cognito.StandardAttributes(
                email=cognito.StandardAttribute(required=True, mutable=True)
            ),
            password_policy=cognito.PasswordPolicy(
                min_length=MIN_PASSWORD_LENGTH,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=cognito.Mfa.REQUIRED if settings.mfa == "required" else cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.PLUS if plus else cognito.FeaturePlan.ESSENTIALS,
            standard_threat_protection_mode=THREAT_MODES[settings.threat_mode],
            email=pool_email(config),
            # As the table: no deletion protection, so a rolled-back first create deletes the pool.
            removal_policy=removal_policy(config),
        )
        hosted_ui = settings.domain_prefix is not None
        self.client = pool.add_client(
            "AppClient",
            user_pool_client_name=f"voiceide-ios-{config.name}",
            generate_secret=False,
            # ALLOW_REFRESH_TOKEN_AUTH comes with every client.
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=settings.password_sign_in),
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=TOKEN_VALIDITY,
            access_token_validity=TOKEN_VALIDITY,
            refresh_token_validity=REFRESH_TOKEN_VALIDITY,
            o_auth=(
                cognito.OAuthSettings(
                    flows=cognito.OAuthFlows(authorization_code_grant=True),
                    scopes=list(OAUTH_SCOPES),
                    callback_urls=list(settings.callback_urls),
                    logout_urls=list(settings.logout_urls) or None,
                )
                if hosted_ui
                else None
            ),
            disable_o_auth=not hosted_ui,
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
        )
        if hosted_ui:
            self.domain = pool.add_domain(
                "Domain", cognito_domain=cognito.CognitoDomainOptions(domain_prefix=settings.domain_prefix)
            )
        self.pool = pool
        self.cfn_pool = pool.node.default_child  # type: ignore[assignment]
        self.client_ids = [self.client.user_pool_client_id]
        self.issuer = f"https://{pool.user_pool_provider_url}"


class ConductorAuth(Construct):
    """What ``$connect`` checks for the stage's ``auth`` mode, as the authorizer's environment."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.mode = config.auth
        self.user_pool: ConductorUserPool | None = None
        self.signing_secret: secretsmanager.Secret | None = None
        self.environment: dict[str, str] = {"CONDUCTOR_AUTH_MODE": config.auth}
        if config.auth == "cognito":
            self.user_pool = ConductorUserPool(self, "UserPool", config=config)
            self.environment["CONDUCTOR_COGNITO_ISSUER"] = self.user_pool.issuer
            self.environment["CONDUCTOR_COGNITO_CLIENT_IDS"] = ",".join(self.user_pool.client_ids)
        elif config.auth == "dev-signed-token":
            self.signing_secret = secretsmanager.Secret(
                self,
                "DevTokenSigningSecret",
                description=(
                    f"HMAC key signing VoiceIDE conductor dev/CI connect tokens ({config.name}; auth: dev-signed-token)"
                ),
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=64, exclude_punctuation=True, include_space=False
                ),
                removal_policy=removal_policy(config),
            )
            self.environment["CONDUCTOR_AUTH_SECRET_ARN"] = self.signing_secret.secret_arn
