"""The conductor stack: WebSocket API, the route Lambdas and the turn runner, sign-in (a Cognito user
pool and the $connect authorizer), the sessions API (HTTP), table, long-term memory, tools on MCP servers
(and an AgentCore Gateway), alarms and dashboard."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.api import ConductorApi
from infra.constructs.auth import ConductorAuth
from infra.constructs.dashboard import ConductorDashboard
from infra.constructs.deadlines import ConductorDeadlines
from infra.constructs.functions import ConductorFunctions, removal_policy
from infra.constructs.mcp import ConductorMcp
from infra.constructs.memory import ConductorMemory
from infra.constructs.monitoring import ConductorAlarms, Watched
from infra.constructs.reaper import ConductorSessionReaper
from infra.constructs.sessions_api import SESSIONS_API_CONNECTION_METHODS, ConductorSessionsApi
from infra.nag import suppress_findings
from infra.reservations import Reservations
from shared.adapters.session_records import SESSIONS_INDEX, SESSIONS_INDEX_PROJECTED

# The turn runner streams each answer (ConverseStream, authorized as InvokeModelWithResponseStream)
# and folds the rolling summary with one Converse call (authorized as InvokeModel) on the same model.
BEDROCK_STREAM_ACTION = "bedrock:InvokeModelWithResponseStream"
BEDROCK_INVOKE_ACTION = "bedrock:InvokeModel"
BEDROCK_ACTIONS: tuple[str, ...] = (BEDROCK_INVOKE_ACTION, BEDROCK_STREAM_ACTION)


def bedrock_model_arns(stack: Stack, config: StageConfig) -> list[str]:
    """ARNs Converse and ConverseStream are authorized against: the foundation model, or the
    inference profile plus the foundation model in every region the profile routes to."""
    bedrock = config.bedrock
    foundation = bedrock.foundation_model_id
    if not bedrock.is_inference_profile:
        return [f"arn:{stack.partition}:bedrock:{config.bedrock_region}::foundation-model/{foundation}"]
    arns = [
        f"arn:{stack.partition}:bedrock:{config.bedrock_region}:{stack.account}:inference-profile/{bedrock.model_id}"
    ]
    arns += [
        f"arn:{stack.partition}:bedrock:{region}::foundation-model/{foundation}"
        for region in bedrock.inference_profile_regions
    ]
    if bedrock.profile_geography == "global":
        # Global profiles may route to any commercial region; IAM names that target region-less.
        arns.append(f"arn:{stack.partition}:bedrock:::foundation-model/{foundation}")
    return arns


def warm_throughput(read: int | None, write: int | None) -> dynamodb.WarmThroughput | None:
    """DynamoDB warm throughput of a table or index; None when neither figure is set."""
    if read is None and write is None:
        return None
    return dynamodb.WarmThroughput(read_units_per_second=read, write_units_per_second=write)


class ConductorStack(Stack):
    """Everything one stage of the conductor needs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        reservations: Reservations | None = None,
        skip_bundle_deps: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        # Reserved concurrency only where a recorded quota reading proves it fits (infra/reservations.py).
        self.reservations = reservations or Reservations()
        capacity = config.capacity

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expires_at",
            # Keys only: the session reaper needs only which STATE item the time to live deleted.
            stream=dynamodb.StreamViewType.KEYS_ONLY,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # AWS-owned keys cannot be audited; the AWS managed key (aws/dynamodb) is KMS-backed and
            # logged in CloudTrail, costs nothing extra, needs no key policy and no kms: grants.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # No deletion protection in the template: a rolled-back first create must be able to delete
            # the table (RetainExceptOnCreate). Stack deletion and replacement keep it (removal_policy),
            # termination protection guards the stack, and an operator may turn protection on by hand
            # once the stage holds data (docs/deploying.md, "Removing a stage"); a later deploy leaves that
            # setting alone.
            removal_policy=removal_policy(config),
            # What the table serves from its first minute (capacity.*; None: the on-demand start).
            warm_throughput=warm_throughput(capacity.warm_read_units_per_second, capacity.warm_write_units_per_second),
        )
        # The sessions index, as the local table defines it (conductor_local/dynamodb/tables.py): a person's
        # sessions by last activity, projecting only what a session list shows. Every state write
        # carries its keys (shared/adapters/session_records.py), on every stage.
        self.table.add_global_secondary_index(
            index_name=SESSIONS_INDEX,
            partition_key=dynamodb.Attribute(name="owner", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="last_active", type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(SESSIONS_INDEX_PROJECTED),
            warm_throughput=warm_throughput(
                capacity.index_warm_read_units_per_second, capacity.index_warm_write_units_per_second
            ),
        )

        self.functions = ConductorFunctions(
            self,
            "Functions",
            config=config,
            table=self.table,
            reservations=self.reservations,
            skip_bundle_deps=skip_bundle_deps,
        )
        # Deletes what remains of a session when the time to live deletes its state (the table's stream).
        self.reaper = ConductorSessionReaper(
            self, "SessionReaper", config=config, table=self.table, functions=self.functions
        )

        self.auth = ConductorAuth(self, "Auth", config=config)
        # Every deployed stage signs in on $connect. The Cognito authorizer calls no AWS API (the pool's
        # JWKS is public): it gets no grant.
        authorizer = self.functions.add_authorizer(self.auth.environment)
        if self.auth.signing_secret is not None:
            # GetSecretValue only (Powertools' get_secret); grant_read would add DescribeSecret.
            authorizer.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue"], resources=[self.auth.signing_secret.secret_arn]
                )
            )

        self.api = ConductorApi(
            self,
            "WebSocket",
            config=config,
            connect=self.functions.connect,
            message=self.functions.message,
            disconnect=self.functions.disconnect,
            authorizer=authorizer,
        )

        functions = self.functions
        functions.turn.add_to_role_policy(
            iam.PolicyStatement(actions=list(BEDROCK_ACTIONS), resources=bedrock_model_arns(self, config))
        )
        for fn in functions.posting:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["execute-api:ManageConnections"], resources=[self.api.management_arn("POST")]
                )
            )

        # The sessions API (stages with Cognito sign-in; config.sessions_api says why not others).
        self.sessions: ConductorSessionsApi | None = None
        if config.sessions_api:
            sessions_fn = functions.add_sessions_api(
                index_name=SESSIONS_INDEX, callback_url=self.api.stage.callback_url
            )
            sessions_fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["execute-api:ManageConnections"],
                    resources=[self.api.management_arn(method) for method in SESSIONS_API_CONNECTION_METHODS],
                )
            )
            self.sessions = ConductorSessionsApi(
                self, "SessionsApi", config=config, function=sessions_fn, user_pool=self.auth.user_pool
            )

        # Long-term memory across sessions (memory.enabled): $default reads it when a session starts, the
        # turn runner writes each turn to it and answers the memory tools, the sessions API lists and erases
        # it. No other function may call it.
        self.memory: ConductorMemory | None = None
        if config.memory.enabled:
            self.memory = ConductorMemory(self, "LongTermMemory", config=config)
            self.memory.connect("message", functions.message)
            self.memory.connect("turn", functions.turn)
            if functions.sessions_api is not None:
                self.memory.connect("sessionsApi", functions.sessions_api)

        # Tools on MCP servers (mcp.*): $default and the turn runner call them (CONDUCTOR_MCP_SERVERS) and alone
        # may read their token secrets. Nothing when the stage names no server and has no gateway.
        self.mcp: ConductorMcp | None = None
        if config.mcp.active:
            self.mcp = ConductorMcp(self, "McpServers", config=config, user_pool=self.auth.user_pool)
            self.mcp.connect(functions.message)
            self.mcp.connect(functions.turn)

        monitored = {
            "connect": functions.connect,
            "message": functions.message,
            "disconnect": functions.disconnect,
            "turn": functions.turn,
            "turnAbandoned": functions.turn_abandoned,
            "toolDeadline": functions.tool_deadline,
        }
        monitored["authorizer"] = authorizer
        if functions.sessions_api is not None:
            monitored["sessionsApi"] = functions.sessions_api
        monitored["sessionReaper"] = self.reaper.function
        watched = Watched(
            config=config,
            functions=monitored,
            timeouts={
                "message": Duration.seconds(config.lambdas.message_timeout_seconds),
                "turn": Duration.seconds(config.lambdas.turn_timeout_seconds),
            },
            table=self.table,
            api_stage=self.api.stage,
            sessions_api=self.sessions.api if self.sessions is not None else None,
        )
        self.alarms = ConductorAlarms(self, "Alarms", watched=watched)
        self.deadlines = ConductorDeadlines(
            self,
            "ToolDeadlines",
            config=config,
            runner=functions.turn,
            consumer=functions.tool_deadline,
            receiver=functions.message,
        )
        self.alarms.notify(self.deadlines.alarm)
        self.alarms.alarms.append(self.deadlines.alarm)  # on the dashboard's alarm status with the others
        self.dashboard = ConductorDashboard(self, "Operations", alarms=self.alarms)

        CfnOutput(self, "WebSocketUrl", value=self.api.stage.url, description="wss:// URL the app connects to")
        CfnOutput(
            self,
            "CallbackUrl",
            value=self.api.stage.callback_url,
            description="https:// management API URL the message function posts through",
        )
        CfnOutput(self, "TableName", value=self.table.table_name, description="DynamoDB table of the conductor")
        if self.memory is not None:
            CfnOutput(
                self,
                "MemoryId",
                value=self.memory.memory_id,
                description="AgentCore Memory of the stage (CONDUCTOR_MEMORY_ID of the functions that call it)",
            )
            CfnOutput(self, "MemoryArn", value=self.memory.memory_arn, description="ARN of the stage's memory")
        if self.mcp is not None and self.mcp.gateway is not None:
            CfnOutput(
                self,
                "McpGatewayUrl",
                value=self.mcp.gateway.url,
                description="https:// MCP endpoint of the stage's AgentCore Gateway (the server 'gateway')",
            )
            CfnOutput(
                self, "McpGatewayId", value=self.mcp.gateway.gateway_id, description="AgentCore Gateway of the stage"
            )
        if self.sessions is not None:
            CfnOutput(
                self,
                "SessionsApiUrl",
                value=self.sessions.url,
                description="https:// base URL of the sessions API (<url>/sessions lists a person's sessions)",
            )
        if self.auth.user_pool is not None:
            pool = self.auth.user_pool
            CfnOutput(
                self, "UserPoolId", value=pool.pool.user_pool_id, description="Cognito user pool the app signs in to"
            )
            CfnOutput(
                self,
                "UserPoolClientId",
                value=",".join(pool.client_ids),
                description="App client id(s) whose tokens open $connect (the app signs in with this client)",
            )
            CfnOutput(
                self,
                "Issuer",
                value=pool.issuer,
                description="iss of the pool's tokens (JWKS: <issuer>/.well-known/jwks.json)",
            )
            if pool.domain is not None:
                CfnOutput(
                    self, "HostedUiUrl", value=pool.domain.base_url(), description="Cognito hosted UI of the pool"
                )
        if self.auth.signing_secret is not None:
            CfnOutput(
                self,
                "DevTokenSigningSecretArn",
                value=self.auth.signing_secret.secret_arn,
                description="Secrets Manager secret whose value signs dev/CI connect tokens (auth: dev-signed-token)",
            )
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.alarms.topic.topic_arn,
            description="SNS topic every alarm notifies (subscribe e-mail, chat or paging to it)",
        )
        CfnOutput(
            self,
            "DashboardUrl",
            value=(
                f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}"
                f"#dashboards/dashboard/{config.stack_name}"
            ),
            description="CloudWatch dashboard of the stage",
        )

        suppress_findings(self)
