"""Long-term records on the local AgentCore Memory, through the real boto3 client: written as is
(``BatchCreateMemoryRecords``), listed, searched, read and deleted as the conductor does."""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.local_agentcore_memory.conftest import (
    ACTOR,
    MEMORY,
    OTHER_ACTOR,
    at,
    preferences,
    project_namespace,
    write,
)

RECORD_ID = re.compile(r"mem-[a-zA-Z0-9-_]*")


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def texts(answer: dict[str, Any]) -> list[str]:
    return [summary["content"]["text"] for summary in answer["memoryRecordSummaries"]]


def search(client: Any, query: str, top_k: int = 10, **where: Any) -> dict[str, Any]:
    where = where or {"namespacePath": f"/people/{ACTOR}/"}
    return dict(
        client.retrieve_memory_records(memoryId=MEMORY, searchCriteria={"searchQuery": query, "topK": top_k}, **where)
    )


def test_batch_create_answers_201_and_record_ids_of_40_to_50_characters(client: Any) -> None:
    answer = client.batch_create_memory_records(
        memoryId=MEMORY,
        records=[
            {
                "requestIdentifier": "one",
                "namespaces": [preferences()],
                "content": {"text": "you prefer tabs"},
                "timestamp": at(0),
            },
            {
                "requestIdentifier": "two",
                "namespaces": [project_namespace()],
                "content": {"text": "this project uses pnpm"},
                "timestamp": at(1),
            },
        ],
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert answer["failedRecords"] == []
    assert [(r["requestIdentifier"], r["status"]) for r in answer["successfulRecords"]] == [
        ("one", "SUCCEEDED"),
        ("two", "SUCCEEDED"),
    ]
    for made in answer["successfulRecords"]:
        assert RECORD_ID.fullmatch(made["memoryRecordId"]) and 40 <= len(made["memoryRecordId"]) <= 50


def test_get_memory_record_as_written(client: Any) -> None:
    record_id = write(
        client, "you prefer tabs over spaces", preferences(), when=3, metadata={"source": {"stringValue": "tool"}}
    )
    record = client.get_memory_record(memoryId=MEMORY, memoryRecordId=record_id)["memoryRecord"]
    assert record["memoryRecordId"] == record_id
    assert record["content"] == {"text": "you prefer tabs over spaces"}
    assert record["namespaces"] == [preferences()]
    assert record["memoryStrategyId"] == "preferences-0123456789"  # the strategy whose namespace it is
    assert record["timestamp"] == at(3)
    assert record["createdAt"].tzinfo is not None
    assert record["metadata"] == {"source": {"stringValue": "tool"}}


def test_a_record_outside_every_strategy_has_none(client: Any) -> None:
    record_id = write(client, "a note", "/notes/misc")
    assert "memoryStrategyId" not in client.get_memory_record(memoryId=MEMORY, memoryRecordId=record_id)["memoryRecord"]


def test_get_with_the_records_namespace_only(client: Any) -> None:
    record_id = write(client, "you prefer tabs", preferences())
    assert client.get_memory_record(memoryId=MEMORY, memoryRecordId=record_id, namespace=preferences())
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.get_memory_record(memoryId=MEMORY, memoryRecordId=record_id, namespace=preferences(OTHER_ACTOR))


def test_delete_memory_record_then_it_is_not_found(client: Any) -> None:
    record_id = write(client, "you prefer tabs", preferences())
    assert client.delete_memory_record(memoryId=MEMORY, memoryRecordId=record_id)["memoryRecordId"] == record_id
    for call in (client.get_memory_record, client.delete_memory_record):
        with pytest.raises(ClientError) as gone:
            call(memoryId=MEMORY, memoryRecordId=record_id)
        assert code(gone) == "ResourceNotFoundException"
        assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_batch_delete_reports_each_record(client: Any, server: Any) -> None:
    kept = write(client, "you prefer tabs", preferences(), name="kept")
    gone = write(client, "you like vim", preferences(), name="gone")
    unknown = "mem-" + "0" * 36
    answer = client.batch_delete_memory_records(
        memoryId=MEMORY, records=[{"memoryRecordId": gone}, {"memoryRecordId": unknown}]
    )
    assert answer["successfulRecords"] == [{"memoryRecordId": gone, "status": "SUCCEEDED"}]
    (failed,) = answer["failedRecords"]
    assert (failed["memoryRecordId"], failed["status"], failed["errorCode"]) == (unknown, "FAILED", 404)
    assert [record["memoryRecordId"] for record in server.store.records()] == [kept]


def test_batch_create_fails_a_record_without_namespace_or_with_an_unknown_strategy(client: Any) -> None:
    answer = client.batch_create_memory_records(
        memoryId=MEMORY,
        records=[
            {"requestIdentifier": "none", "namespaces": [], "content": {"text": "x"}, "timestamp": at(0)},
            {
                "requestIdentifier": "odd",
                "namespaces": [preferences()],
                "content": {"text": "x"},
                "timestamp": at(0),
                "memoryStrategyId": "nope",
            },
            {"requestIdentifier": "fine", "namespaces": [preferences()], "content": {"text": "x"}, "timestamp": at(0)},
        ],
    )
    assert [(r["requestIdentifier"], r["errorCode"]) for r in answer["failedRecords"]] == [("none", 400), ("odd", 400)]
    assert [r["requestIdentifier"] for r in answer["successfulRecords"]] == ["fine"]


def test_the_same_client_token_creates_the_records_once(client: Any, server: Any) -> None:
    request = {
        "memoryId": MEMORY,
        "records": [
            {
                "requestIdentifier": "r",
                "namespaces": [preferences()],
                "content": {"text": "you prefer tabs"},
                "timestamp": at(0),
            }
        ],
        "clientToken": "write-1",
    }
    first = client.batch_create_memory_records(**request)
    again = client.batch_create_memory_records(**request)
    assert again["successfulRecords"] == first["successfulRecords"]
    assert len(server.store.records()) == 1
    changed = {**request, "records": [{**request["records"][0], "content": {"text": "you prefer spaces"}}]}
    with pytest.raises(ClientError) as mismatch:
        client.batch_create_memory_records(**changed)
    assert mismatch.value.response["reason"] == "IdempotentParameterMismatchException"


def test_list_newest_first_in_pages_under_a_path(client: Any) -> None:
    made = [write(client, f"you prefer option {n}", preferences(), name=f"r{n}") for n in range(5)]
    write(client, "not mine", preferences(OTHER_ACTOR))
    listed: list[str] = []
    token = None
    while True:
        extra = {"nextToken": token} if token else {}
        answer = client.list_memory_records(memoryId=MEMORY, namespacePath=f"/people/{ACTOR}/", maxResults=2, **extra)
        listed += [summary["memoryRecordId"] for summary in answer["memoryRecordSummaries"]]
        token = answer.get("nextToken")
        if not token:
            break
    assert listed == list(reversed(made))


def test_namespace_is_exact_and_namespace_path_hierarchical(client: Any) -> None:
    write(client, "you prefer tabs", preferences(), name="a")
    write(client, "this project uses pnpm", project_namespace(), name="b")
    write(client, "someone else", f"/people/{ACTOR}x/preferences", name="c")

    def listed(**where: str) -> list[str]:
        return sorted(texts(client.list_memory_records(memoryId=MEMORY, **where)))

    assert listed(namespace=preferences()) == ["you prefer tabs"]
    assert listed(namespace=f"/people/{ACTOR}") == []
    assert listed(namespacePath=f"/people/{ACTOR}") == ["this project uses pnpm", "you prefer tabs"]
    assert listed(namespacePath=f"/people/{ACTOR}/projects/") == ["this project uses pnpm"]
    assert len(listed(namespacePath="/")) == 3


def test_two_actors_never_see_each_others_records(client: Any) -> None:
    write(client, "you prefer tabs", preferences(ACTOR), name="mine")
    write(client, "you prefer spaces", preferences(OTHER_ACTOR), name="theirs")
    mine = search(client, "prefer tabs spaces", namespacePath=f"/people/{ACTOR}/")
    theirs = client.list_memory_records(memoryId=MEMORY, namespacePath=f"/people/{OTHER_ACTOR}/")
    assert texts(mine) == ["you prefer tabs"]
    assert texts(theirs) == ["you prefer spaces"]


def test_list_by_strategy(client: Any) -> None:
    write(client, "you prefer tabs", preferences(), name="a")
    write(client, "this project uses pnpm", project_namespace(), name="b")
    answer = client.list_memory_records(memoryId=MEMORY, namespacePath="/", memoryStrategyId="facts-0123456789")
    assert texts(answer) == ["this project uses pnpm"]


def test_list_by_metadata(client: Any) -> None:
    write(client, "from a tool", preferences(), name="a", metadata={"source": {"stringValue": "tool"}})
    write(client, "extracted", preferences(), name="b")
    tool = [
        {
            "left": {"metadataKey": "source"},
            "operator": "EQUALS_TO",
            "right": {"metadataValue": {"stringValue": "tool"}},
        }
    ]
    assert texts(client.list_memory_records(memoryId=MEMORY, namespacePath="/", metadataFilters=tool)) == [
        "from a tool"
    ]


def test_retrieve_ranks_by_word_overlap_and_returns_top_k_with_scores(client: Any) -> None:
    write(client, "you prefer tabs over spaces", preferences(), name="a")
    write(client, "you like short answers", preferences(), name="b")
    write(client, "this project uses pnpm for packages", project_namespace(), name="c")
    answer = search(client, "Tabs or spaces for indentation?", top_k=2)
    # no threshold: the nearest come back anyway, the unrelated ones newest first
    assert texts(answer) == ["you prefer tabs over spaces", "this project uses pnpm for packages"]
    scores = [summary["score"] for summary in answer["memoryRecordSummaries"]]
    assert 0 < scores[0] <= 1 and scores[1] == 0
    assert "nextToken" not in answer


def test_retrieve_breaks_ties_newest_first(client: Any) -> None:
    write(client, "you like green", preferences(), name="old")
    write(client, "you like blue", preferences(), name="new")
    assert texts(search(client, "what do I like?")) == ["you like blue", "you like green"]


def test_retrieve_with_an_exact_namespace_and_a_strategy(client: Any) -> None:
    write(client, "you prefer pnpm", preferences(), name="a")
    write(client, "this project uses pnpm", project_namespace(), name="b")
    assert texts(search(client, "pnpm", namespace=project_namespace())) == ["this project uses pnpm"]
    by_strategy = client.retrieve_memory_records(
        memoryId=MEMORY,
        namespacePath="/",
        searchCriteria={"searchQuery": "pnpm", "memoryStrategyId": "preferences-0123456789"},
    )
    assert texts(by_strategy) == ["you prefer pnpm"]


def test_retrieve_pages_through_its_top_k(client: Any) -> None:
    for n in range(6):
        write(client, f"you like colour number {n}", preferences(), name=f"r{n}")
    first = client.retrieve_memory_records(
        memoryId=MEMORY, namespacePath="/", searchCriteria={"searchQuery": "colour", "topK": 5}, maxResults=3
    )
    rest = client.retrieve_memory_records(
        memoryId=MEMORY,
        namespacePath="/",
        searchCriteria={"searchQuery": "colour", "topK": 5},
        maxResults=3,
        nextToken=first["nextToken"],
    )
    assert len(first["memoryRecordSummaries"]) == 3 and len(rest["memoryRecordSummaries"]) == 2
    assert "nextToken" not in rest
    ids = [s["memoryRecordId"] for s in first["memoryRecordSummaries"] + rest["memoryRecordSummaries"]]
    assert len(set(ids)) == 5


def test_a_token_of_another_request_is_refused(client: Any) -> None:
    for n in range(3):
        write(client, f"you like {n}", preferences(), name=f"r{n}")
    token = client.list_memory_records(memoryId=MEMORY, namespacePath="/", maxResults=1)["nextToken"]
    for bad in (token, "not-a-token"):
        with pytest.raises(client.exceptions.ValidationException):
            client.list_memory_records(memoryId=MEMORY, namespace=preferences(), nextToken=bad)


def test_an_expired_record_is_gone(client: Any, server: Any) -> None:
    answer = client.batch_create_memory_records(
        memoryId=MEMORY,
        records=[
            {"requestIdentifier": "r", "namespaces": [preferences()], "content": {"text": "x"}, "timestamp": at(0)}
        ],
        recordExpirySpecification={"recordExpiryDurationDays": 31},
    )
    record_id = answer["successfulRecords"][0]["memoryRecordId"]
    record = client.get_memory_record(memoryId=MEMORY, memoryRecordId=record_id)["memoryRecord"]
    assert (record["expiresAt"] - record["createdAt"]).days == 31
    stored = server.store.memory(MEMORY).records[record_id]
    stored.expires_at = stored.created_at  # as if 31 days had passed
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.get_memory_record(memoryId=MEMORY, memoryRecordId=record_id)
    assert texts(client.list_memory_records(memoryId=MEMORY, namespacePath="/")) == []


def test_records_of_an_unknown_memory_are_not_found(client: Any) -> None:
    with pytest.raises(ClientError) as missing:
        client.list_memory_records(memoryId="someone_else-0123456789", namespacePath="/")
    assert code(missing) == "ResourceNotFoundException"
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.batch_delete_memory_records(memoryId="someone_else-0123456789", records=[])
