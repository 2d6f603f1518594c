"""The sessions API in the synthesized templates (docs/sessions-api.md): the table's sessions index as
the local table defines it, the HTTP API and its routes, sign-in, the stage, the function, its grants,
alarms and dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conductor_local.dynamodb.tables import TTL_ATTRIBUTE, create_tables
from infra.config import StageConfig
from infra.constructs.functions import INDEX_ACTIONS, TABLE_ACTIONS
from infra.constructs.sessions_api import (
    ACCESS_LOG_FIELDS,
    CURSOR_SECRET_ARN_ENV,
    SESSIONS_API_CONNECTION_METHODS,
    SESSIONS_ROUTES,
)
from infra.nag import flatten_cfn_reference
from shared.adapters.session_records import SESSIONS_INDEX, SESSIONS_INDEX_PROJECTED
from tests.infra.code_calls import handler_operations
from tests.infra.conftest import EXISTING_POOL, Synth
from tests.infra.test_checks import acknowledgments
from tests.infra.test_operations import alarm, alarm_metrics, dashboard, expression, widget_metrics
from tests.infra.test_stack import (
    AUTHORIZER_HANDLER,
    HANDLERS,
    as_list,
    env_issuer,
    function_role,
    grants,
    ref_of,
    service_grants,
)

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
HANDLER = "lambdas.sessions_api.handler"
ROUTE_KEYS = {f"{method} {path}" for method, path in SESSIONS_ROUTES}
# The management API operations a function may call on a connection, and the method in the ARN each needs.
CONNECTION_METHODS = {"PostToConnection": "POST", "DeleteConnection": "DELETE", "GetConnection": "GET"}


@pytest.fixture(params=["dev", "prod", "variant"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    """The stages that serve the sessions API: every Cognito stage (dev's pool, prod's, another's)."""
    return request.getfixturevalue(request.param)


@pytest.fixture(params=["dev", "prod", "variant", "signed_token"])
def every_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def props(synth: Synth, resource_id: str) -> dict[str, Any]:
    return synth.resources[resource_id]["Properties"]


def http_routes(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        res["Properties"]["RouteKey"]: res["Properties"]
        for res in synth.of_api("AWS::ApiGatewayV2::Route", "HTTP").values()
    }


# --- the table's sessions index -----------------------------------------------------------------


class RecordingDynamoDB:
    """What ``conductor_local.dynamodb.tables.create_tables`` asks a DynamoDB endpoint for."""

    class exceptions:
        class ResourceInUseException(Exception):
            pass

    def __init__(self) -> None:
        self.created: dict[str, Any] = {}

    def create_table(self, **kwargs: Any) -> None:
        self.created = kwargs

    def get_waiter(self, name: str) -> Any:
        return type("Waiter", (), {"wait": lambda *args, **kwargs: None})()

    def describe_time_to_live(self, **kwargs: Any) -> dict[str, Any]:
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED"}}


def local_table() -> dict[str, Any]:
    endpoint = RecordingDynamoDB()
    create_tables(endpoint, "voiceide-conductor")
    return endpoint.created


def test_the_sessions_index_is_the_local_tables(every_stage: Synth) -> None:
    """Every stage's table has exactly the index the local stack creates (conductor_local/dynamodb/tables.py):
    by-owner, owner (S) / last_active (N), projecting the listed fields; the same keys and TTL too."""
    local = local_table()
    _, table = every_stage.one("AWS::DynamoDB::Table")
    synthesized = table["Properties"]
    # Warm throughput is what a deployed stage pays to start warm (capacity.*), not the index's shape.
    indexes = [
        {key: value for key, value in index.items() if key != "WarmThroughput"}
        for index in synthesized["GlobalSecondaryIndexes"]
    ]
    assert indexes == local["GlobalSecondaryIndexes"]
    assert synthesized["AttributeDefinitions"] == local["AttributeDefinitions"]
    assert synthesized["KeySchema"] == local["KeySchema"]
    assert synthesized["BillingMode"] == local["BillingMode"]
    assert synthesized["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    [index] = indexes
    assert index == {
        "IndexName": SESSIONS_INDEX,
        "KeySchema": [
            {"AttributeName": "owner", "KeyType": "HASH"},
            {"AttributeName": "last_active", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(SESSIONS_INDEX_PROJECTED)},
    }


# --- the HTTP API ------------------------------------------------------------------------------


def test_eight_routes_all_proxy_to_the_sessions_function(any_stage: Synth) -> None:
    api_id = any_stage.api_id("HTTP")
    routes = http_routes(any_stage)
    assert (
        set(routes)
        == ROUTE_KEYS
        == {
            "GET /sessions",
            "GET /sessions/{id}",
            "PATCH /sessions/{id}",
            "POST /sessions/{id}/end",
            "DELETE /sessions/{id}",
            "GET /memories",
            "DELETE /memories",
            "DELETE /memories/{id}",
        }
    )
    fn_id, _ = any_stage.function(HANDLER)
    targets = {ref_of(route["Target"]["Fn::Join"][1][1]) for route in routes.values()}
    [integration_id] = targets  # one integration for them all
    integration = props(any_stage, integration_id)
    assert integration["ApiId"] == {"Ref": api_id}
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert integration["PayloadFormatVersion"] == "2.0"  # what APIGatewayHttpResolver reads
    assert ref_of(integration["IntegrationUri"]) == fn_id
    # API Gateway may invoke the function for these routes of this API only.
    permissions = {
        flatten_cfn_reference(res["Properties"]["SourceArn"])
        for res in any_stage.of_type("AWS::Lambda::Permission").values()
        if ref_of(res["Properties"]["FunctionName"]) == fn_id
    }
    region = any_stage.config.region
    # (flatten_cfn_reference renders every "}" as ">": "/sessions/{id}" reads "/sessions/{id>")
    assert permissions == {
        f"arn:aws:execute-api:{region}:<AWS::AccountId>:<{api_id}>/*/*{path.replace('}', '>')}"
        for _, path in SESSIONS_ROUTES
    }
    # No CORS: no stage setting names a browser origin (infra/constructs/sessions_api.py).
    assert "CorsConfiguration" not in props(any_stage, api_id)
    assert not [key for key in routes if key.startswith("OPTIONS ")]


def test_the_stage_is_default_auto_deployed_and_throttled_like_the_websocket(any_stage: Synth) -> None:
    _, stage = any_stage.one_of_api("AWS::ApiGatewayV2::Stage", "HTTP")
    stage_props = stage["Properties"]
    assert stage_props["StageName"] == "$default"  # no stage in the URL: <url>/sessions
    assert stage_props["AutoDeploy"] is True
    _, websocket = any_stage.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")
    assert (
        stage_props["DefaultRouteSettings"]
        == websocket["Properties"]["DefaultRouteSettings"]
        == {
            "ThrottlingBurstLimit": any_stage.config.throttle.burst_limit,
            "ThrottlingRateLimit": any_stage.config.throttle.rate_limit,
        }
    )


def test_json_access_logs_unless_the_stage_turns_them_off(
    dev: Synth, prod: Synth, variant: Synth, quiet: Synth
) -> None:
    """An HTTP API's access logs need no account-level logging role, so "auto" logs on every stage
    (dev too, which writes no WebSocket access logs); only "off" stops them, with its reason."""
    for synth in (dev, prod, variant):
        assert synth.config.http_access_logs
        stage_id, stage = synth.one_of_api("AWS::ApiGatewayV2::Stage", "HTTP")
        settings = stage["Properties"]["AccessLogSettings"]
        log_group = synth.resources[ref_of(settings["DestinationArn"])]
        assert log_group["Type"] == "AWS::Logs::LogGroup"
        assert log_group["Properties"]["RetentionInDays"] == synth.config.log_retention_days
        assert log_group["DeletionPolicy"] == ("RetainExceptOnCreate" if synth.config.retain else "Delete")
        fields = json.loads(settings["Format"])
        assert fields == ACCESS_LOG_FIELDS
        assert {"requestId", "routeKey", "status", "integrationError", "authorizerError"} <= set(fields)
        assert stage_id not in acknowledgments(synth).get("AwsSolutions-APIG1", [])
    assert (
        not dev.config.access_logs
        and "AccessLogSettings" not in dev.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")[1]["Properties"]
    )

    assert quiet.config.access_logging == "off" and not quiet.config.http_access_logs
    stage_id, stage = quiet.one_of_api("AWS::ApiGatewayV2::Stage", "HTTP")
    assert "AccessLogSettings" not in stage["Properties"]
    assert stage_id in acknowledgments(quiet)["AwsSolutions-APIG1"]
    report = json.loads((quiet.outdir / "validation-report.json").read_text())
    assert [p for p in report["pluginReports"] if p["pluginName"] != "Construct Annotations"] == []


# --- sign-in ------------------------------------------------------------------------------------


def http_authorizer(synth: Synth) -> tuple[str, dict[str, Any]]:
    return synth.one_of_api("AWS::ApiGatewayV2::Authorizer", "HTTP")


def test_with_cognito_every_route_has_the_pools_jwt_authorizer(prod: Synth, variant: Synth) -> None:
    for synth in (prod, variant):
        pool_id, _ = synth.one("AWS::Cognito::UserPool")
        client_id, _ = synth.one("AWS::Cognito::UserPoolClient")
        authorizer_id, authorizer = http_authorizer(synth)
        config = authorizer["Properties"]
        assert config["AuthorizerType"] == "JWT"
        assert config["IdentitySource"] == ["$request.header.Authorization"]
        # issuer https://cognito-idp.<region>.amazonaws.com/<poolId> (the pool's ProviderURL), audience
        # the app client: the same pool and client the $connect authorizer accepts.
        issuer = config["JwtConfiguration"]["Issuer"]
        assert issuer == {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [pool_id, "ProviderURL"]}]]}
        assert issuer == env_issuer(synth)
        assert config["JwtConfiguration"]["Audience"] == [{"Ref": client_id}]
        for key, route in http_routes(synth).items():
            assert (route["AuthorizationType"], ref_of(route["AuthorizerId"])) == ("JWT", authorizer_id), key
        # Nothing to acknowledge on them: cdk-nag's APIG4 (no authorization) does not apply.
        assert not set(acknowledgments(synth).get("AwsSolutions-APIG4", [])) & set(http_route_ids(synth))
        env = synth.function(HANDLER)[1]["Properties"]["Environment"]["Variables"]
        assert env["CONDUCTOR_REQUIRE_PRINCIPAL"] == "true"


def http_route_ids(synth: Synth) -> list[str]:
    return list(synth.of_api("AWS::ApiGatewayV2::Route", "HTTP"))


def test_an_existing_pool_is_checked_with_its_own_issuer_and_clients(existing_pool_stage: Synth) -> None:
    _, authorizer = http_authorizer(existing_pool_stage)
    jwt = authorizer["Properties"]["JwtConfiguration"]
    region = EXISTING_POOL["user_pool_id"].split("_", 1)[0]
    assert flatten_cfn_reference(jwt["Issuer"]) == (
        f"https://cognito-idp.{region}.<AWS::URLSuffix>/{EXISTING_POOL['user_pool_id']}"
    )
    assert jwt["Audience"] == EXISTING_POOL["client_ids"]
    env = existing_pool_stage.function(AUTHORIZER_HANDLER)[1]["Properties"]["Environment"]["Variables"]
    assert jwt["Issuer"] == env["CONDUCTOR_COGNITO_ISSUER"]


def test_dev_signs_in_to_its_own_pool_on_every_route(dev: Synth) -> None:
    """No stage serves the sessions API without sign-in (auth 'none' is the local stack's only)."""
    assert dev.config.auth == "cognito"
    routes = http_routes(dev)
    assert {route["AuthorizationType"] for route in routes.values()} == {"JWT"}
    assert "AwsSolutions-APIG4" not in acknowledgments(dev) or not set(http_route_ids(dev)) & set(
        acknowledgments(dev)["AwsSolutions-APIG4"]
    )
    env = dev.function(HANDLER)[1]["Properties"]["Environment"]["Variables"]
    assert env["CONDUCTOR_REQUIRE_PRINCIPAL"] == "true"


def test_a_dev_signed_token_stage_serves_no_sessions_api(signed_token: Synth) -> None:
    """API Gateway cannot check HMAC tokens, and an open API would list everyone's sessions."""
    assert signed_token.config.auth == "dev-signed-token" and not signed_token.config.sessions_api
    assert [res["Properties"]["ProtocolType"] for res in signed_token.of_type("AWS::ApiGatewayV2::Api").values()] == [
        "WEBSOCKET"
    ]
    handlers = {fn["Properties"]["Handler"] for fn in signed_token.of_type("AWS::Lambda::Function").values()}
    assert HANDLER not in handlers
    assert "SessionsApiUrl" not in signed_token.template["Outputs"]


# --- the function -------------------------------------------------------------------------------


def test_the_function_is_declared_like_the_others_with_its_environment(any_stage: Synth) -> None:
    config: StageConfig = any_stage.config
    fn_id, fn = any_stage.function(HANDLER)
    fn_props = fn["Properties"]
    assert (fn_props["Runtime"], fn_props["Architectures"]) == ("python3.13", ["arm64"])
    assert fn_props["TracingConfig"] == {"Mode": "Active"}
    assert fn_props["MemorySize"] == config.lambdas.handler_memory_mb
    assert fn_props["Timeout"] <= 29  # an HTTP API waits 30 s for its integration
    assert "ReservedConcurrentExecutions" not in fn_props
    log_group = any_stage.resources[ref_of(fn_props["LoggingConfig"]["LogGroup"])]
    assert log_group["Properties"]["RetentionInDays"] == config.log_retention_days
    # Invoked synchronously by API Gateway: no asynchronous invoke config, destination or dead-letter queue.
    assert "DeadLetterConfig" not in fn_props
    assert not [
        c
        for c in any_stage.of_type("AWS::Lambda::EventInvokeConfig").values()
        if ref_of(c["Properties"]["FunctionName"]) == fn_id
    ]

    table_id, _ = any_stage.one("AWS::DynamoDB::Table")
    env = dict(fn_props["Environment"]["Variables"])
    assert ref_of(env.pop("CONDUCTOR_TABLE")) == table_id
    [(secret_id, _)] = [
        (name, res) for name, res in any_stage.of_type("AWS::SecretsManager::Secret").items() if "CursorKey" in name
    ]
    assert ref_of(env.pop("CONDUCTOR_CURSOR_SECRET_ARN")) == secret_id
    # the person's memory, listed and erased (tests/infra/test_memory.py)
    assert ref_of(env.pop("CONDUCTOR_MEMORY_ID")) == any_stage.one("AWS::BedrockAgentCore::Memory")[0]
    callback = flatten_cfn_reference(env.pop("CONDUCTOR_WEBSOCKET_CALLBACK_URL"))
    websocket = any_stage.api_id("WEBSOCKET")
    assert callback == f"https://<{websocket}>.execute-api.{config.region}.<AWS::URLSuffix>/{config.name}"
    assert callback == flatten_cfn_reference(any_stage.template["Outputs"]["CallbackUrl"]["Value"])
    assert env == {
        "CONDUCTOR_ENDED_RETENTION_SECONDS": str(config.sessions.ended_retention_days * 24 * 3600),
        # ending or erasing commits the state (a barge-in may write history): the reaper's backstop
        "CONDUCTOR_HISTORY_TTL_SECONDS": str(400 * 24 * 3600),
        "CONDUCTOR_REQUIRE_PRINCIPAL": "true" if config.authorizer else "false",
        "POWERTOOLS_SERVICE_NAME": config.service_name,
        "POWERTOOLS_LOG_LEVEL": config.log_level,
        "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
    }
    # The same principal rule as the WebSocket's functions.
    for handler in HANDLERS.values():
        ws_env = any_stage.function(handler)[1]["Properties"]["Environment"]["Variables"]
        assert (
            ws_env["CONDUCTOR_REQUIRE_PRINCIPAL"] == fn_props["Environment"]["Variables"]["CONDUCTOR_REQUIRE_PRINCIPAL"]
        )


def test_the_ended_retention_is_the_stages_and_every_store_agrees(dev: Synth, prod: Synth, signed_token: Synth) -> None:
    """The sessions API's end sets it on every item; every function's store keeps it on an ended
    session's later writes (shared/flows/config.py: ended_retention_seconds), so all of them get it."""
    for synth, days in ((dev, 2), (prod, 30), (signed_token, 30)):
        seconds = {
            fn["Properties"]["Handler"]: fn["Properties"]["Environment"]["Variables"].get(
                "CONDUCTOR_ENDED_RETENTION_SECONDS"
            )
            for fn in synth.of_type("AWS::Lambda::Function").values()
            if fn["Properties"]["Handler"] != AUTHORIZER_HANDLER  # checks tokens; no store
        }
        assert set(seconds.values()) == {str(days * 86_400)}, seconds
        assert synth.config.sessions.ended_retention_days == days


def test_the_code_reads_the_environment_the_stack_sets() -> None:
    """The names the stack sets are the ones the function's code reads (lambdas/runtime.py, shared/flows/config.py)."""
    runtime = (ROOT / "lambdas" / "runtime.py").read_text(encoding="utf-8")
    config = (ROOT / "shared" / "flows" / "config.py").read_text(encoding="utf-8")
    assert '"CONDUCTOR_WEBSOCKET_CALLBACK_URL"' in runtime
    for name in ("CONDUCTOR_TABLE", "CONDUCTOR_REQUIRE_PRINCIPAL", "CONDUCTOR_ENDED_RETENTION_SECONDS"):
        assert f'"{name}"' in config, name
    handler = (ROOT / "lambdas" / "sessions_api.py").read_text(encoding="utf-8")
    assert "APIGatewayHttpResolver" in handler  # payload format 2.0, as the integration sends


# --- least privilege ----------------------------------------------------------------------------


def test_the_function_may_manage_exactly_the_connections_calls_its_code_makes(any_stage: Synth) -> None:
    """PostToConnection (session_ended / session_erased) and DeleteConnection (the close), each on its
    method of the WebSocket stage's @connections only; nothing on the sessions API itself."""
    called = {op for service, op in handler_operations(HANDLER) if service == "apigatewaymanagementapi"}
    methods = {CONNECTION_METHODS[op] for op in called}
    assert methods == set(SESSIONS_API_CONNECTION_METHODS) == {"POST", "DELETE"}
    region, stage = any_stage.config.region, any_stage.config.name
    websocket = any_stage.api_id("WEBSOCKET")
    assert service_grants(any_stage, HANDLER, "execute-api") == {
        (
            "execute-api:ManageConnections",
            f"arn:aws:execute-api:{region}:<AWS::AccountId>:<{websocket}>/{stage}/{m}/@connections/*",
        )
        for m in methods
    }


def test_the_function_may_use_the_table_and_query_the_index_and_nothing_else(any_stage: Synth) -> None:
    table_id, _ = any_stage.one("AWS::DynamoDB::Table")
    table_arn = f"<{table_id}.Arn>"
    called = {f"dynamodb:{op}" for service, op in handler_operations(HANDLER) if service == "dynamodb"}
    assert called == set(TABLE_ACTIONS["sessionsApi"])
    assert service_grants(any_stage, HANDLER, "dynamodb") == {(a, table_arn) for a in TABLE_ACTIONS["sessionsApi"]} | {
        ("dynamodb:Query", f"{table_arn}/index/{SESSIONS_INDEX}")
    }
    assert INDEX_ACTIONS == {"sessionsApi": ("dynamodb:Query",)}
    # The index is read by name by the code that pages the sessions (shared/adapters/session_records.py).
    records = (ROOT / "shared" / "adapters" / "session_records.py").read_text(encoding="utf-8")
    assert re.search(r'"IndexName":\s*SESSIONS_INDEX', records)
    # Services beside DynamoDB, the management API, the cursor key, the memory, its logs and traces: none.
    services = {action.split(":", 1)[0] for action, _ in grants(any_stage, function_role(any_stage, HANDLER))}
    assert services == {"dynamodb", "execute-api", "secretsmanager", "bedrock-agentcore", "logs", "xray"}
    # No other function may query the index.
    for fn in any_stage.of_type("AWS::Lambda::Function").values():
        handler = fn["Properties"]["Handler"]
        if handler != HANDLER:
            assert not {r for _, r in service_grants(any_stage, handler, "dynamodb") if "/index/" in r}, handler


def test_the_cursor_key_is_a_secret_only_the_function_may_read(any_stage: Synth) -> None:
    """The page cursors' HMAC key: generated by Secrets Manager, read (GetSecretValue, nothing more)
    by the sessions function alone, kept like the stage's other stateful resources."""
    [(secret_id, secret)] = [
        (name, res) for name, res in any_stage.of_type("AWS::SecretsManager::Secret").items() if "CursorKey" in name
    ]
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32 and generated["ExcludePunctuation"] is True
    assert secret["DeletionPolicy"] == ("RetainExceptOnCreate" if any_stage.config.retain else "Delete")
    assert service_grants(any_stage, HANDLER, "secretsmanager") == {("secretsmanager:GetSecretValue", f"<{secret_id}>")}
    for fn in any_stage.of_type("AWS::Lambda::Function").values():
        handler = fn["Properties"]["Handler"]
        if handler != HANDLER:
            assert not {r for _, r in service_grants(any_stage, handler, "secretsmanager") if secret_id in r}, handler
    # the code reads the variable the stack sets, and the key from it
    code = (ROOT / "lambdas" / "sessions_api.py").read_text(encoding="utf-8")
    assert f'CURSOR_SECRET_ARN_ENV = "{CURSOR_SECRET_ARN_ENV}"' in code and "parameters.get_secret(arn)" in code


# --- alarms, dashboard, output ------------------------------------------------------------------


def test_errors_throttles_and_5xx_alarm(any_stage: Synth) -> None:
    fn_id, _ = any_stage.function(HANDLER)
    rates = set()
    for res in any_stage.of_type("AWS::CloudWatch::Alarm").values():
        read = alarm_metrics(res["Properties"])
        if all(ns == "AWS/Lambda" and dims == {"FunctionName": f"<{fn_id}>"} for ns, _, dims, _, _ in read):
            rates.add(frozenset(name for _, name, _, _, _ in read))
    assert rates == {frozenset({"Errors", "Invocations"}), frozenset({"Throttles", "Invocations"})}
    rate = alarm(any_stage, "SessionsApi5xxRate")
    api = {"ApiId": f"<{any_stage.api_id('HTTP')}>"}
    assert sorted(alarm_metrics(rate)) == [
        ("AWS/ApiGateway", "5xx", api, "Sum", 300),
        ("AWS/ApiGateway", "Count", api, "Sum", 300),
    ]
    assert expression(rate).startswith("IF((FILL(sessions_requests, 0)) > 0, 100 * (FILL(sessions_5xx, 0))")
    assert rate["Threshold"] == any_stage.config.alarms.error_rate_percent
    assert (rate["EvaluationPeriods"], rate["DatapointsToAlarm"]) == (5, 3)
    topic_id, _ = any_stage.one("AWS::SNS::Topic")
    assert [ref_of(a) for a in as_list(rate["AlarmActions"])] == [topic_id]


def test_the_dashboard_shows_the_sessions_api(any_stage: Synth) -> None:
    widgets = dashboard(any_stage)["widgets"]
    graphs = {w["properties"]["title"]: w for w in widgets if w["type"] == "metric"}
    requests = graphs["Sessions API requests and errors (per 5 minutes)"]
    assert {(m, s) for _, m, s in widget_metrics(requests)} == {("Count", "Sum"), ("4xx", "Sum"), ("5xx", "Sum")}
    latency = graphs["Sessions API latency (ms)"]
    assert {(m, s) for _, m, s in widget_metrics(latency)} >= {("Latency", p) for p in ("p50", "p90", "p99")}
    rate = graphs["Sessions API 5XX rate (% of requests)"]
    assert [row[-1]["expression"] for row in rate["properties"]["metrics"] if "expression" in row[-1]]
    # The function joins the per-function error-rate and throttle graphs.
    labels = {
        row[-1].get("label")
        for title in ("Function error rates (% of invocations)", "Lambda throttles")
        for row in graphs[title]["properties"]["metrics"]
        if isinstance(row[-1], dict)
    }
    assert "sessionsApi" in labels
    # ...and its alarms the alarm status widget.
    [status] = [w for w in widgets if w["type"] == "alarm"]
    assert len(status["properties"]["alarms"]) == len(any_stage.of_type("AWS::CloudWatch::Alarm"))


def test_the_output_is_the_apis_base_url(any_stage: Synth) -> None:
    output = any_stage.template["Outputs"]["SessionsApiUrl"]
    region = any_stage.config.region
    assert flatten_cfn_reference(output["Value"]) == (
        f"https://<{any_stage.api_id('HTTP')}>.execute-api.{region}.<AWS::URLSuffix>"
    )
    assert "/sessions" in output["Description"]
