"""The session reaper: when DynamoDB's time to live deletes a session's ``STATE`` item, the table's
stream invokes a function that deletes everything else under the session's key
(``lambdas.session_reaper``, ``shared.flows.session_reaper``).

The event source lets through only those deletions (an event filter: ``REMOVE`` records made by
the service principal ``dynamodb.amazonaws.com`` of ``STATE`` items), so the function runs once per
expired session, not per write. A failed record is retried (bisecting the batch) and reported as a
batch item failure; records stay in the stream 24 hours.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import ENDED_RETENTION_ENV, ConductorFunctions, FunctionSpec
from infra.nag import RUNTIME_REASON, XRAY_REASON, acknowledge, cfn_of, role_policy_of

# What the reaper's code calls on the table: the state (was the session started again?), the
# session's keys, and their deletion in batches.
REAPER_TABLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchWriteItem")
# A long session has thousands of items: 25 a request, a few requests a second.
REAPER_TIMEOUT = Duration.minutes(5)
REAPER_MEMORY_MB = 256
BATCH_SIZE = 10
RETRY_ATTEMPTS = 10
STREAMS_REASON = (
    "dynamodb:ListStreams (granted by the stream event source for Lambda's poller) supports no "
    "resource-level permissions; '*' is the only valid resource. " + XRAY_REASON
)
# DynamoDB Streams marks deletions by the time to live with this service principal.
TTL_FILTER = {
    "eventName": ["REMOVE"],
    "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
    "dynamodb": {"Keys": {"sk": {"S": ["STATE"]}}},
}


class ConductorSessionReaper(Construct):
    """The reaper function, its stream event source and its grants."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        table: dynamodb.ITable,
        functions: ConductorFunctions,
    ) -> None:
        super().__init__(scope, construct_id)
        environment = {
            "CONDUCTOR_TABLE": table.table_name,
            ENDED_RETENTION_ENV: functions.environment[ENDED_RETENTION_ENV],
            "POWERTOOLS_SERVICE_NAME": config.service_name,
            "POWERTOOLS_LOG_LEVEL": config.log_level,
            "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
        }
        self.function: lambda_.Function = functions._function(
            FunctionSpec(
                "sessionReaper",
                "lambdas.session_reaper.handler",
                "Deletes what remains of a session whose state expired (the table's stream)",
                REAPER_MEMORY_MB,
                REAPER_TIMEOUT,
            ),
            environment=environment,
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(actions=list(REAPER_TABLE_ACTIONS), resources=[table.table_arn])
        )
        self.function.add_event_source(
            event_sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=BATCH_SIZE,
                bisect_batch_on_error=True,
                retry_attempts=RETRY_ATTEMPTS,
                report_batch_item_failures=True,
                filters=[lambda_.FilterCriteria.filter(TTL_FILTER)],
            )
        )
        acknowledge(role_policy_of(self.function), "AwsSolutions-IAM5[Resource::*]", STREAMS_REASON)
        acknowledge(cfn_of(self.function), "AwsSolutions-L1", RUNTIME_REASON)
