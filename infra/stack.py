"""The conductor stack: WebSocket API, the route Lambdas and the turn runner (+ optional authorizer),
table, alarms and dashboard."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.api import ConductorApi
from infra.constructs.dashboard import ConductorDashboard
from infra.constructs.functions import ConductorFunctions, removal_policy
from infra.constructs.monitoring import ConductorAlarms, Watched
from infra.nag import suppress_findings

BEDROCK_STREAM_ACTION = "bedrock:InvokeModelWithResponseStream"


def bedrock_model_arns(stack: Stack, config: StageConfig) -> list[str]:
    """ARNs ConverseStream is authorized against: the foundation model, or the inference profile
    plus the foundation model in every region the profile routes to."""
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


class ConductorStack(Stack):
    """Everything one stage of the conductor needs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        skip_bundle_deps: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expires_at",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # AWS-owned keys cannot be audited; the AWS managed key (aws/dynamodb) is KMS-backed and
            # logged in CloudTrail, costs nothing extra, needs no key policy and no kms: grants.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain,
            removal_policy=removal_policy(config),
        )

        self.functions = ConductorFunctions(
            self, "Functions", config=config, table=self.table, skip_bundle_deps=skip_bundle_deps
        )

        self.auth_secret: secretsmanager.Secret | None = None
        authorizer = None
        if config.authorizer:
            self.auth_secret = secretsmanager.Secret(
                self,
                "TokenSigningSecret",
                description=f"HMAC key signing VoiceIDE conductor connect tokens ({config.name})",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=64, exclude_punctuation=True, include_space=False
                ),
                removal_policy=removal_policy(config),
            )
            authorizer = self.functions.add_authorizer(self.auth_secret.secret_arn)
            self.auth_secret.grant_read(authorizer)

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
            iam.PolicyStatement(actions=[BEDROCK_STREAM_ACTION], resources=bedrock_model_arns(self, config))
        )
        for fn in functions.posting:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["execute-api:ManageConnections"], resources=[self.api.management_arn("POST")]
                )
            )

        monitored = {
            "connect": functions.connect,
            "message": functions.message,
            "disconnect": functions.disconnect,
            "turn": functions.turn,
            "turnAbandoned": functions.turn_abandoned,
        }
        if authorizer is not None:
            monitored["authorizer"] = authorizer
        watched = Watched(
            config=config,
            functions=monitored,
            timeouts={
                "message": Duration.seconds(config.lambdas.message_timeout_seconds),
                "turn": Duration.seconds(config.lambdas.turn_timeout_seconds),
            },
            table=self.table,
            api_stage=self.api.stage,
        )
        self.alarms = ConductorAlarms(self, "Alarms", watched=watched)
        self.dashboard = ConductorDashboard(self, "Operations", alarms=self.alarms)

        CfnOutput(self, "WebSocketUrl", value=self.api.stage.url, description="wss:// URL the app connects to")
        CfnOutput(
            self,
            "CallbackUrl",
            value=self.api.stage.callback_url,
            description="https:// management API URL the message function posts through",
        )
        CfnOutput(self, "TableName", value=self.table.table_name, description="DynamoDB table of the conductor")
        if self.auth_secret is not None:
            CfnOutput(
                self,
                "TokenSigningSecretArn",
                value=self.auth_secret.secret_arn,
                description="Secrets Manager secret whose value signs connect tokens",
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
