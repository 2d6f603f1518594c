"""cdk-nag ``AwsSolutions`` findings this stack accepts, each with the reason it is accepted.

cdk-nag 3 runs as a CDK policy-validation plugin: any finding not acknowledged here fails the
synth. Findings are acknowledged on the narrowest construct that produces them.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

from infra.config import StageConfig
from infra.constructs.api import ConductorApi
from infra.constructs.auth import ConductorAuth
from infra.constructs.functions import ConductorFunctions
from infra.constructs.sessions_api import SESSIONS_API_CONNECTION_METHODS, ConductorSessionsApi

XRAY_REASON = (
    "X-Ray PutTraceSegments/PutTelemetryRecords (added by active tracing) support no resource-level "
    "permissions; '*' is the only valid resource."
)
RUNTIME_REASON = (
    "Pinned to python3.13 on purpose: the project supports Lambda Python 3.12/3.13 and the dependency "
    "layer is built from cp313 aarch64 wheels; moving to a newer runtime is a tested change, not automatic."
)
MANAGEMENT_API_REASON = (
    "Connection ids exist only at run time; the statement is limited to POST @connections of this "
    "API's own stage (arn:...:<apiId>/<stage>/POST/@connections/*)."
)
SESSIONS_MANAGEMENT_REASON = (
    "Connection ids exist only at run time; the sessions API tells a session's open connection that it "
    "ended or was erased (POST @connections) and closes it (DELETE @connections), on this API's own "
    "stage only (arn:...:<apiId>/<stage>/<method>/@connections/*)."
)
SECRET_ROTATION_REASON = (
    "HMAC key that signs dev/CI connect tokens (auth: dev-signed-token): rotating it invalidates every token "
    "issued with it, so it is rotated deliberately (put a new value, re-issue tokens; the authorizer caches it "
    "for 5 minutes)."
)
MFA_OPTIONAL_REASON = (
    "MFA is optional on this stage (cognito.mfa in cdk.json): users of a hands-free voice app sign in once per "
    "device and stay signed in with a refresh token; each user may enrol an authenticator app (TOTP), and "
    "a stage sets mfa 'required' to make it mandatory."
)
ESSENTIALS_PLAN_REASON = (
    "The pool is on the Essentials feature plan (cognito.feature_plan in cdk.json): threat protection is "
    "billed per monthly active user; a stage sets feature_plan 'plus' to turn it on (cognito.threat_protection: "
    "audit or full, as prod). The "
    "password policy (12+ characters, all character classes) and admin-created users apply on every plan."
)
ROUTE_AUTH_REASON = (
    "API Gateway WebSocket APIs authorize only on $connect; $default and $disconnect run on a connection "
    "that already passed $connect."
)
DESTINATION_REASON = (
    "Granted by CDK's Lambda destination: Lambda invokes the turn runner's on-failure destination "
    "with the runner's role, on the destination function and its versions only."
)
HTTP_ACCESS_LOGS_OFF_REASON = (
    "This stage sets access_logging 'off' in cdk.json: the sessions API's stage writes no access logs. "
    "The function's logs, X-Ray traces and the API's metrics (requests, 4XX, 5XX, latency) remain."
)
ACCESS_LOGS_OFF_REASON = (
    "This stage does not set API Gateway's account-level CloudWatch Logs role (api_gateway_cloudwatch_role) "
    "and does not declare it set (access_logging 'on'), and API Gateway refuses a logging stage without "
    "it: the stage deploys into a fresh account. Lambda logs, X-Ray traces and the API metrics remain."
)
APIGW_LOGS_ROLE_REASON = (
    "AmazonAPIGatewayPushToCloudWatchLogs is the AWS-documented policy of API Gateway's account-level "
    "logging role, which must create log groups for every API in the account and region."
)


def flatten_cfn_reference(node: Any) -> str:
    """Render a resolved CloudFormation value the way cdk-nag names it in finding ids."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return delimiter.join(flatten_cfn_reference(item) for item in items)
        if "Fn::Sub" in node:
            return flatten_cfn_reference(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten_cfn_reference(resource)}.{flatten_cfn_reference(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten_cfn_reference(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten_cfn_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def role_policy_of(fn: lambda_.Function) -> IConstruct:
    """The inline policy CDK attaches to a function's role (``<role>/DefaultPolicy``)."""
    if fn.role is None or (policy := fn.role.node.try_find_child("DefaultPolicy")) is None:
        raise ValueError(f"{fn.node.path} has no role policy to acknowledge findings on")
    return policy


def cfn_of(construct: IConstruct) -> IConstruct:
    return construct.node.default_child or construct


class ReviewedStack(Protocol):
    """The parts of the conductor's stack (``infra.stack.ConductorStack``) whose findings are reviewed here."""

    config: StageConfig
    functions: ConductorFunctions
    api: ConductorApi
    auth: ConductorAuth
    sessions: ConductorSessionsApi | None


def suppress_findings(stack: ReviewedStack) -> None:
    """Acknowledge the reviewed findings of ``stack``, each on the resource that produces it."""
    for fn in stack.functions.every:
        acknowledge(role_policy_of(fn), "AwsSolutions-IAM5[Resource::*]", XRAY_REASON)
        acknowledge(cfn_of(fn), "AwsSolutions-L1", RUNTIME_REASON)

    management = flatten_cfn_reference(Stack.of(stack).resolve(stack.api.management_arn("POST")))
    for fn in stack.functions.posting:
        acknowledge(role_policy_of(fn), f"AwsSolutions-IAM5[Resource::{management}]", MANAGEMENT_API_REASON)

    if stack.functions.sessions_api is not None:
        for method in SESSIONS_API_CONNECTION_METHODS:
            arn = flatten_cfn_reference(Stack.of(stack).resolve(stack.api.management_arn(method)))
            acknowledge(
                role_policy_of(stack.functions.sessions_api),
                f"AwsSolutions-IAM5[Resource::{arn}]",
                SESSIONS_MANAGEMENT_REASON,
            )

    abandoned = stack.functions.turn_abandoned
    versions = flatten_cfn_reference(Stack.of(stack).resolve(abandoned.function_arn)) + ":*"
    acknowledge(role_policy_of(stack.functions.turn), f"AwsSolutions-IAM5[Resource::{versions}]", DESTINATION_REASON)

    if stack.auth.signing_secret is not None:
        acknowledge(cfn_of(stack.auth.signing_secret), "AwsSolutions-SMG4", SECRET_ROTATION_REASON)
    pool = stack.auth.user_pool
    if pool is not None and pool.cfn_pool is not None:
        if stack.config.cognito.mfa != "required":
            acknowledge(pool.cfn_pool, "AwsSolutions-COG2", MFA_OPTIONAL_REASON)
        if stack.config.cognito.feature_plan != "plus":
            acknowledge(pool.cfn_pool, "AwsSolutions-COG8", ESSENTIALS_PLAN_REASON)

    for route_key in ("$default", "$disconnect"):
        acknowledge(cfn_of(stack.api.routes[route_key]), "AwsSolutions-APIG4", ROUTE_AUTH_REASON)
    if stack.api.access_logs is None:
        acknowledge(cfn_of(stack.api.stage), "AwsSolutions-APIG1", ACCESS_LOGS_OFF_REASON)

    sessions = stack.sessions
    if sessions is not None and sessions.access_logs is None:
        acknowledge(cfn_of(sessions.stage), "AwsSolutions-APIG1", HTTP_ACCESS_LOGS_OFF_REASON)

    if stack.api.cloudwatch_role is not None and stack.api.cloudwatch_policy is not None:
        policy = flatten_cfn_reference(Stack.of(stack).resolve(stack.api.cloudwatch_policy.managed_policy_arn))
        acknowledge(cfn_of(stack.api.cloudwatch_role), f"AwsSolutions-IAM4[Policy::{policy}]", APIGW_LOGS_ROLE_REASON)
