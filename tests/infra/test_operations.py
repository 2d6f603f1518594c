"""Operations in the synthesized templates: the alarm topic, metric-math rate alarms, duration,
throttle, API and spend alarms, and the dashboard (its widgets and the metrics it names)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.constructs.dashboard import TURN_TIMINGS
from infra.constructs.monitoring import (
    CONDUCTOR_FAULT_CODES,
    SUMMARIES_WRITTEN_METRIC,
    SUMMARY_FAILURES_METRIC,
    TABLE_OPERATIONS,
)
from infra.nag import flatten_cfn_reference
from shared.flows.commit import error_metric_name
from shared.flows.conductor_service import PROMOTED_METRIC, SPECULATED_METRIC
from shared.flows.speculation_watcher import (
    DISCARDED_INPUT_METRIC,
    DISCARDED_METRIC,
    DISCARDED_OUTPUT_METRIC,
    SPECULATIONS_METRIC,
)
from shared.wire.protocol import SENT_ERROR_CODES, SERVER_ERROR_CODES, ErrorCode
from tests.infra.conftest import Synth

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
RATE_ALARMS = (
    "ConductorErrorRate",
    "BedrockErrorRate",
    "TurnsAbandonedRate",
    "SummaryFailureRate",
    "ApiIntegrationErrorRate",
)


@pytest.fixture(params=["dev", "prod", "variant"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {name: res["Properties"] for name, res in synth.of_type("AWS::CloudWatch::Alarm").items()}


def alarm(synth: Synth, construct_id: str) -> dict[str, Any]:
    found = [props for name, props in alarms(synth).items() if name.startswith(f"Alarms{construct_id}")]
    assert len(found) == 1, construct_id
    return found[0]


def alarm_metrics(props: dict[str, Any]) -> list[tuple[str, str, dict[str, str], str, int]]:
    """(namespace, name, dimensions, statistic, period) of every metric an alarm reads."""
    if "MetricName" in props:
        dims = {d["Name"]: flatten_cfn_reference(d["Value"]) for d in props.get("Dimensions", [])}
        stat = props.get("Statistic") or props.get("ExtendedStatistic")
        return [(props["Namespace"], props["MetricName"], dims, stat, props["Period"])]
    found = []
    for query in props["Metrics"]:
        if "MetricStat" in query:
            stat = query["MetricStat"]
            metric = stat["Metric"]
            dims = {d["Name"]: flatten_cfn_reference(d["Value"]) for d in metric.get("Dimensions", [])}
            found.append((metric["Namespace"], metric["MetricName"], dims, stat["Stat"], stat["Period"]))
    return found


def expression(props: dict[str, Any]) -> str:
    [returned] = [q for q in props["Metrics"] if q.get("ReturnData", True)]
    return returned["Expression"]


def test_every_alarm_notifies_the_topic_when_it_fires_and_when_it_clears(any_stage: Synth) -> None:
    topic_id, _ = any_stage.one("AWS::SNS::Topic")
    found = alarms(any_stage)
    assert len(found) >= 15
    for name, props in found.items():
        assert [flatten_cfn_reference(a) for a in props["AlarmActions"]] == [f"<{topic_id}>"], name
        assert [flatten_cfn_reference(a) for a in props["OKActions"]] == [f"<{topic_id}>"], name
        assert props["TreatMissingData"] == "notBreaching", name
        assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", name
        assert props["AlarmDescription"].startswith(f"VoiceIDE conductor ({any_stage.config.name}): "), name


def test_error_rates_are_metric_math_over_turns_in_3_of_5_periods(any_stage: Synth) -> None:
    config = any_stage.config
    own = (config.metrics_namespace, {"service": config.service_name}, "Sum", 300)
    for construct_id, failures in (
        ("ConductorErrorRate", {error_metric_name(code) for code in CONDUCTOR_FAULT_CODES}),
        ("BedrockErrorRate", {error_metric_name(ErrorCode.BEDROCK_ERROR)}),
        ("TurnsAbandonedRate", {"TurnsAbandoned"}),
    ):
        props = alarm(any_stage, construct_id)
        read = alarm_metrics(props)
        assert {name for _, name, _, _, _ in read} == failures | {"Turns"}
        assert all((ns, dims, stat, period) == own for ns, _, dims, stat, period in read)
        assert expression(props).startswith("IF((FILL(turns, 0)) > 0, 100 * (")
        assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 3)
        assert props["Threshold"] == config.alarms.error_rate_percent
    assert {error_metric_name(code) for code in CONDUCTOR_FAULT_CODES} == {
        "ErrorEvents.conductor_error",
        "ErrorEvents.handler_error",
    }


def test_failed_summary_folds_alarm_as_a_share_of_the_folds(any_stage: Synth) -> None:
    """A fold that fails leaves the conversation going but forgetting what left the window: e.g. a
    role that may stream but not call Converse fails every fold, and only this alarm says so."""
    config = any_stage.config
    props = alarm(any_stage, "SummaryFailureRate")
    own = (config.metrics_namespace, {"service": config.service_name}, "Sum", 300)
    read = alarm_metrics(props)
    assert {name for _, name, _, _, _ in read} == {SUMMARY_FAILURES_METRIC, SUMMARIES_WRITTEN_METRIC}
    assert all((ns, dims, stat, period) == own for ns, _, dims, stat, period in read)
    failures, attempts = "FILL(summary_failures, 0)", "FILL(summaries_written, 0) + FILL(summary_failures, 0)"
    assert expression(props) == (
        f"IF(({attempts}) > 0, 100 * ({failures}) / ({attempts}), IF(({failures}) > 0, 100, 0))"
    )
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 3)
    assert props["Threshold"] == config.alarms.error_rate_percent
    # The conductor emits both counts under these names (shared/flows/memory_keeper.py).
    keeper = (ROOT / "shared" / "flows" / "memory_keeper.py").read_text(encoding="utf-8")
    assert f'"{SUMMARY_FAILURES_METRIC}"' in keeper and f'"{SUMMARIES_WRITTEN_METRIC}"' in keeper


def test_function_error_and_throttle_rates_per_invocation(any_stage: Synth) -> None:
    for fn_id in any_stage.of_type("AWS::Lambda::Function"):
        rates = {}
        for props in alarms(any_stage).values():
            read = alarm_metrics(props)
            if all(
                ns == "AWS/Lambda"
                and dims == {"FunctionName": f"<{fn_id}>"}
                and name not in ("Duration", "IteratorAge")
                for ns, name, dims, _, _ in read
            ):
                rates[frozenset(name for _, name, _, _, _ in read)] = props
        assert set(rates) == {frozenset({"Errors", "Invocations"}), frozenset({"Throttles", "Invocations"})}, fn_id
        for props in rates.values():
            assert "100 *" in expression(props)
            assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 3)


def test_duration_alarms_sit_at_the_configured_share_of_each_timeout(any_stage: Synth) -> None:
    config = any_stage.config
    share = config.alarms.duration_percent_of_timeout / 100
    for construct_id, handler, timeout in (
        ("TurnDurationNearTimeout", "lambdas.turn.handler", config.lambdas.turn_timeout_seconds),
        ("MessageDurationNearTimeout", "lambdas.message.handler", config.lambdas.message_timeout_seconds),
    ):
        fn_id, fn = any_stage.function(handler)
        assert fn["Properties"]["Timeout"] == timeout
        props = alarm(any_stage, construct_id)
        assert alarm_metrics(props) == [("AWS/Lambda", "Duration", {"FunctionName": f"<{fn_id}>"}, "p99", 300)]
        assert props["Threshold"] == pytest.approx(timeout * 1000 * share)
        assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 3)


def test_table_throttles_cover_every_operation_of_the_store_and_the_sessions_records(any_stage: Synth) -> None:
    table_id, _ = any_stage.one("AWS::DynamoDB::Table")
    read = alarm_metrics(alarm(any_stage, "TableThrottles"))
    assert all(ns == "AWS/DynamoDB" and dims["TableName"] == f"<{table_id}>" for ns, _, dims, _, _ in read)
    throttled = {dims["Operation"] for _, name, dims, _, _ in read if name == "ThrottledRequests"}
    assert len(throttled) == len(TABLE_OPERATIONS)
    assert {name for _, name, _, _, _ in read} == {"ThrottledRequests", "ReadThrottleEvents", "WriteThrottleEvents"}
    called = {
        "".join(part.title() for part in name.split("_"))
        for module in ("store.py", "session_records.py")
        for name in re.findall(r"_client\.(\w+)\(", (ROOT / "shared" / "adapters" / module).read_text(encoding="utf-8"))
    }
    assert called == throttled
    # An alarm's metric math takes at most 10 metrics.
    assert len(read) <= 10


def test_api_gateway_alarms_read_the_websocket_stage_metrics(any_stage: Synth) -> None:
    api_id = any_stage.api_id("WEBSOCKET")
    stage = {"ApiId": f"<{api_id}>", "Stage": any_stage.config.name}
    assert alarm_metrics(alarm(any_stage, "ApiExecutionErrors")) == [
        ("AWS/ApiGateway", "ExecutionError", stage, "Sum", 300)
    ]
    read = alarm_metrics(alarm(any_stage, "ApiIntegrationErrorRate"))
    assert ("AWS/ApiGateway", "IntegrationError", stage, "Sum", 300) in read
    routes = {f"<{any_stage.function(f'lambdas.{name}.handler')[0]}>" for name in ("connect", "message", "disconnect")}
    assert {dims["FunctionName"] for _, name, dims, _, _ in read if name == "Invocations"} == routes


def spend_of(expression_text: str, tokens: dict[str, float]) -> float:
    """The spend alarm's expression evaluated over ``tokens`` (metric id -> an hour's sum; a missing
    metric is no data, which FILL makes 0)."""
    filled = re.sub(r"FILL\((\w+), 0\)", lambda m: repr(float(tokens.get(m.group(1), 0.0))), expression_text)
    return arithmetic(ast.parse(filled, mode="eval").body)


def arithmetic(node: ast.expr) -> float:
    """A CloudWatch metric math expression's arithmetic (numbers, + - * /); anything else fails."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp):
        left, right = arithmetic(node.left), arithmetic(node.right)
        operations = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        if isinstance(node.op, ast.Div):
            return left / right
        return operations[type(node.op)]
    raise AssertionError(f"not arithmetic: {ast.dump(node)}")


def test_the_spend_guard_counts_every_token_at_the_stages_prices(dev: Synth, prod: Synth) -> None:
    """Dropped speculations cost input tokens: the alarm weighs input (the turns' and the dropped
    speculations'), cache writes and reads, and output (both too) by the stage's prices, per hour."""
    assert dev.config.alarms.bedrock_usd_per_hour != prod.config.alarms.bedrock_usd_per_hour
    for synth in (dev, prod):
        props = alarm(synth, "BedrockSpendPerHour")
        assert props["Threshold"] == synth.config.alarms.bedrock_usd_per_hour
        assert props["EvaluationPeriods"] == 1
        own = {"service": synth.config.service_name}
        read = alarm_metrics(props)
        assert sorted(read) == sorted(
            (synth.config.metrics_namespace, name, own, "Sum", 3600)
            for name in (
                "InputTokens",
                "OutputTokens",
                "CacheReadInputTokens",
                "CacheWriteInputTokens",
                DISCARDED_INPUT_METRIC,
                DISCARDED_OUTPUT_METRIC,
            )
        )
        ids = {q["MetricStat"]["Metric"]["MetricName"]: q["Id"] for q in props["Metrics"] if "MetricStat" in q}
        prices = synth.config.bedrock.prices
        assert prices is not None
        hour = {
            "InputTokens": 2_000_000,
            DISCARDED_INPUT_METRIC: 3_000_000,
            "CacheWriteInputTokens": 500_000,
            "CacheReadInputTokens": 10_000_000,
            "OutputTokens": 400_000,
            DISCARDED_OUTPUT_METRIC: 100_000,
        }
        expected = 5 * prices.input + 0.5 * prices.cache_write + 10 * prices.cache_read + 0.5 * prices.output
        got = spend_of(expression(props), {ids[name]: value for name, value in hour.items()})
        assert got == pytest.approx(expected)
        # A quiet hour of dropped speculations alone still costs: input tokens count.
        only_dropped = spend_of(expression(props), {ids[DISCARDED_INPUT_METRIC]: 1_000_000})
        assert only_dropped == pytest.approx(prices.input)


def test_prod_alarms_at_its_expected_load_below_the_spend_guard_and_caps_each_person(dev: Synth, prod: Synth) -> None:
    """The spend guard ($3,000/h) sits above prod's full-load spend: a second alarm tells someone when an
    hour costs what the expected load costs, on the same estimate; and one person's day has a ceiling."""
    guard, expected = alarm(prod, "BedrockSpendPerHour"), alarm(prod, "BedrockSpendAtExpectedLoad")
    assert expected["Threshold"] == prod.config.alarms.bedrock_usd_per_hour_expected
    assert expected["Threshold"] < guard["Threshold"] == prod.config.alarms.bedrock_usd_per_hour
    assert expected["Metrics"] == guard["Metrics"] and expected["EvaluationPeriods"] == 1
    assert expected["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert expected["AlarmActions"] == guard["AlarmActions"]  # it reaches someone too
    assert not [name for name in alarms(dev) if name.startswith("AlarmsBedrockSpendAtExpectedLoad")]
    for synth, ceiling in ((dev, 0.0), (prod, prod.config.daily_budget_usd)):
        for handler in ("lambdas.message.handler", "lambdas.turn.handler"):
            env = synth.function(handler)[1]["Properties"]["Environment"]["Variables"]
            assert float(env["CONDUCTOR_DAILY_BUDGET_USD"]) == ceiling
    assert prod.config.daily_budget_usd > 0


def test_api_gateway_refusals_alarm_as_a_rate_of_the_apps_requests(any_stage: Synth) -> None:
    """ClientError: API Gateway answered 4XX before any function ran (a throttled frame is a 429, a
    refused sign-in a 401/403), per request of the app (refused ones, connects and $default frames)."""
    props = alarm(any_stage, "ApiClientErrorRate")
    _, stage = any_stage.one_of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET")
    api_dims = {"ApiId": flatten_cfn_reference(stage["Properties"]["ApiId"]), "Stage": any_stage.config.name}
    read = alarm_metrics(props)
    assert ("AWS/ApiGateway", "ClientError", api_dims, "Sum", 300) in read
    assert ("AWS/ApiGateway", "ConnectCount", api_dims, "Sum", 300) in read
    message_fn = f"<{any_stage.function('lambdas.message.handler')[0]}>"
    assert [dims["FunctionName"] for _, name, dims, _, _ in read if name == "Invocations"] == [message_fn]
    assert props["Threshold"] == any_stage.config.alarms.client_error_rate_percent
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 3)
    text = expression(props)
    assert text.startswith("IF((FILL(client_errors, 0) + FILL(connects, 0) + FILL(frames, 0)) > 0, 100 * (")


def test_sent_error_codes_are_every_code_the_conductor_sends() -> None:
    """The dashboard graphs one metric per code: a code the conductor starts sending must be on it."""
    sources = [*ROOT.glob("shared/**/*.py"), *ROOT.glob("lambdas/*.py")]
    used = {
        ErrorCode[name]
        for path in sources
        if path.name != "protocol.py"
        for name in re.findall(r"ErrorCode\.([A-Z_]+)", path.read_text(encoding="utf-8"))
    }
    used -= {ErrorCode.AUDIO_OUTPUT_INTERRUPTED}  # the app's barge-in, received
    assert used | set(SERVER_ERROR_CODES) <= set(SENT_ERROR_CODES)


# ---- dashboard ---------------------------------------------------------------------------------


def dashboard(synth: Synth) -> dict[str, Any]:
    """The dashboard body as JSON, with references shown as ``<LogicalId>``."""
    _, resource = synth.one("AWS::CloudWatch::Dashboard")
    assert resource["Properties"]["DashboardName"] == synth.config.stack_name
    delimiter, parts = resource["Properties"]["DashboardBody"]["Fn::Join"]
    return json.loads(delimiter.join(part if isinstance(part, str) else flatten_cfn_reference(part) for part in parts))


def widget_metrics(widget: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(namespace, metric name, stat) of a graph's metrics; "..." rows repeat the previous row's."""
    found: list[tuple[str, str, str]] = []
    previous: list[Any] = []
    for row in widget["properties"].get("metrics", []):
        if isinstance(row[-1], dict) and "expression" in row[-1]:
            continue
        options = row[-1] if isinstance(row[-1], dict) else {}
        cells = [cell for cell in row if not isinstance(cell, dict)]
        padded = [*previous, *[None] * len(cells)][: len(cells)]
        cells = [prev if cell == "." else cell for cell, prev in zip(cells, padded, strict=True)]
        previous = cells
        found.append((cells[0], cells[1], options.get("stat", widget["properties"].get("stat", ""))))
    return found


def test_dashboard_graphs_turns_errors_latency_tokens_and_connections(any_stage: Synth) -> None:
    body = dashboard(any_stage)
    widgets = body["widgets"]
    assert all(w["properties"].get("title") for w in widgets if w["type"] != "text")
    graphs = {w["properties"]["title"]: widget_metrics(w) for w in widgets if w["type"] == "metric"}
    ns = any_stage.config.metrics_namespace

    assert graphs["Turns (per 5 minutes)"] == [(ns, "Turns", "Sum")]
    assert {(m, s) for _, m, s in graphs["Connections and messages (API Gateway)"]} == {
        ("ConnectCount", "Sum"),
        ("MessageCount", "Sum"),
    }
    assert {m for _, m, _ in graphs["Error events sent to the app, by code"]} == {
        error_metric_name(code) for code in SENT_ERROR_CODES
    }
    for title in ("Turn runner duration (ms)", "$default duration (ms)"):
        assert {(m, s) for _, m, s in graphs[title]} == {("Duration", p) for p in ("p50", "p90", "p99")}
    assert {m for _, m, _ in graphs["API Gateway errors"]} == {"IntegrationError", "ExecutionError", "ClientError"}
    rates = next(w for w in widgets if w["properties"].get("title") == "Error rates (% of turns)")
    assert len([row for row in rates["properties"]["metrics"] if "expression" in row[-1]]) == 3

    spend = next(w for w in widgets if w["properties"].get("title", "").startswith("Bedrock estimated USD per hour"))
    assert spend["properties"]["annotations"]["horizontal"][0]["value"] == any_stage.config.alarms.bedrock_usd_per_hour
    assert len([row for row in spend["properties"]["metrics"] if "expression" in row[-1]]) == 1
    refusals = next(w for w in widgets if w["properties"].get("title", "").startswith("API Gateway refusals"))
    assert refusals["properties"]["annotations"]["horizontal"][0]["value"] == (
        any_stage.config.alarms.client_error_rate_percent
    )
    failures = next(w for w in widgets if w["properties"].get("title") == "Conductor failure counts")
    counted = [m for _, m, _ in widget_metrics(failures)]
    assert "WatcherFailures" in counted and "TurnsAbandoned" in counted  # apart: a watcher is no turn
    assert len(counted) == len(set(counted))
    assert not [row for row in failures["properties"]["metrics"] if "expression" in row[-1]]  # no sum
    [status] = [w for w in widgets if w["type"] == "alarm"]
    assert len(status["properties"]["alarms"]) == len(alarms(any_stage))

    summary = next(w for w in widgets if w["properties"].get("title", "").startswith("Rolling summary"))
    assert {(m, s) for _, m, s in widget_metrics(summary)} == {
        (SUMMARIES_WRITTEN_METRIC, "Sum"),
        (SUMMARY_FAILURES_METRIC, "Sum"),
    }
    [rate] = [row[-1] for row in summary["properties"]["metrics"] if "expression" in row[-1]]
    assert rate["yAxis"] == "right" and "summary_failures" in rate["expression"]
    assert summary["properties"]["annotations"]["horizontal"][0]["value"] == any_stage.config.alarms.error_rate_percent


def graph_rows(widget: dict[str, Any]) -> list[tuple[str, str, dict[str, str], str, str | None]]:
    """(namespace, metric, dimensions, stat, id) of every metric row of a graph, hidden ones too."""
    found = []
    for row in widget["properties"].get("metrics", []):
        if isinstance(row[-1], dict) and "expression" in row[-1]:
            continue
        options = row[-1] if isinstance(row[-1], dict) else {}
        cells = [cell for cell in row if not isinstance(cell, dict)]
        assert "." not in cells, "rows are written out in full"
        dims = dict(zip(cells[2::2], cells[3::2], strict=True))
        found.append((cells[0], cells[1], dims, options.get("stat", ""), options.get("id")))
    return found


def expressions(widget: dict[str, Any]) -> list[str]:
    return [row[-1]["expression"] for row in widget["properties"]["metrics"] if "expression" in row[-1]]


def test_dashboard_has_a_per_turn_section_of_percentiles_tokens_and_work(any_stage: Synth) -> None:
    widgets = dashboard(any_stage)["widgets"]
    by_title = {w["properties"].get("title"): w for w in widgets if w["type"] == "metric"}
    config = any_stage.config
    own = {"service": config.service_name}
    [header] = [w for w in widgets if w["type"] == "text"]
    assert header["properties"]["markdown"].startswith(f"## Per turn ({config.name})")
    assert header["width"] == 24
    section = [w for w in widgets if w["y"] > header["y"]]

    timings = {title: name for title, name in TURN_TIMINGS}
    assert set(timings.values()) == {
        "FirstPartialMs",
        "FirstSpeakMs",
        "ModelFirstTokenMs",
        "TurnRunMs",
        "ToolRoundTripMs",
    }
    for title, name in timings.items():
        assert by_title[title] in section
        assert graph_rows(by_title[title]) == [
            (config.metrics_namespace, name, own, "p50", None),
            (config.metrics_namespace, name, own, "p99", None),
        ]
        assert by_title[title]["properties"]["period"] == 300

    tokens = by_title["Bedrock tokens (per 5 minutes)"]
    assert tokens in section
    assert [(m, dims, stat) for _, m, dims, stat, _ in graph_rows(tokens)] == [
        (name, own, "Sum") for name in ("InputTokens", "OutputTokens", "CacheReadInputTokens", "CacheWriteInputTokens")
    ]

    ratio = by_title["Prompt cache hit ratio (%)"]
    [expression] = expressions(ratio)
    hidden = {row_id: (m, dims, stat) for _, m, dims, stat, row_id in graph_rows(ratio)}
    assert hidden == {
        "cache_read": ("CacheReadInputTokens", own, "Sum"),
        "cache_write": ("CacheWriteInputTokens", own, "Sum"),
        "uncached": ("InputTokens", own, "Sum"),
    }
    total = "FILL(cache_read, 0) + FILL(cache_write, 0) + FILL(uncached, 0)"
    assert expression == f"IF(({total}) > 0, 100 * FILL(cache_read, 0) / ({total}), 0)"
    assert ratio["properties"]["yAxis"]["left"] == {"min": 0, "max": 100}

    work = by_title["DynamoDB requests and posts per turn"]
    assert expressions(work) == [
        "IF(FILL(turns, 0) > 0, FILL(dynamodb_requests, 0) / turns, 0)",
        "IF(FILL(turns, 0) > 0, FILL(posts, 0) / turns, 0)",
    ]
    assert {row_id: m for _, m, _, _, row_id in graph_rows(work)} == {
        "dynamodb_requests": "DynamoDBRequests",
        "turns": "Turns",
        "posts": "Posts",
    }


def test_dashboard_metrics_carry_no_per_session_dimension(any_stage: Synth) -> None:
    """Own metrics are keyed by the service alone: one time series per stage, whatever the traffic."""
    ns = any_stage.config.metrics_namespace
    for widget in dashboard(any_stage)["widgets"]:
        if widget["type"] != "metric":
            continue
        for namespace, name, dims, _, _ in graph_rows(widget):
            if namespace == ns:
                assert dims == {"service": any_stage.config.service_name}, (widget["properties"]["title"], name)


def test_dashboard_widgets_do_not_overlap(any_stage: Synth) -> None:
    cells: set[tuple[int, int]] = set()
    for widget in dashboard(any_stage)["widgets"]:
        area = {
            (x, y)
            for x in range(widget["x"], widget["x"] + widget["width"])
            for y in range(widget["y"], widget["y"] + widget["height"])
        }
        assert not cells & area, widget["properties"].get("title")
        assert widget["x"] + widget["width"] <= 24
        cells |= area


def test_dashboard_shows_how_often_speculations_are_confirmed_and_what_dropped_ones_cost(any_stage: Synth) -> None:
    widgets = dashboard(any_stage)["widgets"]
    config = any_stage.config
    own = {"service": config.service_name}
    state = "on" if config.speculation.enabled else "off"
    by_title = {w["properties"].get("title"): w for w in widgets if w["type"] == "metric"}
    rates = by_title[f"Speculative turns (%; {state}, stable {config.speculation.stable_ms} ms)"]
    assert expressions(rates) == [
        "IF(FILL(finals, 0) > 0, 100 * FILL(speculated, 0) / finals, 0)",
        "IF(FILL(finals, 0) > 0, 100 * FILL(promoted, 0) / finals, 0)",
        "IF(FILL(speculated, 0) > 0, 100 * FILL(promoted, 0) / speculated, 0)",
    ]
    # The names are the ones the conductor emits: $default per final, the watcher per speculation.
    assert {row_id: (m, stat) for _, m, _, stat, row_id in graph_rows(rates)} == {
        "speculated": (SPECULATED_METRIC, "Sum"),
        "promoted": (PROMOTED_METRIC, "Sum"),
        "finals": (SPECULATED_METRIC, "SampleCount"),
    }
    started = by_title["Speculations started and dropped (per 5 minutes)"]
    assert [(m, dims, stat) for _, m, dims, stat, _ in graph_rows(started)] == [
        (SPECULATIONS_METRIC, own, "Sum"),
        (DISCARDED_METRIC, own, "Sum"),
    ]
    spent = by_title["Tokens spent on dropped speculations (per 5 minutes)"]
    assert [m for _, m, _, _, _ in graph_rows(spent)] == [DISCARDED_INPUT_METRIC, DISCARDED_OUTPUT_METRIC]
