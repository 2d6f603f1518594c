"""The WebSocket API: three routes to the conductor's functions, one throttled, logged stage."""

from __future__ import annotations

import json

import jsii
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_authorizers import WebSocketLambdaAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import WebSocketLambdaIntegration
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import log_group

# What API Gateway requires before it invokes the $connect authorizer. Every listed identity source
# must be present and non-empty, or API Gateway answers 401 without calling the function; there is no
# "either of". The token may come in the Authorization header (URLSession sets it on the upgrade
# request) or in the ``token`` query parameter (clients that cannot set handshake headers), so neither
# can be listed: only ``sessionId``, which every connect carries. A handshake without it is refused by
# API Gateway at no cost; the function reads the token from either place and answers 401 when both
# are absent. (WebSocket APIs have no authorizer caching, so the list is no cache key either.)
AUTHORIZER_IDENTITY_SOURCE: tuple[str, ...] = ("route.request.querystring.sessionId",)

ACCESS_LOG_FIELDS: dict[str, str] = {
    "requestId": "$context.requestId",
    "extendedRequestId": "$context.extendedRequestId",
    "requestTime": "$context.requestTime",
    "stage": "$context.stage",
    "connectionId": "$context.connectionId",
    "eventType": "$context.eventType",
    "routeKey": "$context.routeKey",
    "messageId": "$context.messageId",
    "status": "$context.status",
    "sourceIp": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "principalId": "$context.authorizer.principalId",
    "authorizerError": "$context.authorizer.error",
    "integrationStatus": "$context.integration.status",
    "integrationLatency": "$context.integration.latency",
    "integrationError": "$context.integration.error",
    "errorMessage": "$context.error.message",
}

# AWS-managed policy API Gateway documents for its account-level CloudWatch Logs role.
APIGW_PUSH_TO_CLOUDWATCH = "service-role/AmazonAPIGatewayPushToCloudWatchLogs"


@jsii.implements(apigwv2.IAccessLogSettings)
class JsonAccessLogSettings:
    """JSON access logs (one object per line) into a log group: ``fields`` (the WebSocket stage's by
    default) name each ``$context`` variable logged."""

    def __init__(self, group: logs.ILogGroup, fields: dict[str, str] | None = None) -> None:
        self._destination = apigwv2.LogGroupLogDestination(group)
        self._format = apigw.AccessLogFormat.custom(json.dumps(fields or ACCESS_LOG_FIELDS, separators=(",", ":")))

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return self._format


class ConductorApi(Construct):
    """``$connect``/``$default``/``$disconnect`` routes without route responses: the message
    function answers through the management API and may run past the 29 s integration timeout.
    The stage writes JSON access logs where the account's logging role is set (``access_logging``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        connect: lambda_.IFunction,
        message: lambda_.IFunction,
        disconnect: lambda_.IFunction,
        authorizer: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        # Every deployed stage signs in on $connect (the stage's auth mode); the other routes run on a
        # connection that passed it.
        connect_authorizer = WebSocketLambdaAuthorizer(
            "ConnectAuthorizer", authorizer, identity_source=list(AUTHORIZER_IDENTITY_SOURCE)
        )
        self.api = apigwv2.WebSocketApi(
            self,
            "Api",
            api_name=f"voiceide-conductor-{config.name}",
            description=f"VoiceIDE conductor WebSocket API ({config.name})",
        )
        self.routes: dict[str, apigwv2.WebSocketRoute] = {
            "$connect": self.api.add_route(
                "$connect", integration=WebSocketLambdaIntegration("Connect", connect), authorizer=connect_authorizer
            ),
            "$default": self.api.add_route("$default", integration=WebSocketLambdaIntegration("Message", message)),
            "$disconnect": self.api.add_route(
                "$disconnect", integration=WebSocketLambdaIntegration("Disconnect", disconnect)
            ),
        }
        # Access logging needs the account's API Gateway CloudWatch Logs role (config.access_logging).
        self.access_logs = log_group(self, "AccessLogs", config) if config.access_logs else None
        self.stage = apigwv2.WebSocketStage(
            self,
            "Stage",
            web_socket_api=self.api,
            stage_name=config.name,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.throttle.rate_limit, burst_limit=config.throttle.burst_limit
            ),
            access_log_settings=JsonAccessLogSettings(self.access_logs) if self.access_logs is not None else None,
        )
        self.cloudwatch_role: iam.Role | None = None
        self.cloudwatch_policy: iam.IManagedPolicy | None = None
        if config.api_gateway_cloudwatch_role:
            self._account_logging_role()

    def _account_logging_role(self) -> None:
        """API Gateway writes WebSocket access logs only when the account has a CloudWatch role."""
        self.cloudwatch_policy = iam.ManagedPolicy.from_aws_managed_policy_name(APIGW_PUSH_TO_CLOUDWATCH)
        role = iam.Role(
            self,
            "CloudWatchRole",
            assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
            description="Lets API Gateway write access logs to CloudWatch Logs (account-wide setting)",
            managed_policies=[self.cloudwatch_policy],
        )
        # The account setting outlives this stack and other stages' access logs rely on it: keep the
        # role it points at, even when the create that set it rolls back (the setting may still name
        # it; the role has a generated name, so it never blocks a retry).
        role.apply_removal_policy(RemovalPolicy.RETAIN)
        account = apigw.CfnAccount(self, "Account", cloud_watch_role_arn=role.role_arn)
        account.apply_removal_policy(RemovalPolicy.RETAIN)
        self.stage.node.add_dependency(account)
        self.cloudwatch_role = role

    def management_arn(self, method: str) -> str:
        """ARN of the management API calls ``method`` on any connection of this API's stage."""
        return Stack.of(self).format_arn(
            service="execute-api",
            resource=self.api.api_id,
            resource_name=f"{self.stage.stage_name}/{method}/@connections/*",
        )
