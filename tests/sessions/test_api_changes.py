"""The sessions Lambda's changing routes end to end (rename, end, erase), and ids and ownership on
every route: HTTP API events in, DynamoDB (moto) and the fake gateway behind."""

from __future__ import annotations

import json
import uuid

import pytest

from lambdas import runtime
from shared.core import conductor
from shared.core.decision import DEFAULT_SETTINGS
from shared.core.messages import text_block
from shared.core.state import ActiveStream, Turn
from shared.wire.protocol import ErrorCode
from tests.sessions.conftest import (
    CALLBACK_URL,
    OTHER,
    PERSON,
    RETENTION_SECONDS,
    TABLE,
    Api,
    conversation,
    error_code,
)

BAD_REQUEST = "bad_request"


# ---- every route: ids and ownership ------------------------------------------------------------

ROUTES = [
    ("GET", "/sessions/{id}", None),
    ("PATCH", "/sessions/{id}", {"title": "Mine now"}),
    ("POST", "/sessions/{id}/end", None),
    ("DELETE", "/sessions/{id}", None),
]


@pytest.mark.parametrize(("method", "template", "body"), ROUTES)
def test_another_persons_session_is_404_on_every_route(api: Api, method: str, template: str, body: object) -> None:
    theirs = api.seed(OTHER, connection_id="their-conn", title="Theirs")
    status, answer = api.call(method, template.format(id=theirs.session_id), body=body)
    assert status == 404 and error_code(answer) == "not_found"
    after = api.store.load(theirs.session_id)
    assert after is not None and after.title == "Theirs" and after.ended_at is None
    assert api.gateway.posts == [] and api.gateway.closes == []


@pytest.mark.parametrize(("method", "template", "body"), ROUTES)
@pytest.mark.parametrize("bad_id", ["not-a-uuid", "9c5b94b1-35ad-19bb-b118-8e8fc24abf80"])
def test_a_bad_id_is_400_on_every_route(api: Api, method: str, template: str, body: object, bad_id: str) -> None:
    status, answer = api.call(method, template.format(id=bad_id), body=body)
    assert status == 400 and error_code(answer) == BAD_REQUEST
    assert answer["error"]["message"] == "the session id must be a UUID v4"


# ---- rename ------------------------------------------------------------------------------------


def test_rename(api: Api) -> None:
    state = api.seed(title="Made title")
    status, body = api.call("PATCH", f"/sessions/{state.session_id}", body={"title": "  Build failure on main  "})
    assert status == 200 and body["title"] == "Build failure on main" and body["id"] == state.session_id
    stored = api.store.load(state.session_id)
    assert stored is not None and stored.title == "Build failure on main"
    _, listed = api.call("GET", "/sessions")
    assert listed["sessions"][0]["title"] == "Build failure on main"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"title": ""}, None),
        ({"title": "   "}, None),
        ({"title": "x" * 61}, None),
        ({"title": 5}, None),
        ({"name": "x"}, None),
        ({"title": "ok", "extra": 1}, None),
        ("not json", None),
        ("[]", None),
        (None, None),
        ({"title": "ok"}, {"content-type": "text/plain"}),
        ({"title": "ok"}, {"content-type": "multipart/form-data"}),
        ({"title": '"."'}, None),  # nothing left once cleaned
    ],
)
def test_bad_titles_and_bodies_are_400(api: Api, body: object, headers: dict[str, str] | None) -> None:
    state = api.seed(title="Kept")
    status, answer = api.call("PATCH", f"/sessions/{state.session_id}", body=body, headers=headers)
    assert status == 400 and error_code(answer) == BAD_REQUEST
    stored = api.store.load(state.session_id)
    assert stored is not None and stored.title == "Kept"


def test_a_base64_body_is_read(api: Api) -> None:
    state = api.seed()
    status, body = api.call("PATCH", f"/sessions/{state.session_id}", body={"title": "Encoded"}, base64_body=True)
    assert status == 200 and body["title"] == "Encoded"


# ---- end ---------------------------------------------------------------------------------------


def test_end_marks_ended_tells_the_connection_and_closes_it(api: Api) -> None:
    state = api.seed(connection_id="conn-1", messages=conversation())
    status, body = api.call("POST", f"/sessions/{state.session_id}/end")
    assert status == 200 and body["status"] == "ended" and body["id"] == state.session_id
    [(endpoint, connection_id, frame)] = api.gateway.posts
    assert (endpoint, connection_id) == (CALLBACK_URL, "conn-1")
    assert frame["kind"]["error"]["code"] == "session_ended"
    assert api.gateway.closes == [(CALLBACK_URL, "conn-1")]
    stored = api.store.load(state.session_id)
    assert stored is not None and stored.ended_at is not None and stored.connection_id is None
    items = [item for item in api.items() if item["pk"]["S"] == f"SESSION#{state.session_id}"]
    assert len(items) == 1 + len(conversation())
    assert {int(item["expires_at"]["N"]) for item in items} == {int(stored.ended_at) + RETENTION_SECONDS}
    _, listed = api.call("GET", "/sessions", query={"status": "ended"})
    assert [session["id"] for session in listed["sessions"]] == [state.session_id]


def test_with_the_reaper_ending_re_dates_the_state_alone_so_a_resumed_session_keeps_all_it_said(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the session reaper deletes a session's items with its expired state (the history's
    backstop set), ending dates the state only: a session resumed later has no gap in its history."""
    monkeypatch.setenv("CONDUCTOR_HISTORY_TTL_SECONDS", str(400 * 24 * 3600))
    runtime.reset()
    state = api.seed(connection_id="conn-1", messages=conversation())
    before = {item["sk"]["S"]: int(item["expires_at"]["N"]) for item in api.items(state.session_id)}
    status, _ = api.call("POST", f"/sessions/{state.session_id}/end")
    assert status == 200
    stored = api.store.load(state.session_id)
    assert stored is not None and stored.ended_at is not None
    after = {item["sk"]["S"]: int(item["expires_at"]["N"]) for item in api.items(state.session_id)}
    assert after.pop("STATE") == int(stored.ended_at) + RETENTION_SECONDS
    messages = {key: at for key, at in before.items() if key != "STATE"}
    assert len(messages) == len(conversation()) and after == messages


def test_end_stops_a_turn_in_progress_keeping_what_was_heard(api: Api) -> None:
    turn = Turn(turn_id="turn-1", stream=ActiveStream(stream_id="turn-1.0.x", text="Hello there. And more", spoken=12))
    state = api.seed(connection_id="conn-1", messages=[("user", [text_block("hi")])], turn=turn)
    status, _ = api.call("POST", f"/sessions/{state.session_id}/end")
    assert status == 200
    stored = api.store.load(state.session_id)
    assert stored is not None and stored.turn is None
    kept = [json.loads(frame) for _, frame in api.store.outbox(state.session_id)]
    finals = [frame["kind"].get("assistantSpeechFinal") for frame in kept]
    assert {"text": "Hello there.", "interrupted": True} in finals
    _, body = api.call("GET", f"/sessions/{state.session_id}")
    assert [(entry["role"], entry["text"], entry.get("interrupted")) for entry in body["transcript"]] == [
        ("user", "hi", None),
        ("assistant", "Hello there.", True),
    ]


def test_end_without_a_connection_posts_nothing(api: Api) -> None:
    state = api.seed()
    status, body = api.call("POST", f"/sessions/{state.session_id}/end")
    assert status == 200 and body["status"] == "ended"
    assert api.gateway.posts == [] and api.gateway.closes == []


def test_end_of_an_unknown_session_is_404(api: Api) -> None:
    status, body = api.call("POST", f"/sessions/{uuid.uuid4()}/end")
    assert status == 404 and error_code(body) == "not_found"


# ---- erase -------------------------------------------------------------------------------------


def test_erase_leaves_no_item_and_then_the_session_is_not_found(api: Api) -> None:
    state = api.seed(connection_id="conn-9", messages=conversation())
    api.store.put_connection("conn-9", state.session_id, PERSON)
    kept = api.seed(messages=conversation())  # another session of the same person stays
    assert len(api.items(state.session_id)) == 1 + len(conversation()) + 1
    status, body = api.call("DELETE", f"/sessions/{state.session_id}")
    assert (status, body) == (204, None)
    assert api.items(state.session_id) == []
    assert len(api.items(kept.session_id)) == 1 + len(conversation())
    [(_, connection_id, frame)] = api.gateway.posts
    assert connection_id == "conn-9" and frame["kind"]["error"]["code"] == "session_erased"
    assert api.gateway.closes == [(CALLBACK_URL, "conn-9")]
    status, body = api.call("DELETE", f"/sessions/{state.session_id}")
    assert status == 404 and error_code(body) == "not_found"
    status, _ = api.call("GET", f"/sessions/{state.session_id}")
    assert status == 404


def test_erase_of_a_session_never_seen_is_404(api: Api) -> None:
    status, body = api.call("DELETE", f"/sessions/{uuid.uuid4()}")
    assert status == 404 and error_code(body) == "not_found"


def test_erase_deletes_the_leftovers_of_an_erase_that_failed_halfway_and_answers_404(api: Api) -> None:
    state = api.seed(messages=conversation())
    api.client.delete_item(TableName=TABLE, Key={"pk": {"S": f"SESSION#{state.session_id}"}, "sk": {"S": "STATE"}})
    assert len(api.items(state.session_id)) == len(conversation())
    status, body = api.call("DELETE", f"/sessions/{state.session_id}")
    assert status == 404 and error_code(body) == "not_found"
    assert api.items(state.session_id) == []


def test_writes_an_ended_session_still_gets_keep_the_end_expiry_and_a_late_transcript_starts_nothing(
    api: Api,
) -> None:
    state = api.seed()
    status, _ = api.call("POST", f"/sessions/{state.session_id}/end")
    assert status == 200
    store = runtime.store()  # as the WebSocket Lambdas build it: the stage's retention from the env
    ended = store.load(state.session_id)
    assert ended is not None and ended.ended_at is not None
    late = conductor.handle_transcript(ended, "one more thing", now=ended.ended_at + 1, settings=DEFAULT_SETTINGS)
    assert late.run_model is None and late.state.turn is None
    assert [getattr(event, "code", None) for event in late.events] == [ErrorCode.SESSION_ENDED]
    store.commit(late.state)  # a write after the end (the refusal's event) keeps the end's expiry
    (item,) = [i for i in api.items(state.session_id) if i["sk"]["S"] == "STATE"]
    assert int(item["expires_at"]["N"]) == int(ended.ended_at) + RETENTION_SECONDS
