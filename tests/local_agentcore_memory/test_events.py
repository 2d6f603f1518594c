"""Events and sessions on the local AgentCore Memory, through the real boto3 client: the calls the
conductor makes after each turn and when a session is erased, answered as the service answers."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.local_agentcore_memory.conftest import ACTOR, MEMORY, OTHER_ACTOR, SESSION, at, say, user_turn

EVENT_ID = re.compile(r"[0-9]+#[a-fA-F0-9]+")


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_create_event_answers_201_with_the_event_as_sent(client: Any) -> None:
    answer = client.create_event(
        memoryId=MEMORY,
        actorId=ACTOR,
        sessionId=SESSION,
        eventTimestamp=at(1.5),
        payload=user_turn("hello there"),
        metadata={"device": {"stringValue": "iphone"}},
    )
    event = answer["event"]
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert EVENT_ID.fullmatch(event["eventId"])
    assert (event["memoryId"], event["actorId"], event["sessionId"]) == (MEMORY, ACTOR, SESSION)
    assert event["eventTimestamp"] == at(1.5)
    assert event["payload"] == user_turn("hello there")
    assert event["metadata"] == {"device": {"stringValue": "iphone"}}


def test_get_event_and_delete_event(client: Any) -> None:
    event = say(client, "hello there")
    keys = {"memoryId": MEMORY, "actorId": ACTOR, "sessionId": SESSION, "eventId": event["eventId"]}
    assert client.get_event(**keys)["event"] == event
    assert client.delete_event(**keys)["eventId"] == event["eventId"]
    with pytest.raises(ClientError) as gone:
        client.get_event(**keys)
    assert code(gone) == "ResourceNotFoundException"
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.delete_event(**keys)


def test_an_event_is_found_only_under_its_own_actor_and_session(client: Any) -> None:
    event = say(client, "hello there")
    for actor, session in ((OTHER_ACTOR, SESSION), (ACTOR, "another-session")):
        with pytest.raises(client.exceptions.ResourceNotFoundException):
            client.get_event(memoryId=MEMORY, actorId=actor, sessionId=session, eventId=event["eventId"])


def test_list_events_newest_first_in_pages(client: Any) -> None:
    made = [say(client, f"turn {n}", when=n)["eventId"] for n in range(5)]
    listed: list[str] = []
    token = None
    pages = 0
    while True:
        request = {"memoryId": MEMORY, "actorId": ACTOR, "sessionId": SESSION, "maxResults": 2}
        answer = client.list_events(**request, **({"nextToken": token} if token else {}))
        listed += [event["eventId"] for event in answer["events"]]
        pages += 1
        token = answer.get("nextToken")
        if not token:
            break
    assert listed == list(reversed(made))
    assert pages == 3


def test_list_events_without_payloads_and_of_an_empty_session(client: Any) -> None:
    say(client, "hello there")
    answer = client.list_events(memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, includePayloads=False)
    assert len(answer["events"]) == 1 and "payload" not in answer["events"][0]
    assert client.list_events(memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION)["events"][0]["payload"]
    assert client.list_events(memoryId=MEMORY, actorId=OTHER_ACTOR, sessionId=SESSION)["events"] == []


def test_list_events_by_metadata(client: Any) -> None:
    say(client, "on the phone", metadata={"device": {"stringValue": "iphone"}})
    say(client, "on the desk", when=1, metadata={"device": {"stringValue": "mac"}})
    say(client, "nowhere", when=2)

    def texts(*filters: dict[str, Any]) -> list[str]:
        answer = client.list_events(
            memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, filter={"eventMetadata": list(filters)}
        )
        return [event["payload"][0]["conversational"]["content"]["text"] for event in answer["events"]]

    device = {"metadataKey": "device"}
    iphone = {"metadataValue": {"stringValue": "iphone"}}
    assert texts({"left": device, "operator": "EQUALS_TO", "right": iphone}) == ["on the phone"]
    assert texts({"left": device, "operator": "EXISTS"}) == ["on the desk", "on the phone"]
    assert texts({"left": device, "operator": "NOT_EXISTS"}) == ["nowhere"]
    with pytest.raises(client.exceptions.ValidationException):
        texts({"left": device, "operator": "EQUALS_TO"})


def test_a_branch_starts_at_an_event_of_its_own_session(client: Any) -> None:
    root = say(client, "hello there")
    branch = {"name": "retry", "rootEventId": root["eventId"]}
    said = say(client, "once more", when=1, branch=branch)
    assert said["branch"] == branch
    retried = client.list_events(
        memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, filter={"branch": {"name": "retry"}}
    )
    assert [event["eventId"] for event in retried["events"]] == [said["eventId"]]
    with_parent = client.list_events(
        memoryId=MEMORY,
        actorId=ACTOR,
        sessionId=SESSION,
        filter={"branch": {"name": "retry", "includeParentBranches": True}},
    )
    assert [event["eventId"] for event in with_parent["events"]] == [said["eventId"], root["eventId"]]
    with pytest.raises(ClientError) as elsewhere:
        say(client, "elsewhere", session="another-session", branch=branch)
    assert code(elsewhere) == "ValidationException"
    assert elsewhere.value.response["reason"] == "EventInOtherSession"
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        say(client, "nowhere", branch={"name": "retry", "rootEventId": "1#ab"})


def test_the_same_client_token_creates_one_event(client: Any, server: Any) -> None:
    first = say(client, "hello there", clientToken="turn-1")
    again = say(client, "hello there", clientToken="turn-1")
    assert again == first
    assert len(server.store.events()) == 1
    with pytest.raises(ClientError) as mismatch:
        say(client, "something else", clientToken="turn-1")
    assert code(mismatch) == "ValidationException"
    assert mismatch.value.response["reason"] == "IdempotentParameterMismatchException"
    assert say(client, "hello there", clientToken="turn-2")["eventId"] != first["eventId"]


def test_list_sessions_newest_first_and_with_events_only(client: Any) -> None:
    for n, session in enumerate(("first", "second", "third")):
        say(client, "hello", session=session, when=n)
    say(client, "not mine", actor=OTHER_ACTOR, session="theirs")
    answer = client.list_sessions(memoryId=MEMORY, actorId=ACTOR)
    assert [s["sessionId"] for s in answer["sessionSummaries"]] == ["third", "second", "first"]
    assert all(s["actorId"] == ACTOR and s["createdAt"] for s in answer["sessionSummaries"])
    page = client.list_sessions(memoryId=MEMORY, actorId=ACTOR, maxResults=2)
    rest = client.list_sessions(memoryId=MEMORY, actorId=ACTOR, maxResults=2, nextToken=page["nextToken"])
    assert [s["sessionId"] for s in rest["sessionSummaries"]] == ["first"] and "nextToken" not in rest
    (event,) = client.list_events(memoryId=MEMORY, actorId=ACTOR, sessionId="second")["events"]
    client.delete_event(memoryId=MEMORY, actorId=ACTOR, sessionId="second", eventId=event["eventId"])
    busy = client.list_sessions(memoryId=MEMORY, actorId=ACTOR, filter={"eventFilter": "HAS_EVENTS"})
    assert [s["sessionId"] for s in busy["sessionSummaries"]] == ["third", "first"]


def test_erasing_a_session_as_the_sessions_api_does(client: Any) -> None:
    """``ListEvents`` (no payloads, pages of 100) then ``DeleteEvent`` each, until none is left."""
    for n in range(3):
        say(client, f"turn {n}", when=n)
    say(client, "another session", session="kept")
    erased = 0
    while events := client.list_events(
        memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, includePayloads=False, maxResults=100
    )["events"]:
        for event in events:
            client.delete_event(memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, eventId=event["eventId"])
            erased += 1
    assert erased == 3
    assert len(client.list_events(memoryId=MEMORY, actorId=ACTOR, sessionId="kept")["events"]) == 1


def test_an_unknown_memory_is_not_found(client: Any) -> None:
    with pytest.raises(ClientError) as missing:
        client.create_event(
            memoryId="someone_else-0123456789",
            actorId=ACTOR,
            sessionId=SESSION,
            eventTimestamp=at(0),
            payload=user_turn("hello"),
        )
    assert code(missing) == "ResourceNotFoundException"
    assert "someone_else-0123456789" in missing.value.response["Error"]["Message"]


def test_a_memory_arn_names_the_memory(client: Any) -> None:
    arn = f"arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/{MEMORY}"
    event = client.create_event(
        memoryId=arn, actorId=ACTOR, sessionId=SESSION, eventTimestamp=at(0), payload=user_turn("hello")
    )["event"]
    assert event["memoryId"] == MEMORY


def test_events_created_from_many_threads_at_once_are_all_kept(client: Any, server: Any) -> None:
    errors: list[BaseException] = []

    def create(worker: int) -> None:
        try:
            for n in range(10):
                say(client, f"worker {worker} turn {n}", session=f"session-{worker}", when=n)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=create, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    events = server.store.events()
    assert len(events) == 60
    assert len({event["eventId"] for event in events}) == 60
