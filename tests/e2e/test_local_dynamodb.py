"""The local stack's DynamoDB: it must keep what it committed while other requests run, and not leak.

The stack serves DynamoDB from moto's server. moto runs TransactWriteItems as a sequence of
single writes and, when one condition fails, puts back a copy of the whole table taken when the
transaction began, so a write another request committed in between would be erased. The
conductor's handlers commit concurrently all the time (a lost version race IS a failed
transaction): with requests served concurrently, the same transcript delivered twice started
no turn at all in 4 of 40 tries and turns stalled at random. The stack serves each DynamoDB
write alone (``conductor_local/dynamodb/server.py``); the first test holds a failing
transaction inside moto and checks that another commit neither overtakes it nor is erased.
Reads change nothing and are served together, as DynamoDB serves them (``$default`` reads the
state and the recent history in parallel): a held read does not hold up another read, but does
hold up a write, and a read of a key the table does not hold leaves the table as it was.

Also: moto deep-copies the whole table once per action of every TransactWriteItems (its rollback
snapshot), and its ``BaseModel`` keeps a reference to every instance it ever built (for its
dashboard). Unless the stack drops those references, every commit leaves copies of the table
alive: ``make run`` grew without bound (1.4 GB after some 100 turns) and commits got slower as
the garbage grew. The second test checks that commits leave no such copies behind; the third that
a transaction's snapshot copies only the items it names (not the table once per action) and a
failed transaction still rolls back all of its actions.
"""

from __future__ import annotations

import copy
import gc
import json
import threading
import uuid
from typing import Any

import boto3
import pytest
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult

from conductor_local.stack import LocalStack
from shared.adapters.store import SessionStore, VersionConflict
from shared.core.history_ops import AppendMessage
from shared.core.state import SessionState
from tests.e2e.conftest import WAIT_S, session_store

pytestmark = pytest.mark.e2e

OVERTAKE_WAIT_S = 0.5
"""How long a request that must NOT overtake a held one gets to try (slowness cannot fail that check)."""

READ_ALONGSIDE_WAIT_S = 4 * WAIT_S
"""How long a read that MUST run beside a held one may take: generous, as a loaded CI machine is slow."""

HOLD_S = 3 * READ_ALONGSIDE_WAIT_S
"""How long a held request stays held unless released: longer than any wait, so only the test releases it."""


def test_a_commit_survives_a_concurrent_commit_that_loses_its_version_race(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = session_store(stack)
    loser_id, winner_id = str(uuid.uuid4()), str(uuid.uuid4())
    stale = SessionState(session_id=loser_id)
    store.commit(stale, [])  # version 1 is stored: a commit of version 0 now loses the race

    # Hold the losing transaction right after it began (moto has taken its table copy).
    inside, resume = threading.Event(), threading.Event()
    check_item = DynamoDBBackend.get_item
    loser_key = {"S": f"SESSION#{loser_id}"}

    def held_get_item(backend: DynamoDBBackend, table_name: str, keys: dict[str, Any], *args: Any) -> Any:
        if keys.get("pk") == loser_key and not inside.is_set():
            inside.set()
            resume.wait(WAIT_S)
        return check_item(backend, table_name, keys, *args)

    monkeypatch.setattr(DynamoDBBackend, "get_item", held_get_item)
    outcomes: dict[str, Any] = {}

    def run(name: str, commit: Any) -> None:
        try:
            outcomes[name] = commit()
        except BaseException as exc:
            outcomes[name] = exc

    # A history message makes it a transaction, as for every decision that writes one.
    said = [AppendMessage(seq=0, role="user", content=[{"text": "hello"}])]
    loser = threading.Thread(target=run, args=("loser", lambda: store.commit(stale, said)))
    winner_store = SessionStore(stack.dynamodb_client(), stack.table_name, ttl_seconds=3600)
    winner = threading.Thread(
        target=run, args=("winner", lambda: winner_store.commit(SessionState(session_id=winner_id), []))
    )
    loser.start()
    try:
        assert inside.wait(WAIT_S), "the losing transaction never reached its condition check"
        winner.start()  # another session's commit, meanwhile
        winner.join(OVERTAKE_WAIT_S)
        overtook = not winner.is_alive()
    finally:
        resume.set()
        loser.join(WAIT_S)
        if winner.ident is not None:
            winner.join(WAIT_S)

    assert isinstance(outcomes.get("loser"), VersionConflict), outcomes
    assert isinstance(outcomes.get("winner"), SessionState), outcomes
    kept = store.load(winner_id)
    assert kept is not None, "a committed session state was erased by another request's rollback"
    assert kept.version == 1
    assert not overtook, "a DynamoDB write ran beside another write"


def live_moto_items() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is Item)


def test_commits_do_not_keep_copies_of_the_table_alive(stack: LocalStack) -> None:
    store = session_store(stack)
    for _ in range(50):  # a table of some size, whatever ran before
        store.commit(SessionState(session_id=str(uuid.uuid4())), [])
    table_size = stack.dynamodb_client().scan(TableName=stack.table_name, Select="COUNT")["Count"]
    state = store.commit(SessionState(session_id=str(uuid.uuid4())), [])
    before = live_moto_items()
    commits = 10
    for _ in range(commits):
        # A kept event makes it a transaction (two actions), as for every decision that sends one.
        state = store.commit(state, [], outbox=[(state.next_seq, "{}")])
        state = state.model_copy(update={"next_seq": state.next_seq + 1})
    grown = live_moto_items() - before
    # What the commits stored: one kept event each (the state item is replaced). Allow for slack.
    assert grown <= 3 * commits, f"{grown} more live items after {commits} commits to a {table_size}-item table"


def test_a_transaction_copies_only_the_items_it_names_and_a_failed_one_changes_nothing(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = stack.dynamodb_client()
    table = stack.table_name
    kept = {"pk": {"S": "BENCH#kept"}, "sk": {"S": "A"}}
    client.put_item(TableName=table, Item={**kept, "n": {"N": "1"}})
    for number in range(30):  # a table of some size: none of these may be copied
        client.put_item(TableName=table, Item={"pk": {"S": f"BENCH#other{number}"}, "sk": {"S": "A"}})
    copies: list[Any] = []
    deepcopy = copy.deepcopy

    def counting(value: Any, memo: Any = None) -> Any:
        if isinstance(value, Table | Item):
            copies.append(value)
        return deepcopy(value, memo)

    monkeypatch.setattr(copy, "deepcopy", counting)
    actions = [
        {"Put": {"TableName": table, "Item": {"pk": {"S": "BENCH#new"}, "sk": {"S": "A"}}}},
        {
            "Update": {
                "TableName": table,
                "Key": kept,
                "UpdateExpression": "SET n = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": {"pk": {"S": "BENCH#missing"}, "sk": {"S": "A"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
    ]
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=actions)
    assert not any(isinstance(value, Table) for value in copies), "the whole table was deep-copied"
    assert len(copies) <= 2 * len(actions), f"{len(copies)} items copied for a transaction of {len(actions)}"

    assert "Item" not in client.get_item(TableName=table, Key={"pk": {"S": "BENCH#new"}, "sk": {"S": "A"}})
    assert client.get_item(TableName=table, Key=kept)["Item"]["n"] == {"N": "1"}
    client.transact_write_items(TransactItems=actions[:2])
    assert client.get_item(TableName=table, Key=kept, ConsistentRead=True)["Item"]["n"] == {"N": "2"}


def _held_get_item(monkeypatch: pytest.MonkeyPatch, held_pk: str) -> tuple[threading.Event, threading.Event]:
    """Hold moto's GetItem of ``held_pk`` inside the server until ``resume`` is set."""
    inside, resume = threading.Event(), threading.Event()
    get_item = DynamoDBBackend.get_item

    def held(backend: DynamoDBBackend, table_name: str, keys: dict[str, Any], *args: Any) -> Any:
        if keys.get("pk") == {"S": held_pk} and not inside.is_set():
            inside.set()
            resume.wait(HOLD_S)
        return get_item(backend, table_name, keys, *args)

    monkeypatch.setattr(DynamoDBBackend, "get_item", held)
    return inside, resume


def _overtakes(stack: LocalStack, held_pk: str, monkeypatch: pytest.MonkeyPatch, other: Any, *, within: float) -> bool:
    """Whether ``other`` (a request) completes within ``within`` seconds while a GetItem of ``held_pk``
    is held in the server (the hold outlasts ``within``: only this function releases it)."""
    inside, resume = _held_get_item(monkeypatch, held_pk)
    client = stack.dynamodb_client()
    held = threading.Thread(
        target=lambda: client.get_item(
            TableName=stack.table_name, Key={"pk": {"S": held_pk}, "sk": {"S": "A"}}, ConsistentRead=True
        )
    )
    held.start()
    second = threading.Thread(target=other)
    try:
        assert inside.wait(WAIT_S), "the held read never reached moto"
        second.start()
        second.join(within)
        return not second.is_alive()
    finally:
        resume.set()
        held.join(WAIT_S)
        if second.ident is not None:
            second.join(WAIT_S)


def test_reads_run_together_and_a_write_waits_for_them(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    table = stack.table_name
    client = stack.dynamodb_client()
    for name in ("held", "other"):
        client.put_item(TableName=table, Item={"pk": {"S": f"READS#{name}"}, "sk": {"S": "A"}, "n": {"N": "1"}})

    def query_other() -> None:
        answer = client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "READS#other"}},
        )
        assert [item["pk"]["S"] for item in answer["Items"]] == ["READS#other"]

    assert _overtakes(stack, "READS#held", monkeypatch, query_other, within=READ_ALONGSIDE_WAIT_S), (
        "a read waited for another read"
    )
    monkeypatch.undo()

    def write_other() -> None:
        client.put_item(TableName=table, Item={"pk": {"S": "READS#other"}, "sk": {"S": "A"}, "n": {"N": "2"}})

    assert not _overtakes(stack, "READS#held", monkeypatch, write_other, within=OVERTAKE_WAIT_S), (
        "a write ran beside a read"
    )
    stored = client.get_item(TableName=table, Key={"pk": {"S": "READS#other"}, "sk": {"S": "A"}})
    assert stored["Item"]["n"] == {"N": "2"}, "the write that waited was lost"


def test_the_deadline_queue_neither_waits_for_a_table_read_nor_holds_one_up(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline poller receives from SQS on the same server every second. Queued as a table
    write behind a long read, it held up every read that arrived after it (a read then waited
    for another read)."""
    client = stack.dynamodb_client()
    client.put_item(TableName=stack.table_name, Item={"pk": {"S": "READS#queue"}, "sk": {"S": "A"}})
    sqs = boto3.client(
        "sqs",
        endpoint_url=stack.dynamodb_endpoint,
        region_name=stack.region,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )

    def receive() -> None:
        sqs.receive_message(QueueUrl=stack.deadline_queue_url, WaitTimeSeconds=0, VisibilityTimeout=0)

    assert _overtakes(stack, "READS#queue", monkeypatch, receive, within=READ_ALONGSIDE_WAIT_S), (
        "an SQS request waited for a table read"
    )


def test_a_read_of_a_missing_key_leaves_the_table_as_it_was(stack: LocalStack) -> None:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    client = stack.dynamodb_client()
    missing = f"READS#missing-{uuid.uuid4()}"
    answer = client.get_item(TableName=stack.table_name, Key={"pk": {"S": missing}, "sk": {"S": "A"}})
    assert "Item" not in answer
    moto_table = dynamodb_backends[DEFAULT_ACCOUNT_ID][stack.region].get_table(stack.table_name)
    assert all(key.value != missing for key in moto_table.items), "a read added a partition to the table"


def test_concurrent_queries_of_one_table_each_read_their_own_partition(stack: LocalStack) -> None:
    client = stack.dynamodb_client()
    table = stack.table_name
    partitions = [f"READS#q{number}-{uuid.uuid4()}" for number in range(6)]
    for pk in partitions:
        for sk in ("A", "B", "C"):
            client.put_item(TableName=table, Item={"pk": {"S": pk}, "sk": {"S": sk}})
    wrong: list[str] = []

    def query(pk: str) -> None:
        own = stack.dynamodb_client()
        for _ in range(20):
            items = own.query(
                TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": pk}}
            )["Items"]
            if [(i["pk"]["S"], i["sk"]["S"]) for i in items] != [(pk, "A"), (pk, "B"), (pk, "C")]:
                wrong.append(pk)

    threads = [threading.Thread(target=query, args=(pk,)) for pk in partitions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not wrong, f"queries answered another partition's items: {wrong[:3]}"


def test_item_data_answers_are_what_the_shape_walk_would_write(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every answer written directly as JSON decodes to exactly what moto's walk of the operation's
    output shape writes, for every attribute type and every item-data operation."""
    direct = DynamoResult.execute_result
    shape_walk = direct.shape_walk  # type: ignore[attr-defined]
    compared: dict[str, int] = {}
    differences: list[str] = []

    def both(result: DynamoResult, context: Any) -> Any:
        answer = direct(result, context)
        walked = shape_walk(result, context)
        name = context.operation_model.name
        compared[name] = compared.get(name, 0) + 1
        if answer[0] != walked[0] or json.loads(answer[2] or "{}") != json.loads(walked[2] or "{}"):
            differences.append(f"{name}: {answer[2]!r} != {walked[2]!r}")
        return answer

    monkeypatch.setattr(DynamoResult, "execute_result", both)
    client, table = stack.dynamodb_client(), stack.table_name
    pk = {"S": f"TYPES#{uuid.uuid4()}"}
    every_type = {
        "pk": pk,
        "sk": {"S": "A"},
        "s": {"S": "héllo ✓"},
        "n": {"N": "-12.50"},
        "b": {"B": b"\x00\x01\xff"},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b"\x00", b"\xfe"]},
        "m": {"M": {"inner": {"L": [{"BOOL": True}, {"NULL": True}, {"N": "3"}]}}},
        "empty": {"S": ""},
    }
    key = {"pk": pk, "sk": {"S": "A"}}
    client.put_item(TableName=table, Item=every_type)
    client.put_item(TableName=table, Item={**every_type, "n": {"N": "7"}}, ReturnValues="ALL_OLD")
    client.get_item(TableName=table, Key=key, ConsistentRead=True)
    client.get_item(TableName=table, Key={"pk": pk, "sk": {"S": "missing"}})
    client.query(TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": pk}, Limit=1)
    client.scan(TableName=table, FilterExpression="pk = :pk", ExpressionAttributeValues={":pk": pk})
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "8"}},
        ReturnValues="ALL_NEW",
        ReturnConsumedCapacity="TOTAL",
    )
    client.batch_get_item(RequestItems={table: {"Keys": [key]}})
    client.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": key}}])
    client.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": {**every_type, "sk": {"S": "B"}}}}])
    client.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": {"pk": pk, "sk": {"S": "B"}}}}]})
    client.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD")

    assert not differences, differences
    expected = {"PutItem", "GetItem", "Query", "Scan", "UpdateItem", "BatchGetItem", "TransactGetItems"}
    assert expected | {"DeleteItem"} <= set(compared), compared
