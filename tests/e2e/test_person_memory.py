"""What the conductor remembers across sessions, end to end on the local stack with sign-in: real
WebSockets, the sessions API over real HTTP, the local AgentCore Memory's own store looked into.

One stack for the module, three people: ``dev`` (the pool's test user) remembers and forgets, ``ada``
must never see any of it, ``cyd`` hits the write limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from conductor_local.agentcore_memory.errors import internal
from conductor_local.cognito.user_pool import add_user
from conductor_local.stack import LocalStack
from shared.core.person_memory import SECRET_REFUSAL
from tests.e2e.conftest import STACK_ENV, TURN_TIMEOUT_S, async_test, client_for
from tests.e2e.test_sessions_api import api_of, http_call, off_loop, sign_in_as
from voiceide_client.connection.sign_in import CognitoSignIn

pytestmark = pytest.mark.e2e

ADA = ("ada", "Second-user-1")
CYD = ("cyd", "Third-user-1")


@pytest.fixture(scope="module")
def memory_stack() -> Iterator[LocalStack]:
    spoken = {**STACK_ENV, "CONDUCTOR_LOCAL_READBACK": "spoken"}  # results said as a person would
    with LocalStack(port=0, quiet=True, env=spoken, auth="cognito") as local:
        assert local.user_pool is not None and local.memory_server is not None
        for username, password in (ADA, CYD):
            add_user(local.cognito_client(), local.user_pool.user_pool_id, username, password)
        yield local


def records(stack: LocalStack) -> list[dict[str, Any]]:
    return stack.memory_server.store.records()


def events(stack: LocalStack) -> list[dict[str, Any]]:
    return stack.memory_server.store.events()


def sub_of(person: CognitoSignIn) -> str:
    payload = person.id_token().split(".")[1]
    import base64

    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["sub"])


async def said(stack: LocalStack, person: CognitoSignIn, *lines: str, session_id: str | None = None) -> list[str]:
    """What the conductor answered each line, in one session of ``person``."""
    answers: list[str] = []
    async with client_for(stack, session_id, handshake_headers=person.headers) as client:
        for line in lines:
            answers.append((await client.say(line, timeout=TURN_TIMEOUT_S)).final_text)
    await off_loop(stack.lambda_server.wait_idle)  # the turns' events are written after their last post
    return answers


@async_test
async def test_a_preference_is_remembered_in_a_new_session_and_never_seen_by_another_person(
    memory_stack: LocalStack,
) -> None:
    dev, ada = sign_in_as(memory_stack), sign_in_as(memory_stack, *ADA)
    (written,) = await said(memory_stack, dev, "remember that I prefer tabs over spaces")
    assert "I'll remember that you prefer tabs over spaces" in written
    mine = [record for record in records(memory_stack) if "tabs over spaces" in record["content"]["text"]]
    assert len(mine) == 1  # the write itself; its turn is kept as an event but not extracted again
    assert mine[0]["namespaces"] == [f"/people/{sub_of(dev)}/preferences"]

    # A new session of the same person: the model's request carries it, and "what do you remember" says it.
    context, recalled = await said(memory_stack, dev, "context", "what do you remember")
    assert '<context kind="remembered">' in context and "tabs over spaces" in context
    assert "I remember: you prefer tabs over spaces" in recalled

    # Another person: not in their requests, not in their search, not over HTTP.
    their_context, theirs = await said(memory_stack, ada, "context", "what do you remember about me")
    assert "tabs" not in their_context and "remembered" not in their_context
    assert theirs == "I don't remember anything about you yet."
    assert (await off_loop(api_of(memory_stack, ada).memories))["memories"] == []
    record_id = mine[0]["memoryRecordId"]
    status, _, body = await off_loop(
        http_call,
        memory_stack,
        "DELETE",
        f"/memories/{record_id}",
        headers={"Authorization": f"Bearer {ada.id_token()}"},
    )
    unknown = await off_loop(
        http_call,
        memory_stack,
        "DELETE",
        "/memories/mem-" + "0" * 40,
        headers={"Authorization": f"Bearer {ada.id_token()}"},
    )
    assert (
        (status, body)
        == (unknown[0], unknown[2])
        == (404, {"error": {"code": "not_found", "message": "no such record"}})
    )
    listed = (await off_loop(api_of(memory_stack, dev).memories))["memories"]
    assert [(entry["id"], entry["kind"], entry["scope"]) for entry in listed] == [(record_id, "preference", "person")]

    # "forget that" after hearing it: gone from the store, the API and the session's next request.
    async with client_for(memory_stack, handshake_headers=dev.headers) as client:
        await client.say("what do you remember", timeout=TURN_TIMEOUT_S)
        forgotten = (await client.say("forget that", timeout=TURN_TIMEOUT_S)).final_text
        after = (await client.say("context", timeout=TURN_TIMEOUT_S)).final_text
    assert forgotten == "Forgotten."
    assert "tabs over spaces" not in after
    assert not [record for record in records(memory_stack) if "tabs" in record["content"]["text"]]
    assert (await off_loop(api_of(memory_stack, dev).memories))["memories"] == []


@async_test
async def test_forgetting_everything_leaves_no_record_and_no_event_of_the_person(memory_stack: LocalStack) -> None:
    dev = sign_in_as(memory_stack)
    await said(memory_stack, dev, "remember that I run the tests with -x", "I always use pnpm for this project")
    sub = sub_of(dev)
    assert any(f"/people/{sub}/" in record["namespaces"][0] for record in records(memory_stack))
    assert any(event["actorId"] == sub for event in events(memory_stack))  # each turn left its event
    deleted = await off_loop(api_of(memory_stack, dev).forget_all)
    assert deleted >= 1
    assert not [record for record in records(memory_stack) if f"/people/{sub}/" in record["namespaces"][0]]
    assert not [event for event in events(memory_stack) if event["actorId"] == sub]
    assert (await off_loop(api_of(memory_stack, dev).memories))["memories"] == []
    (context,) = await said(memory_stack, dev, "context")
    assert "remembered" not in context


@async_test
async def test_erasing_a_session_deletes_its_events(memory_stack: LocalStack) -> None:
    dev = sign_in_as(memory_stack)
    async with client_for(memory_stack, handshake_headers=dev.headers) as client:
        await client.say("the build uses gradle", timeout=TURN_TIMEOUT_S)
        session_id = client.session_id
    await off_loop(memory_stack.lambda_server.wait_idle)
    assert [event for event in events(memory_stack) if event["sessionId"] == session_id]
    await off_loop(api_of(memory_stack, dev).erase, session_id)
    assert not [event for event in events(memory_stack) if event["sessionId"] == session_id]


@async_test
async def test_the_sixth_write_in_a_minute_is_refused_aloud_and_a_secret_never_is_kept(
    memory_stack: LocalStack,
) -> None:
    cyd = sign_in_as(memory_stack, *CYD)
    lines = [
        f"remember that note number {index} is about the {word} module"
        for index, word in enumerate(("parser", "lexer", "printer", "linker", "loader", "cache"))
    ]
    answers = await said(memory_stack, cyd, *lines)
    assert all("I'll remember that" in answer for answer in answers[:5]), answers
    assert "5 things a minute" in answers[5] and "was not kept" in answers[5]
    sub = sub_of(cyd)
    kept = [record for record in records(memory_stack) if record["namespaces"][0].startswith(f"/people/{sub}/")]
    assert len(kept) == 5 and not any("cache" in record["content"]["text"] for record in kept)

    (refused,) = await said(memory_stack, sign_in_as(memory_stack, *ADA), "remember my password is hunter2")
    assert SECRET_REFUSAL.split(":")[0] in refused
    everything = json.dumps(records(memory_stack), default=str) + json.dumps(events(memory_stack), default=str)
    assert "hunter2" not in everything


@async_test
async def test_a_memory_that_is_down_never_stops_a_turn(memory_stack: LocalStack) -> None:
    dev = sign_in_as(memory_stack)
    server = memory_stack.memory_server

    def failing(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        raise internal("the memory is down")

    server.call = failing  # every request of the memory answers 500 (after botocore's retries too)
    try:
        answer, context = await said(memory_stack, dev, "remember that I like dark themes", "context")
    finally:
        del server.call
    assert "Memory is not available right now" in answer
    assert context  # the next turn ran as ever


@async_test
async def test_crafted_requests_get_a_400_or_401_never_a_500(memory_stack: LocalStack) -> None:
    token = {"Authorization": f"Bearer {sign_in_as(memory_stack).id_token()}"}
    for method, path, expected in (
        ("GET", "/memories?cursor=made-up.cursor", 400),
        ("GET", "/memories?limit=0", 400),
        ("GET", "/memories?limit=101", 400),
        ("DELETE", "/memories/not-an-id", 400),
        ("DELETE", "/memories/mem-" + "%00" * 40, 400),
    ):
        status, _, body = await off_loop(http_call, memory_stack, method, path, headers=token)
        assert (status, body["error"]["code"]) == (expected, "bad_request"), (method, path, body)
    status, _, body = await off_loop(http_call, memory_stack, "GET", "/memories")
    assert (status, body) == (401, {"message": "Unauthorized"})
