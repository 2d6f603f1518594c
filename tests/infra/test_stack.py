"""Assertions on the synthesized templates of dev, prod and a stage with every option on."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.config import StageConfigError, select_stage
from infra.constructs.functions import INDEX_ACTIONS, TABLE_ACTIONS
from infra.constructs.monitoring import NO_SUBSCRIBER_WARNING
from infra.nag import flatten_cfn_reference
from infra.quota_readings import QuotaReading, reading_key
from infra.reservations import UNPROVEN_WARNING
from shared.adapters.session_records import SESSIONS_INDEX
from tests.infra.conftest import ALARM_EMAIL, SES_FROM_EMAIL, Synth, stage_like_prod, synthesize
from tests.infra.test_checks import findings
from tests.infra.test_operations import alarm_metrics

pytestmark = pytest.mark.infra

HANDLERS = {
    "$connect": "lambdas.connect.handler",
    "$default": "lambdas.message.handler",
    "$disconnect": "lambdas.disconnect.handler",
}
AUTHORIZER_HANDLER = "lambdas.authorizer.handler"
TURN_HANDLER = "lambdas.turn.handler"
TURN_ABANDONED_HANDLER = "lambdas.turn_abandoned.handler"
GUARDED_SERVICES = ("bedrock", "execute-api", "dynamodb", "bedrock-agentcore")
TOOL_DEADLINE_HANDLER = "lambdas.tool_deadline.handler"
SESSIONS_API_HANDLER = "lambdas.sessions_api.handler"
REAPER_HANDLER = "lambdas.session_reaper.handler"
# The name each table user has in infra/constructs/functions.py's TABLE_ACTIONS.
TABLE_USERS = {
    "connect": HANDLERS["$connect"],
    "disconnect": HANDLERS["$disconnect"],
    "message": HANDLERS["$default"],
    "turn": TURN_HANDLER,
    "turnAbandoned": TURN_ABANDONED_HANDLER,
    "toolDeadline": TOOL_DEADLINE_HANDLER,
    "sessionsApi": SESSIONS_API_HANDLER,
}
# The modules that call DynamoDB: the store, and the sessions API's records (the index, erasing, expiry).
TABLE_MODULES = tuple(
    Path(__file__).resolve().parents[2] / "shared" / "adapters" / name for name in ("store.py", "session_records.py")
)
# boto3 client method -> IAM action; transaction items -> the action DynamoDB authorizes each with.
CLIENT_CALL_ACTIONS = {
    "get_item": "GetItem", "put_item": "PutItem", "update_item": "UpdateItem", "delete_item": "DeleteItem",
    "query": "Query", "scan": "Scan", "batch_get_item": "BatchGetItem", "batch_write_item": "BatchWriteItem",
}  # fmt: skip
TRANSACT_ITEM_ACTIONS = {"Get": "GetItem", "Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                         "ConditionCheck": "ConditionCheckItem"}  # fmt: skip


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def ref_of(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` points at."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
    return None


def role_statements(synth: Synth, role_id: str) -> list[dict[str, Any]]:
    """Every statement granted to a role, inline or through AWS::IAM::Policy resources."""
    statements: list[dict[str, Any]] = []
    role = synth.resources[role_id]["Properties"]
    for policy in role.get("Policies", []):
        statements += policy["PolicyDocument"]["Statement"]
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if any(ref_of(r) == role_id for r in policy["Properties"]["Roles"]):
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def grants(synth: Synth, role_id: str) -> set[tuple[str, str]]:
    """(action, flattened resource) pairs of a role's Allow statements."""
    pairs = set()
    for statement in role_statements(synth, role_id):
        assert statement["Effect"] == "Allow"
        for action in as_list(statement["Action"]):
            for resource in as_list(statement["Resource"]):
                pairs.add((action, flatten_cfn_reference(resource)))
    return pairs


def function_role(synth: Synth, handler: str) -> str:
    _, fn = synth.function(handler)
    return ref_of(fn["Properties"]["Role"])


def service_grants(synth: Synth, handler: str, service: str) -> set[tuple[str, str]]:
    return {(a, r) for a, r in grants(synth, function_role(synth, handler)) if a.startswith(f"{service}:")}


STAGES = ["dev", "prod", "variant"]


@pytest.fixture(params=STAGES)
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


# --- WebSocket API ------------------------------------------------------------------------------


def test_three_routes_each_proxy_to_its_function(any_stage: Synth) -> None:
    routes = {
        res["Properties"]["RouteKey"]: res["Properties"]
        for res in any_stage.of_api("AWS::ApiGatewayV2::Route", "WEBSOCKET").values()
    }
    assert set(routes) == set(HANDLERS)
    for route_key, handler in HANDLERS.items():
        fn_id, _ = any_stage.function(handler)
        target = routes[route_key]["Target"]["Fn::Join"][1]
        integration = any_stage.resources[ref_of(target[1])]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert fn_id in flatten_cfn_reference(integration["IntegrationUri"])
    # The message function answers through the management API: no route responses anywhere.
    assert not any_stage.of_type("AWS::ApiGatewayV2::RouteResponse")
    assert not any_stage.of_type("AWS::ApiGatewayV2::IntegrationResponse")
    assert all("RouteResponseSelectionExpression" not in r for r in routes.values())


def test_stage_auto_deploys_with_throttling_and_json_access_logs_where_it_may(any_stage: Synth) -> None:
    _, stage = any_stage.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")
    props = stage["Properties"]
    assert props["StageName"] == any_stage.config.name
    assert props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": any_stage.config.throttle.burst_limit,
        "ThrottlingRateLimit": any_stage.config.throttle.rate_limit,
    }
    if not any_stage.config.access_logs:
        assert "AccessLogSettings" not in props
        return
    log_group = any_stage.resources[ref_of(props["AccessLogSettings"]["DestinationArn"])]
    assert log_group["Type"] == "AWS::Logs::LogGroup"
    assert log_group["Properties"]["RetentionInDays"] == any_stage.config.log_retention_days
    fields = json.loads(props["AccessLogSettings"]["Format"])
    assert fields["requestId"] == "$context.requestId"
    assert fields["connectionId"] == "$context.connectionId"
    assert fields["routeKey"] == "$context.routeKey"


def test_account_logging_role_only_where_configured(dev: Synth, prod: Synth, variant: Synth) -> None:
    account_id, account = prod.one("AWS::ApiGateway::Account")
    assert account["DeletionPolicy"] == "Retain"
    role = prod.resources[ref_of(account["Properties"]["CloudWatchRoleArn"])]
    assert role["DeletionPolicy"] == "Retain"
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "apigateway.amazonaws.com"
    }
    stage_id, _ = prod.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")
    assert account_id in as_list(prod.resources[stage_id].get("DependsOn", []))
    # One stage per account and region owns the setting (prod); the others rely on it.
    for other in (dev, variant):
        assert not other.of_type("AWS::ApiGateway::Account")
        assert not [
            role
            for role in other.of_type("AWS::IAM::Role").values()
            if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
            == {"Service": "apigateway.amazonaws.com"}
        ]


def needs_the_account_logging_role(stage: dict[str, Any]) -> list[str]:
    """Settings of a WebSocket stage that API Gateway refuses without the account's CloudWatch Logs
    role ("CloudWatch Logs role ARN must be set in account settings to enable logging")."""
    props = stage["Properties"]
    found = ["AccessLogSettings"] if "AccessLogSettings" in props else []
    for name, settings in [("DefaultRouteSettings", props.get("DefaultRouteSettings", {}))] + [
        (f"RouteSettings.{key}", value) for key, value in props.get("RouteSettings", {}).items()
    ]:
        if settings.get("LoggingLevel", "OFF") != "OFF" or settings.get("DataTraceEnabled"):
            found.append(name)
    return found


def test_a_fresh_account_deploys_dev_and_prod_still_logs(dev: Synth, prod: Synth, variant: Synth) -> None:
    """A stage logs only where the same template sets the account's logging role, or where the stage
    declares it set (access_logging: on); dev does neither, so it deploys where no role was ever set."""
    for synth in (dev, prod, variant):
        _, stage = synth.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")
        logging = needs_the_account_logging_role(stage)
        sets_the_role = bool(synth.of_type("AWS::ApiGateway::Account"))
        assert not logging or sets_the_role or synth.config.access_logging == "on", synth.config.name
    assert dev.config.access_logging == "auto" and not dev.config.api_gateway_cloudwatch_role
    assert needs_the_account_logging_role(dev.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")[1]) == []
    assert not dev.of_type("AWS::ApiGateway::Account")
    assert needs_the_account_logging_role(prod.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")[1]) == [
        "AccessLogSettings"
    ]
    assert prod.of_type("AWS::ApiGateway::Account")
    assert variant.config.access_logging == "on" and not variant.of_type("AWS::ApiGateway::Account")
    assert needs_the_account_logging_role(variant.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")[1]) == [
        "AccessLogSettings"
    ]


def connect_route(synth: Synth) -> dict[str, Any]:
    return next(
        r["Properties"]
        for r in synth.of_api("AWS::ApiGatewayV2::Route", "WEBSOCKET").values()
        if r["Properties"]["RouteKey"] == "$connect"
    )


def test_every_stage_signs_in_on_connect_and_on_every_sessions_api_route(
    dev: Synth, prod: Synth, variant: Synth, signed_token: Synth
) -> None:
    """No deployed stage is open: $connect has the stage's authorizer, every sessions API route API
    Gateway's JWT authorizer on the stage's pool. API Gateway authorizes a WebSocket connection on
    $connect only, so $default and $disconnect are the only routes without one; the sessions API
    answers no preflight (no CORS), so it has no OPTIONS route either."""
    for synth in (dev, prod, variant, signed_token):
        authorizer_id, _ = synth.one_of_api("AWS::ApiGatewayV2::Authorizer", "WEBSOCKET")
        routes = {
            r["Properties"]["RouteKey"]: r["Properties"]
            for r in synth.of_api("AWS::ApiGatewayV2::Route", "WEBSOCKET").values()
        }
        assert routes["$connect"]["AuthorizationType"] == "CUSTOM", synth.config.name
        assert ref_of(routes["$connect"]["AuthorizerId"]) == authorizer_id
        assert {key for key, props in routes.items() if props["AuthorizationType"] == "NONE"} == {
            "$default",
            "$disconnect",
        }
        assert synth.function(AUTHORIZER_HANDLER)
        for handler in (*HANDLERS.values(), TURN_HANDLER):
            env = synth.function(handler)[1]["Properties"]["Environment"]["Variables"]
            assert env["CONDUCTOR_REQUIRE_PRINCIPAL"] == "true"
        if not synth.config.sessions_api:
            continue
        http_routes = synth.of_api("AWS::ApiGatewayV2::Route", "HTTP")
        assert http_routes and not [
            r for r in http_routes.values() if r["Properties"]["RouteKey"].startswith("OPTIONS")
        ]
        jwt_id, jwt = synth.one_of_api("AWS::ApiGatewayV2::Authorizer", "HTTP")
        assert jwt["Properties"]["AuthorizerType"] == "JWT"
        for route in http_routes.values():
            assert route["Properties"]["AuthorizationType"] == "JWT", route["Properties"]["RouteKey"]
            assert ref_of(route["Properties"]["AuthorizerId"]) == jwt_id


def test_dev_signs_in_to_its_own_small_pool_and_stays_tightly_throttled(dev: Synth) -> None:
    assert dev.config.auth == "cognito"
    _, pool = dev.one("AWS::Cognito::UserPool")
    props = pool["Properties"]
    assert props["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}
    assert props["MfaConfiguration"] == "OPTIONAL"
    assert props["UserPoolTier"] == "ESSENTIALS"
    assert pool["DeletionPolicy"] == "Delete"
    # Cognito's own e-mail is enough for a handful of developers; dev also allows the plain password flow
    # the command-line client signs in with (cognito.password_sign_in), besides the app's SRP.
    assert "EmailConfiguration" not in props
    _, client = dev.one("AWS::Cognito::UserPoolClient")
    assert set(client["Properties"]["ExplicitAuthFlows"]) == {
        "ALLOW_USER_SRP_AUTH",
        "ALLOW_USER_PASSWORD_AUTH",
        "ALLOW_REFRESH_TOKEN_AUTH",
    }
    _, stage = dev.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")
    throttle = stage["Properties"]["DefaultRouteSettings"]
    # Enough for the ten people speaking at once dev is for (docs/capacity.md: ~1.7 requests a second
    # each), no more; and a dense speaker's ~9 turns a minute.
    assert (throttle["ThrottlingRateLimit"], throttle["ThrottlingBurstLimit"]) == (24, 48)
    env = dev.function(TURN_HANDLER)[1]["Properties"]["Environment"]["Variables"]
    assert env["CONDUCTOR_MAX_TURNS_PER_MINUTE"] == "12"


def test_cognito_stages_create_a_pool_and_a_public_app_client(prod: Synth, variant: Synth) -> None:
    for synth in (prod, variant):
        assert synth.config.auth == "cognito"
        pool_id, pool = synth.one("AWS::Cognito::UserPool")
        props = pool["Properties"]
        assert props["Policies"]["PasswordPolicy"] == {
            "MinimumLength": 12,
            "RequireLowercase": True,
            "RequireNumbers": True,
            "RequireSymbols": True,
            "RequireUppercase": True,
            "TemporaryPasswordValidityDays": 3,
        }
        assert props["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}
        # Every user enrols an authenticator app (TOTP); no SMS.
        assert props["MfaConfiguration"] == "ON" and props["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
        # Threat protection on the Plus plan, scoring and logging every sign-in (audit).
        assert props["UserPoolTier"] == "PLUS"
        assert props["UserPoolAddOns"] == {"AdvancedSecurityMode": "AUDIT"}
        # Invitations and password resets from the stage's verified SES address, not Cognito's ~50 a day.
        email = props["EmailConfiguration"]
        assert (email["EmailSendingAccount"], email["From"]) == ("DEVELOPER", SES_FROM_EMAIL)
        assert flatten_cfn_reference(email["SourceArn"]) == (
            f"arn:aws:ses:{synth.config.region}:<AWS::AccountId>:identity/{SES_FROM_EMAIL}"
        )
        assert props["UsernameAttributes"] == ["email"]
        # Retained on deletion and replacement, deleted when its first create rolls back (so no
        # deletion protection in the template, which would keep that rollback from deleting it).
        assert pool["DeletionPolicy"] == "RetainExceptOnCreate" and pool["UpdateReplacePolicy"] == "Retain"
        assert "DeletionProtection" not in props
        _, client = synth.one("AWS::Cognito::UserPoolClient")
        client_props = client["Properties"]
        assert ref_of(client_props["UserPoolId"]) == pool_id
        assert client_props["GenerateSecret"] is False  # it ships inside the app
        # The app's SRP and refresh tokens only: the password never leaves the phone.
        assert set(client_props["ExplicitAuthFlows"]) == {"ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"}
        assert client_props["PreventUserExistenceErrors"] == "ENABLED"
        assert client_props["EnableTokenRevocation"] is True
        assert not synth.of_type("AWS::Cognito::UserPoolDomain")
        # no token secret: the one secret is the sessions API's cursor key (tests/infra/test_sessions_api.py)
        assert [name for name in synth.of_type("AWS::SecretsManager::Secret") if "CursorKey" not in name] == []


def test_the_cognito_authorizer_checks_the_pools_tokens_and_calls_no_aws_api(prod: Synth, variant: Synth) -> None:
    for synth in (prod, variant):
        pool_id, _ = synth.one("AWS::Cognito::UserPool")
        client_id, _ = synth.one("AWS::Cognito::UserPoolClient")
        authorizer_id, authorizer = synth.one_of_api("AWS::ApiGatewayV2::Authorizer", "WEBSOCKET")
        props = authorizer["Properties"]
        assert props["AuthorizerType"] == "REQUEST"
        # Only sessionId: the token may come in the Authorization header or the token query parameter.
        assert props["IdentitySource"] == ["route.request.querystring.sessionId"]
        fn_id, fn = synth.function(AUTHORIZER_HANDLER)
        assert fn_id in flatten_cfn_reference(props["AuthorizerUri"])
        routes = {
            r["Properties"]["RouteKey"]: r["Properties"]
            for r in synth.of_api("AWS::ApiGatewayV2::Route", "WEBSOCKET").values()
        }
        assert routes["$connect"]["AuthorizationType"] == "CUSTOM"
        assert ref_of(routes["$connect"]["AuthorizerId"]) == authorizer_id
        assert routes["$default"]["AuthorizationType"] == "NONE"

        env = fn["Properties"]["Environment"]["Variables"]
        assert env["CONDUCTOR_AUTH_MODE"] == "cognito"
        assert env["CONDUCTOR_COGNITO_ISSUER"] == {
            "Fn::Join": ["", ["https://", {"Fn::GetAtt": [pool_id, "ProviderURL"]}]]
        }
        assert env["CONDUCTOR_COGNITO_CLIENT_IDS"] == {"Ref": client_id}
        assert "CONDUCTOR_COGNITO_JWKS_URL" not in env  # <issuer>/.well-known/jwks.json
        assert "CONDUCTOR_AUTH_SECRET_ARN" not in env
        # Its role may write its logs and traces, nothing else: the JWKS is public.
        actions = {action for action, _ in grants(synth, function_role(synth, AUTHORIZER_HANDLER))}
        assert actions == {
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "xray:PutTraceSegments",
            "xray:PutTelemetryRecords",
        }
        for handler in HANDLERS.values():
            env = synth.function(handler)[1]["Properties"]["Environment"]["Variables"]
            assert env["CONDUCTOR_REQUIRE_PRINCIPAL"] == "true"

        outputs = synth.template["Outputs"]
        assert outputs["UserPoolId"]["Value"] == {"Ref": pool_id}
        assert outputs["UserPoolClientId"]["Value"] == {"Ref": client_id}
        assert outputs["Issuer"]["Value"] == env_issuer(synth)
        assert "DevTokenSigningSecretArn" not in outputs


def env_issuer(synth: Synth) -> Any:
    return synth.function(AUTHORIZER_HANDLER)[1]["Properties"]["Environment"]["Variables"]["CONDUCTOR_COGNITO_ISSUER"]


@pytest.fixture(scope="module")
def signed_token_stage(signed_token: Synth) -> Synth:
    return signed_token


@pytest.fixture(scope="module")
def hosted_ui_stage(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    cognito = {
        "mfa": "required",
        "feature_plan": "plus",
        "domain_prefix": "voiceide-hosted-test",
        "callback_urls": ["voiceide://signin"],
        "logout_urls": ["voiceide://signout"],
        "ses_from_email": SES_FROM_EMAIL,
    }
    stages = {"hosted": stage_like_prod(cognito=cognito)}
    return synthesize(tmp_path_factory.mktemp("cdk-hosted"), "hosted", stages=stages)


def test_a_dev_signed_token_stage_reads_only_its_generated_secret(signed_token_stage: Synth) -> None:
    synth = signed_token_stage
    assert not synth.of_type("AWS::Cognito::UserPool")
    secret_id, secret = synth.one("AWS::SecretsManager::Secret")
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] >= 32
    _, fn = synth.function(AUTHORIZER_HANDLER)
    env = fn["Properties"]["Environment"]["Variables"]
    assert env["CONDUCTOR_AUTH_MODE"] == "dev-signed-token"
    assert ref_of(env["CONDUCTOR_AUTH_SECRET_ARN"]) == secret_id
    assert not any(name.startswith("CONDUCTOR_COGNITO_") for name in env)
    assert service_grants(synth, AUTHORIZER_HANDLER, "secretsmanager") == {
        ("secretsmanager:GetSecretValue", f"<{secret_id}>"),
    }
    for handler in HANDLERS.values():
        assert not service_grants(synth, handler, "secretsmanager")
    for service in GUARDED_SERVICES:
        assert not service_grants(synth, AUTHORIZER_HANDLER, service)
    assert ref_of(synth.template["Outputs"]["DevTokenSigningSecretArn"]["Value"]) == secret_id
    assert connect_route(synth)["AuthorizationType"] == "CUSTOM"


def test_an_existing_pool_is_used_as_it_is(existing_pool_stage: Synth) -> None:
    synth = existing_pool_stage
    assert not synth.of_type("AWS::Cognito::UserPool") and not synth.of_type("AWS::Cognito::UserPoolClient")
    env = synth.function(AUTHORIZER_HANDLER)[1]["Properties"]["Environment"]["Variables"]
    # The pool's own region names its issuer (the stage is in us-east-1).
    assert flatten_cfn_reference(env["CONDUCTOR_COGNITO_ISSUER"]) == (
        "https://cognito-idp.eu-west-1.<AWS::URLSuffix>/eu-west-1_AbCdEf123"
    )
    assert env["CONDUCTOR_COGNITO_CLIENT_IDS"] == "3n4b5urk1ft4fl3mg5e62d9ado,7a1b2c3d4e"
    assert synth.template["Outputs"]["UserPoolId"]["Value"] == "eu-west-1_AbCdEf123"


def test_mfa_plus_plan_and_hosted_ui_when_configured(hosted_ui_stage: Synth) -> None:
    synth = hosted_ui_stage
    _, pool = synth.one("AWS::Cognito::UserPool")
    assert pool["Properties"]["MfaConfiguration"] == "ON"
    assert pool["Properties"]["UserPoolTier"] == "PLUS"
    assert pool["Properties"]["UserPoolAddOns"] == {"AdvancedSecurityMode": "ENFORCED"}
    _, domain = synth.one("AWS::Cognito::UserPoolDomain")
    assert domain["Properties"]["Domain"] == "voiceide-hosted-test"
    _, client = synth.one("AWS::Cognito::UserPoolClient")
    props = client["Properties"]
    assert props["AllowedOAuthFlows"] == ["code"] and props["AllowedOAuthFlowsUserPoolClient"] is True
    assert props["CallbackURLs"] == ["voiceide://signin"] and props["LogoutURLs"] == ["voiceide://signout"]
    assert set(props["AllowedOAuthScopes"]) == {"openid", "email", "profile"}
    assert "HostedUiUrl" in synth.template["Outputs"]
    # Nothing left to acknowledge on this pool: MFA is required and threat protection is on.
    pool_acks = acknowledged_rules(synth, "AWS::Cognito::UserPool")
    assert not {"AwsSolutions-COG2", "AwsSolutions-COG8"} & pool_acks


def acknowledged_rules(synth: Synth, resource_type: str) -> set[str]:
    """cdk-nag rules acknowledged on the resources of one type (``infra/nag.py``)."""
    return {
        rule["id"]
        for resource in synth.of_type(resource_type).values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    }


def test_cognito_findings_are_acknowledged_only_where_the_stage_chose_so(dev: Synth, prod: Synth) -> None:
    # prod requires MFA and is on the Plus plan: nothing to acknowledge. dev: MFA optional and the
    # Essentials plan, each acknowledged on the pool with its reason.
    assert acknowledged_rules(prod, "AWS::Cognito::UserPool") == set()
    assert acknowledged_rules(dev, "AWS::Cognito::UserPool") == {"AwsSolutions-COG2", "AwsSolutions-COG8"}
    for synth in (dev, prod):
        report = json.loads((synth.outdir / "validation-report.json").read_text())
        assert findings(report) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"authorizer": False}, "'authorizer' was replaced by 'auth'"),
        ({"auth": "oauth"}, "'cognito' or 'dev-signed-token'"),
        (
            {"auth": "none"},
            "auth 'none' is for the local stack only (voiceide-conductor local); deployed stages use cognito or "
            "dev-signed-token",
        ),
        ({"auth": "dev-signed-token", "cognito": {"mfa": "required"}}, "apply only with"),
        ({"cognito": {"user_pool_id": "us-east-1_Abc"}}, "list the app client ids"),
        ({"cognito": {"client_ids": ["abc"]}}, "only apply with user_pool_id"),
        ({"cognito": {"callback_urls": ["voiceide://signin"]}}, "need domain_prefix"),
        ({"cognito": {"user_pool_id": "not a pool"}}, "user_pool_id"),
    ],
)
def test_auth_settings_are_validated_with_clear_errors(changes: dict[str, Any], message: str) -> None:
    settings = stage_like_prod(**changes)
    if changes.get("auth") not in (None, "cognito") and "cognito" not in changes:
        settings.pop("cognito", None)
    if "authorizer" in changes:
        settings.pop("auth")
    with pytest.raises(StageConfigError, match=re.escape(message)):
        select_stage({"qa": settings}, "qa")


# The one guarded action granted on '*', and to whom: dynamodb:ListStreams, for the session reaper's
# stream event source (CDK's DynamoEventSource grants it). IAM defines no resource type for it (Service
# Authorization Reference, Amazon DynamoDB: ListStreams has an empty "Resource types" column), so a
# statement naming the stream would never match the call; '*' is the only resource that grants it.
STAR_EXCEPTIONS = {("dynamodb:ListStreams", REAPER_HANDLER)}


def test_no_wildcards_on_bedrock_execute_api_or_dynamodb(any_stage: Synth) -> None:
    checked, starred = 0, set()
    reaper_role = function_role(any_stage, REAPER_HANDLER)
    for role_id in any_stage.of_type("AWS::IAM::Role"):
        for action, resource in grants(any_stage, role_id):
            service = action.split(":", 1)[0]
            if service in GUARDED_SERVICES:
                checked += 1
                assert "*" not in action, f"{role_id}: wildcard action {action}"
                if resource == "*" and role_id == reaper_role and (action, REAPER_HANDLER) in STAR_EXCEPTIONS:
                    starred.add((action, REAPER_HANDLER))
                    continue
                assert resource != "*", f"{role_id}: {action} on '*'"
    assert checked > 0
    assert starred == STAR_EXCEPTIONS  # the exception is still needed (and nothing else took it)


def test_only_the_turn_runner_calls_the_model_and_only_the_configured_one(
    dev: Synth, prod: Synth, variant: Synth
) -> None:
    """The runner streams answers (ConverseStream) and folds the rolling summary (Converse) with the
    conversation's model: InvokeModelWithResponseStream and InvokeModel on the same ARNs."""
    handler = TURN_HANDLER
    for synth in (dev, prod):
        profile = synth.config.bedrock.model_id
        foundation = synth.config.bedrock.foundation_model_id
        assert profile.startswith("us.") and foundation == profile[3:]
        expected = {f"arn:aws:bedrock:us-east-1:<AWS::AccountId>:inference-profile/{profile}"} | {
            f"arn:aws:bedrock:{region}::foundation-model/{foundation}"
            for region in synth.config.bedrock.inference_profile_regions
        }
        assert service_grants(synth, handler, "bedrock") == {
            (action, arn)
            for arn in expected
            for action in ("bedrock:InvokeModelWithResponseStream", "bedrock:InvokeModel")
        }
    assert prod.config.bedrock.inference_profile_regions == ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
    assert {a for a, _ in service_grants(variant, handler, "bedrock")} == {
        "bedrock:InvokeModelWithResponseStream",
        "bedrock:InvokeModel",
    }
    variant_arns = {r for _, r in service_grants(variant, handler, "bedrock")}
    assert "arn:aws:bedrock:::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0" in variant_arns
    assert (
        "arn:aws:bedrock:eu-west-1:<AWS::AccountId>:inference-profile/global.anthropic.claude-sonnet-4-5-20250929-v1:0"
        in variant_arns
    )
    for other in (*HANDLERS.values(), TURN_ABANDONED_HANDLER):
        assert not service_grants(prod, other, "bedrock")


def test_message_function_may_only_launch_the_turn_runner(any_stage: Synth) -> None:
    turn_id, _ = any_stage.function(TURN_HANDLER)
    assert service_grants(any_stage, HANDLERS["$default"], "lambda") == {("lambda:InvokeFunction", f"<{turn_id}.Arn>")}
    _, message = any_stage.function(HANDLERS["$default"])
    assert message["Properties"]["Environment"]["Variables"]["CONDUCTOR_TURN_FUNCTION"] == {"Ref": turn_id}
    for handler in (HANDLERS["$connect"], HANDLERS["$disconnect"], TURN_ABANDONED_HANDLER):
        assert not service_grants(any_stage, handler, "lambda")


def test_turn_runner_is_never_retried_and_hands_failures_to_its_destination(any_stage: Synth) -> None:
    turn_id, _ = any_stage.function(TURN_HANDLER)
    abandoned_id, _ = any_stage.function(TURN_ABANDONED_HANDLER)
    _, invoke_config = any_stage.one("AWS::Lambda::EventInvokeConfig")
    props = invoke_config["Properties"]
    assert props["FunctionName"] == {"Ref": turn_id}
    assert props["MaximumRetryAttempts"] == 0
    assert props["MaximumEventAgeInSeconds"] == 60
    assert props["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [abandoned_id, "Arn"]}}}
    # The runner's role may invoke its destination (Lambda delivers the record with it), nothing else.
    assert {arn for _, arn in service_grants(any_stage, TURN_HANDLER, "lambda")} == {
        f"<{abandoned_id}.Arn>",
        f"<{abandoned_id}.Arn>:*",
    }


def test_posting_functions_post_only_to_their_own_stage(any_stage: Synth) -> None:
    api_id = any_stage.api_id("WEBSOCKET")
    region, stage = any_stage.config.region, any_stage.config.name
    for handler in (HANDLERS["$default"], HANDLERS["$disconnect"], TURN_HANDLER, TURN_ABANDONED_HANDLER):
        assert service_grants(any_stage, handler, "execute-api") == {
            (
                "execute-api:ManageConnections",
                f"arn:aws:execute-api:{region}:<AWS::AccountId>:<{api_id}>/{stage}/POST/@connections/*",
            )
        }
    assert not service_grants(any_stage, HANDLERS["$connect"], "execute-api")


def test_table_access_is_item_level_on_this_table_only(any_stage: Synth) -> None:
    table_id, _ = any_stage.one("AWS::DynamoDB::Table")
    table_arn = f"<{table_id}.Arn>"
    index_arn = f"{table_arn}/index/{SESSIONS_INDEX}"
    for name, handler in TABLE_USERS.items():
        # The sessions API also has Query on the sessions index alone (no index/*); no other function has any.
        assert service_grants(any_stage, handler, "dynamodb") == {(a, table_arn) for a in TABLE_ACTIONS[name]} | {
            (a, index_arn) for a in INDEX_ACTIONS.get(name, ())
        }
    if any_stage.config.authorizer:
        assert not service_grants(any_stage, AUTHORIZER_HANDLER, "dynamodb")


def store_table_actions() -> set[str]:
    """The DynamoDB actions shared/adapters/store.py and shared/adapters/session_records.py need: their client calls,
    and for transactions the kinds of item they write (dict keys such as ``"Put"``)."""
    return set().union(*(module_table_actions(path) for path in TABLE_MODULES))


def module_table_actions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "_client"
    }
    assert called, f"no DynamoDB client call found in {path}"
    unknown = called - set(CLIENT_CALL_ACTIONS) - {"transact_write_items", "transact_get_items"}
    assert not unknown, f"map these client calls to IAM actions: {unknown}"
    actions = {CLIENT_CALL_ACTIONS[name] for name in called & set(CLIENT_CALL_ACTIONS)}
    if called & {"transact_write_items", "transact_get_items"}:
        keys = {
            key.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Dict)
            for key in node.keys
            if isinstance(key, ast.Constant) and key.value in TRANSACT_ITEM_ACTIONS
        }
        actions |= {TRANSACT_ITEM_ACTIONS[key] for key in keys}
    return {f"dynamodb:{action}" for action in actions}


def test_every_granted_table_action_is_one_the_store_calls(any_stage: Synth) -> None:
    """Each granted action is one the store calls, and each one it calls is granted to some function
    (which function needs which: tests/infra/test_grants_from_calls.py)."""
    used = store_table_actions()
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"} <= used  # Update: transaction items
    granted: set[str] = set()
    for handler in TABLE_USERS.values():
        granted |= {action for action, _ in service_grants(any_stage, handler, "dynamodb")}
    assert granted == used, f"granted but never called: {sorted(granted - used)}; not granted: {sorted(used - granted)}"


def test_function_roles_trust_lambda_and_carry_no_managed_policies(any_stage: Synth) -> None:
    for fn in any_stage.of_type("AWS::Lambda::Function").values():
        role = any_stage.resources[ref_of(fn["Properties"]["Role"])]["Properties"]
        assert role["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]
        assert "ManagedPolicyArns" not in role


# --- DynamoDB -----------------------------------------------------------------------------------


def test_table_settings(any_stage: Synth) -> None:
    _, table = any_stage.one("AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert props["AttributeDefinitions"] == [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
        {"AttributeName": "owner", "AttributeType": "S"},
        {"AttributeName": "last_active", "AttributeType": "N"},
    ]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    # AWS managed key (aws/dynamodb): encrypted with KMS, no customer key referenced.
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert "LocalSecondaryIndexes" not in props
    assert len(props["GlobalSecondaryIndexes"]) == 1  # the sessions index (tests/infra/test_sessions_api.py)


# What 1,000 people speaking at once write (docs/capacity.md, prod's target): 7.203 WRU/s each to the table,
# 3.498 to the sessions index. A new on-demand table and index start at 4,000 WRU/s.
TARGET_SPEAKERS = 1000
TABLE_WRU_PER_SPEAKER = 7.203
INDEX_WRU_PER_SPEAKER = 3.498


def test_prod_starts_warm_enough_for_its_target_and_dev_pays_for_no_warming(dev: Synth, prod: Synth) -> None:
    _, table = prod.one("AWS::DynamoDB::Table")
    props = table["Properties"]
    capacity = prod.config.capacity
    assert props["WarmThroughput"] == {"WriteUnitsPerSecond": capacity.warm_write_units_per_second}
    assert props["WarmThroughput"]["WriteUnitsPerSecond"] >= TARGET_SPEAKERS * TABLE_WRU_PER_SPEAKER
    [index] = props["GlobalSecondaryIndexes"]
    assert index["WarmThroughput"] == {"WriteUnitsPerSecond": capacity.index_warm_write_units_per_second}
    assert index["WarmThroughput"]["WriteUnitsPerSecond"] >= TARGET_SPEAKERS * INDEX_WRU_PER_SPEAKER
    _, dev_table = dev.one("AWS::DynamoDB::Table")
    assert "WarmThroughput" not in dev_table["Properties"]
    assert "WarmThroughput" not in dev_table["Properties"]["GlobalSecondaryIndexes"][0]


# The account-level API Gateway logging role and setting: other stages' access logs rely on them, so
# they stay even when the create that made them rolls back (their names never block a retry).
ACCOUNT_LEVEL = ("AWS::ApiGateway::Account", "AWS::IAM::Role")


def test_prod_retains_data_but_a_failed_first_create_leaves_nothing_behind(dev: Synth, prod: Synth) -> None:
    """prod keeps its data on stack deletion and replacement (Retain), but a create that rolls back
    deletes what it made (RetainExceptOnCreate): no orphaned table, pool, key, queue or log group
    blocks the retry. dev destroys everything."""
    _, prod_table = prod.one("AWS::DynamoDB::Table")
    assert prod_table["DeletionPolicy"] == "RetainExceptOnCreate"
    assert prod_table["UpdateReplacePolicy"] == "Retain"
    assert "DeletionProtectionEnabled" not in prod_table["Properties"]  # it would block that rollback
    _, dev_table = dev.one("AWS::DynamoDB::Table")
    assert dev_table["DeletionPolicy"] == "Delete"
    assert not dev_table["Properties"].get("DeletionProtectionEnabled", False)
    kept = {
        res["Type"]
        for res in prod.resources.values()
        if res.get("DeletionPolicy") == "RetainExceptOnCreate" or res.get("UpdateReplacePolicy") == "Retain"
    }
    assert {
        "AWS::DynamoDB::Table",
        "AWS::Cognito::UserPool",
        "AWS::KMS::Key",
        "AWS::SQS::Queue",
        "AWS::Logs::LogGroup",
    } <= kept
    plain_retain = {name: res["Type"] for name, res in prod.resources.items() if res.get("DeletionPolicy") == "Retain"}
    assert set(plain_retain.values()) <= set(ACCOUNT_LEVEL), plain_retain
    for synth, policy in ((dev, "Delete"), (prod, "RetainExceptOnCreate")):
        for log_group in synth.of_type("AWS::Logs::LogGroup").values():
            assert log_group["DeletionPolicy"] == policy
        for queue in synth.of_type("AWS::SQS::Queue").values():
            assert queue["DeletionPolicy"] == policy
        for key in synth.of_type("AWS::KMS::Key").values():
            assert key["DeletionPolicy"] == policy
    assert prod.stack.termination_protection is True
    assert dev.stack.termination_protection is False


# --- Lambda -------------------------------------------------------------------------------------


def test_functions_share_one_code_asset_and_one_dependency_layer(any_stage: Synth) -> None:
    functions = any_stage.of_type("AWS::Lambda::Function")
    # the routes' three, the turn runner, its destination, the tool-deadline consumer, the session reaper,
    # the sessions API's
    expected = 9 if any_stage.config.authorizer else 8
    assert len(functions) == expected
    layer_id, layer = any_stage.one("AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    # Every stage: an update deletes the replaced layer version once no function points at it.
    assert (layer["DeletionPolicy"], layer["UpdateReplacePolicy"]) == ("Delete", "Delete")
    keys = {json.dumps(fn["Properties"]["Code"], sort_keys=True) for fn in functions.values()}
    assert len(keys) == 1
    for fn in functions.values():
        props = fn["Properties"]
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert [ref_of(layer) for layer in props["Layers"]] == [layer_id]
        log_group = any_stage.resources[ref_of(props["LoggingConfig"]["LogGroup"])]
        assert log_group["Properties"]["RetentionInDays"] == any_stage.config.log_retention_days


def test_timeouts_memory_and_environment(any_stage: Synth) -> None:
    config = any_stage.config
    table_id, _ = any_stage.one("AWS::DynamoDB::Table")
    _, message = any_stage.function(HANDLERS["$default"])
    props = message["Properties"]
    assert props["Timeout"] == config.lambdas.message_timeout_seconds <= 29  # API Gateway's integration timeout
    assert props["MemorySize"] == config.lambdas.message_memory_mb
    env = dict(props["Environment"]["Variables"])  # a copy: the synth is shared by the session's tests
    assert ref_of(env.pop("CONDUCTOR_TABLE")) == table_id
    assert ref_of(env.pop("CONDUCTOR_TURN_FUNCTION")) == any_stage.function(TURN_HANDLER)[0]
    assert "ToolDeadlinesQueue" in ref_of(env.pop("CONDUCTOR_DEADLINE_QUEUE_URL"))  # parts' deadlines
    # what the person's memory holds, read when a session starts (tests/infra/test_memory.py)
    assert ref_of(env.pop("CONDUCTOR_MEMORY_ID")) == any_stage.one("AWS::BedrockAgentCore::Memory")[0]
    # the MCP servers it calls, where the stage has any (tests/infra/test_mcp.py)
    assert (env.pop("CONDUCTOR_MCP_SERVERS", None) is not None) is config.mcp.active
    assert env == {
        "BEDROCK_MODEL_ID": config.bedrock.model_id,
        "BEDROCK_REGION": config.bedrock_region,
        "BEDROCK_MAX_TOKENS": str(config.bedrock.max_tokens),
        "BEDROCK_EFFORT": config.bedrock.effort,
        "BEDROCK_THINKING": config.bedrock.thinking,
        "CONDUCTOR_MAX_TOOL_ROUNDS": str(config.max_tool_rounds),
        "CONDUCTOR_TURN_RESERVE_MS": str(config.lambdas.turn_reserve_ms),
        "CONDUCTOR_REQUIRE_PRINCIPAL": "true" if config.authorizer else "false",
        "CONDUCTOR_MAX_TURNS_PER_MINUTE": str(config.max_turns_per_minute),
        "CONDUCTOR_SPECULATION": "true" if config.speculation.enabled else "false",
        "CONDUCTOR_SPECULATION_STABLE_MS": str(config.speculation.stable_ms),
        # each turn's cost from the stage's one price table; the progress line; the daily ceiling
        "CONDUCTOR_PRICES": config.bedrock.prices.model_dump_json() if config.bedrock.prices else "",
        "CONDUCTOR_PROGRESS_AFTER_MS": str(config.progress_after_ms),
        "CONDUCTOR_PROGRESS_EVERY_MS": str(config.progress_every_ms),
        "CONDUCTOR_DAILY_BUDGET_USD": str(config.daily_budget_usd),
        "CONDUCTOR_ENDED_RETENTION_SECONDS": str(config.sessions.ended_retention_days * 86_400),
        # The session reaper deletes a session's history when its state expires: history only backstops.
        "CONDUCTOR_HISTORY_TTL_SECONDS": str(400 * 86_400),
        "CONDUCTOR_MIN_PARTIAL_INTERVAL_MS": str(config.fair_share.min_partial_interval_ms),
        "CONDUCTOR_MAX_EVENTS_PER_SECOND": str(config.fair_share.max_events_per_second),
        "POWERTOOLS_SERVICE_NAME": config.service_name,
        "POWERTOOLS_LOG_LEVEL": config.log_level,
        "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
    }
    _, turn = any_stage.function(TURN_HANDLER)
    turn_props = turn["Properties"]
    turn_env = turn_props["Environment"]["Variables"]
    assert turn_env["BEDROCK_EFFORT"] == config.bedrock.effort
    assert turn_env["BEDROCK_THINKING"] == config.bedrock.thinking
    assert turn_props["Timeout"] == config.lambdas.turn_timeout_seconds >= 300
    assert turn_props["MemorySize"] == config.lambdas.turn_memory_mb
    assert int(env["CONDUCTOR_TURN_RESERVE_MS"]) < turn_props["Timeout"] * 1000
    # The watcher of a person's speech runs in the turn function: it speculates exactly as $default asks,
    # and holds back partials as $default does; the runner writes history with the same backstop.
    for name in (
        "CONDUCTOR_SPECULATION",
        "CONDUCTOR_SPECULATION_STABLE_MS",
        "CONDUCTOR_MIN_PARTIAL_INTERVAL_MS",
        "CONDUCTOR_HISTORY_TTL_SECONDS",
    ):
        assert turn_env[name] == env[name]
    for route_key in ("$connect", "$disconnect"):
        _, fn = any_stage.function(HANDLERS[route_key])
        assert fn["Properties"]["Timeout"] == config.lambdas.handler_timeout_seconds <= 29
        assert fn["Properties"]["Environment"]["Variables"]["CONDUCTOR_TABLE"] == {"Ref": table_id}


def reserved_by_handler(synth: Synth) -> dict[str, int]:
    return {
        fn["Properties"]["Handler"]: fn["Properties"]["ReservedConcurrentExecutions"]
        for fn in synth.of_type("AWS::Lambda::Function").values()
        if "ReservedConcurrentExecutions" in fn["Properties"]
    }


def test_no_stage_reserves_concurrency_that_no_reading_proves(dev: Synth, prod: Synth, variant: Synth) -> None:
    """prod as shipped pins no account and commits no reading: it deploys at an account's defaults (even
    a new account's 10 or 50), reserving nothing of the 1,500 it asks for, and says so at synth."""
    assert prod.config.lambdas.turn_reserved_concurrency == 1500 and prod.config.account is None
    assert variant.config.lambdas.reserved == 220
    for synth in (dev, prod, variant):
        assert reserved_by_handler(synth) == {}
    for synth in (prod, variant):
        [warning] = [w for w in synth_warnings(synth) if UNPROVEN_WARNING in w]
        assert f"stage '{synth.config.name}' pins no account (stages.{synth.config.name}.account)" in warning
    assert not [w for w in synth_warnings(dev) if UNPROVEN_WARNING in w]  # dev asks for none


def lambda_reading(quota: int) -> QuotaReading:
    """What doctor records after reading ``quota`` in prod's region of ``ACCOUNT``."""
    return QuotaReading(ACCOUNT, "us-east-1", "2026-11-28T12:00:00Z", lambda_concurrency=quota, lambda_unreserved=quota)


def test_a_pinned_stage_with_a_reading_that_holds_it_reserves(tmp_path: Path) -> None:
    """doctor read 1,600 in prod's account and region: 1,500 for the turn runner leaves the 100 Lambda keeps."""
    reading = lambda_reading(1600)
    synth = synthesize(
        tmp_path,
        "prod",
        **{"stages.prod.account": ACCOUNT, reading_key(ACCOUNT, "us-east-1"): reading.to_json()},
    )
    assert reserved_by_handler(synth) == {TURN_HANDLER: 1500}
    assert not [w for w in synth_warnings(synth) if UNPROVEN_WARNING in w]


def test_a_reading_that_cannot_hold_the_reservation_fails_synth(tmp_path: Path) -> None:
    reading = lambda_reading(1000)
    with pytest.raises(StageConfigError, match=r"^stages\.prod\.lambdas\.turn_reserved_concurrency \(1,500\) must"):
        synthesize(
            tmp_path,
            "prod",
            **{"stages.prod.account": ACCOUNT, reading_key(ACCOUNT, "us-east-1"): json.dumps(reading.to_json())},
        )


# --- Alarms and outputs -------------------------------------------------------------------------


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {name: res["Properties"] for name, res in synth.of_type("AWS::CloudWatch::Alarm").items()}


def test_alarms_on_errors_throttles_and_bedrock(any_stage: Synth) -> None:
    alarms = _alarms(any_stage)
    lambda_alarms = {
        (name, dims["FunctionName"])
        for a in alarms.values()
        for ns, name, dims, _, _ in alarm_metrics(a)
        if ns == "AWS/Lambda"
    }
    for fn_id in any_stage.of_type("AWS::Lambda::Function"):
        assert ("Errors", f"<{fn_id}>") in lambda_alarms
        assert ("Throttles", f"<{fn_id}>") in lambda_alarms
    for metric in ("ErrorEvents.bedrock_error", "TurnsAbandoned"):  # what the conductor counts itself
        own = [m for a in alarms.values() for m in alarm_metrics(a) if m[1] == metric]
        assert len(own) == 1, metric
        assert own[0][0] == any_stage.config.metrics_namespace
        assert own[0][2] == {"service": any_stage.config.service_name}
    for alarm in alarms.values():
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"


def test_alarms_notify_an_encrypted_topic_and_email_only_where_configured(
    dev: Synth, prod: Synth, variant: Synth
) -> None:
    assert not dev.of_type("AWS::SNS::Subscription")
    for synth in (prod, variant):
        topic_id, topic = synth.one("AWS::SNS::Topic")
        key_id = ref_of(topic["Properties"]["KmsMasterKeyId"])
        key = synth.resources[key_id]["Properties"]
        assert key["EnableKeyRotation"] is True
        assert any(
            s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and "kms:Decrypt" in as_list(s["Action"])
            for s in key["KeyPolicy"]["Statement"]
        )
        for alarm in _alarms(synth).values():
            assert [ref_of(a) for a in alarm["AlarmActions"]] == [topic_id]
        _, topic_policy = synth.one("AWS::SNS::TopicPolicy")
        statements = topic_policy["Properties"]["PolicyDocument"]["Statement"]
        assert [s["Effect"] for s in statements if s.get("Condition") == SSL_ONLY] == ["Deny"]
    for synth in (prod, variant):  # prod as deployed: -c stages.prod.alarm_email=… (tests/infra/conftest.py)
        _, subscription = synth.one("AWS::SNS::Subscription")
        assert subscription["Properties"]["Protocol"] == "email"
        assert subscription["Properties"]["Endpoint"] == ALARM_EMAIL


def test_outputs(dev: Synth, prod: Synth, variant: Synth) -> None:
    for synth in (dev, prod, variant):
        api_id = synth.api_id("WEBSOCKET")
        outputs = {name: flatten_cfn_reference(o["Value"]) for name, o in synth.template["Outputs"].items()}
        region, stage = synth.config.region, synth.config.name
        assert outputs["WebSocketUrl"] == f"wss://<{api_id}>.execute-api.{region}.<AWS::URLSuffix>/{stage}"
        assert outputs["CallbackUrl"] == f"https://<{api_id}>.execute-api.{region}.<AWS::URLSuffix>/{stage}"
        assert "TableName" in outputs
        assert outputs["SessionsApiUrl"] == f"https://<{synth.api_id('HTTP')}>.execute-api.{region}.<AWS::URLSuffix>"
    for synth in (dev, prod, variant):
        assert "TokenSigningSecretArn" not in synth.template["Outputs"]
        assert ("UserPoolId" in synth.template["Outputs"]) is (synth.config.auth == "cognito")
    for synth in (dev, prod):  # every deployed stage: what the app and voiceide-client sign in with
        assert {"UserPoolId", "UserPoolClientId", "Issuer"} <= set(synth.template["Outputs"])
    for synth in (dev, prod, variant):
        topic_id, _ = synth.one("AWS::SNS::Topic")
        assert synth.template["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic_id}
        region = synth.config.region
        assert flatten_cfn_reference(synth.template["Outputs"]["DashboardUrl"]["Value"]) == (
            f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
            f"#dashboards/dashboard/{synth.config.stack_name}"
        )


def test_stack_names_and_regions(dev: Synth, prod: Synth, variant: Synth) -> None:
    assert (dev.stack.stack_name, dev.stack.region) == ("VoiceIDEConductor-dev", "us-east-1")
    assert (prod.stack.stack_name, prod.stack.region) == ("VoiceIDEConductor-prod", "us-east-1")
    assert (variant.stack.stack_name, variant.stack.region) == ("VoiceIDEConductor-staging", "eu-west-1")


SSL_ONLY = {"Bool": {"aws:SecureTransport": "false"}}
ACCOUNT = "123456789012"


def flat_conditions(statement: dict[str, Any]) -> dict[str, dict[str, str]]:
    conditions = statement["Condition"].items()
    return {op: {key: flatten_cfn_reference(value) for key, value in keys.items()} for op, keys in conditions}


def cloudwatch_statements(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]


def test_cloudwatch_may_publish_alarms_to_the_topic_and_use_its_key(any_stage: Synth) -> None:
    """The topic's policy replaces SNS's default one: without its own statement CloudWatch could not
    publish (nor encrypt with the key), and no alarm would reach anyone."""
    region = any_stage.config.region
    own_alarms = {
        "StringEquals": {"aws:SourceAccount": "<AWS::AccountId>"},
        "ArnLike": {"aws:SourceArn": f"arn:aws:cloudwatch:{region}:<AWS::AccountId>:alarm:*"},
    }
    topic_id, topic = any_stage.one("AWS::SNS::Topic")
    _, policy = any_stage.one("AWS::SNS::TopicPolicy")
    assert [ref_of(t) for t in policy["Properties"]["Topics"]] == [topic_id]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    [publish] = cloudwatch_statements(statements)
    assert (publish["Effect"], as_list(publish["Action"])) == ("Allow", ["sns:Publish"])
    assert [ref_of(r) for r in as_list(publish["Resource"])] == [topic_id]
    assert flat_conditions(publish) == own_alarms
    assert any(s["Effect"] == "Deny" and s.get("Condition") == SSL_ONLY for s in statements)

    key = any_stage.resources[ref_of(topic["Properties"]["KmsMasterKeyId"])]["Properties"]
    [use_key] = cloudwatch_statements(key["KeyPolicy"]["Statement"])
    assert use_key["Effect"] == "Allow"
    assert set(as_list(use_key["Action"])) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert flat_conditions(use_key) == own_alarms


def synth_warnings(synth: Synth) -> list[str]:
    """Warning annotations of the stack, as the CLI prints them after a synth."""
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    artifact = manifest["artifacts"][synth.stack.artifact_id]
    metadata = artifact.get("metadata", {})
    if "additionalMetadataFile" in artifact:  # newer assemblies keep it beside the manifest
        metadata = {**metadata, **json.loads((synth.outdir / artifact["additionalMetadataFile"]).read_text())}
    return [entry["data"] for entries in metadata.values() for entry in entries if entry["type"] == "aws:cdk:warning"]


def test_a_stage_without_a_subscriber_says_so_when_it_synthesizes(dev: Synth, prod: Synth, variant: Synth) -> None:
    """A stage that keeps nothing (dev) may synthesize without a listener, with a warning; a retaining
    one may not synthesize at all (tests/infra/test_stage_checks.py)."""
    assert dev.config.alarm_listeners == ()
    [warning] = [w for w in synth_warnings(dev) if NO_SUBSCRIBER_WARNING in w]
    assert "Stage 'dev' names nobody to hear its alarms" in warning
    assert "alarm_email or alarm_topic_arn" in warning
    for synth in (prod, variant):
        assert synth.config.alarm_email == ALARM_EMAIL
        assert not [w for w in synth_warnings(synth) if NO_SUBSCRIBER_WARNING in w]


ONCALL_TOPIC = "arn:aws:sns:us-east-1:123456789012:voiceide-oncall"


def test_a_stage_names_its_own_topic_and_every_alarm_notifies_it_too(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``alarm_topic_arn``: an existing topic (chat, paging) hears every alarm besides the stage's own
    topic; the stage then synthesizes without the warning, which a stage naming nobody prints on
    stderr as well as in the assembly."""
    synth = synthesize(tmp_path / "named", "qa", stages={"qa": stage_like_prod(alarm_topic_arn=ONCALL_TOPIC)})
    assert "names nobody to hear its alarms" not in capfd.readouterr().err
    assert not [w for w in synth_warnings(synth) if NO_SUBSCRIBER_WARNING in w]
    topic_id, _ = synth.one("AWS::SNS::Topic")  # the stage's own; the named one is only referenced
    found = synth.of_type("AWS::CloudWatch::Alarm")
    assert len(found) >= 15
    for name, res in found.items():
        for actions in (res["Properties"]["AlarmActions"], res["Properties"]["OKActions"]):
            assert sorted(flatten_cfn_reference(a) for a in actions) == sorted([f"<{topic_id}>", ONCALL_TOPIC]), name
    from infra.app import build_app

    quiet = stage_like_prod(alarm_email=None, removal_policy="destroy")
    build_app({"stage": "qa", "stages": {"qa": quiet}, "skip_bundle_deps": "true"}, outdir=str(tmp_path))
    [line] = [line for line in capfd.readouterr().err.splitlines() if "names nobody" in line]
    assert line.startswith("warning: Stage 'qa' names nobody to hear its alarms")
