"""Alarms on handler errors, Lambda throttles, Bedrock errors and abandoned turns, with optional e-mail alerts."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StageConfig

BEDROCK_ERRORS_METRIC = "BedrockErrors"
TURNS_ABANDONED_METRIC = "TurnsAbandoned"
PERIOD = Duration.minutes(5)


class ConductorAlarms(Construct):
    """One alarm per signal; all notify the alarm topic when an e-mail address is configured."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, functions: dict[str, lambda_.Function]
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        for name, fn in functions.items():
            self._alarm(
                f"{name.capitalize()}Errors",
                fn.metric_errors(period=PERIOD, statistic="Sum"),
                f"{name} function invocations failed",
            )
            self._alarm(
                f"{name.capitalize()}Throttles",
                fn.metric_throttles(period=PERIOD, statistic="Sum"),
                f"{name} function invocations were throttled",
            )
        self._alarm(
            "BedrockErrors",
            self._metric(config, BEDROCK_ERRORS_METRIC),
            "Bedrock ConverseStream calls failed (throttling, stream errors)",
        )
        self._alarm(
            "TurnsAbandoned",
            self._metric(config, TURNS_ABANDONED_METRIC),
            "turns never ran or their runner died (the user heard an apology)",
        )

        self.topic: sns.Topic | None = None
        if config.alarm_email:
            self.topic = self._topic(config)
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
            action = cw_actions.SnsAction(self.topic)
            for alarm in self.alarms:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

    @staticmethod
    def _metric(config: StageConfig, name: str) -> cloudwatch.Metric:
        """A count the conductor emits itself (Powertools metrics, dimension ``service``)."""
        return cloudwatch.Metric(
            namespace=config.metrics_namespace,
            metric_name=name,
            dimensions_map={"service": config.service_name},
            statistic="Sum",
            period=PERIOD,
        )

    def _alarm(self, construct_id: str, metric: cloudwatch.Metric, description: str) -> None:
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                construct_id,
                metric=metric,
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"VoiceIDE conductor: {description} in the last 5 minutes",
            )
        )

    def _topic(self, config: StageConfig) -> sns.Topic:
        # CloudWatch can only publish to an encrypted topic whose customer managed key lets it.
        key = kms.Key(
            self,
            "TopicKey",
            description=f"Encrypts the VoiceIDE conductor alarm topic ({config.name})",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN if config.retain else RemovalPolicy.DESTROY,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
        return sns.Topic(
            self,
            "Topic",
            display_name=f"VoiceIDE conductor alarms ({config.name})",
            master_key=key,
            enforce_ssl=True,
        )
