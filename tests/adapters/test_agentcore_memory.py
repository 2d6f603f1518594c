"""The AgentCore Memory adapter: every request it sends is one botocore's model of ``bedrock-agentcore``
accepts (the Stubber validates each against the installed service model), and the events it writes
are taken by moto's implementation of the service too."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from moto import mock_aws

from conductor_local.agentcore_memory.validation import problems_of
from shared.adapters.agentcore_memory import AgentCoreMemory, MemoryFailed

MEMORY_ID = "voiceide_dev-AbCdEf1234"
SUB = "7f1c2a9e-1b2c-4d3e-8f90-123456789abc"
RECORD = "mem-" + "a" * 40
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.fixture
def client() -> Any:
    """A client whose every request is checked against every constraint of the service model (the
    maximums, patterns and enums botocore itself leaves to the service) before the Stubber sees it."""
    made = boto3.client("bedrock-agentcore", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")

    def strict(params: dict[str, Any], model: Any, **_: Any) -> None:
        problems = problems_of(model.input_shape, params)
        if problems:
            raise AssertionError(f"{model.name}: {problems}")

    made.meta.events.register("provide-client-params.bedrock-agentcore.*", strict)
    return made


def summary(record_id: str, text: str, namespace: str) -> dict[str, Any]:
    return {
        "memoryRecordId": record_id,
        "content": {"text": text},
        "memoryStrategyId": "preferences-AbCdEf1234",
        "namespaces": [namespace],
        "createdAt": NOW,
    }


def test_retrieval_asks_under_the_persons_path_and_drops_anything_not_theirs(client: Any) -> None:
    mine = summary(RECORD, "you prefer tabs", f"/people/{SUB}/preferences")
    foreign = summary("mem-" + "b" * 40, "someone else's", "/people/other/preferences")
    with Stubber(client) as stub:
        stub.add_response(
            "retrieve_memory_records",
            {"memoryRecordSummaries": [mine, foreign]},
            {
                "memoryId": MEMORY_ID,
                "namespacePath": f"/people/{SUB}/",
                "searchCriteria": {"searchQuery": "tabs", "topK": 8},
                "maxResults": 8,
            },
        )
        found = AgentCoreMemory(client, MEMORY_ID).retrieve(SUB, f"/people/{SUB}/", "tabs", 8)
    assert [(record.id, record.kind, record.scope) for record in found] == [(RECORD, "preference", "person")]
    assert found[0].created_at == NOW.timestamp()


def test_a_write_is_one_record_in_the_chosen_namespace_with_an_idempotent_token(client: Any) -> None:
    memory = AgentCoreMemory(client, MEMORY_ID)
    tokens: list[str] = []
    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_response(
                "batch_create_memory_records",
                {"successfulRecords": [{"memoryRecordId": RECORD, "status": "SUCCEEDED"}], "failedRecords": []},
                {
                    "memoryId": MEMORY_ID,
                    "records": [
                        {
                            "requestIdentifier": ANY,
                            "namespaces": [f"/people/{SUB}/preferences"],
                            "content": {"text": "prefers tabs"},
                            "timestamp": NOW,
                        }
                    ],
                    "clientToken": ANY,
                },
            )
        client.meta.events.register(
            "provide-client-params.bedrock-agentcore.BatchCreateMemoryRecords",
            lambda params, **_: tokens.append(params["clientToken"]),
        )
        for _ in range(2):
            made = memory.create(f"/people/{SUB}/preferences", "prefers tabs", request_key="s/t1", now=NOW.timestamp())
            assert made == RECORD
    assert len(set(tokens)) == 1  # the same request, the same token: the service makes one record


def test_a_refused_record_is_an_error(client: Any) -> None:
    with Stubber(client) as stub:
        stub.add_response(
            "batch_create_memory_records",
            {
                "successfulRecords": [],
                "failedRecords": [{"memoryRecordId": RECORD, "status": "FAILED", "errorMessage": "no"}],
            },
        )
        with pytest.raises(MemoryFailed):
            AgentCoreMemory(client, MEMORY_ID).create("/people/x/preferences", "t", request_key="k", now=0)


def test_a_foreign_or_unknown_record_reads_as_none(client: Any) -> None:
    memory = AgentCoreMemory(client, MEMORY_ID)
    with Stubber(client) as stub:
        stub.add_response(
            "get_memory_record",
            {"memoryRecord": summary(RECORD, "theirs", "/people/other/preferences")},
            {"memoryId": MEMORY_ID, "memoryRecordId": RECORD},
        )
        stub.add_client_error("get_memory_record", "ResourceNotFoundException", http_status_code=404)
        assert memory.record(SUB, RECORD) is None
        assert memory.record(SUB, RECORD) is None


def test_deleting_a_record_already_gone_is_not_an_error(client: Any) -> None:
    with Stubber(client) as stub:
        stub.add_client_error("delete_memory_record", "ResourceNotFoundException", http_status_code=404)
        assert AgentCoreMemory(client, MEMORY_ID).delete(RECORD) is False


def test_pages_pass_the_token_on(client: Any) -> None:
    with Stubber(client) as stub:
        stub.add_response(
            "list_memory_records",
            {"memoryRecordSummaries": [summary(RECORD, "t", f"/people/{SUB}/preferences")], "nextToken": "n2"},
            {"memoryId": MEMORY_ID, "namespacePath": f"/people/{SUB}/", "maxResults": 1},
        )
        stub.add_response(
            "list_memory_records",
            {"memoryRecordSummaries": []},
            {"memoryId": MEMORY_ID, "namespacePath": f"/people/{SUB}/", "maxResults": 1, "nextToken": "n2"},
        )
        memory = AgentCoreMemory(client, MEMORY_ID)
        first, token = memory.page(SUB, f"/people/{SUB}/", limit=1)
        second, last = memory.page(SUB, f"/people/{SUB}/", limit=1, next_token=token)
    assert len(first) == 1 and token == "n2" and second == [] and last is None


def test_a_turn_event_holds_both_sides_and_the_project_and_skips_extraction_when_asked(client: Any) -> None:
    expected = {
        "memoryId": MEMORY_ID,
        "actorId": SUB,
        "sessionId": "0b6f6d1e-1d5a-4c59-9d0b-1b3f7b9d6a10",
        "eventTimestamp": NOW,
        "payload": [
            {"conversational": {"content": {"text": "I prefer tabs"}, "role": "USER"}},
            {"conversational": {"content": {"text": "Noted."}, "role": "ASSISTANT"}},
        ],
        "clientToken": ANY,
        "extractionConfig": {"namespaceVariables": {"project": "shop-api"}},
    }
    event = {
        "memoryId": MEMORY_ID,
        "actorId": SUB,
        "sessionId": expected["sessionId"],
        "eventId": "1764331200000#abc123",
        "eventTimestamp": NOW,
        "payload": [],
    }
    with Stubber(client) as stub:
        stub.add_response("create_event", {"event": event}, expected)
        stub.add_response("create_event", {"event": event}, {**expected, "extractionMode": "SKIP"})
        memory = AgentCoreMemory(client, MEMORY_ID)
        for extract in (True, False):
            made = memory.add_turn(
                SUB,
                expected["sessionId"],
                "I prefer tabs",
                "Noted.",
                project="shop-api",
                turn_key="1:I prefer tabs",
                now=NOW.timestamp(),
                extract=extract,
            )
            assert made == "1764331200000#abc123"


def test_the_strict_check_is_real_an_out_of_range_top_k_never_leaves(client: Any) -> None:
    with Stubber(client) as stub:
        stub.add_response("retrieve_memory_records", {"memoryRecordSummaries": []})
        with pytest.raises(AssertionError, match="topK"):
            AgentCoreMemory(client, MEMORY_ID).retrieve(SUB, f"/people/{SUB}/", "q", 101)


@mock_aws
def test_moto_takes_the_turn_events_and_erasing_a_session_deletes_every_one() -> None:
    client = boto3.client("bedrock-agentcore", region_name="us-east-1")
    memory = AgentCoreMemory(client, MEMORY_ID)
    session = "0b6f6d1e-1d5a-4c59-9d0b-1b3f7b9d6a10"
    for turn in range(3):
        memory.add_turn(
            SUB, session, f"words {turn}", "answer", project="p", turn_key=str(turn), now=NOW.timestamp() + turn
        )
    listed = client.list_events(memoryId=MEMORY_ID, actorId=SUB, sessionId=session)["events"]
    assert len(listed) == 3
    assert memory.erase_session(SUB, session) == 3
    assert client.list_events(memoryId=MEMORY_ID, actorId=SUB, sessionId=session)["events"] == []


def test_an_unexpected_error_is_raised(client: Any) -> None:
    with Stubber(client) as stub:
        stub.add_client_error("delete_memory_record", "ThrottledException", http_status_code=429)
        with pytest.raises(ClientError):
            AgentCoreMemory(client, MEMORY_ID).delete(RECORD)


def test_every_call_against_the_local_memory_over_http() -> None:
    """The adapter end to end against the local data plane (which refuses what AWS refuses)."""
    from conductor_local.agentcore_memory.server import LocalAgentCoreMemoryServer
    from conductor_local.agentcore_memory.store import LOCAL_MEMORY_ID

    with LocalAgentCoreMemoryServer("127.0.0.1", 0) as server:
        client = boto3.client(
            "bedrock-agentcore",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        memory = AgentCoreMemory(client, LOCAL_MEMORY_ID)
        session = "0b6f6d1e-1d5a-4c59-9d0b-1b3f7b9d6a10"
        memory.add_turn(SUB, session, "I prefer tabs over spaces", "Noted.", project="shop-api", turn_key="1", now=1.0)
        made = [
            memory.create(f"/people/{SUB}/projects/shop-api", f"uses tool {index}", request_key=str(index), now=2.0)
            for index in range(3)
        ]
        assert memory.create(f"/people/{SUB}/projects/shop-api", "uses tool 0", request_key="0", now=2.0) == made[0]
        found = memory.retrieve(SUB, f"/people/{SUB}/", "tabs", 5)
        assert found[0].text == "you prefer tabs over spaces" and found[0].kind == "preference"
        first, token = memory.page(SUB, f"/people/{SUB}/", limit=2)
        rest, last = memory.page(SUB, f"/people/{SUB}/", limit=2, next_token=token)
        assert len(first) == 2 and len(rest) == 2 and last is None
        assert memory.record(SUB, made[1]) is not None and memory.record("someone-else", made[1]) is None
        assert memory.delete(made[1]) is True and memory.delete(made[1]) is False
        assert memory.delete_many([made[0], made[2]]) == 2
        assert memory.sessions(SUB) == [session]
        assert memory.erase_session(SUB, session) == 1
        assert [record.text for record in memory.all_records(SUB, f"/people/{SUB}/")] == ["you prefer tabs over spaces"]
