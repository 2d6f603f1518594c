"""What an attacker sends the sessions API: bodies and cursors no app writes are 400s (never 500s),
cursors are only ever ones this API handed to this person for this list, and another person's
session is answered exactly as one that does not exist, byte for byte, on every route."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from conductor_local.lambda_runtime.context import LocalLambdaContext
from lambdas import sessions_api
from shared.wire.session_cursors import CURSOR_MAX_CHARS, CursorSeal
from tests.sessions.conftest import CURSOR_KEY, OTHER, PERSON, Api, conversation, error_code, http_event

REFUSED_CURSOR = "the cursor is not one this API handed out"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---- bodies ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (nested(5_000), "the body must be JSON: the JSON nests deeper than 32 levels"),
        ('{"title": ' + nested(5_000) + "}", "the body must be JSON: the JSON nests deeper than 32 levels"),
        (
            '{"title": "x", "more": ' + '{"a":' * 40 + "1" + "}" * 40 + "}",
            "the body must be JSON: the JSON nests deeper than 32 levels",
        ),
        ('{"title": ' + "7" * 5_000 + "}", "the body must be JSON: a number in the JSON is longer than 100 characters"),
        ('{"title": -' + "7" * 100 + "}", "the body must be JSON: a number in the JSON is longer than 100 characters"),
        ('{"title": NaN}', "the body must be JSON: NaN is not JSON"),
        ('{"title": -Infinity}', "the body must be JSON: -Infinity is not JSON"),
        ('{"title": 1e999}', "the body must be JSON: a number in the JSON is too large"),
        ('{"title": "x"', "the body must be JSON"),
    ],
)
@pytest.mark.parametrize("base64_body", [False, True])
def test_a_body_no_app_writes_is_400(api: Api, body: str, message: str, base64_body: bool) -> None:
    state = api.seed(title="Kept")
    status, answer = api.call("PATCH", f"/sessions/{state.session_id}", body=body, base64_body=base64_body)
    assert status == 400 and error_code(answer) == "bad_request"
    assert answer["error"]["message"] == message
    stored = api.store.load(state.session_id)
    assert stored is not None and stored.title == "Kept"


def test_a_body_within_the_depth_is_read(api: Api) -> None:
    state = api.seed(title="Kept")
    status, answer = api.call(
        "PATCH", f"/sessions/{state.session_id}", body={"title": "x", "more": json.loads(nested(31))}
    )
    # read, then refused for its extra field: the model's rule, not the reader's
    assert status == 400 and answer["error"]["message"] == 'the body may only hold "title", not "more"'


# ---- list cursors --------------------------------------------------------------------------------


def payload_of(cursor: str) -> dict[str, Any]:
    text = cursor.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def encoded(plain: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode().rstrip("=")


def first_page_cursor(api: Api, sub: str = PERSON) -> str:
    for index in range(3):
        api.seed(sub, last_active=1_790_000_000.0 + index)
    status, body = api.call("GET", "/sessions", query={"limit": "1"}, sub=sub)
    assert status == 200 and body["nextCursor"]
    return str(body["nextCursor"])


def refused(api: Api, cursor: str, sub: str = PERSON, path: str = "/sessions") -> None:
    status, body = api.call("GET", path, query={"cursor": cursor}, sub=sub)
    assert status == 400 and error_code(body) == "bad_request", (status, body)
    assert body["error"]["message"] == REFUSED_CURSOR


def test_a_cursor_handed_out_pages_on(api: Api) -> None:
    cursor = first_page_cursor(api)
    status, body = api.call("GET", "/sessions", query={"cursor": cursor, "limit": "1"})
    assert status == 200 and len(body["sessions"]) == 1
    assert set(payload_of(cursor)) == {"pk", "sk", "last_active"}  # the owner is in the MAC, not the payload


def test_a_cursor_of_person_a_is_refused_for_person_b(api: Api) -> None:
    refused(api, first_page_cursor(api, OTHER))


def test_a_cursor_with_its_mac_changed_is_refused(api: Api) -> None:
    cursor = first_page_cursor(api)
    payload, mac = cursor.split(".")
    flipped = ("B" if mac[0] == "A" else "A") + mac[1:]
    for forged in (f"{payload}.{flipped}", f"{payload}.{mac[:-2]}", f"{payload}.", payload, f"{payload}.{mac}.{mac}"):
        refused(api, forged)


def test_a_cursor_re_pointed_at_another_key_is_refused(api: Api) -> None:
    cursor = first_page_cursor(api)
    theirs = api.seed(OTHER)
    _, mac = cursor.split(".")
    plain = payload_of(cursor)
    for change in (
        {"pk": f"SESSION#{theirs.session_id}"},
        {"last_active": "1790000000.500"},
        {"owner": OTHER},
    ):
        refused(api, f"{encoded({**plain, **change})}.{mac}")


def test_a_cursor_signed_with_another_key_is_refused(api: Api) -> None:
    plain = payload_of(first_page_cursor(api))
    other_key = CursorSeal(b"k" * 32)
    refused(api, other_key.seal("sessions", PERSON, plain))


@pytest.mark.parametrize(
    "last_active",
    ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "1e3", "", "1" * 40, ["1"], {"n": "1"}],
)
def test_a_cursor_the_api_signed_but_with_a_bad_key_field_is_refused(api: Api, last_active: object) -> None:
    # signed with the stage's own key: even then, only a key of the documented shape is used
    seal = CursorSeal(CURSOR_KEY.encode())
    cursor = seal.seal("sessions", PERSON, {"pk": f"SESSION#{uuid.uuid4()}", "sk": "STATE", "last_active": last_active})
    refused(api, cursor)


@pytest.mark.parametrize(
    "cursor",
    [
        "x" * 100_000,
        "A" * (CURSOR_MAX_CHARS + 1),
        encoded({"pk": "SESSION#x", "sk": "STATE", "owner": PERSON, "last_active": "inf"}),
        encoded({"pk": "SESSION#x", "sk": "STATE", "owner": PERSON, "last_active": "nan"}),
        encoded({"pk": "SESSION#x", "sk": "STATE", "owner": PERSON, "last_active": "1e999"}),
        encoded(json.loads(nested(30))),
        base64.urlsafe_b64encode(nested(5_000).encode()).decode(),
        "not base64!.also not",
        "e30.e30",
        "....",
        "",
        "é.é",
    ],
)
def test_a_cursor_the_api_never_issued_is_refused(api: Api, cursor: str) -> None:
    api.seed()
    refused(api, cursor)


# ---- transcript cursors -------------------------------------------------------------------------


def test_a_transcript_cursor_is_only_good_for_its_session_and_person(api: Api) -> None:
    mine = api.seed(messages=conversation())
    other_mine = api.seed(messages=conversation())
    status, body = api.call("GET", f"/sessions/{mine.session_id}", query={"limit": "1"})
    assert status == 200 and body["nextCursor"]
    cursor = body["nextCursor"]
    status, _ = api.call("GET", f"/sessions/{mine.session_id}", query={"cursor": cursor, "limit": "1"})
    assert status == 200
    refused(api, cursor, path=f"/sessions/{other_mine.session_id}")
    plain = payload_of(cursor)
    _, mac = cursor.split(".")
    refused(api, f"{encoded({**plain, 'seq': plain['seq'] + 1})}.{mac}", path=f"/sessions/{mine.session_id}")
    refused(api, encoded({"seq": 0, "part": 0}), path=f"/sessions/{mine.session_id}")


# ---- foreign and unknown ids --------------------------------------------------------------------

VERBS = [
    ("GET", "/sessions/{id}", None),
    ("GET", "/sessions/{id}?limit=1", None),
    ("PATCH", "/sessions/{id}", {"title": "Mine now"}),
    ("POST", "/sessions/{id}/end", None),
    ("DELETE", "/sessions/{id}", None),
]


def raw_answer(method: str, template: str, session_id: str, body: object) -> dict[str, Any]:
    path, _, query = template.format(id=session_id).partition("?")
    params = dict(item.split("=") for item in query.split("&")) if query else None
    event = http_event(method, path, body=body, query=params)
    return sessions_api.handler(event, LocalLambdaContext(function_name="sessions"))


@pytest.mark.parametrize(("method", "template", "body"), VERBS)
def test_a_foreign_and_an_unknown_id_get_the_same_bytes(api: Api, method: str, template: str, body: object) -> None:
    theirs = api.seed(OTHER, connection_id="their-conn", title="Theirs", messages=conversation())
    api.store.put_connection("their-conn", theirs.session_id, OTHER)
    foreign = raw_answer(method, template, theirs.session_id, body)
    unknown = raw_answer(method, template, str(uuid.uuid4()), body)
    upper = raw_answer(method, template, theirs.session_id.upper(), body)
    assert foreign == unknown == upper
    assert foreign["statusCode"] == 404
    assert json.loads(foreign["body"]) == {"error": {"code": "not_found", "message": "no such session"}}
    after = api.store.load(theirs.session_id)
    assert after is not None and after.title == "Theirs" and after.ended_at is None
    assert api.gateway.posts == [] and api.gateway.closes == []
