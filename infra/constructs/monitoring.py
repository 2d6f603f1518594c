"""Alarms of one stage, all notifying the stage's alarm topic (e-mail subscription optional).

Errors alarm on rates, not single data points: CloudWatch metric math divides the errors by what
they happened to (turns, invocations, integration calls), and an alarm fires when the rate is at or
above ``alarms.error_rate_percent`` in 3 of 5 five-minute periods (the sessions API's 5XX answers
too, per request), and so do the requests API Gateway refuses before any function runs (the WebSocket
stage's ClientError: throttled frames, refused sign-ins). Durations alarm near the function's timeout,
throttles of the table and failed API executions when they last, and Bedrock spend when an hour's
estimated dollars (every kind of token, dropped speculations' too, at the stage's prices) reach the
stage's ceiling. Failed rolling-summary folds alarm per fold: the conversation goes on, so nothing
else would tell. The session reaper alarms when it falls an hour behind the table's stream.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import removal_policy
from shared.flows.commit import error_metric_name
from shared.wire.protocol import ErrorCode

PERIOD = Duration.minutes(5)
EVALUATION_PERIODS = 5
DATAPOINTS_TO_ALARM = 3
SPEND_PERIOD = Duration.hours(1)

TURNS_METRIC = "Turns"
TURNS_ABANDONED_METRIC = "TurnsAbandoned"
OUTPUT_TOKENS_METRIC = "OutputTokens"
INPUT_TOKENS_METRIC = "InputTokens"
CACHE_READ_TOKENS_METRIC = "CacheReadInputTokens"
CACHE_WRITE_TOKENS_METRIC = "CacheWriteInputTokens"
# Per-turn timings the turn runner emits (milliseconds): transcript committed -> first partial posted,
# -> first tts.speak posted; model request -> first text; the runner invocation; toolCall sent -> the
# round's last result committed.
FIRST_PARTIAL_METRIC = "FirstPartialMs"
FIRST_SPEAK_METRIC = "FirstSpeakMs"
MODEL_FIRST_TOKEN_METRIC = "ModelFirstTokenMs"
TURN_RUN_METRIC = "TurnRunMs"
TOOL_ROUND_TRIP_METRIC = "ToolRoundTripMs"
# Per runner invocation counts: DynamoDB calls and posts to the connection.
DYNAMODB_REQUESTS_METRIC = "DynamoDBRequests"
POSTS_METRIC = "Posts"
# The rolling summary (shared/flows/memory_keeper.py): folds written, and folds that failed (the conversation
# goes on, but what left the window is forgotten until a later fold succeeds).
SUMMARIES_WRITTEN_METRIC = "SummariesWritten"
SUMMARY_FAILURES_METRIC = "SummaryFailures"
# Speculative turns (shared/core/speculation.py): per final transcript 1 or 0, whether a speculation was
# running and whether the final promoted it; per watcher, speculations started and dropped and the tokens
# the dropped ones spent (input, and output written before they were stopped).
TURNS_SPECULATED_METRIC = "TurnsSpeculated"
TURNS_PROMOTED_METRIC = "TurnsPromoted"
SPECULATIONS_METRIC = "Speculations"
SPECULATIONS_DISCARDED_METRIC = "SpeculationsDiscarded"
DISCARDED_INPUT_TOKENS_METRIC = "SpeculationDiscardedInputTokens"
DISCARDED_OUTPUT_TOKENS_METRIC = "SpeculationDiscardedOutputTokens"
# Fair sharing (shared/flows/service.py): events refused over a session's budget a second.
EVENTS_RATE_LIMITED_METRIC = "EventsRateLimited"
# The session reaper (lambdas/session_reaper.py): expired sessions reaped, and the items it deleted.
SESSIONS_REAPED_METRIC = "SessionsReaped"
SESSION_ITEMS_REAPED_METRIC = "SessionItemsReaped"
# The session reaper reads the table's stream, whose records DynamoDB keeps 24 hours: a reaper stuck
# on a batch (failing, throttled) must be seen long before they go. Its iterator age (how old the
# last record it was handed is) at this for 3 of 5 five-minute periods alarms, with ~23 h left to act.
REAPER = "sessionReaper"
REAPER_ITERATOR_AGE_LIMIT = Duration.hours(1)
# A speculation watcher that failed (its invocation died or never ran): counted apart from abandoned turns.
WATCHER_FAILURES_METRIC = "WatcherFailures"
# The spend estimate: each token metric (metric id, metric name) and the price it is weighed with
# (bedrock.prices, USD per million tokens). A dropped speculation's tokens are counted by the watcher
# only, never in InputTokens/OutputTokens: the sum counts each token once.
SPEND_TOKENS: tuple[tuple[str, str, str], ...] = (
    ("input_tokens", INPUT_TOKENS_METRIC, "input"),
    ("discarded_input", DISCARDED_INPUT_TOKENS_METRIC, "input"),
    ("cache_write", CACHE_WRITE_TOKENS_METRIC, "cache_write"),
    ("cache_read", CACHE_READ_TOKENS_METRIC, "cache_read"),
    ("output_tokens", OUTPUT_TOKENS_METRIC, "output"),
    ("discarded_output", DISCARDED_OUTPUT_TOKENS_METRIC, "output"),
)
# Who may publish to the alarm topic and use its key: CloudWatch, for alarms of this account and region.
CLOUDWATCH_PRINCIPAL = "cloudwatch.amazonaws.com"
NO_SUBSCRIBER_WARNING = "@voiceide/conductor:alarmsWithoutSubscriber"
# Error codes that mean the conductor failed the user (the others answer a malformed or refused frame).
CONDUCTOR_FAULT_CODES: tuple[ErrorCode, ...] = (ErrorCode.CONDUCTOR_ERROR, ErrorCode.HANDLER_ERROR)
BEDROCK_FAULT_CODES: tuple[ErrorCode, ...] = (ErrorCode.BEDROCK_ERROR,)
# The table operations the store and the sessions API's records use (ThrottledRequests has an
# Operation dimension; shared/adapters/session_records.py: ending rewrites each item's expiry, erasing deletes
# in batches, listing reads the active sessions' device counts in a batch). With the read and write
# throttle events, 10 metrics: as many as an alarm's metric math takes.
TABLE_OPERATIONS: tuple[dynamodb.Operation, ...] = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.BATCH_GET_ITEM,
)
ROUTE_FUNCTIONS = ("connect", "message", "disconnect")
TIMED_FUNCTIONS = ("message", "turn")


def own_metric(
    config: StageConfig, name: str, *, statistic: str = "Sum", period: Duration = PERIOD
) -> cloudwatch.Metric:
    """A metric the conductor emits itself (Powertools EMF, dimension ``service``)."""
    return cloudwatch.Metric(
        namespace=config.metrics_namespace,
        metric_name=name,
        dimensions_map={"service": config.service_name},
        statistic=statistic,
        period=period,
        label=name,
    )


def error_events(config: StageConfig, code: ErrorCode) -> cloudwatch.Metric:
    """``error`` events with ``code`` sent to the app."""
    return cloudwatch.Metric(
        namespace=config.metrics_namespace,
        metric_name=error_metric_name(code),
        dimensions_map={"service": config.service_name},
        statistic="Sum",
        period=PERIOD,
        label=str(code),
    )


def api_metric(stage: apigwv2.WebSocketStage, name: str) -> cloudwatch.Metric:
    """An ``AWS/ApiGateway`` WebSocket metric of the stage (dimensions ApiId, Stage)."""
    return stage.metric(name, statistic="Sum", period=PERIOD, label=name)


def http_api_metric(api: apigwv2.HttpApi, name: str, *, statistic: str = "Sum") -> cloudwatch.Metric:
    """An ``AWS/ApiGateway`` metric of an HTTP API (dimension ApiId: every stage, it has one)."""
    return api.metric(name, statistic=statistic, period=PERIOD, label=name if statistic == "Sum" else statistic)


def percent(
    label: str, failed: dict[str, cloudwatch.IMetric], total: dict[str, cloudwatch.IMetric]
) -> cloudwatch.MathExpression:
    """``100 * sum(failed) / sum(total)`` per period; missing points count as 0, and failures in a
    period with nothing to divide by count as 100 % (a handler error on a frame of no new turn)."""
    failures = " + ".join(f"FILL({key}, 0)" for key in failed)
    attempts = " + ".join(f"FILL({key}, 0)" for key in total)
    return cloudwatch.MathExpression(
        expression=f"IF(({attempts}) > 0, 100 * ({failures}) / ({attempts}), IF(({failures}) > 0, 100, 0))",
        using_metrics={**failed, **total},
        label=label,
        period=PERIOD,
    )


@dataclass(frozen=True)
class Watched:
    """What the alarms and the dashboard look at."""

    config: StageConfig
    functions: dict[str, lambda_.Function]
    timeouts: dict[str, Duration]
    table: dynamodb.ITable
    api_stage: apigwv2.WebSocketStage
    # The sessions API, on stages that serve it.
    sessions_api: apigwv2.HttpApi | None = None


class ConductorAlarms(Construct):
    """Every alarm of the stage; each one notifies ``topic`` when it fires and when it clears."""

    def __init__(self, scope: Construct, construct_id: str, *, watched: Watched) -> None:
        super().__init__(scope, construct_id)
        config = watched.config
        self.watched = watched
        self.alarms: list[cloudwatch.Alarm] = []
        self.rates: dict[str, cloudwatch.MathExpression] = {}
        threshold = config.alarms.error_rate_percent

        turns = {"turns": own_metric(config, TURNS_METRIC)}
        self._rate(
            "ConductorErrorRate",
            percent(
                "conductor_error + handler_error per turn (%)",
                {f"e_{code.value}": error_events(config, code) for code in CONDUCTOR_FAULT_CODES},
                turns,
            ),
            f"turns ending in conductor_error or handler_error reached {threshold:g}%",
        )
        self._rate(
            "BedrockErrorRate",
            percent(
                "bedrock_error per turn (%)",
                {f"e_{code.value}": error_events(config, code) for code in BEDROCK_FAULT_CODES},
                turns,
            ),
            f"turns ending in bedrock_error (model failed, stalled or garbled) reached {threshold:g}%",
        )
        self._rate(
            "TurnsAbandonedRate",
            percent("abandoned turns per turn (%)", {"abandoned": own_metric(config, TURNS_ABANDONED_METRIC)}, turns),
            f"turns whose runner never ran or died (the user heard an apology) reached {threshold:g}%",
        )
        self._rate(
            "SummaryFailureRate",
            self.summary_failure_rate(),
            f"failed rolling-summary folds (the conversation forgets what left the window) reached {threshold:g}%",
        )

        for name, fn in watched.functions.items():
            key = name.lower()  # metric ids are unique per graph: the dashboard shows every function's rate
            invocations = {f"{key}_invocations": fn.metric_invocations(period=PERIOD, statistic="Sum")}
            self._rate(
                f"{name.capitalize()}ErrorRate",
                percent(
                    f"{name} errors per invocation (%)", {f"{key}_errors": fn.metric_errors(period=PERIOD)}, invocations
                ),
                f"failed invocations of the {name} function reached {threshold:g}%",
            )
            throttles = {f"{key}_throttles": fn.metric_throttles(period=PERIOD, statistic="Sum")}
            self._rate(
                f"{name.capitalize()}ThrottleRate",
                percent(f"{name} throttles per invocation (%)", throttles, {**invocations, **throttles}),
                f"throttled invocations of the {name} function reached {threshold:g}%",
            )

        share = config.alarms.duration_percent_of_timeout
        for name in TIMED_FUNCTIONS:
            limit_ms = watched.timeouts[name].to_milliseconds() * share / 100
            self._alarm(
                f"{name.capitalize()}DurationNearTimeout",
                watched.functions[name].metric_duration(period=PERIOD, statistic="p99"),
                limit_ms,
                f"p99 duration of the {name} function reached {share:g}% of its timeout ({limit_ms:g} ms)",
            )

        reaper = watched.functions.get(REAPER)
        if reaper is not None:
            limit = REAPER_ITERATOR_AGE_LIMIT
            self._alarm(
                "SessionReaperIteratorAge",
                self.reaper_iterator_age(),
                limit.to_milliseconds(),
                f"the session reaper is {limit.to_hours():g} h or more behind the table's stream (failing or "
                "throttled: the stream keeps records 24 h, and a session whose record is lost keeps its history "
                "until the 400-day backstop)",
            )

        self._alarm(
            "TableThrottles",
            self.table_throttles(),
            1,
            "DynamoDB throttled requests to the conductor table",
        )
        self._alarm(
            "ApiExecutionErrors",
            api_metric(watched.api_stage, "ExecutionError"),
            1,
            "API Gateway could not call a route's function (ExecutionError)",
        )
        self._rate(
            "ApiIntegrationErrorRate",
            percent(
                "integration errors per route invocation (%)",
                {"integration_errors": api_metric(watched.api_stage, "IntegrationError")},
                {
                    f"calls_{name}": watched.functions[name].metric_invocations(period=PERIOD, statistic="Sum")
                    for name in ROUTE_FUNCTIONS
                },
            ),
            f"routes answering API Gateway with a 4XX/5XX (IntegrationError) reached {threshold:g}%",
        )

        if watched.sessions_api is not None:
            self._rate(
                "SessionsApi5xxRate",
                self.sessions_api_5xx_rate(),
                f"sessions API requests answered with a 5XX (the function failed, timed out or was throttled, "
                f"or answered internal_error) reached {threshold:g}%",
            )

        self._rate(
            "ApiClientErrorRate",
            self.client_error_rate(),
            f"requests API Gateway refused before any function ran (ClientError: throttled frames, refused "
            f"sign-ins) reached {config.alarms.client_error_rate_percent:g}% of the app's requests",
            threshold=config.alarms.client_error_rate_percent,
        )

        ceiling = config.alarms.bedrock_usd_per_hour
        self.spend = cloudwatch.Alarm(
            self,
            "BedrockSpendPerHour",
            metric=self.bedrock_usd_per_hour(),
            threshold=ceiling,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=self._description(
                f"Bedrock tokens of the last hour cost an estimated ${ceiling:g} or more at the stage's prices "
                "(input, output, cache, dropped speculations; spend guard)"
            ),
        )
        self.alarms.append(self.spend)
        # The earlier spend alarm: an hour that costs what the stage's expected load costs.
        self.expected_spend: cloudwatch.Alarm | None = None
        expected = config.alarms.bedrock_usd_per_hour_expected
        if expected is not None:
            self.expected_spend = cloudwatch.Alarm(
                self,
                "BedrockSpendAtExpectedLoad",
                metric=self.bedrock_usd_per_hour(),
                threshold=expected,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=self._description(
                    f"Bedrock tokens of the last hour cost an estimated ${expected:g} or more at the stage's prices: "
                    f"the load the stage expects (the spend guard fires at ${ceiling:g})"
                ),
            )
            self.alarms.append(self.expected_spend)

        self.topic = self._topic(config)
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.listener: sns.ITopic | None = (
            sns.Topic.from_topic_arn(self, "Listener", config.alarm_topic_arn) if config.alarm_topic_arn else None
        )
        if not config.alarm_listeners:
            warning = (
                f"Stage {config.name!r} names nobody to hear its alarms: they notify the topic AlarmTopicArn, which "
                "nobody subscribes to. Set alarm_email or alarm_topic_arn in cdk.json (stages.<name>) or subscribe "
                "a channel to the topic (docs/operations.md)."
            )
            Annotations.of(self).add_warning_v2(NO_SUBSCRIBER_WARNING, warning)
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        for alarm in self.alarms:
            self.notify(alarm)

    def notify(self, alarm: cloudwatch.Alarm) -> None:
        """``alarm`` tells the stage's topic (and the stage's own topic, ``alarm_topic_arn``) when it
        fires and when it clears."""
        for topic in (self.topic, self.listener):
            if topic is not None:
                action = cw_actions.SnsAction(topic)
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

    def table_throttles(self) -> cloudwatch.MathExpression:
        """Throttled requests of every operation the store uses, plus read and write throttle events."""
        table = self.watched.table
        return cloudwatch.MathExpression(
            expression="FILL(requests, 0) + FILL(reads, 0) + FILL(writes, 0)",
            using_metrics={
                "requests": table.metric_throttled_requests_for_operations(operations=list(TABLE_OPERATIONS)),
                "reads": table.metric("ReadThrottleEvents", statistic="Sum", period=PERIOD),
                "writes": table.metric("WriteThrottleEvents", statistic="Sum", period=PERIOD),
            },
            label="DynamoDB throttles",
            period=PERIOD,
        )

    def reaper_iterator_age(self) -> cloudwatch.Metric:
        """The age of the last stream record handed to the session reaper (ms, maximum per period)."""
        return self.watched.functions[REAPER].metric(
            "IteratorAge", statistic="Maximum", period=PERIOD, label="reaper iterator age (max, ms)"
        )

    def sessions_api_5xx_rate(self) -> cloudwatch.MathExpression:
        """5XX answers of the sessions API per request, in %."""
        api = self.watched.sessions_api
        if api is None:
            raise ValueError("this stage has no sessions API")
        return percent(
            "sessions API 5XX per request (%)",
            {"sessions_5xx": http_api_metric(api, "5xx")},
            {"sessions_requests": http_api_metric(api, "Count")},
        )

    def summary_failure_rate(self) -> cloudwatch.MathExpression:
        """Failed folds per fold attempted (written or failed), in %."""
        config = self.watched.config
        failures = {"summary_failures": own_metric(config, SUMMARY_FAILURES_METRIC)}
        return percent(
            "failed summary folds (%)",
            failures,
            {"summaries_written": own_metric(config, SUMMARIES_WRITTEN_METRIC), **failures},
        )

    def bedrock_usd_per_hour(self) -> cloudwatch.MathExpression:
        """The estimated dollars of an hour's Bedrock tokens: each token metric of ``SPEND_TOKENS``
        summed over the hour, times its price per million tokens (``bedrock.prices``)."""
        config = self.watched.config
        prices = config.bedrock.prices
        if prices is None:
            raise ValueError(f"stage {config.name!r} states no bedrock.prices")
        terms = " + ".join(f"{getattr(prices, price):g} * FILL({key}, 0)" for key, _, price in SPEND_TOKENS)
        return cloudwatch.MathExpression(
            expression=f"({terms}) / 1000000",
            using_metrics={key: own_metric(config, name, period=SPEND_PERIOD) for key, name, _ in SPEND_TOKENS},
            label="Bedrock estimated USD per hour",
            period=SPEND_PERIOD,
        )

    def client_error_rate(self) -> cloudwatch.MathExpression:
        """WebSocket requests API Gateway refused (ClientError) per request of the app: the refused ones,
        connects that reached ``$connect`` and frames that reached ``$default``, in %."""
        watched = self.watched
        refused = {"client_errors": api_metric(watched.api_stage, "ClientError")}
        return percent(
            "API Gateway refusals per request (%)",
            refused,
            {
                **refused,
                "connects": api_metric(watched.api_stage, "ConnectCount"),
                "frames": watched.functions["message"].metric_invocations(period=PERIOD, statistic="Sum"),
            },
        )

    def _description(self, what: str) -> str:
        return f"VoiceIDE conductor ({self.watched.config.name}): {what}. Runbook: docs/operations.md."

    def _alarm(self, construct_id: str, metric: cloudwatch.IMetric, threshold: float, what: str) -> None:
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                construct_id,
                metric=metric,
                threshold=threshold,
                evaluation_periods=EVALUATION_PERIODS,
                datapoints_to_alarm=DATAPOINTS_TO_ALARM,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=self._description(f"{what}, in 3 of the last 5 five-minute periods"),
            )
        )

    def _rate(
        self, construct_id: str, rate: cloudwatch.MathExpression, what: str, *, threshold: float | None = None
    ) -> None:
        self.rates[construct_id] = rate
        limit = self.watched.config.alarms.error_rate_percent if threshold is None else threshold
        self._alarm(construct_id, rate, limit, what)

    def _topic(self, config: StageConfig) -> sns.Topic:
        """The encrypted alarm topic. Its policy replaces SNS's default one (which let the account's
        services publish): with only the SSL-only deny, CloudWatch could not publish and no alarm would
        reach anyone. So the policy and the key's policy both let CloudWatch in, for alarms of this
        account and region only (aws:SourceAccount, aws:SourceArn: no confused deputy)."""
        stack = Stack.of(self)
        from_own_alarms = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"},
        }
        key = kms.Key(
            self,
            "TopicKey",
            description=f"Encrypts the VoiceIDE conductor alarm topic ({config.name})",
            enable_key_rotation=True,
            removal_policy=removal_policy(config),
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsEncryptNotifications",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=from_own_alarms,
            )
        )
        topic = sns.Topic(
            self,
            "Topic",
            display_name=f"VoiceIDE conductor alarms ({config.name})",
            master_key=key,
            enforce_ssl=True,
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=from_own_alarms,
            )
        )
        return topic
