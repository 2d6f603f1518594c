"""The local Lambda endpoint, driven through the real boto3 ``lambda`` client.

It stands in for Lambda's ``Invoke`` when ``$default`` launches the turn runner, so it answers
as Lambda does: the invocation types, the payload limits, the error shapes, asynchronous retries
and the invocation record an on-failure destination receives.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conductor_local.lambda_runtime.server import (
    ACCOUNT,
    ASYNC_PAYLOAD_LIMIT,
    REGION,
    SYNC_PAYLOAD_LIMIT,
    LocalFunction,
    LocalLambdaServer,
)

WAIT_S = 10.0


class Calls:
    """What a registered handler saw: each event and context, in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.contexts: list[Any] = []
        self._lock = threading.Lock()

    def record(self, event: Any, context: Any) -> None:
        with self._lock:
            self.events.append(event)
            self.contexts.append(context)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.events)


class Gate:
    """A handler held until the test releases it, so a test can look while it still runs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.calls = Calls()

    def __call__(self, event: Any, context: Any) -> dict[str, Any]:
        self.calls.record(event, context)
        self.entered.set()
        assert self.release.wait(WAIT_S), "the test never released the handler"
        self.finished.set()
        return {"handled": event}


def raising(error: Exception, calls: Calls, *, succeed_on: int | None = None) -> Any:
    def handler(event: Any, context: Any) -> Any:
        calls.record(event, context)
        if succeed_on is not None and calls.count >= succeed_on:
            return {"ok": True}
        raise error

    return handler


@pytest.fixture
def server() -> Iterator[LocalLambdaServer]:
    with LocalLambdaServer({}) as running:
        yield running
        assert running.wait_idle(WAIT_S)


@pytest.fixture
def client(server: LocalLambdaServer) -> Any:
    return boto3.client(
        "lambda",
        endpoint_url=server.url,
        region_name=REGION,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=30),
    )


def register(server: LocalLambdaServer, name: str, handler: Any, **settings: Any) -> None:
    server.functions[name] = LocalFunction(handler, **settings)


def json_payload(size: int) -> bytes:
    """A JSON string document of exactly ``size`` bytes."""
    return b'"' + b"a" * (size - 2) + b'"'


def error_code(error: ClientError) -> tuple[int, str]:
    return error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]["Code"]


# ---- invocation types ----------------------------------------------------------------------


def test_an_event_invocation_is_accepted_at_once_and_runs_in_the_background(
    server: LocalLambdaServer, client: Any
) -> None:
    gate = Gate()
    register(server, "worker", gate, timeout_seconds=120)
    response = client.invoke(FunctionName="worker", InvocationType="Event", Payload=b'{"job": 1}')
    assert response["StatusCode"] == 202
    assert response["Payload"].read() == b""
    assert "FunctionError" not in response
    assert gate.entered.wait(WAIT_S)
    assert not gate.finished.is_set()  # the caller got its answer while the handler still runs
    assert not server.wait_idle(0.05)
    gate.release.set()
    assert server.wait_idle(WAIT_S)
    assert gate.finished.is_set()
    assert gate.calls.events == [{"job": 1}]
    context = gate.calls.contexts[0]
    assert context.function_name == "worker"
    assert 0 < context.get_remaining_time_in_millis() <= 120_000
    assert server.failures == []


def test_each_event_invocation_gets_its_own_worker_and_context(server: LocalLambdaServer, client: Any) -> None:
    gate = Gate()
    register(server, "worker", gate)
    for number in range(3):
        assert client.invoke(FunctionName="worker", InvocationType="Event", Payload=json.dumps(number))["StatusCode"]
    gate.release.set()
    assert server.wait_idle(WAIT_S)
    assert sorted(gate.calls.events) == [0, 1, 2]
    assert len({context.aws_request_id for context in gate.calls.contexts}) == 3


def test_request_response_returns_the_handlers_result(server: LocalLambdaServer, client: Any) -> None:
    register(server, "echo", lambda event, context: {"echo": event, "function": context.function_name})
    response = client.invoke(FunctionName="echo", Payload=b'{"a": [1, 2]}')
    assert response["StatusCode"] == 200
    assert response["ExecutedVersion"] == "$LATEST"
    assert "FunctionError" not in response
    assert json.loads(response["Payload"].read()) == {"echo": {"a": [1, 2]}, "function": "echo"}


def test_a_raising_handler_is_an_unhandled_function_error(server: LocalLambdaServer, client: Any) -> None:
    calls = Calls()
    register(server, "broken", raising(KeyError("session"), calls))
    response = client.invoke(FunctionName="broken", InvocationType="RequestResponse", Payload=b"{}")
    assert response["StatusCode"] == 200  # the invoke worked; the function failed
    assert response["FunctionError"] == "Unhandled"
    body = json.loads(response["Payload"].read())
    assert body["errorType"] == "KeyError"
    assert "session" in body["errorMessage"]
    assert calls.count == 1  # synchronous invocations are never retried by Lambda


def test_dry_run_checks_without_running(server: LocalLambdaServer, client: Any) -> None:
    calls = Calls()
    register(server, "worker", lambda event, context: calls.record(event, context))
    response = client.invoke(FunctionName="worker", InvocationType="DryRun", Payload=b"{}")
    assert response["StatusCode"] == 204
    assert server.wait_idle(WAIT_S)
    assert calls.count == 0


@pytest.mark.parametrize("invocation_type", ["Event", "RequestResponse", "DryRun"])
def test_an_unknown_function_is_resource_not_found(client: Any, invocation_type: str) -> None:
    with pytest.raises(client.exceptions.ResourceNotFoundException) as raised:
        client.invoke(FunctionName="nobody-home", InvocationType=invocation_type, Payload=b"{}")
    assert error_code(raised.value) == (404, "ResourceNotFoundException")
    assert f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:nobody-home" in raised.value.response["Error"]["Message"]


def test_a_function_can_be_named_by_its_arn(server: LocalLambdaServer, client: Any) -> None:
    register(server, "echo", lambda event, context: event)
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:echo"
    assert json.loads(client.invoke(FunctionName=arn, Payload=b"[7]")["Payload"].read()) == [7]
    assert json.loads(client.invoke(FunctionName=f"{arn}:$LATEST", Payload=b"[8]")["Payload"].read()) == [8]


def test_a_body_that_is_not_json_is_invalid_request_content(server: LocalLambdaServer, client: Any) -> None:
    calls = Calls()
    register(server, "worker", lambda event, context: calls.record(event, context))
    with pytest.raises(client.exceptions.InvalidRequestContentException) as raised:
        client.invoke(FunctionName="worker", InvocationType="Event", Payload=b"{not json")
    assert error_code(raised.value) == (400, "InvalidRequestContentException")
    assert server.wait_idle(WAIT_S) and calls.count == 0


# ---- payload limits --------------------------------------------------------------------------


def test_an_event_payload_of_one_megabyte_is_accepted(server: LocalLambdaServer, client: Any) -> None:
    calls = Calls()
    register(server, "worker", lambda event, context: calls.record(event, context))
    response = client.invoke(FunctionName="worker", InvocationType="Event", Payload=json_payload(ASYNC_PAYLOAD_LIMIT))
    assert response["StatusCode"] == 202
    assert server.wait_idle(WAIT_S)
    assert len(calls.events[0]) == ASYNC_PAYLOAD_LIMIT - 2


def test_an_event_payload_over_one_megabyte_is_refused_as_lambda_does(server: LocalLambdaServer, client: Any) -> None:
    calls = Calls()
    register(server, "worker", lambda event, context: calls.record(event, context))
    size = ASYNC_PAYLOAD_LIMIT + 1
    with pytest.raises(ClientError) as raised:
        client.invoke(FunctionName="worker", InvocationType="Event", Payload=json_payload(size))
    assert error_code(raised.value) == (413, "RequestEntityTooLargeException")
    message = raised.value.response["Error"]["Message"]
    assert (
        message == f"{size} byte payload is too large for the Event invocation type (limit {ASYNC_PAYLOAD_LIMIT} bytes)"
    )
    assert server.wait_idle(WAIT_S)
    assert calls.count == 0 and server.started == 0


def test_a_request_response_payload_may_exceed_the_event_limit(server: LocalLambdaServer, client: Any) -> None:
    register(server, "size", lambda event, context: len(event))
    response = client.invoke(FunctionName="size", Payload=json_payload(2 * ASYNC_PAYLOAD_LIMIT))
    assert json.loads(response["Payload"].read()) == 2 * ASYNC_PAYLOAD_LIMIT - 2


@pytest.mark.parametrize("invocation_type", ["RequestResponse", "DryRun"])
def test_a_payload_over_six_megabytes_is_refused(server: LocalLambdaServer, client: Any, invocation_type: str) -> None:
    calls = Calls()
    register(server, "worker", lambda event, context: calls.record(event, context))
    with pytest.raises(ClientError) as raised:
        client.invoke(
            FunctionName="worker", InvocationType=invocation_type, Payload=json_payload(SYNC_PAYLOAD_LIMIT + 1)
        )
    assert error_code(raised.value) == (413, "RequestEntityTooLargeException")
    assert str(SYNC_PAYLOAD_LIMIT) in raised.value.response["Error"]["Message"]
    assert calls.count == 0


# ---- asynchronous failures: retries and the on-failure destination -----------------------------


def test_a_failing_event_is_retried_then_its_record_goes_to_the_destination(
    server: LocalLambdaServer, client: Any
) -> None:
    calls, records = Calls(), Calls()
    register(server, "flaky", raising(RuntimeError("the model went away"), calls), retry_attempts=2, on_failure="dlq")
    register(server, "dlq", lambda event, context: records.record(event, context))
    payload = {"sessionId": "s-1", "streamId": "stream-1", "endpoint": "http://127.0.0.1:1/test"}
    assert client.invoke(FunctionName="flaky", InvocationType="Event", Payload=json.dumps(payload))["StatusCode"] == 202
    assert server.wait_idle(WAIT_S)  # the destination included
    assert calls.events == [payload, payload, payload]  # the first attempt and Lambda's two retries
    (record,) = records.events
    assert set(record) == {
        "version",
        "timestamp",
        "requestContext",
        "requestPayload",
        "responseContext",
        "responsePayload",
    }
    assert record["version"] == "1.0"
    assert record["timestamp"].endswith("Z")
    context = record["requestContext"]
    assert context["condition"] == "RetriesExhausted"
    assert context["approximateInvokeCount"] == 3
    assert context["functionArn"] == f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:flaky:$LATEST"
    assert context["requestId"]
    assert record["requestPayload"] == payload
    assert record["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    assert record["responsePayload"] == {"errorMessage": "the model went away", "errorType": "RuntimeError"}
    assert records.contexts[0].function_name == "dlq"
    assert server.failures == [record]


def test_with_retries_off_one_failure_goes_to_the_destination(server: LocalLambdaServer, client: Any) -> None:
    calls, records = Calls(), Calls()
    register(server, "once", raising(ValueError("bad"), calls), retry_attempts=0, on_failure="dlq")
    register(server, "dlq", lambda event, context: records.record(event, context))
    client.invoke(FunctionName="once", InvocationType="Event", Payload=b"{}")
    assert server.wait_idle(WAIT_S)
    assert calls.count == 1
    assert records.events[0]["requestContext"]["approximateInvokeCount"] == 1


def test_a_retry_that_succeeds_sends_nothing_to_the_destination(server: LocalLambdaServer, client: Any) -> None:
    calls, records = Calls(), Calls()
    register(server, "flaky", raising(RuntimeError("once"), calls, succeed_on=2), retry_attempts=2, on_failure="dlq")
    register(server, "dlq", lambda event, context: records.record(event, context))
    client.invoke(FunctionName="flaky", InvocationType="Event", Payload=b"{}")
    assert server.wait_idle(WAIT_S)
    assert calls.count == 2
    assert records.count == 0 and server.failures == []


def test_a_failure_without_a_destination_is_only_recorded(server: LocalLambdaServer, client: Any) -> None:
    calls = Calls()
    register(server, "lonely", raising(RuntimeError("x"), calls), retry_attempts=0)
    client.invoke(FunctionName="lonely", InvocationType="Event", Payload=b'{"n": 1}')
    assert server.wait_idle(WAIT_S)
    assert [record["requestPayload"] for record in server.failures] == [{"n": 1}]


def test_a_failing_destination_does_not_keep_the_invocation_running(server: LocalLambdaServer, client: Any) -> None:
    calls, dlq_calls = Calls(), Calls()
    register(server, "flaky", raising(RuntimeError("x"), calls), retry_attempts=0, on_failure="dlq")
    register(server, "dlq", raising(RuntimeError("the destination broke too"), dlq_calls))
    client.invoke(FunctionName="flaky", InvocationType="Event", Payload=b"{}")
    assert server.wait_idle(WAIT_S)
    assert dlq_calls.count == 1  # a destination is not retried here
    register(server, "ok", lambda event, context: "fine")
    assert json.loads(client.invoke(FunctionName="ok", Payload=b"{}")["Payload"].read()) == "fine"


# ---- waiting for asynchronous invocations ----------------------------------------------------


def test_wait_idle_since_a_mark_ignores_invocations_started_before_it(server: LocalLambdaServer, client: Any) -> None:
    held, quick = Gate(), Calls()
    register(server, "held", held)
    register(server, "quick", lambda event, context: quick.record(event, context))
    client.invoke(FunctionName="held", InvocationType="Event", Payload=b"{}")
    assert held.entered.wait(WAIT_S)
    mark = server.started
    assert mark == 1
    client.invoke(FunctionName="quick", InvocationType="Event", Payload=b"{}")
    assert server.wait_idle(WAIT_S, since=mark)  # the quick one ended; the held one is not waited for
    assert quick.count == 1
    assert server.started == 2
    assert not server.wait_idle(0.05)  # everything since the start: the held one still runs
    assert not server.wait_idle(0.05, since=mark - 1)
    held.release.set()
    assert server.wait_idle(WAIT_S)


def test_wait_idle_covers_the_destination(server: LocalLambdaServer, client: Any) -> None:
    held = Gate()
    register(server, "flaky", raising(RuntimeError("x"), Calls()), retry_attempts=0, on_failure="dlq")
    register(server, "dlq", held)
    mark = server.started
    client.invoke(FunctionName="flaky", InvocationType="Event", Payload=b"{}")
    assert held.entered.wait(WAIT_S)
    assert not server.wait_idle(0.05, since=mark)  # the failed invocation is not over until its record is handled
    held.release.set()
    assert server.wait_idle(WAIT_S, since=mark)
    assert held.finished.is_set()
