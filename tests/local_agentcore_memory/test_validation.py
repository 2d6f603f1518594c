"""The local AgentCore Memory refuses what the service refuses, in its words and its error shape: every
constraint of the botocore model (also those botocore leaves to the service), bodies it cannot read,
and operations it does not know."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conductor_local.agentcore_memory.wire import route
from tests.local_agentcore_memory.conftest import ACTOR, MEMORY, SESSION, at, preferences, raw_request, user_turn

EVENTS_PATH = f"/memories/{MEMORY}/events"


def refusal(call: Any, **params: Any) -> str:
    """The ``ValidationException`` a call gets (HTTP 400), its message."""
    with pytest.raises(ClientError) as refused:
        call(**params)
    error = refused.value.response
    assert error["Error"]["Code"] == "ValidationException", error
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    return str(error["Error"]["Message"])


def event(**changed: Any) -> dict[str, Any]:
    request = {
        "memoryId": MEMORY,
        "actorId": ACTOR,
        "sessionId": SESSION,
        "eventTimestamp": at(0),
        "payload": user_turn("hello"),
    }
    return {**request, **changed}


def retrieve(**criteria: Any) -> dict[str, Any]:
    return {
        "memoryId": MEMORY,
        "namespacePath": "/people/",
        "searchCriteria": {"searchQuery": "tabs", **criteria},
    }


def test_a_missing_required_member(raw_client: Any) -> None:
    request = event()
    del request["eventTimestamp"]
    message = refusal(raw_client.create_event, **request)
    assert message == (
        "1 validation error detected: "
        "Value null at 'eventTimestamp' failed to satisfy constraint: Member must not be null"
    )
    refused = refusal(raw_client.retrieve_memory_records, memoryId=MEMORY, namespacePath="/", searchCriteria={})
    assert "'searchCriteria.searchQuery'" in refused
    without_session = event()
    del without_session["sessionId"]  # optional in the model; every event belongs to a session here
    assert "Value null at 'sessionId'" in refusal(raw_client.create_event, **without_session)


@pytest.mark.parametrize(
    ("changed", "words"),
    [
        (
            {"actorId": "a" * 256},
            "Value at 'actorId' failed to satisfy constraint: Member must have length less than or equal to 255",
        ),
        (
            {"actorId": "-starts-with-a-dash"},
            "at 'actorId' failed to satisfy constraint: Member must satisfy regular expression pattern",
        ),
        (
            {"sessionId": "has space"},
            "at 'sessionId' failed to satisfy constraint: Member must satisfy regular expression pattern",
        ),
        (
            {"payload": user_turn("x") * 51},
            "Value at 'payload' failed to satisfy constraint: Member must have length less than or equal to 100",
        ),
        (
            {"extractionMode": "NEVER"},
            "Value 'NEVER' at 'extractionMode' failed to satisfy constraint: "
            "Member must satisfy enum value set: [SKIP]",
        ),
        (
            {"extractionConfig": {"namespaceVariables": {"project": "Not A Slug"}}},
            "at 'extractionConfig.namespaceVariables.project' failed to satisfy constraint: "
            "Member must satisfy regular expression pattern",
        ),
        (
            {"extractionConfig": {"namespaceVariables": {"actorId": "x"}}},
            "failed to satisfy constraint: Map keys must satisfy regular expression pattern",
        ),
        (
            {"branch": {"name": "b", "rootEventId": "not-an-event-id"}},
            "at 'branch.rootEventId' failed to satisfy constraint",
        ),
        (
            {"metadata": {f"k{n}": {"stringValue": "v"} for n in range(16)}},
            "Value at 'metadata' failed to satisfy constraint: Member must have length less than or equal to 15",
        ),
        (
            {"payload": [{"conversational": {"content": {"text": "x" * 100_001}, "role": "USER"}}]},
            "Value at 'payload.1.member.conversational.content.text'",
        ),
    ],
)
def test_maximums_patterns_enums_and_sizes_botocore_leaves_to_the_service(
    client: Any, changed: dict[str, Any], words: str
) -> None:
    assert words in refusal(client.create_event, **event(**changed))


def test_sensitive_values_are_never_echoed(client: Any) -> None:
    secret = "x" * 100_001
    message = refusal(
        client.create_event, **event(payload=[{"conversational": {"content": {"text": secret}, "role": "USER"}}])
    )
    assert "xxxx" not in message


def test_every_problem_is_reported(client: Any) -> None:
    message = refusal(client.create_event, **event(actorId="a" * 256, extractionMode="NEVER"))
    assert message.startswith("2 validation errors detected: ")


@pytest.mark.parametrize(
    ("criteria", "path", "constraint"),
    [
        ({"topK": 101}, "searchCriteria.topK", "have value less than or equal to 100"),
        ({"topK": 0}, "searchCriteria.topK", "have value greater than or equal to 1"),
        ({"memoryStrategyId": "has space"}, "searchCriteria.memoryStrategyId", "satisfy regular expression pattern"),
    ],
)
def test_search_criteria_ranges(raw_client: Any, criteria: dict[str, Any], path: str, constraint: str) -> None:
    message = refusal(raw_client.retrieve_memory_records, **retrieve(**criteria))
    assert f"at '{path}' failed to satisfy constraint: Member must {constraint}" in message


@pytest.mark.parametrize("max_results", [0, 101])
def test_max_results_from_1_to_100(raw_client: Any, max_results: int) -> None:
    for call, params in (
        (raw_client.list_memory_records, {"memoryId": MEMORY, "namespacePath": "/"}),
        (raw_client.list_events, {"memoryId": MEMORY, "actorId": ACTOR, "sessionId": SESSION}),
        (raw_client.retrieve_memory_records, retrieve()),
    ):
        assert "at 'maxResults'" in refusal(call, **params, maxResults=max_results)


def test_record_ids_and_event_ids_by_their_patterns(client: Any, raw_client: Any) -> None:
    short = refusal(raw_client.get_memory_record, memoryId=MEMORY, memoryRecordId="mem-short")
    assert (
        "Value 'mem-short' at 'memoryRecordId' failed to satisfy constraint: Member must have length greater" in short
    )
    wrong = refusal(client.get_memory_record, memoryId=MEMORY, memoryRecordId="rec-" + "a" * 36)
    assert "at 'memoryRecordId' failed to satisfy constraint: Member must satisfy regular expression pattern" in wrong
    bad_event = refusal(client.get_event, memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, eventId="12-ab")
    assert "at 'eventId'" in bad_event
    assert "at 'memoryId'" in refusal(client.list_memory_records, memoryId="no-such-shape", namespacePath="/")


def test_unions_want_exactly_one_member(raw_client: Any) -> None:
    payload = [{"conversational": {"content": {"text": "x"}, "role": "USER"}, "blob": {"a": 1}}]
    assert "at 'payload.1.member' failed to satisfy constraint: Member must have exactly one" in refusal(
        raw_client.create_event, **event(payload=payload)
    )


def test_batch_sizes_and_duplicate_request_identifiers(client: Any, raw_client: Any) -> None:
    record = {"requestIdentifier": "r", "namespaces": [preferences()], "content": {"text": "x"}, "timestamp": at(0)}
    too_many = [{**record, "requestIdentifier": f"r{n}"} for n in range(101)]
    assert "Value at 'records' failed to satisfy constraint" in refusal(
        client.batch_create_memory_records, memoryId=MEMORY, records=too_many
    )
    assert "Duplicate requestIdentifier" in refusal(
        client.batch_create_memory_records, memoryId=MEMORY, records=[record, record]
    )
    assert "at 'records.1.member.requestIdentifier'" in refusal(
        client.batch_create_memory_records, memoryId=MEMORY, records=[{**record, "requestIdentifier": "has space"}]
    )
    assert "recordExpiryDurationDays" in refusal(
        raw_client.batch_create_memory_records,
        memoryId=MEMORY,
        records=[record],
        recordExpirySpecification={"recordExpiryDurationDays": 30},
    )


def test_namespace_or_namespace_path_exactly_one(client: Any) -> None:
    assert "'namespace'" in refusal(client.list_memory_records, memoryId=MEMORY)
    both = refusal(client.list_memory_records, memoryId=MEMORY, namespace=preferences(), namespacePath="/")
    assert "'namespacePath'" in both
    assert "'namespace'" in refusal(
        client.retrieve_memory_records, memoryId=MEMORY, searchCriteria={"searchQuery": "tabs"}
    )


def test_validation_comes_before_not_found(client: Any) -> None:
    message = refusal(client.retrieve_memory_records, **{**retrieve(topK=500), "memoryId": "someone_else-0123456789"})
    assert "topK" in message


def test_the_error_shape_on_the_wire(server: Any) -> None:
    answer = raw_request(server, "POST", EVENTS_PATH, b"{not json")
    assert answer.status == 400
    assert answer.headers["x-amzn-errortype"] == "ValidationException"
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"message": "The request body is not valid JSON", "reason": "CannotParse"}
    missing = raw_request(server, "GET", f"/memories/nobody_here-0123456789/memoryRecord/mem-{'a' * 36}")
    assert missing.status == 404
    assert missing.headers["x-amzn-errortype"] == "ResourceNotFoundException"
    assert set(missing.json()) == {"message"}


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"null",
        b'"text"',
        b"\xff\xfe",
        json.dumps({"actorId": 7, "eventTimestamp": 0, "payload": []}).encode(),
        json.dumps({"actorId": "a", "eventTimestamp": "yesterday", "payload": []}).encode(),
        json.dumps({"actorId": "a", "eventTimestamp": 0, "payload": {"not": "a list"}}).encode(),
        json.dumps({"actorId": "a", "eventTimestamp": 0, "payload": [None]}).encode(),
    ],
)
def test_a_body_it_cannot_read_is_a_validation_exception(server: Any, body: bytes) -> None:
    answer = raw_request(server, "POST", EVENTS_PATH, body)
    assert (answer.status, answer.headers["x-amzn-errortype"]) == (400, "ValidationException")
    assert answer.json()["reason"] == "CannotParse"


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=4),
        max_leaves=12,
    )
)
def test_any_json_body_is_answered_never_a_crash(server: Any, body: Any) -> None:
    for path in (EVENTS_PATH, f"/memories/{MEMORY}/retrieve", f"/memories/{MEMORY}/memoryRecords/batchCreate"):
        answer = raw_request(server, "POST", path, json.dumps(body).encode())
        assert answer.status in (200, 201, 400), answer.body


def test_unknown_routes_and_operations_it_does_not_serve(server: Any) -> None:
    unknown = raw_request(server, "GET", "/nothing/here")
    assert (unknown.status, unknown.headers["x-amzn-errortype"]) == (404, "UnknownOperationException")
    operation, _ = route("POST", f"/memories/{MEMORY}/memoryRecords/batchUpdate")
    assert operation.name == "BatchUpdateMemoryRecords"
    served = raw_request(server, "POST", f"/memories/{MEMORY}/memoryRecords/batchUpdate", b"{}")
    assert (served.status, served.headers["x-amzn-errortype"]) == (501, "NotImplementedException")


def test_timestamps_are_epoch_seconds_on_the_wire(server: Any) -> None:
    body = {"actorId": ACTOR, "sessionId": SESSION, "eventTimestamp": 1793523600.25, "payload": user_turn("hello")}
    answer = raw_request(server, "POST", EVENTS_PATH, json.dumps(body).encode())
    assert answer.status == 201
    assert answer.json()["event"]["eventTimestamp"] == 1793523600.25


def test_only_loopback_names_are_answered(server: Any) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("POST", EVENTS_PATH, body=b"{}", headers={"Host": "evil.example"})
        assert connection.getresponse().status == 403
    finally:
        connection.close()
