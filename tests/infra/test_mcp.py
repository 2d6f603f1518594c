"""Tools on MCP servers: the stage's AgentCore Gateway, its sign-in and role, its targets, the servers the
conductor is told of, and who may read their token secrets."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint

from benchmarks.costs import AGENTCORE_GATEWAY_PRICES_AS_OF, PRICES
from infra.config import StageConfigError, read_cdk_json_context, select_stage
from infra.constructs.mcp import MCP_SERVERS_ENV, MCP_VERSIONS
from infra.nag import flatten_cfn_reference
from tests.infra.conftest import EXISTING_POOL, Synth, stage_like_prod, synthesize
from tests.infra.test_checks import ALLOWED_LINT_WARNINGS, findings
from tests.infra.test_stack import as_list, function_role, grants, ref_of

pytestmark = pytest.mark.infra

GATEWAY = "AWS::BedrockAgentCore::Gateway"
TARGET = "AWS::BedrockAgentCore::GatewayTarget"
# The functions that call MCP servers: $default and the turn runner.
CALLERS = {"lambdas.message.handler", "lambdas.turn.handler"}
GATEWAY_URL = "https://gw-abc1234567.gateway.bedrock-agentcore.us-east-1.amazonaws.com/mcp"
ACCOUNT = "123456789012"
DOCS_SECRET = f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:mcp/docs-token-AbC123"
CI_SECRET = f"arn:aws:secretsmanager:eu-west-1:{ACCOUNT}:secret:mcp/ci-token-XyZ789"
TICKETS_FUNCTION = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:voiceide-tickets"
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "words to look for"},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["query"],
}
SERVERS = [
    {"name": "wiki", "url": "https://wiki.example.com/mcp"},
    {
        "name": "docs",
        "url": "https://docs.example.com/mcp",
        "auth": "bearer",
        "token_secret_arn": DOCS_SECRET,
        "allow": ["pages.publish"],
        "deny": ["pages.delete"],
    },
    {
        "name": "ci",
        "url": "https://ci.example.com/mcp",
        "auth": "bearer",
        "token_secret_arn": CI_SECRET,
        "background": ["ci.run"],
    },
    # a second server behind the same token: the secret is granted once
    {"name": "ci-eu", "url": "https://ci.eu.example.com/mcp", "auth": "bearer", "token_secret_arn": CI_SECRET},
]
TARGETS = [
    {"type": "mcp_server", "name": "issues", "url": "https://issues.example.com/mcp", "description": "Issue tracker"},
    {
        "type": "lambda",
        "name": "tickets",
        "function_arn": TICKETS_FUNCTION,
        "tools": [{"name": "search", "description": "Finds tickets", "input_schema": SEARCH_SCHEMA}],
    },
]
TOOLED_STAGE = "tooled"
DIRECT_STAGE = "direct"


def dev_settings(**mcp: Any) -> dict[str, Any]:
    stages = copy.deepcopy(read_cdk_json_context()["stages"])
    if mcp:
        stages["dev"]["mcp"] = mcp
    return stages


def config_of(**mcp: Any) -> Any:
    return select_stage(dev_settings(**mcp), "dev")


@pytest.fixture(scope="module")
def tooled(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A retaining stage on an existing pool with servers, a gateway and both kinds of target."""
    settings = stage_like_prod(
        cognito=EXISTING_POOL,
        mcp={"servers": SERVERS, "gateway": {"enabled": True, "targets": TARGETS, "deny": ["issues___delete"]}},
    )
    return synthesize(tmp_path_factory.mktemp("cdk-tooled"), TOOLED_STAGE, stages={TOOLED_STAGE: settings})


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """dev with servers it calls directly and no gateway."""
    settings = dev_settings(servers=SERVERS[:2], gateway={"enabled": False})["dev"]
    return synthesize(tmp_path_factory.mktemp("cdk-direct"), DIRECT_STAGE, stages={DIRECT_STAGE: settings})


@pytest.fixture(params=["dev", "prod", "tooled", "direct"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def the_gateway(synth: Synth) -> tuple[str, dict[str, Any]]:
    return synth.one(GATEWAY)


def gateway_role(synth: Synth) -> str:
    return ref_of(the_gateway(synth)[1]["Properties"]["RoleArn"])


def resolve_gateway_url(value: Any, gateway_id: str | None) -> str:
    """An environment value with the gateway's URL (Fn::GetAtt) written in as ``GATEWAY_URL``."""
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    for part in parts:
        assert isinstance(part, str) or part == {"Fn::GetAtt": [gateway_id, "GatewayUrl"]}, part
    return "".join(part if isinstance(part, str) else GATEWAY_URL for part in parts)


def servers_by_handler(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    found = synth.of_type(GATEWAY)
    gateway_id = next(iter(found)) if found else None
    return {
        fn["Properties"]["Handler"]: json.loads(resolve_gateway_url(variables[MCP_SERVERS_ENV], gateway_id))
        for fn in synth.of_type("AWS::Lambda::Function").values()
        if MCP_SERVERS_ENV in (variables := fn["Properties"].get("Environment", {}).get("Variables", {}))
    }


# --- the gateway --------------------------------------------------------------------------------


def test_the_gateway_exists_only_where_the_stage_enables_it(dev: Synth, prod: Synth, direct: Synth) -> None:
    stages = read_cdk_json_context()["stages"]
    assert stages["dev"]["mcp"] == {"servers": [], "gateway": {"enabled": True, "targets": []}}
    assert stages["prod"]["mcp"]["gateway"]["enabled"] is False
    gateway_id, _ = the_gateway(dev)
    assert not dev.of_type(TARGET)  # dev exercises the gateway with no targets
    outputs = dev.template["Outputs"]
    assert outputs["McpGatewayUrl"]["Value"] == {"Fn::GetAtt": [gateway_id, "GatewayUrl"]}
    assert outputs["McpGatewayId"]["Value"] == {"Fn::GetAtt": [gateway_id, "GatewayIdentifier"]}
    for synth in (prod, direct):
        assert not synth.of_type(GATEWAY) and not synth.of_type(TARGET)
        assert not {"McpGatewayUrl", "McpGatewayId"} & set(synth.template["Outputs"])
        assert not [r for r in synth.of_type("AWS::IAM::Role") if "Gateway" in r]


def test_the_gateway_speaks_mcp_with_semantic_search(dev: Synth, tooled: Synth) -> None:
    for synth in (dev, tooled):
        props = the_gateway(synth)[1]["Properties"]
        assert props["Name"] == f"voiceide-{synth.config.name}"
        assert re.fullmatch(r"([0-9a-zA-Z][-]?){1,48}", props["Name"])  # CloudFormation's pattern
        assert props["ProtocolType"] == "MCP"
        mcp = props["ProtocolConfiguration"]["Mcp"]
        assert mcp["SearchType"] == "SEMANTIC"
        assert mcp["SupportedVersions"] == list(MCP_VERSIONS)
        assert "ExceptionLevel" not in props  # DEBUG would hand targets' error details to callers
        assert "KmsKeyArn" not in props  # the service's own key, as the memory's


def test_the_gateway_accepts_tokens_of_the_stages_own_pool_and_app_client(dev: Synth) -> None:
    """The same pool and client as $connect: the authorizer function's issuer and client ids."""
    props = the_gateway(dev)[1]["Properties"]
    assert props["AuthorizerType"] == "CUSTOM_JWT"
    jwt = props["AuthorizerConfiguration"]["CustomJWTAuthorizer"]
    pool_id, _ = dev.one("AWS::Cognito::UserPool")
    client_id, _ = dev.one("AWS::Cognito::UserPoolClient")
    assert jwt["DiscoveryUrl"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [pool_id, "ProviderURL"]}, "/.well-known/openid-configuration"]]
    }
    # Cognito access tokens carry client_id and no aud: the clients are checked, no audience is set.
    assert jwt["AllowedClients"] == [{"Ref": client_id}]
    assert set(jwt) == {"DiscoveryUrl", "AllowedClients"}
    authorizer = dev.function("lambdas.authorizer.handler")[1]["Properties"]["Environment"]["Variables"]
    issuer = flatten_cfn_reference(authorizer["CONDUCTOR_COGNITO_ISSUER"])
    assert flatten_cfn_reference(jwt["DiscoveryUrl"]) == f"{issuer}/.well-known/openid-configuration"
    assert [flatten_cfn_reference(c) for c in jwt["AllowedClients"]] == [
        flatten_cfn_reference(authorizer["CONDUCTOR_COGNITO_CLIENT_IDS"])
    ]


def test_an_existing_pool_signs_in_to_the_gateway_with_its_listed_clients(tooled: Synth) -> None:
    jwt = the_gateway(tooled)[1]["Properties"]["AuthorizerConfiguration"]["CustomJWTAuthorizer"]
    pool = EXISTING_POOL["user_pool_id"]
    assert flatten_cfn_reference(jwt["DiscoveryUrl"]) == (
        f"https://cognito-idp.eu-west-1.<AWS::URLSuffix>/{pool}/.well-known/openid-configuration"
    )
    assert jwt["AllowedClients"] == EXISTING_POOL["client_ids"]


# --- its execution role -------------------------------------------------------------------------


def test_only_agentcore_acting_for_this_gateway_may_assume_its_role(dev: Synth, tooled: Synth) -> None:
    for synth in (dev, tooled):
        role = synth.resources[gateway_role(synth)]["Properties"]
        [statement] = role["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "bedrock-agentcore.amazonaws.com"}
        assert statement["Action"] == "sts:AssumeRole"
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        source = flatten_cfn_reference(statement["Condition"]["ArnLike"]["aws:SourceArn"])
        region = synth.config.region
        assert (
            source
            == f"arn:aws:bedrock-agentcore:{region}:<AWS::AccountId>:gateway/voiceide-{synth.config.name}-" + ("?" * 10)
        )
        assert "ManagedPolicyArns" not in role and "Policies" not in role


def test_the_role_may_only_invoke_the_lambda_targets(dev: Synth, tooled: Synth) -> None:
    """No '*' anywhere: an MCP server target is called without credentials (nothing to grant), and
    InvokeFunction takes the function's ARN. A gateway without Lambda targets has no policy at all."""
    assert grants(dev, gateway_role(dev)) == set()
    assert grants(tooled, gateway_role(tooled)) == {("lambda:InvokeFunction", TICKETS_FUNCTION)}


# --- its targets --------------------------------------------------------------------------------


def test_targets_are_the_configured_ones_on_this_gateway(tooled: Synth) -> None:
    gateway_id, _ = the_gateway(tooled)
    targets = {res["Properties"]["Name"]: res for res in tooled.of_type(TARGET).values()}
    assert set(targets) == {"issues", "tickets"}
    role_id = gateway_role(tooled)
    for target in targets.values():
        assert target["Properties"]["GatewayIdentifier"] == {"Fn::GetAtt": [gateway_id, "GatewayIdentifier"]}
        assert role_id in target["DependsOn"]  # its grants exist before the target lists its tools
    issues = targets["issues"]["Properties"]
    assert issues["TargetConfiguration"] == {"Mcp": {"McpServer": {"Endpoint": "https://issues.example.com/mcp"}}}
    assert "CredentialProviderConfigurations" not in issues  # the gateway's "No authorization"
    assert issues["Description"] == "Issue tracker"
    tickets = targets["tickets"]["Properties"]
    assert tickets["CredentialProviderConfigurations"] == [{"CredentialProviderType": "GATEWAY_IAM_ROLE"}]
    assert tickets["TargetConfiguration"]["Mcp"]["Lambda"] == {
        "LambdaArn": TICKETS_FUNCTION,
        "ToolSchema": {
            "InlinePayload": [
                {
                    "Name": "search",
                    "Description": "Finds tickets",
                    "InputSchema": {
                        "Type": "object",
                        "Properties": {
                            "query": {"Type": "string", "Description": "words to look for"},
                            "labels": {"Type": "array", "Items": {"Type": "string"}},
                        },
                        "Required": ["query"],
                    },
                }
            ]
        },
    }


# --- what the functions are told, and may read --------------------------------------------------


def test_exactly_the_two_callers_know_the_servers(any_stage: Synth) -> None:
    found = servers_by_handler(any_stage)
    assert set(found) == (CALLERS if any_stage.config.mcp.active else set())
    if found:
        [first, second] = found.values()
        assert first == second


def test_the_servers_are_written_as_the_contract_says(dev: Synth, tooled: Synth, direct: Synth) -> None:
    gateway = {"name": "gateway", "url": GATEWAY_URL, "auth": "bearer"}
    assert servers_by_handler(dev)["lambdas.turn.handler"] == [gateway]  # no token source yet (docs)
    wiki = {"name": "wiki", "url": "https://wiki.example.com/mcp", "auth": "none"}
    docs = {
        "name": "docs",
        "url": "https://docs.example.com/mcp",
        "auth": "bearer",
        "tokenSecretArn": DOCS_SECRET,
        "allow": ["pages.publish"],
        "deny": ["pages.delete"],
    }
    assert servers_by_handler(direct)["lambdas.message.handler"] == [wiki, docs]
    assert servers_by_handler(tooled)["lambdas.message.handler"] == [
        wiki,
        docs,
        {"name": "ci", "url": "https://ci.example.com/mcp", "auth": "bearer", "tokenSecretArn": CI_SECRET,
         "background": ["ci.run"]},
        {"name": "ci-eu", "url": "https://ci.eu.example.com/mcp", "auth": "bearer", "tokenSecretArn": CI_SECRET},
        gateway | {"deny": ["issues___delete"]},
    ]  # fmt: skip
    for entry in servers_by_handler(tooled)["lambdas.turn.handler"]:
        assert re.fullmatch(r"[a-z][a-z0-9-]{0,19}", entry["name"]) and "token" not in entry


def secret_grants(synth: Synth, role_id: str) -> set[tuple[str, str]]:
    return {(a, r) for a, r in grants(synth, role_id) if a.startswith("secretsmanager:")}


def test_only_the_callers_may_read_the_servers_token_secrets(any_stage: Synth) -> None:
    expected = {("secretsmanager:GetSecretValue", arn) for arn in any_stage.config.mcp.token_secret_arns}
    for handler in CALLERS:
        assert secret_grants(any_stage, function_role(any_stage, handler)) == expected, handler
    tokens = set(any_stage.config.mcp.token_secret_arns)
    for role_id in any_stage.of_type("AWS::IAM::Role"):
        if role_id not in {function_role(any_stage, handler) for handler in CALLERS}:
            assert not {r for _, r in grants(any_stage, role_id)} & tokens, role_id


def test_each_secret_is_granted_once_in_one_statement(tooled: Synth) -> None:
    for handler in CALLERS:
        statements = [
            s
            for policy in tooled.of_type("AWS::IAM::Policy").values()
            if any(ref_of(r) == function_role(tooled, handler) for r in policy["Properties"]["Roles"])
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
            if "secretsmanager:GetSecretValue" in as_list(s["Action"])
        ]
        assert [(s["Action"], sorted(as_list(s["Resource"]))) for s in statements] == [
            ("secretsmanager:GetSecretValue", sorted([CI_SECRET, DOCS_SECRET]))
        ]


# --- the checks every template passes ----------------------------------------------------------


def test_templates_with_and_without_mcp_pass_cdk_nag_and_cfn_lint(any_stage: Synth) -> None:
    report = json.loads((Path(any_stage.outdir) / "validation-report.json").read_text())
    assert findings(report) == []
    matches = lint(json.dumps(any_stage.template), regions=[any_stage.config.region])
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []
    assert {m.rule.id for m in matches} <= ALLOWED_LINT_WARNINGS


# --- settings -----------------------------------------------------------------------------------


def test_without_an_mcp_block_a_stage_calls_no_server() -> None:
    stages = dev_settings()
    del stages["dev"]["mcp"]
    mcp = select_stage(stages, "dev").mcp
    assert (mcp.servers, mcp.gateway.enabled, mcp.gateway.targets, mcp.active) == ((), False, (), False)


def test_the_gateway_name_is_reserved_only_while_the_gateway_is_on() -> None:
    server = {"name": "gateway", "url": "https://gw.example.com/mcp"}
    assert config_of(servers=[server], gateway={"enabled": False}).mcp.active
    with pytest.raises(StageConfigError, match=r"MCP server names must be unique: gateway \('gateway' is the gat"):
        config_of(servers=[server], gateway={"enabled": True})


BEARER = {"name": "docs", "url": "https://docs.example.com/mcp", "auth": "bearer"}


@pytest.mark.parametrize(
    ("mcp", "message"),
    [
        ({"servers": [{"name": "Docs", "url": "https://d.example.com"}]}, "server name 'Docs': 1-20 lowercase"),
        ({"servers": [{"name": "1docs", "url": "https://d.example.com"}]}, "starting with a letter"),
        ({"servers": [{"name": "d" * 21, "url": "https://d.example.com"}]}, "1-20 lowercase letters"),
        ({"servers": [{"name": "docs", "url": "http://d.example.com/mcp"}]}, "is not an https:// URL"),
        ({"servers": [{"name": "docs", "url": "https:///mcp"}]}, "is not an https:// URL"),
        (
            {
                "servers": [
                    {"name": "docs", "url": "https://a.example.com"},
                    {"name": "docs", "url": "https://b.example"},
                ]
            },
            "MCP server names must be unique: docs",
        ),
        ({"servers": [BEARER]}, '"auth": "bearer" needs token_secret_arn'),
        ({"servers": [BEARER | {"token_secret_arn": "docs-token"}]}, "token_secret_arn\n.*String should match"),
        (  # a partial ARN: IAM would match no secret with it
            {"servers": [BEARER | {"token_secret_arn": DOCS_SECRET.removesuffix("-AbC123")}]},
            "token_secret_arn\n.*String should match",
        ),
        (
            {"servers": [{"name": "docs", "url": "https://d.example.com", "token_secret_arn": DOCS_SECRET}]},
            'token_secret_arn needs "auth": "bearer"',
        ),
        ({"servers": [BEARER | {"token": "s3cr3t"}]}, "a literal token is for the local stack only"),
        ({"servers": [BEARER | {"auth": "basic", "token_secret_arn": DOCS_SECRET}]}, "'none' or 'bearer'"),
        (
            {"servers": [{"name": "docs", "url": "https://d.example.com", "allow": ["x"], "deny": ["x"]}]},
            "x: in both deny and allow",
        ),
        ({"gateway": {"enabled": False, "targets": TARGETS[:1]}}, "gateway targets are listed but the gateway is off"),
        ({"gateway": {"enabled": True, "targets": TARGETS[:1] * 2}}, "gateway target names must be unique: issues"),
        (
            {"gateway": {"enabled": True, "targets": [TARGETS[0] | {"url": "http://issues.example.com"}]}},
            "is not an https:// URL",
        ),
        ({"gateway": {"enabled": True, "targets": [TARGETS[0] | {"name": "Issues"}]}}, "String should match pattern"),
        ({"gateway": {"enabled": True, "targets": [TARGETS[0] | {"type": "openapi"}]}}, "'mcp_server', 'lambda'"),
        (
            {"gateway": {"enabled": True, "targets": [TARGETS[1] | {"function_arn": "voiceide-tickets"}]}},
            "function_arn\n.*String should match pattern",
        ),
        ({"gateway": {"enabled": True, "targets": [TARGETS[1] | {"tools": []}]}}, "tools\n.*at least 1 item"),
        (
            {"gateway": {"enabled": True, "targets": [TARGETS[1] | {"url": "https://x.example.com"}]}},
            "url\n.*Extra inputs are not permitted",
        ),
        (
            {
                "gateway": {
                    "enabled": True,
                    "targets": [
                        TARGETS[1]
                        | {"tools": [{"name": "s", "description": "d", "input_schema": {"type": "object", "enum": []}}]}
                    ],
                }
            },
            "input_schema has enum: a gateway's inline schema takes only",
        ),
        (
            {
                "gateway": {
                    "enabled": True,
                    "targets": [
                        TARGETS[1]
                        | {
                            "tools": [
                                {
                                    "name": "s",
                                    "description": "d",
                                    "input_schema": {"type": "object", "properties": {"n": {"type": "float"}}},
                                }
                            ]
                        }
                    ],
                }
            },
            r"input_schema\.properties\.n\.type must be one of",
        ),
    ],
)
def test_mcp_settings_are_validated_with_clear_errors(mcp: dict[str, Any], message: str) -> None:
    with pytest.raises(StageConfigError, match=rf"(?s)stage 'dev' has invalid settings:\n.*mcp.*{message}"):
        config_of(**mcp)


def test_a_stage_without_cognito_sign_in_cannot_have_the_gateway() -> None:
    settings = stage_like_prod(auth="dev-signed-token", removal_policy="destroy", mcp={"gateway": {"enabled": True}})
    del settings["cognito"]
    with pytest.raises(StageConfigError, match=r'mcp.gateway needs "auth": "cognito"'):
        select_stage({"ci": settings}, "ci")
    settings["mcp"] = {"servers": SERVERS[:1]}  # servers it calls directly need no pool
    assert select_stage({"ci": settings}, "ci").mcp.active


def test_the_deploying_guide_states_the_gateways_prices() -> None:
    """The guide's section and the cost model's table agree, price for price, and on the day they were read."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "deploying.md").read_text(encoding="utf-8")
    section = text.split("## Tools on MCP servers", 1)[1].split("\n## ", 1)[0]
    assert f"checked on {AGENTCORE_GATEWAY_PRICES_AS_OF}" in section
    assert f"${PRICES['agentcore_gateway_invocation'] * 1000:.3f} per 1,000 API invocations" in section
    assert f"${PRICES['agentcore_gateway_search'] * 1000:.3f} per 1,000 Search API calls" in section
    assert f"${PRICES['agentcore_gateway_tool_index_month'] * 100:.2f} per 100 tools indexed" in section
