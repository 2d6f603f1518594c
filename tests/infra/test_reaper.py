"""The session reaper in the synthesized templates: the table's keys-only stream, the event source
filtered to the time to live's deletions of STATE items, the function's environment and grants, the
alarm that pages when it falls behind, the dashboard's fair-sharing and retention figures, and the
settings every function that writes history or admits events gets from the stage."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from infra.constructs.reaper import TTL_FILTER
from lambdas.session_reaper import ITEMS_METRIC, REAPED_METRIC
from shared.adapters.store import HISTORY_BACKSTOP_SECONDS
from shared.flows.conductor_service import RATE_LIMITED_METRIC
from shared.flows.session_reaper import expired_session
from tests.infra.conftest import Synth
from tests.infra.test_operations import alarm, alarm_metrics, dashboard, widget_metrics
from tests.infra.test_stack import HANDLERS, TURN_HANDLER, function_role, grants, ref_of

pytestmark = pytest.mark.infra

REAPER_HANDLER = "lambdas.session_reaper.handler"
# Every function whose store commits a session's state (and so may write history).
COMMITTING = (
    "lambdas.connect.handler",
    "lambdas.disconnect.handler",
    "lambdas.message.handler",
    "lambdas.turn.handler",
    "lambdas.turn_abandoned.handler",
    "lambdas.tool_deadline.handler",
    "lambdas.sessions_api.handler",
)


@pytest.fixture(params=["dev", "prod", "variant"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def reaper_mapping(synth: Synth) -> dict[str, Any]:
    fn_id, _ = synth.function(REAPER_HANDLER)
    (props,) = [
        mapping["Properties"]
        for mapping in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if ref_of(mapping["Properties"]["FunctionName"]) == fn_id
    ]
    return props


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Lambda event filtering for the patterns used here: every key of the pattern is in the event,
    nested objects match recursively, and a list of values matches a value equal to one of them."""
    for key, wanted in pattern.items():
        if key not in event:
            return False
        value = event[key]
        if isinstance(wanted, Mapping):
            if not isinstance(value, Mapping) or not matches(wanted, value):
                return False
        elif value not in wanted:
            return False
    return True


def record(event: str, sk: str, identity: dict[str, str] | None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "eventName": event,
        "dynamodb": {"Keys": {"pk": {"S": "SESSION#s-1"}, "sk": {"S": sk}}, "StreamViewType": "KEYS_ONLY"},
    }
    if identity is not None:
        found["userIdentity"] = identity
    return found


TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def test_the_table_streams_its_keys_to_the_reaper(any_stage: Synth) -> None:
    table_id, table = any_stage.one("AWS::DynamoDB::Table")
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "KEYS_ONLY"}
    props = reaper_mapping(any_stage)
    assert props["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert (props["BatchSize"], props["MaximumRetryAttempts"], props["BisectBatchOnFunctionError"]) == (10, 10, True)
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    [criteria] = props["FilterCriteria"]["Filters"]
    assert json.loads(criteria["Pattern"]) == TTL_FILTER
    # The two event source mappings of the stack: the deadline queue's and this one.
    assert len(any_stage.of_type("AWS::Lambda::EventSourceMapping")) == 2


@pytest.mark.parametrize(
    ("event", "sk", "identity", "reaped"),
    [
        ("REMOVE", "STATE", TTL, True),  # the time to live deleted the state
        ("REMOVE", "STATE", None, False),  # an erase through the sessions API (a user's delete)
        ("REMOVE", "STATE", {"type": "Service", "principalId": "other.amazonaws.com"}, False),
        ("REMOVE", "MSG#0000000001", TTL, False),  # a history item's own expiry
        ("MODIFY", "STATE", None, False),  # every commit
        ("INSERT", "STATE", None, False),
    ],
)
def test_the_filter_lets_through_exactly_what_the_reaper_reaps(
    event: str, sk: str, identity: dict[str, str] | None, reaped: bool
) -> None:
    """The event filter (Lambda, before any invocation) and the code (``expired_session``) agree."""
    sample = record(event, sk, identity)
    assert matches(TTL_FILTER, sample) is reaped
    assert (expired_session(sample) is not None) is reaped


def test_the_reaper_may_read_its_stream_and_delete_from_the_table_only(any_stage: Synth) -> None:
    table_id, _ = any_stage.one("AWS::DynamoDB::Table")
    _, fn = any_stage.function(REAPER_HANDLER)
    props = fn["Properties"]
    assert (props["Timeout"], props["MemorySize"]) == (300, 256)
    env = dict(props["Environment"]["Variables"])
    assert ref_of(env.pop("CONDUCTOR_TABLE")) == table_id
    config = any_stage.config
    assert env == {
        "CONDUCTOR_ENDED_RETENTION_SECONDS": str(config.sessions.ended_retention_seconds),
        "POWERTOOLS_SERVICE_NAME": config.service_name,
        "POWERTOOLS_LOG_LEVEL": config.log_level,
        "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
    }
    dynamodb = {
        (action, resource)
        for action, resource in grants(any_stage, function_role(any_stage, REAPER_HANDLER))
        if action.startswith("dynamodb:")
    }
    table, stream = f"<{table_id}.Arn>", f"<{table_id}.StreamArn>"
    assert dynamodb == {
        ("dynamodb:GetItem", table),
        ("dynamodb:Query", table),
        ("dynamodb:BatchWriteItem", table),
        ("dynamodb:DescribeStream", stream),
        ("dynamodb:GetRecords", stream),
        ("dynamodb:GetShardIterator", stream),
        ("dynamodb:ListStreams", "*"),
    }


def test_a_reaper_an_hour_behind_its_stream_pages_someone(any_stage: Synth) -> None:
    fn_id, _ = any_stage.function(REAPER_HANDLER)
    props = alarm(any_stage, "SessionReaperIteratorAge")
    assert alarm_metrics(props) == [("AWS/Lambda", "IteratorAge", {"FunctionName": f"<{fn_id}>"}, "Maximum", 300)]
    assert props["Threshold"] == 3600 * 1000  # with 23 of the stream's 24 hours left
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 3)
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert props["AlarmActions"] and props["OKActions"]
    for kind in ("ErrorRate", "ThrottleRate"):
        assert alarm(any_stage, f"Sessionreaper{kind}")["AlarmActions"]


def test_the_dashboard_shows_refused_events_and_reaped_sessions(any_stage: Synth) -> None:
    widgets = dashboard(any_stage)["widgets"]
    shown = {(namespace, name) for w in widgets if w["type"] == "metric" for namespace, name, _ in widget_metrics(w)}
    namespace = any_stage.config.metrics_namespace
    for name in (RATE_LIMITED_METRIC, REAPED_METRIC, ITEMS_METRIC):
        assert (namespace, name) in shown, name
    assert ("AWS/Lambda", "IteratorAge") in shown
    assert (RATE_LIMITED_METRIC, REAPED_METRIC, ITEMS_METRIC) == (
        "EventsRateLimited",
        "SessionsReaped",
        "SessionItemsReaped",
    )


def test_the_functions_get_the_stages_fair_sharing_and_the_history_backstop(
    dev: Synth, prod: Synth, variant: Synth
) -> None:
    assert (variant.config.fair_share.min_partial_interval_ms, variant.config.fair_share.max_events_per_second) == (
        250,
        20,
    )
    for synth in (dev, prod, variant):
        fair = synth.config.fair_share
        for handler in (HANDLERS["$default"], TURN_HANDLER):
            env = synth.function(handler)[1]["Properties"]["Environment"]["Variables"]
            assert env["CONDUCTOR_MIN_PARTIAL_INTERVAL_MS"] == str(fair.min_partial_interval_ms), handler
            assert env["CONDUCTOR_MAX_EVENTS_PER_SECOND"] == str(fair.max_events_per_second), handler
        for handler in COMMITTING:
            env = synth.function(handler)[1]["Properties"]["Environment"]["Variables"]
            assert env["CONDUCTOR_HISTORY_TTL_SECONDS"] == str(HISTORY_BACKSTOP_SECONDS) == str(400 * 86_400)
