"""The tool-call deadline queue, locally: an SQS queue on the stack's moto server and the event
source mapping that feeds it to ``lambdas.tool_deadline.handler``.

* ``create_deadline_queue``: the queue (moto serves SQS on the DynamoDB server's port), with the
  deployed visibility timeout.
* ``deadline_functions``: the tool-deadline function for ``LocalLambdaServer``.
* ``DeadlineQueuePoller``: a thread doing what Lambda's event source mapping does: receive up to
  10 messages, invoke the function synchronously with an SQS-shaped event through the local Lambda
  endpoint, delete the messages the batch response does not list in ``batchItemFailures``. A
  failed invocation (or a response that is not a valid batch response) leaves the whole batch to
  come back after the visibility timeout, as Lambda does.

The poller short-polls (``WaitTimeSeconds=0``) every ``interval_s`` (a second: deadlines are a
minute or more): the local moto server runs each write alone (DynamoDB's atomicity), so a long
poll would hold up every table request.

``LocalStack`` wires all of it when it starts (``AWS_ENDPOINT_URL_SQS``, ``CONDUCTOR_DEADLINE_QUEUE_URL``).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import threading
from typing import Any

import boto3
from botocore.config import Config

from conductor_local.lambda_runtime.server import LocalFunction

logger = logging.getLogger(__name__)

TOOL_DEADLINE_FUNCTION = "voiceide-conductor-tool-deadline"
TOOL_DEADLINE_TIMEOUT_S = 30.0
"""The tool-deadline function's timeout as deployed."""
QUEUE_NAME = "voiceide-conductor-tool-deadlines"
VISIBILITY_TIMEOUT_S = 180
"""Six times the function's timeout, as deployed (AWS's advice for an event source mapping)."""
BATCH_SIZE = 10
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}


def deadline_functions() -> dict[str, LocalFunction]:
    """The tool-deadline function as deployed (invoked synchronously by the poller)."""

    def expire_tool_calls(event: Any, context: Any) -> Any:
        return importlib.import_module("lambdas.tool_deadline").handler(event, context)

    return {TOOL_DEADLINE_FUNCTION: LocalFunction(expire_tool_calls, timeout_seconds=TOOL_DEADLINE_TIMEOUT_S)}


def sqs_client(endpoint: str, region: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name=region, **LOCAL_CREDENTIALS)


def create_deadline_queue(client: Any, name: str = QUEUE_NAME) -> str:
    """Create the queue (idempotent for the same attributes) and return its URL."""
    response = client.create_queue(QueueName=name, Attributes={"VisibilityTimeout": str(VISIBILITY_TIMEOUT_S)})
    return str(response["QueueUrl"])


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The event Lambda's event source mapping sends for a batch of received messages."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": dict(message.get("Attributes", {})),
                "messageAttributes": {},
                "md5OfBody": message.get("MD5OfBody") or hashlib.md5(message["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for message in messages
        ]
    }


def failed_ids(response: Any, batch_ids: set[str]) -> set[str]:
    """The message ids a batch response reports as failed. As Lambda: a response that is not a
    valid partial batch response, or names an id outside the batch, fails the whole batch."""
    if response is None or response == {} or response == "":
        return set()
    if not isinstance(response, dict):
        return set(batch_ids)
    failures = response.get("batchItemFailures", [])
    if not isinstance(failures, list):
        return set(batch_ids)
    ids: set[str] = set()
    for failure in failures:
        item = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(item, str) or item not in batch_ids:
            return set(batch_ids)
        ids.add(item)
    return ids


class DeadlineQueuePoller:
    """Lambda's SQS event source mapping for one queue and function, on a thread."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        lambda_client: Any,
        function_name: str = TOOL_DEADLINE_FUNCTION,
        *,
        region: str = "us-east-1",
        interval_s: float = 1.0,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.lambda_client = lambda_client
        self.function_name = function_name
        self.region = region
        self.interval_s = interval_s
        self.invocations = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._queue_arn = ""

    def start(self) -> DeadlineQueuePoller:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        self._queue_arn = attributes["Attributes"]["QueueArn"]
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="local-deadline-queue", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=TOOL_DEADLINE_TIMEOUT_S + 5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                handled = self.poll_once()
            except Exception:
                logger.exception("deadline queue poll failed")
                handled = 0
            if not handled:
                self._stop.wait(self.interval_s)

    def poll_once(self) -> int:
        """Receive one batch and hand it to the function; returns how many messages it held."""
        received = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=BATCH_SIZE,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["All"],
        )
        messages: list[dict[str, Any]] = received.get("Messages", [])
        if not messages:
            return 0
        self.invocations += 1
        batch_ids = {message["MessageId"] for message in messages}
        event = sqs_event(messages, self._queue_arn, self.region)
        response = self.lambda_client.invoke(FunctionName=self.function_name, Payload=json.dumps(event).encode())
        if response.get("FunctionError"):
            logger.error("tool-deadline function failed: the batch comes back after the visibility timeout")
            return len(messages)
        payload = response["Payload"].read()
        failed = failed_ids(json.loads(payload) if payload else None, batch_ids)
        done = [
            {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
            for index, message in enumerate(messages)
            if message["MessageId"] not in failed
        ]
        if done:
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=done)
        return len(messages)


def start_poller(
    sqs_endpoint: str, queue_url: str, lambda_url: str, region: str, *, interval_s: float = 1.0
) -> DeadlineQueuePoller:
    """A started poller feeding ``queue_url`` (on the moto server) to the tool-deadline function
    of the local Lambda server at ``lambda_url``."""
    lambda_client = boto3.client(
        "lambda",
        endpoint_url=lambda_url,
        region_name=region,
        config=Config(read_timeout=TOOL_DEADLINE_TIMEOUT_S + 5, retries={"total_max_attempts": 1}),
        **LOCAL_CREDENTIALS,
    )
    sqs = sqs_client(sqs_endpoint, region)
    return DeadlineQueuePoller(sqs, queue_url, lambda_client, region=region, interval_s=interval_s).start()
