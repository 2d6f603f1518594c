"""Tools on MCP servers: the servers the conductor calls (``CONDUCTOR_MCP_SERVERS``), the grants on their
token secrets, and the stage's Amazon Bedrock AgentCore Gateway with its targets (docs/deploying.md,
"Tools on MCP servers").

Signing in to the gateway. Its inbound authorizer is a custom JWT one on the stage's own Cognito pool:
whoever calls it presents an access token of that pool issued to the app's client. The conductor holds no
such token: the ``$connect`` authorizer verifies the app's token and keeps only the person's ``sub``. A
machine client of the pool (client credentials) would sign the conductor in as itself, not as the person
speaking, so the gateway and its targets could not tell people apart; forwarding the person's own token
means keeping it beside the session and renewing it. Neither is built: the ``gateway`` server is listed
with auth "bearer" and no token source, and the conductor cannot sign in to it yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import (
    GATEWAY_SERVER_NAME,
    LambdaTarget,
    McpServerSettings,
    McpServerTarget,
    StageConfig,
    ToolRules,
)
from infra.constructs.auth import ConductorUserPool

# The servers a function calls, as the shared contract writes them: a JSON list of
# {"name", "url", "auth", "tokenSecretArn"?, "allow"?, "deny"?, "background"?}.
MCP_SERVERS_ENV = "CONDUCTOR_MCP_SERVERS"
SERVICE_PRINCIPAL = "bedrock-agentcore.amazonaws.com"
# The MCP versions AgentCore Gateway serves (its developer guide, "Use an AgentCore gateway"); the gateway
# refuses a request of a version its protocol configuration does not list.
MCP_VERSIONS: tuple[str, ...] = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
# A gateway's ARN ends in gateway/<name>-<10 lowercase letters or digits> (CloudFormation's GatewayArn).
GATEWAY_ID_SUFFIX = "?" * 10
INSTRUCTIONS = (
    "Tools the VoiceIDE conductor offers its model on behalf of the person speaking; find one with "
    "x_amz_bedrock_agentcore_search."
)


def gateway_name(config: StageConfig) -> str:
    """``voiceide-<stage>``, as the gateway's name pattern takes it (no ``--``, no trailing ``-``)."""
    return re.sub(r"-+", "-", f"voiceide-{config.name}").rstrip("-")


def discovery_url(issuer: str) -> str:
    """The OpenID discovery document of the pool whose tokens have ``iss`` ``issuer``."""
    return f"{issuer}/.well-known/openid-configuration"


def _rules(rules: ToolRules) -> dict[str, list[str]]:
    return {key: list(getattr(rules, key)) for key in ("allow", "deny", "background") if getattr(rules, key)}


def server_entry(server: McpServerSettings) -> dict[str, Any]:
    """One server of ``CONDUCTOR_MCP_SERVERS`` (the contract's camelCase keys)."""
    entry: dict[str, Any] = {"name": server.name, "url": server.url, "auth": server.auth}
    if server.token_secret_arn is not None:
        entry["tokenSecretArn"] = server.token_secret_arn
    return entry | _rules(server)


def servers_environment(config: StageConfig, gateway_url: str | None) -> str:
    """``CONDUCTOR_MCP_SERVERS`` of the stage: its servers, then the gateway (at ``gateway_url``) when it has
    one. The gateway entry has no token source (the module's docstring says why)."""
    entries = [server_entry(server) for server in config.mcp.servers]
    if gateway_url is not None:
        entries.append({"name": GATEWAY_SERVER_NAME, "url": gateway_url, "auth": "bearer"} | _rules(config.mcp.gateway))
    return json.dumps(entries, separators=(",", ":"))


def schema_property(schema: Mapping[str, Any]) -> agentcore.CfnGatewayTarget.SchemaDefinitionProperty:
    """A JSON Schema (the subset ``infra.config.check_tool_schema`` admits) as CloudFormation writes it."""
    properties = schema.get("properties")
    return agentcore.CfnGatewayTarget.SchemaDefinitionProperty(
        type=schema["type"],
        description=schema.get("description"),
        properties={name: schema_property(child) for name, child in properties.items()} if properties else None,
        required=list(schema["required"]) if schema.get("required") else None,
        items=schema_property(schema["items"]) if "items" in schema else None,
    )


def target_configuration(
    target: McpServerTarget | LambdaTarget,
) -> agentcore.CfnGatewayTarget.TargetConfigurationProperty:
    mcp = agentcore.CfnGatewayTarget
    if isinstance(target, McpServerTarget):
        inner = mcp.McpTargetConfigurationProperty(
            mcp_server=mcp.McpServerTargetConfigurationProperty(endpoint=target.url)
        )
    else:
        tools = [
            mcp.ToolDefinitionProperty(
                name=tool.name, description=tool.description, input_schema=schema_property(tool.input_schema)
            )
            for tool in target.tools
        ]
        inner = mcp.McpTargetConfigurationProperty(
            lambda_=mcp.McpLambdaTargetConfigurationProperty(
                lambda_arn=target.function_arn, tool_schema=mcp.ToolSchemaProperty(inline_payload=tools)
            )
        )
    return mcp.TargetConfigurationProperty(mcp=inner)


class ConductorGateway(Construct):
    """The stage's AgentCore Gateway: MCP with semantic tool search, inbound JWT of the stage's pool (access
    tokens of the app's client: ``allowedClients`` checks their ``client_id``; Cognito access tokens carry
    no ``aud``), and an execution role that may do exactly what its targets need: invoke each Lambda
    target's function. MCP server targets are called without outbound credentials, so they need nothing."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, user_pool: ConductorUserPool
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        name = gateway_name(config)
        # Only AgentCore, acting for a gateway of this name in this account and region, may assume it.
        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal(SERVICE_PRINCIPAL).with_conditions(
                {
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": (
                            f"arn:{stack.partition}:bedrock-agentcore:{stack.region}:{stack.account}:"
                            f"gateway/{name}-{GATEWAY_ID_SUFFIX}"
                        )
                    },
                }
            ),
            description=f"VoiceIDE conductor AgentCore Gateway ({config.name}): invokes its Lambda targets",
        )
        self.gateway = agentcore.CfnGateway(
            self,
            "Gateway",
            name=name,
            description=f"Tools of the VoiceIDE conductor over MCP ({config.name})",
            protocol_type="MCP",
            protocol_configuration=agentcore.CfnGateway.GatewayProtocolConfigurationProperty(
                mcp=agentcore.CfnGateway.MCPGatewayConfigurationProperty(
                    search_type="SEMANTIC", supported_versions=list(MCP_VERSIONS), instructions=INSTRUCTIONS
                )
            ),
            authorizer_type="CUSTOM_JWT",
            authorizer_configuration=agentcore.CfnGateway.AuthorizerConfigurationProperty(
                custom_jwt_authorizer=agentcore.CfnGateway.CustomJWTAuthorizerConfigurationProperty(
                    discovery_url=discovery_url(user_pool.issuer), allowed_clients=list(user_pool.client_ids)
                )
            ),
            role_arn=self.role.role_arn,
        )
        self.targets: dict[str, agentcore.CfnGatewayTarget] = {}
        for target in config.mcp.gateway.targets:
            credentials = None
            if isinstance(target, LambdaTarget):
                self.role.add_to_policy(
                    iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[target.function_arn])
                )
                credentials = [
                    agentcore.CfnGatewayTarget.CredentialProviderConfigurationProperty(
                        credential_provider_type="GATEWAY_IAM_ROLE"
                    )
                ]
            resource = agentcore.CfnGatewayTarget(
                self,
                f"Target-{target.name}",
                gateway_identifier=self.gateway.attr_gateway_identifier,
                name=target.name,
                description=target.description,
                target_configuration=target_configuration(target),
                credential_provider_configurations=credentials,
            )
            # Creating a target lists its tools through the gateway: its role's grants come first.
            resource.node.add_dependency(self.role)
            self.targets[target.name] = resource

    @property
    def url(self) -> str:
        return self.gateway.attr_gateway_url

    @property
    def gateway_id(self) -> str:
        return self.gateway.attr_gateway_identifier


class ConductorMcp(Construct):
    """What the functions that call MCP servers are given: ``CONDUCTOR_MCP_SERVERS`` and GetSecretValue on
    exactly the servers' token secrets; and the gateway, when the stage has one."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, user_pool: ConductorUserPool | None
    ) -> None:
        super().__init__(scope, construct_id)
        self.gateway: ConductorGateway | None = None
        if config.mcp.gateway.enabled:
            if user_pool is None:
                raise ValueError("the gateway signs in with the stage's Cognito pool (auth: cognito)")
            self.gateway = ConductorGateway(self, "Gateway", config=config, user_pool=user_pool)
        self.environment = servers_environment(config, self.gateway.url if self.gateway is not None else None)
        self.secret_arns = config.mcp.token_secret_arns

    def connect(self, function: lambda_.Function) -> None:
        """Give ``function`` the servers and the reading of their token secrets."""
        function.add_environment(MCP_SERVERS_ENV, self.environment)
        if self.secret_arns:
            # GetSecretValue only; grant_read would add DescribeSecret.
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=list(self.secret_arns))
            )
