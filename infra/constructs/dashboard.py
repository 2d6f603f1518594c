"""The stage's CloudWatch dashboard: turns, error rates, latency, tokens, connections, throttles."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.constructs.monitoring import (
    FIRST_PARTIAL_METRIC,
    INPUT_TOKENS_METRIC,
    OUTPUT_TOKENS_METRIC,
    PERIOD,
    TURNS_ABANDONED_METRIC,
    TURNS_METRIC,
    ConductorAlarms,
    api_metric,
    error_events,
    own_metric,
)
from shared.protocol import SENT_ERROR_CODES

WIDTH = 8  # three graphs per row of the 24-column grid
HEIGHT = 6
PERCENTILES = ("p50", "p90", "p99")
# Failures the conductor counts besides the error events it sends.
FAILURE_COUNTS = ("BedrockErrors", "ContextOverflows", "TurnLaunchFailures", "StateConflicts", TURNS_ABANDONED_METRIC)


def graph(title: str, left: list[cloudwatch.IMetric], **options: object) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=left, width=WIDTH, height=HEIGHT, period=PERIOD, **options)


def limit(value: float, label: str) -> cloudwatch.HorizontalAnnotation:
    return cloudwatch.HorizontalAnnotation(value=value, label=label, color=cloudwatch.Color.RED)


class ConductorDashboard(Construct):
    """One dashboard per stage, named after the stack (``VoiceIDEConductor-<stage>``)."""

    def __init__(self, scope: Construct, construct_id: str, *, alarms: ConductorAlarms) -> None:
        super().__init__(scope, construct_id)
        watched = alarms.watched
        config = watched.config
        functions = watched.functions
        stage = watched.api_stage
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=config.stack_name,
            default_interval=Duration.hours(6),
        )
        turn_timeout_ms = watched.timeouts["turn"].to_milliseconds()
        message_timeout_ms = watched.timeouts["message"].to_milliseconds()
        share = config.alarms.duration_percent_of_timeout / 100
        self.dashboard.add_widgets(
            graph("Turns (per 5 minutes)", [own_metric(config, TURNS_METRIC)]),
            graph(
                "Connections and messages (API Gateway)",
                [api_metric(stage, "ConnectCount"), api_metric(stage, "MessageCount")],
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms",
                alarms=alarms.alarms,
                width=WIDTH,
                height=HEIGHT,
                sort_by=cloudwatch.AlarmStatusWidgetSortBy.STATE_UPDATED_TIMESTAMP,
            ),
        )
        self.dashboard.add_widgets(
            graph(
                "Error rates (% of turns)",
                [alarms.rates[name] for name in ("ConductorErrorRate", "BedrockErrorRate", "TurnsAbandonedRate")],
                left_annotations=[limit(config.alarms.error_rate_percent, "alarm")],
            ),
            graph(
                "Error events sent to the app, by code",
                [error_events(config, code) for code in SENT_ERROR_CODES],
                stacked=True,
            ),
            graph("Conductor failure counts", [own_metric(config, name) for name in FAILURE_COUNTS]),
        )
        self.dashboard.add_widgets(
            graph(
                "Turn runner duration (ms)",
                [functions["turn"].metric_duration(statistic=p, period=PERIOD, label=p) for p in PERCENTILES],
                left_annotations=[limit(turn_timeout_ms * share, "alarm"), limit(turn_timeout_ms, "timeout")],
            ),
            graph(
                "$default duration (ms)",
                [functions["message"].metric_duration(statistic=p, period=PERIOD, label=p) for p in PERCENTILES],
                left_annotations=[limit(message_timeout_ms * share, "alarm"), limit(message_timeout_ms, "timeout")],
            ),
            graph(
                "Time to first partial (ms, request to the model → first words posted)",
                [own_metric(config, FIRST_PARTIAL_METRIC, statistic=p).with_(label=p) for p in PERCENTILES],
            ),
        )
        self.dashboard.add_widgets(
            graph(
                "Bedrock tokens (per 5 minutes)",
                [own_metric(config, INPUT_TOKENS_METRIC), own_metric(config, OUTPUT_TOKENS_METRIC)],
            ),
            cloudwatch.GraphWidget(
                title="Bedrock output tokens per hour (spend guard)",
                left=[alarms.output_tokens_per_hour()],
                left_annotations=[limit(config.alarms.output_tokens_per_hour, "ceiling")],
                width=WIDTH,
                height=HEIGHT,
            ),
            graph(
                "Function error rates (% of invocations)",
                [alarms.rates[f"{name.capitalize()}ErrorRate"].with_(label=name) for name in functions],
                left_annotations=[limit(config.alarms.error_rate_percent, "alarm")],
            ),
        )
        self.dashboard.add_widgets(
            graph(
                "Lambda throttles",
                [fn.metric_throttles(statistic="Sum", period=PERIOD, label=name) for name, fn in functions.items()],
            ),
            graph("DynamoDB throttles", [alarms.table_throttles()]),
            graph(
                "API Gateway errors",
                [api_metric(stage, name) for name in ("IntegrationError", "ExecutionError", "ClientError")],
            ),
        )
