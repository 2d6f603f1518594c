"""The session reaper: a session's state deleted by DynamoDB's time to live takes the rest of the
session with it (moto; the stream records are built as DynamoDB Streams sends them)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from conductor_local.bedrock.server import message
from conductor_local.lambda_runtime.context import LocalLambdaContext
from lambdas import runtime, session_reaper
from shared.adapters.store import HISTORY_BACKSTOP_SECONDS, SessionStore
from shared.flows.session_reaper import expired_session
from tests.handlers.conftest import Harness

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def removed(session_id: str, *, sk: str = "STATE", identity: dict[str, str] | None = TTL_IDENTITY) -> dict[str, Any]:
    record: dict[str, Any] = {
        "eventID": uuid.uuid4().hex,
        "eventName": "REMOVE",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": {"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": sk}},
            "SequenceNumber": str(uuid.uuid4().int)[:21],
            "SizeBytes": 60,
            "StreamViewType": "KEYS_ONLY",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2026-01-01T00:00:00.000",
    }
    if identity is not None:
        record["userIdentity"] = identity
    return record


def items_of(session_id: str) -> list[str]:
    store = runtime.store()
    response = store._client.query(
        TableName=runtime.settings().table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"SESSION#{session_id}"}},
        ConsistentRead=True,
    )
    return sorted(item["sk"]["S"] for item in response["Items"])


def expire_state(session_id: str) -> None:
    """What DynamoDB's time to live does to the state item."""
    runtime.store()._client.delete_item(
        TableName=runtime.settings().table_name, Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "STATE"}}
    )


def used_session(conductor: Harness) -> str:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(message("First answer."))
    conductor.say(conn, "hello")
    conductor.finish_turn(conn)
    return conn.session_id.lower()


def reap(*records: dict[str, Any]) -> dict[str, Any]:
    return session_reaper.handler({"Records": list(records)}, LocalLambdaContext(function_name="session-reaper"))


def test_history_lives_as_long_as_the_session_not_a_week_from_its_writing(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_HISTORY_TTL_SECONDS", str(HISTORY_BACKSTOP_SECONDS))  # the reaper's stages
    runtime.reset()
    session_id = used_session(conductor)
    store = runtime.store()
    item = store._client.get_item(
        TableName=runtime.settings().table_name,
        Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "MSG#0000000000"}},
        ConsistentRead=True,
    )["Item"]
    state = store._client.get_item(
        TableName=runtime.settings().table_name,
        Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "STATE"}},
        ConsistentRead=True,
    )["Item"]
    written = float(item["at"]["N"])
    assert int(item["expires_at"]["N"]) >= written + HISTORY_BACKSTOP_SECONDS - 5  # only the far backstop
    assert int(state["expires_at"]["N"]) <= written + runtime.settings().session_ttl_seconds + 60


def test_a_state_the_ttl_deleted_takes_the_rest_of_the_session_with_it(conductor: Harness) -> None:
    session_id = used_session(conductor)
    other = used_session(conductor)
    assert any(sk.startswith("MSG#") for sk in items_of(session_id))
    expire_state(session_id)
    assert reap(removed(session_id)) == {"batchItemFailures": []}
    assert items_of(session_id) == []
    assert "STATE" in items_of(other) and any(sk.startswith("MSG#") for sk in items_of(other))  # untouched


def test_other_deletions_are_not_the_reapers(conductor: Harness) -> None:
    session_id = used_session(conductor)
    before = items_of(session_id)
    user = {"type": "AWS", "principalId": "AROAEXAMPLE:someone"}
    reap(
        removed(session_id, identity=None),  # an erase through the API, or by hand
        removed(session_id, identity=user),
        removed(session_id, sk="OUTBOX#0000000001"),  # an outbox item's own expiry
        {**removed(session_id), "eventName": "MODIFY"},
    )
    assert items_of(session_id) == before


def test_a_session_started_again_since_keeps_its_new_conversation(conductor: Harness) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(message("Old answer."))
    conductor.say(conn, "old question")
    conductor.finish_turn(conn)
    session_id = conn.session_id.lower()
    expire_state(session_id)
    old_messages = [sk for sk in items_of(session_id) if sk.startswith("MSG#")]
    # the app comes back with the same id before the reaper ran: a new session (a new incarnation)
    again = conductor.connect(session_id=session_id)
    conductor.start_session(again)
    reap(removed(session_id))
    remaining = items_of(session_id)
    assert "STATE" in remaining and not set(old_messages) & set(remaining)
    conductor.script.push(message("New answer."))
    conductor.say(again, "new question")
    assert ("final", "New answer.") in conductor.summary(again)
    assert conductor.history(session_id) == [
        {"role": "user", "content": [{"text": "new question"}]},
        {"role": "assistant", "content": [{"text": "New answer."}]},
    ]


class Unprocessing:
    """A DynamoDB client that leaves the first item of every first batch unprocessed, as DynamoDB may."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        ((table, requests),) = RequestItems.items()
        self.batches.append(len(requests))
        if len(self.batches) == 1:
            self.client.batch_write_item(RequestItems={table: requests[1:]})
            return {"UnprocessedItems": {table: requests[:1]}}
        return self.client.batch_write_item(RequestItems=RequestItems)


def test_items_dynamodb_leaves_unprocessed_are_sent_again_in_batches_of_25(conductor: Harness) -> None:
    session_id = used_session(conductor)
    table = runtime.settings().table_name
    base = boto3.client("dynamodb")
    for n in range(60):
        base.put_item(TableName=table, Item={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": f"EVENT#{n:03d}"}})
    expire_state(session_id)
    client = Unprocessing(base)
    store = SessionStore(client, table, ttl_seconds=3600, sleep=lambda _seconds: None)
    keys = store.expired_session_keys(session_id)
    assert store.delete_items(keys) == len(keys) > 60
    assert max(client.batches) == 25 and client.batches[1] == 1  # the one left over, sent again
    assert items_of(session_id) == []


def test_a_record_is_read_strictly() -> None:
    assert expired_session(removed("abc")) == "abc"
    for broken in (
        {},
        {"eventName": "REMOVE", "userIdentity": TTL_IDENTITY},
        {**removed("abc"), "dynamodb": {"Keys": {"pk": {"N": "1"}, "sk": {"S": "STATE"}}}},
        {**removed("abc"), "dynamodb": {"Keys": {"pk": {"S": "CONN#x"}, "sk": {"S": "STATE"}}}},
        {**removed("abc"), "dynamodb": {"Keys": {"pk": {"S": "SESSION#"}, "sk": {"S": "STATE"}}}},
        {**removed("abc"), "userIdentity": "dynamodb.amazonaws.com"},
    ):
        assert expired_session(broken) is None


def test_without_the_reaper_history_expires_with_the_session_ttl_as_before(conductor: Harness) -> None:
    session_id = used_session(conductor)
    item = runtime.store()._client.get_item(
        TableName=runtime.settings().table_name,
        Key={"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "MSG#0000000000"}},
        ConsistentRead=True,
    )["Item"]
    assert int(item["expires_at"]["N"]) <= float(item["at"]["N"]) + runtime.settings().session_ttl_seconds + 5
