"""The tool-call deadline queue in the synthesized templates: queue, dead letters, consumer, grants, alarm."""

from __future__ import annotations

from typing import Any

import pytest

from infra.constructs.deadlines import QUEUE_URL_ENV
from infra.constructs.functions import TABLE_ACTIONS
from infra.nag import flatten_cfn_reference
from tests.infra.conftest import Synth
from tests.infra.test_stack import (
    TURN_HANDLER,
    function_role,
    grants,
    ref_of,
    service_grants,
)

pytestmark = pytest.mark.infra

DEADLINE_HANDLER = "lambdas.tool_deadline.handler"
SEND = "sqs:SendMessage"
CONSUME = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}


@pytest.fixture(params=["dev", "prod", "variant"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def queues(synth: Synth) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    """(queue, dead-letter queue): the one with a redrive policy, and the one it names."""
    found = synth.of_type("AWS::SQS::Queue")
    assert len(found) == 2, sorted(found)
    (queue_id,) = [name for name, res in found.items() if "RedrivePolicy" in res["Properties"]]
    dlq_id = ref_of(found[queue_id]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"])
    assert dlq_id in found and dlq_id != queue_id
    return (queue_id, found[queue_id]), (dlq_id, found[dlq_id])


def test_the_queue_is_encrypted_ssl_only_and_hands_failures_to_a_dead_letter_queue(any_stage: Synth) -> None:
    (queue_id, queue), (dlq_id, dlq) = queues(any_stage)
    assert queue["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 3
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    _, fn = any_stage.function(DEADLINE_HANDLER)
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * fn["Properties"]["Timeout"]
    for logical_id, res in ((queue_id, queue), (dlq_id, dlq)):
        assert res["Properties"].get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in res["Properties"]
        policies = [
            p["Properties"]
            for p in any_stage.of_type("AWS::SQS::QueuePolicy").values()
            if any(ref_of(q) == logical_id for q in p["Properties"]["Queues"])
        ]
        statements = [s for p in policies for s in p["PolicyDocument"]["Statement"]]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        ), f"{logical_id} accepts requests without TLS"


def test_the_deadline_function_consumes_the_queue_in_batches_with_partial_failures(any_stage: Synth) -> None:
    (queue_id, _), _ = queues(any_stage)
    fn_id, fn = any_stage.function(DEADLINE_HANDLER)
    # The queue's mapping; the other one is the session reaper's (the table's stream).
    (props,) = [
        mapping["Properties"]
        for mapping in any_stage.of_type("AWS::Lambda::EventSourceMapping").values()
        if ref_of(mapping["Properties"]["FunctionName"]) == fn_id
    ]
    assert ref_of(props["FunctionName"]) == fn_id
    assert ref_of(props["EventSourceArn"]) == queue_id
    assert props["BatchSize"] == 10
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert fn["Properties"]["Timeout"] == 30
    assert fn["Properties"]["MemorySize"] == any_stage.config.lambdas.handler_memory_mb
    _, turn = any_stage.function(TURN_HANDLER)
    for key in ("Layers", "Runtime", "Architectures", "TracingConfig"):
        assert fn["Properties"][key] == turn["Properties"][key], key
    assert fn["Properties"]["Code"] == turn["Properties"]["Code"]


def test_runner_and_deadline_function_find_the_queue(any_stage: Synth) -> None:
    (queue_id, _), _ = queues(any_stage)
    turn_id, turn = any_stage.function(TURN_HANDLER)
    _, fn = any_stage.function(DEADLINE_HANDLER)
    for props in (turn["Properties"], fn["Properties"]):
        assert ref_of(props["Environment"]["Variables"][QUEUE_URL_ENV]) == queue_id
    env = fn["Properties"]["Environment"]["Variables"]
    assert ref_of(env["CONDUCTOR_TURN_FUNCTION"]) == turn_id
    assert env["CONDUCTOR_TABLE"] == turn["Properties"]["Environment"]["Variables"]["CONDUCTOR_TABLE"]


def test_the_runner_may_only_send_and_the_deadline_function_send_and_consume(any_stage: Synth) -> None:
    (queue_id, _), (dlq_id, _) = queues(any_stage)
    queue_arn = flatten_cfn_reference({"Fn::GetAtt": [queue_id, "Arn"]})
    runner = service_grants(any_stage, TURN_HANDLER, "sqs")
    consumer = service_grants(any_stage, DEADLINE_HANDLER, "sqs")
    assert (SEND, queue_arn) in runner
    assert not {action for action, _ in runner} & CONSUME
    assert {(action, queue_arn) for action in (SEND, *CONSUME)} <= consumer
    assert all(resource == queue_arn for _, resource in runner | consumer), "nothing on the dead letters, no wildcard"
    # $default arms the deadline of a tool result that started to arrive in parts: send only
    assert service_grants(any_stage, "lambdas.message.handler", "sqs") == {(SEND, queue_arn)}
    for handler in ("lambdas.connect.handler", "lambdas.disconnect.handler"):
        assert not service_grants(any_stage, handler, "sqs"), handler
    assert dlq_id not in str(runner | consumer)


def test_the_deadline_function_reads_the_table_posts_and_launches_only_the_runner(any_stage: Synth) -> None:
    turn_id, _ = any_stage.function(TURN_HANDLER)
    role = function_role(any_stage, DEADLINE_HANDLER)
    table_actions = {action for action, _ in grants(any_stage, role) if action.startswith("dynamodb:")}
    assert table_actions == set(TABLE_ACTIONS["toolDeadline"])
    invokes = service_grants(any_stage, DEADLINE_HANDLER, "lambda")
    assert invokes == {("lambda:InvokeFunction", flatten_cfn_reference({"Fn::GetAtt": [turn_id, "Arn"]}))}
    posts = service_grants(any_stage, DEADLINE_HANDLER, "execute-api")
    assert {action for action, _ in posts} == {"execute-api:ManageConnections"}
    assert all(resource.endswith(f"/{any_stage.config.name}/POST/@connections/*") for _, resource in posts), posts


def test_dead_letters_alarm_the_stage_topic_when_they_fire_and_clear(any_stage: Synth) -> None:
    _, (dlq_id, _) = queues(any_stage)
    (topic_id,) = any_stage.of_type("AWS::SNS::Topic")
    found = [
        res["Properties"]
        for res in any_stage.of_type("AWS::CloudWatch::Alarm").values()
        if res["Properties"].get("Namespace") == "AWS/SQS"
    ]
    assert len(found) == 1
    (alarm,) = found
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert [flatten_cfn_reference(d["Value"]) for d in alarm["Dimensions"]] == [
        flatten_cfn_reference({"Fn::GetAtt": [dlq_id, "QueueName"]})
    ]
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert [ref_of(a) for a in alarm["AlarmActions"]] == [topic_id]
    assert [ref_of(a) for a in alarm["OKActions"]] == [topic_id]
