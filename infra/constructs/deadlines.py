"""The tool-call deadline queue: the turn runner sends a delayed message per round of tool calls,
the tool-deadline function receives it when the first deadline is due (``lambdas.tool_deadline``).

Messages that fail three receives go to a dead-letter queue kept 14 days; one there means a
session whose calls were never timed out (its turn waits until the app answers or reconnects),
so a visible message alarms (the stack has it notify the stage's topics, as every alarm).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import removal_policy

QUEUE_URL_ENV = "CONDUCTOR_DEADLINE_QUEUE_URL"
MAX_RECEIVE_COUNT = 3
DLQ_RETENTION = Duration.days(14)
BATCH_SIZE = 10
VISIBILITY_FACTOR = 6
"""AWS's advice for a queue a Lambda function consumes: a visibility timeout of at least six times
the function's timeout, so a message is not received again while a retried invocation runs."""


class ConductorDeadlines(Construct):
    """The deadline queue, its dead-letter queue and alarm, and who may use them."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        runner: lambda_.Function,
        consumer: lambda_.Function,
        receiver: lambda_.Function,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
            removal_policy=removal_policy(config),
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(consumer.timeout.to_seconds() * VISIBILITY_FACTOR)
            if consumer.timeout is not None
            else Duration.minutes(3),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=MAX_RECEIVE_COUNT, queue=self.dead_letters),
            removal_policy=removal_policy(config),
        )
        # The event source grants the consumer what Lambda's poller needs (receive, delete, ...).
        consumer.add_event_source(
            event_sources.SqsEventSource(self.queue, batch_size=BATCH_SIZE, report_batch_item_failures=True)
        )
        # The runner arms the first deadline; the consumer re-arms later ones and the next pending one;
        # the message function arms the one of a tool result that started to arrive in parts.
        # SendMessage only: the code has the queue's URL and calls nothing else (grant_send_messages
        # would add GetQueueAttributes and GetQueueUrl).
        for fn in (runner, consumer, receiver):
            fn.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn]))
            fn.add_environment(QUEUE_URL_ENV, self.queue.queue_url)

        self.alarm = cloudwatch.Alarm(
            self,
            "DeadLettersVisible",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"VoiceIDE conductor ({config.name}): tool-call deadline alarms failed {MAX_RECEIVE_COUNT} times "
                "and wait in the dead-letter queue (those sessions' tool calls never time out). Runbook: "
                "docs/operations.md."
            ),
        )
