"""The sessions API (docs/sessions-api.md): an HTTP API whose eight routes go to one function, behind
API Gateway's JWT authorizer on the stage's Cognito user pool where the stage has sign-in, and the
secret key its page cursors are signed with."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.aws_apigatewayv2_authorizers import HttpJwtAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.api import JsonAccessLogSettings
from infra.constructs.auth import ConductorUserPool
from infra.constructs.functions import log_group, removal_policy

# (method, path) of every route, exactly: all of them go to the one function.
SESSIONS_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/sessions"),
    ("GET", "/sessions/{id}"),
    ("PATCH", "/sessions/{id}"),
    ("POST", "/sessions/{id}/end"),
    ("DELETE", "/sessions/{id}"),
    ("GET", "/memories"),
    ("DELETE", "/memories"),
    ("DELETE", "/memories/{id}"),
)
# The management API methods the sessions API's function calls on a session's open connection of the
# WebSocket stage: POST (the session_ended / session_erased event, PostToConnection) and DELETE
# (closing it, DeleteConnection).
SESSIONS_API_CONNECTION_METHODS: tuple[str, ...] = ("POST", "DELETE")
# Where the JWT authorizer reads the token: ``Authorization: Bearer <ID or access token>``. A request
# without it is answered 401 by API Gateway, without invoking anything.
JWT_IDENTITY_SOURCE: tuple[str, ...] = ("$request.header.Authorization",)
# The function reads the cursor key from this secret once per cold start (lambdas/sessions_api.py).
CURSOR_SECRET_ARN_ENV = "CONDUCTOR_CURSOR_SECRET_ARN"
CURSOR_SECRET_ROTATION_REASON = (
    "HMAC key that signs the sessions API's page cursors: a new value only makes the cursors handed out "
    "before it a 400 (the app starts from the first page), so it is rotated by putting a new value, and "
    "functions pick it up at their next cold start; a rotation Lambda would add nothing."
)

ACCESS_LOG_FIELDS: dict[str, str] = {
    "requestId": "$context.requestId",
    "extendedRequestId": "$context.extendedRequestId",
    "requestTime": "$context.requestTime",
    "stage": "$context.stage",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "protocol": "$context.protocol",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "sourceIp": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "principalId": "$context.authorizer.claims.sub",
    "authorizerError": "$context.authorizer.error",
    "integrationStatus": "$context.integration.status",
    "integrationLatency": "$context.integration.latency",
    "integrationError": "$context.integration.error",
    "errorMessage": "$context.error.message",
}


class ConductorSessionsApi(Construct):
    """The HTTP API, its ``$default`` stage (auto-deployed, throttled like the WebSocket stage, JSON
    access logs unless ``access_logging`` is "off") and its routes to ``function``.

    With ``user_pool`` every route has a JWT authorizer: issuer the pool's
    (``https://cognito-idp.<region>.amazonaws.com/<poolId>``), audience its app client id(s) (API
    Gateway compares an ID token's ``aud`` and an access token's ``client_id`` with them). Without
    one (``auth: none``) no route has an authorizer: the function serves one fixed person.

    No CORS: the stage settings name no browser origin (the iOS app is no browser, and the voice
    console runs on the local stack, which serves the sessions API on its own origin), so API Gateway
    answers no preflight and a browser page elsewhere cannot read an answer. A stage that gets a
    browser client adds its origin here, from a setting, never "*".
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        function: lambda_.Function,
        user_pool: ConductorUserPool | None,
    ) -> None:
        super().__init__(scope, construct_id)
        # The key of the page cursors: the function may read this secret's value and nothing else.
        self.cursor_secret = secretsmanager.Secret(
            self,
            "CursorKey",
            description=f"HMAC key signing the VoiceIDE conductor sessions API's page cursors ({config.name})",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True, include_space=False
            ),
            removal_policy=removal_policy(config),
        )
        function.add_environment(CURSOR_SECRET_ARN_ENV, self.cursor_secret.secret_arn)
        function.add_to_role_policy(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[self.cursor_secret.secret_arn])
        )
        Validations.of(self.cursor_secret.node.default_child or self.cursor_secret).acknowledge(
            Acknowledgment(id="AwsSolutions-SMG4", reason=CURSOR_SECRET_ROTATION_REASON)
        )
        self.api = apigwv2.HttpApi(
            self,
            "Api",
            api_name=f"voiceide-conductor-sessions-{config.name}",
            description=f"VoiceIDE conductor sessions API ({config.name})",
            create_default_stage=False,
        )
        self.access_logs = log_group(self, "AccessLogs", config) if config.http_access_logs else None
        # The $default stage: the API's URL has no stage path (https://<id>.execute-api.<region>.<suffix>/sessions).
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.api,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.throttle.rate_limit, burst_limit=config.throttle.burst_limit
            ),
            access_log_settings=(
                JsonAccessLogSettings(self.access_logs, ACCESS_LOG_FIELDS) if self.access_logs is not None else None
            ),
        )
        self.authorizer = (
            HttpJwtAuthorizer(
                "CognitoJwt",
                user_pool.issuer,
                jwt_audience=list(user_pool.client_ids),
                authorizer_name=f"voiceide-conductor-{config.name}-cognito",
                identity_source=list(JWT_IDENTITY_SOURCE),
            )
            if user_pool is not None
            else None
        )
        integration = HttpLambdaIntegration("Sessions", function)
        self.routes: dict[str, apigwv2.HttpRoute] = {}
        for method, path in SESSIONS_ROUTES:
            [route] = self.api.add_routes(
                path=path,
                methods=[apigwv2.HttpMethod(method)],
                integration=integration,
                authorizer=self.authorizer,
            )
            self.routes[f"{method} {path}"] = route

    @property
    def url(self) -> str:
        """The API's base URL, without a trailing slash: ``<url>/sessions`` lists the sessions."""
        stack = Stack.of(self)
        return f"https://{self.api.api_id}.execute-api.{stack.region}.{stack.url_suffix}"
