"""The stage's CloudWatch dashboard: turns, error rates, latency, connections, throttles, fair sharing
and the session reaper, the sessions API (where the stage has it), and a section of per-turn figures
(latency percentiles, tokens and the prompt cache, work per turn)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.monitoring import (
    CACHE_READ_TOKENS_METRIC,
    CACHE_WRITE_TOKENS_METRIC,
    DISCARDED_INPUT_TOKENS_METRIC,
    DISCARDED_OUTPUT_TOKENS_METRIC,
    DYNAMODB_REQUESTS_METRIC,
    EVENTS_RATE_LIMITED_METRIC,
    FIRST_PARTIAL_METRIC,
    FIRST_SPEAK_METRIC,
    INPUT_TOKENS_METRIC,
    MODEL_FIRST_TOKEN_METRIC,
    OUTPUT_TOKENS_METRIC,
    PERIOD,
    POSTS_METRIC,
    REAPER_ITERATOR_AGE_LIMIT,
    SESSION_ITEMS_REAPED_METRIC,
    SESSIONS_REAPED_METRIC,
    SPECULATIONS_DISCARDED_METRIC,
    SPECULATIONS_METRIC,
    SUMMARIES_WRITTEN_METRIC,
    SUMMARY_FAILURES_METRIC,
    TOOL_ROUND_TRIP_METRIC,
    TURN_RUN_METRIC,
    TURNS_ABANDONED_METRIC,
    TURNS_METRIC,
    TURNS_PROMOTED_METRIC,
    TURNS_SPECULATED_METRIC,
    WATCHER_FAILURES_METRIC,
    ConductorAlarms,
    api_metric,
    error_events,
    http_api_metric,
    own_metric,
)
from shared.wire.protocol import SENT_ERROR_CODES

WIDTH = 8  # three graphs per row of the 24-column grid
HEIGHT = 6
PERCENTILES = ("p50", "p90", "p99")
TURN_PERCENTILES = ("p50", "p99")
# The per-turn timings, each graphed as its percentiles (title, metric).
TURN_TIMINGS = (
    ("First partial (ms, transcript committed → first partial posted)", FIRST_PARTIAL_METRIC),
    ("First tts.speak (ms, transcript committed → first speech call posted)", FIRST_SPEAK_METRIC),
    ("Model first token (ms, request to the model → first text)", MODEL_FIRST_TOKEN_METRIC),
    ("Turn runner invocation (ms)", TURN_RUN_METRIC),
    ("Tool round trip (ms, toolCall sent → the round's last result committed)", TOOL_ROUND_TRIP_METRIC),
)
TOKEN_METRICS = (INPUT_TOKENS_METRIC, OUTPUT_TOKENS_METRIC, CACHE_READ_TOKENS_METRIC, CACHE_WRITE_TOKENS_METRIC)
# Work per turn: the runner's counts over the turns started (metric id, metric).
WORK_METRICS = (("dynamodb_requests", DYNAMODB_REQUESTS_METRIC), ("posts", POSTS_METRIC))
# Failures the conductor counts besides the error events it sends, each its own line (none is a sum
# of others): a failed speculation watcher counts in WatcherFailures, never among the abandoned turns.
FAILURE_COUNTS = (
    "BedrockErrors",
    "ContextOverflows",
    "TurnLaunchFailures",
    "WatcherLaunchFailures",
    WATCHER_FAILURES_METRIC,
    "StateConflicts",
    TURNS_ABANDONED_METRIC,
)


def graph(title: str, left: list[cloudwatch.IMetric], **options: object) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=left, width=WIDTH, height=HEIGHT, period=PERIOD, **options)


def limit(value: float, label: str) -> cloudwatch.HorizontalAnnotation:
    return cloudwatch.HorizontalAnnotation(value=value, label=label, color=cloudwatch.Color.RED)


def percentiles(config: StageConfig, name: str) -> list[cloudwatch.IMetric]:
    return [own_metric(config, name, statistic=p).with_(label=p) for p in TURN_PERCENTILES]


def cache_hit_ratio(config: StageConfig) -> cloudwatch.MathExpression:
    """Input tokens read from the prompt cache, in % of all input tokens (uncached, read, written)."""
    tokens = {
        "cache_read": own_metric(config, CACHE_READ_TOKENS_METRIC),
        "cache_write": own_metric(config, CACHE_WRITE_TOKENS_METRIC),
        "uncached": own_metric(config, INPUT_TOKENS_METRIC),
    }
    total = " + ".join(f"FILL({key}, 0)" for key in tokens)
    return cloudwatch.MathExpression(
        expression=f"IF(({total}) > 0, 100 * FILL(cache_read, 0) / ({total}), 0)",
        using_metrics=tokens,
        label="cache reads (% of input tokens)",
        period=PERIOD,
    )


def per_turn(config: StageConfig, metric_id: str, name: str) -> cloudwatch.MathExpression:
    """A count the runner emits, summed over the period and divided by the turns started in it."""
    counted = {metric_id: own_metric(config, name), "turns": own_metric(config, TURNS_METRIC)}
    return cloudwatch.MathExpression(
        expression=f"IF(FILL(turns, 0) > 0, FILL({metric_id}, 0) / turns, 0)",
        using_metrics=counted,
        label=f"{name} per turn",
        period=PERIOD,
    )


def speculation_rates(config: StageConfig) -> list[cloudwatch.IMetric]:
    """Of the final transcripts: the share that found a speculation running, the share that promoted
    it, and of the speculated ones the share promoted (the hit rate)."""
    counts = {
        "speculated": own_metric(config, TURNS_SPECULATED_METRIC),
        "promoted": own_metric(config, TURNS_PROMOTED_METRIC),
        "finals": own_metric(config, TURNS_SPECULATED_METRIC, statistic="SampleCount"),
    }

    def share(expression: str, label: str) -> cloudwatch.MathExpression:
        return cloudwatch.MathExpression(expression=expression, using_metrics=counts, label=label, period=PERIOD)

    return [
        share("IF(FILL(finals, 0) > 0, 100 * FILL(speculated, 0) / finals, 0)", "speculated (% of finals)"),
        share("IF(FILL(finals, 0) > 0, 100 * FILL(promoted, 0) / finals, 0)", "promoted (% of finals)"),
        share("IF(FILL(speculated, 0) > 0, 100 * FILL(promoted, 0) / speculated, 0)", "hit rate (% of speculated)"),
    ]


def speculation_row(config: StageConfig) -> list[cloudwatch.IWidget]:
    """Speculative turns: how often the final confirms them, and what the dropped ones cost."""
    state = "on" if config.speculation.enabled else "off"
    return [
        graph(
            f"Speculative turns (%; {state}, stable {config.speculation.stable_ms} ms)",
            speculation_rates(config),
            left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
        ),
        graph(
            "Speculations started and dropped (per 5 minutes)",
            [own_metric(config, name) for name in (SPECULATIONS_METRIC, SPECULATIONS_DISCARDED_METRIC)],
        ),
        graph(
            "Tokens spent on dropped speculations (per 5 minutes)",
            [own_metric(config, name) for name in (DISCARDED_INPUT_TOKENS_METRIC, DISCARDED_OUTPUT_TOKENS_METRIC)],
        ),
    ]


def turn_section(config: StageConfig) -> list[list[cloudwatch.IWidget]]:
    """Rows of the per-turn figures: dimensions service only (as the conductor emits them; the
    dashboard is the stage's), nothing per session."""
    header = cloudwatch.TextWidget(
        markdown=f"## Per turn ({config.name})\nLatency percentiles, Bedrock tokens and the prompt cache, "
        "DynamoDB requests and posts per turn, speculative turns.",
        width=3 * WIDTH,
        height=2,
    )
    timings = [graph(title, percentiles(config, name)) for title, name in TURN_TIMINGS]
    return [
        [header],
        timings[:3],
        [
            *timings[3:],
            graph(
                "DynamoDB requests and posts per turn",
                [per_turn(config, metric_id, name) for metric_id, name in WORK_METRICS],
            ),
        ],
        [
            graph("Bedrock tokens (per 5 minutes)", [own_metric(config, name) for name in TOKEN_METRICS]),
            graph(
                "Prompt cache hit ratio (%)",
                [cache_hit_ratio(config)],
                left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
            ),
        ],
        speculation_row(config),
    ]


def sharing_and_retention_row(alarms: ConductorAlarms) -> list[cloudwatch.IWidget]:
    """Fair sharing (events refused over a session's budget) and the session reaper (sessions and
    items deleted after their state expired, and how far behind the table's stream it is)."""
    config = alarms.watched.config
    fair = config.fair_share
    return [
        graph(
            f"Events refused rate_limited (per 5 minutes; {fair.max_events_per_second}/s per session)",
            [own_metric(config, EVENTS_RATE_LIMITED_METRIC)],
        ),
        graph(
            "Expired sessions reaped and their items deleted (per 5 minutes)",
            [own_metric(config, SESSIONS_REAPED_METRIC)],
            right=[own_metric(config, SESSION_ITEMS_REAPED_METRIC)],
        ),
        graph(
            "Session reaper iterator age (ms; stream records are kept 24 h)",
            [alarms.reaper_iterator_age()],
            left_annotations=[limit(REAPER_ITERATOR_AGE_LIMIT.to_milliseconds(), "alarm")],
        ),
    ]


def sessions_api_row(alarms: ConductorAlarms) -> list[cloudwatch.IWidget]:
    """The sessions API: its requests and error answers, API Gateway's latency, its 5XX rate."""
    watched = alarms.watched
    api = watched.sessions_api
    if api is None:
        raise ValueError("this stage has no sessions API")
    function = watched.functions["sessionsApi"]
    return [
        graph(
            "Sessions API requests and errors (per 5 minutes)",
            [http_api_metric(api, name) for name in ("Count", "4xx", "5xx")],
        ),
        graph(
            "Sessions API latency (ms)",
            [http_api_metric(api, "Latency", statistic=p) for p in PERCENTILES],
            right=[function.metric_duration(statistic="p99", period=PERIOD, label="function p99")],
        ),
        graph(
            "Sessions API 5XX rate (% of requests)",
            [alarms.rates["SessionsApi5xxRate"]],
            left_annotations=[limit(watched.config.alarms.error_rate_percent, "alarm")],
        ),
    ]


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
            cloudwatch.GraphWidget(
                title="Bedrock estimated USD per hour (spend guard; every token at the stage's prices)",
                left=[alarms.bedrock_usd_per_hour()],
                left_annotations=[limit(config.alarms.bedrock_usd_per_hour, "ceiling")]
                + (
                    [limit(config.alarms.bedrock_usd_per_hour_expected, "expected load")]
                    if config.alarms.bedrock_usd_per_hour_expected is not None
                    else []
                ),
                width=WIDTH,
                height=HEIGHT,
            ),
        )
        # Spend per person: a Logs Insights query over the one "turn usage" line each turn logs, not
        # a metric with a person dimension (one custom metric per person, billed monthly, unbounded).
        usage_logs = [name for name in ("message", "turn", "tool_deadline", "turn_abandoned") if name in functions]
        self.dashboard.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Spend per person (turnUsage: estimated USD at the stage's prices, tokens, turns)",
                log_group_names=[functions[name].log_group.log_group_name for name in usage_logs],
                query_lines=[
                    'filter message = "turn usage"',
                    "stats sum(turn_usage.costUsd) as usd, sum(turn_usage.inputTokens) as input,"
                    " sum(turn_usage.outputTokens) as output, count(*) as turns by principal",
                    "sort usd desc",
                    "limit 25",
                ],
                width=WIDTH * 2,
                height=HEIGHT,
            )
        )
        self.dashboard.add_widgets(
            graph(
                "Function error rates (% of invocations)",
                [alarms.rates[f"{name.capitalize()}ErrorRate"].with_(label=name) for name in functions],
                left_annotations=[limit(config.alarms.error_rate_percent, "alarm")],
            ),
            graph(
                "Lambda throttles",
                [fn.metric_throttles(statistic="Sum", period=PERIOD, label=name) for name, fn in functions.items()],
            ),
            graph("DynamoDB throttles", [alarms.table_throttles()]),
        )
        self.dashboard.add_widgets(
            graph(
                "API Gateway errors",
                [api_metric(stage, name) for name in ("IntegrationError", "ExecutionError", "ClientError")],
            ),
            graph(
                "API Gateway refusals (ClientError: throttled frames, refused sign-ins; % of the app's requests)",
                [alarms.rates["ApiClientErrorRate"]],
                left_annotations=[limit(config.alarms.client_error_rate_percent, "alarm")],
                left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
            ),
            graph(
                "Rolling summary: folds written and failed",
                [own_metric(config, name) for name in (SUMMARIES_WRITTEN_METRIC, SUMMARY_FAILURES_METRIC)],
                right=[alarms.rates["SummaryFailureRate"]],
                right_annotations=[limit(config.alarms.error_rate_percent, "alarm")],
                right_y_axis=cloudwatch.YAxisProps(min=0, max=100),
            ),
        )
        self.dashboard.add_widgets(*sharing_and_retention_row(alarms))
        if watched.sessions_api is not None:
            self.dashboard.add_widgets(*sessions_api_row(alarms))
        for row in turn_section(config):
            self.dashboard.add_widgets(*row)
