"""Deadline alarms on SQS (moto), the tool-deadline handler and the local queue poller."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.sqs.deadline_queue import DeadlineQueuePoller, failed_ids, sqs_event
from lambdas import tool_deadline
from shared.adapters.deadline_alarms import MAX_DELAY_S, DeadlineAlarm, SqsDeadlineAlarms, delay_seconds

REGION = "us-east-1"
ENDPOINT = "https://abc.execute-api.us-east-1.amazonaws.com/prod"


class StrictSqs:
    """moto's SQS, refusing a ``DelaySeconds`` outside 0..900 as SQS does, recording the sends."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **params: Any) -> Any:
        delay = params.get("DelaySeconds", 0)
        if not 0 <= delay <= MAX_DELAY_S:
            error = {"Code": "InvalidParameterValue", "Message": f"Value {delay} for parameter DelaySeconds is invalid"}
            raise ClientError({"Error": error}, "SendMessage")
        self.sent.append(params)
        return self.client.send_message(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sqs() -> Iterator[StrictSqs]:
    with mock_aws():
        yield StrictSqs(boto3.client("sqs", region_name=REGION))


@pytest.fixture
def queue_url(sqs: StrictSqs) -> str:
    return sqs.create_queue(QueueName="deadlines")["QueueUrl"]


def received(sqs: StrictSqs, queue_url: str) -> list[dict[str, Any]]:
    return sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])


# ---- the alarm ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("due_in", "delay"), [(-30.0, 0), (0.0, 0), (0.2, 1), (59.0, 59), (59.01, 60), (900.0, 900), (3600.0, 900)]
)
def test_the_delay_is_never_early_and_within_sqs_limits(due_in: float, delay: int) -> None:
    assert delay_seconds(1_000_000.0 + due_in, 1_000_000.0) == delay


def test_an_alarm_is_a_delayed_message_naming_the_session_endpoint_and_deadline(sqs: StrictSqs, queue_url: str) -> None:
    alarms = SqsDeadlineAlarms(sqs, queue_url, clock=Clock(1_000.0))
    alarms.set_alarm("s-1", ENDPOINT, 1_060.5)
    alarms.set_alarm("s-2", ENDPOINT, 99_000.0)  # past SQS's 15 minutes: sent with the maximum

    assert [params["DelaySeconds"] for params in sqs.sent] == [61, MAX_DELAY_S]
    assert json.loads(sqs.sent[0]["MessageBody"]) == {"sessionId": "s-1", "endpoint": ENDPOINT, "dueAt": 1_060.5}
    assert received(sqs, queue_url) == [], "a delayed message is not visible before its delay"


def test_a_deadline_already_past_is_visible_at_once(sqs: StrictSqs, queue_url: str) -> None:
    SqsDeadlineAlarms(sqs, queue_url).set_alarm("s-1", ENDPOINT, 10.0)

    (message,) = received(sqs, queue_url)
    assert DeadlineAlarm.model_validate_json(message["Body"]) == DeadlineAlarm(
        session_id="s-1", endpoint=ENDPOINT, due_at=10.0
    )


# ---- the handler -------------------------------------------------------------------------


class FakeService:
    def __init__(self, next_due: float | None = None, fail_for: str = "") -> None:
        self.next_due = next_due
        self.fail_for = fail_for
        self.expired: list[tuple[str, str]] = []

    def expire_tool_calls(self, session_id: str, endpoint: str) -> float | None:
        if session_id == self.fail_for:
            raise RuntimeError("table unavailable")
        self.expired.append((session_id, endpoint))
        return self.next_due


@pytest.fixture
def wired(
    sqs: StrictSqs, queue_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[SqsDeadlineAlarms, FakeService, Clock]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    clock = Clock(5_000.0)
    alarms = SqsDeadlineAlarms(sqs, queue_url, clock=clock)
    fake = FakeService()
    monkeypatch.setattr(tool_deadline, "deadline_alarms", lambda: alarms)
    monkeypatch.setattr(tool_deadline, "service", lambda: fake)
    return alarms, fake, clock


def event_of(*bodies: str) -> dict[str, Any]:
    messages = [
        {"MessageId": f"m-{index}", "ReceiptHandle": f"r-{index}", "Body": body} for index, body in enumerate(bodies)
    ]
    return sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:deadlines", REGION)


def run(event: dict[str, Any]) -> dict[str, Any]:
    return tool_deadline.handler(event, LocalLambdaContext(function_name="tool-deadline", timeout_seconds=30))


def body(session_id: str, due_at: float) -> str:
    return DeadlineAlarm(session_id=session_id, endpoint=ENDPOINT, due_at=due_at).to_body()


def test_a_due_alarm_expires_the_calls_and_arms_the_next_deadline(
    wired: tuple[SqsDeadlineAlarms, FakeService, Clock], sqs: StrictSqs
) -> None:
    _, fake, clock = wired
    fake.next_due = clock.now + 600

    response = run(event_of(body("s-1", clock.now - 0.5), body("s-2", clock.now + 0.8)))

    assert response == {"batchItemFailures": []}
    assert fake.expired == [("s-1", ENDPOINT), ("s-2", ENDPOINT)], "within a second of the deadline counts as due"
    assert [params["DelaySeconds"] for params in sqs.sent] == [600, 600]


def test_an_alarm_not_yet_due_is_sent_again_with_what_remains(
    wired: tuple[SqsDeadlineAlarms, FakeService, Clock], sqs: StrictSqs
) -> None:
    _, fake, clock = wired

    response = run(event_of(body("s-1", clock.now + 1_200), body("s-2", clock.now + 300)))

    assert response == {"batchItemFailures": []}
    assert fake.expired == []
    assert [params["DelaySeconds"] for params in sqs.sent] == [MAX_DELAY_S, 300]
    assert json.loads(sqs.sent[0]["MessageBody"])["dueAt"] == clock.now + 1_200


def test_a_malformed_body_is_dropped_and_the_rest_of_the_batch_handled(
    wired: tuple[SqsDeadlineAlarms, FakeService, Clock], sqs: StrictSqs
) -> None:
    _, fake, clock = wired

    response = run(event_of("not json", '{"sessionId": "s-1"}', "", body("s-3", clock.now)))

    assert response == {"batchItemFailures": []}
    assert fake.expired == [("s-3", ENDPOINT)]
    assert sqs.sent == []


def test_a_failure_reports_only_its_record_for_a_retry(
    wired: tuple[SqsDeadlineAlarms, FakeService, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, fake, clock = wired
    fake.fail_for = "s-2"

    response = run(event_of(body("s-1", clock.now), body("s-2", clock.now), body("s-3", clock.now)))

    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert fake.expired == [("s-1", ENDPOINT), ("s-3", ENDPOINT)]


# ---- the local event source mapping ------------------------------------------------------


def test_a_batch_response_fails_the_whole_batch_when_it_is_not_valid() -> None:
    batch = {"a", "b", "c"}
    assert failed_ids({"batchItemFailures": []}, batch) == set()
    assert failed_ids(None, batch) == set()
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "b"}]}, batch) == {"b"}
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, batch) == batch
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": ""}]}, batch) == batch
    assert failed_ids({"batchItemFailures": "b"}, batch) == batch
    assert failed_ids(["b"], batch) == batch


class FakeLambda:
    def __init__(self, answer: Any, function_error: bool = False) -> None:
        self.answer = answer
        self.function_error = function_error
        self.events: list[dict[str, Any]] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:
        event = json.loads(Payload)
        self.events.append(event)
        answer = self.answer(event) if callable(self.answer) else self.answer
        response: dict[str, Any] = {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}
        if self.function_error:
            response["FunctionError"] = "Unhandled"
        return response


def queue_depth(sqs: StrictSqs, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_the_poller_deletes_what_the_function_handled_and_keeps_its_failures(sqs: StrictSqs, queue_url: str) -> None:
    alarms = SqsDeadlineAlarms(sqs, queue_url)
    for session in ("s-1", "s-2", "s-3"):
        alarms.set_alarm(session, ENDPOINT, 0.0)

    def fail_s2(event: dict[str, Any]) -> dict[str, Any]:
        ids = [r["messageId"] for r in event["Records"] if json.loads(r["body"])["sessionId"] == "s-2"]
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in ids]}

    function = FakeLambda(fail_s2)
    poller = DeadlineQueuePoller(sqs, queue_url, function)
    poller._queue_arn = "arn:aws:sqs:us-east-1:123456789012:deadlines"

    assert poller.poll_once() == 3
    (event,) = function.events
    record = event["Records"][0]
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith(":deadlines")
    assert {json.loads(r["body"])["sessionId"] for r in event["Records"]} == {"s-1", "s-2", "s-3"}
    assert queue_depth(sqs, queue_url) == 1, "only the failed message stays (invisible until its timeout)"


def test_the_poller_keeps_the_whole_batch_when_the_function_fails(sqs: StrictSqs, queue_url: str) -> None:
    SqsDeadlineAlarms(sqs, queue_url).set_alarm("s-1", ENDPOINT, 0.0)
    poller = DeadlineQueuePoller(sqs, queue_url, FakeLambda({"errorMessage": "boom"}, function_error=True))

    assert poller.poll_once() == 1
    assert queue_depth(sqs, queue_url) == 1
    assert poller.poll_once() == 0, "in flight until the visibility timeout"
