"""The sessions Lambda's reading routes end to end: HTTP API events in, DynamoDB (moto) behind."""

from __future__ import annotations

import uuid

import pytest

from tests.sessions.conftest import OTHER, Api, conversation, error_code

BAD_REQUEST = "bad_request"


# ---- listing -----------------------------------------------------------------------------------


def test_sixty_sessions_page_newest_first(api: Api) -> None:
    seeded = [api.seed(last_active=1_790_000_000.0 + index) for index in range(60)]
    api.seed(OTHER, last_active=1_790_000_100.0)  # someone else's: never listed
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": "25"} | ({"cursor": cursor} if cursor else {})
        status, body = api.call("GET", "/sessions", query=query)
        assert status == 200
        seen.extend(session["id"] for session in body["sessions"])
        pages += 1
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [state.session_id for state in reversed(seeded)]


def test_a_listed_session_has_the_documented_fields(api: Api) -> None:
    state = api.seed(
        title="Fixing the login test", turn_count=7, last_utterance="run the tests again", last_active=1_790_000_000.25
    )
    status, body = api.call("GET", "/sessions")
    assert status == 200 and body["nextCursor"] is None
    assert body["sessions"] == [
        {
            "id": state.session_id,
            "title": "Fixing the login test",
            "createdAt": "2026-09-21T14:12:20.250Z",
            "lastActiveAt": "2026-09-21T14:13:20.250Z",
            "turns": 7,
            "status": "idle",
            "origin": "voice",
            "lastUtterance": "run the tests again",
            "devices": 0,
        }
    ]


def test_status_filters_the_list(api: Api) -> None:
    active = api.seed(connection_id="conn-1", last_active=1_790_000_003.0)
    idle = api.seed(last_active=1_790_000_002.0)
    ended = api.seed(ended_at=1_790_000_009.0, last_active=1_790_000_001.0)
    for wanted, state in (("active", active), ("idle", idle), ("ended", ended)):
        status, body = api.call("GET", "/sessions", query={"status": wanted, "limit": "1"})
        assert status == 200
        assert [(session["id"], session["status"]) for session in body["sessions"]] == [(state.session_id, wanted)]


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "0"},
        {"limit": "101"},
        {"limit": "ten"},
        {"status": "open"},
        {"cursor": "not-a-cursor"},
        {"cursor": "eyJwayI6IngifQ"},  # JSON, but not a key this API handed out
    ],
)
def test_bad_list_parameters_are_400_in_our_shape(api: Api, query: dict[str, str]) -> None:
    status, body = api.call("GET", "/sessions", query=query)
    assert status == 400 and error_code(body) == BAD_REQUEST


def test_another_persons_cursor_is_refused(api: Api) -> None:
    for index in range(3):
        api.seed(OTHER, last_active=1_790_000_000.0 + index)
    _, body = api.call("GET", "/sessions", query={"limit": "1"}, sub=OTHER)
    status, refused = api.call("GET", "/sessions", query={"cursor": body["nextCursor"]})
    assert status == 400 and error_code(refused) == BAD_REQUEST


def test_the_limit_message_names_the_range(api: Api) -> None:
    _, body = api.call("GET", "/sessions", query={"limit": "500"})
    assert body["error"]["message"] == "limit must be between 1 and 100"


# ---- sign-in -----------------------------------------------------------------------------------


def test_a_stage_with_sign_in_answers_401_without_a_principal(api: Api) -> None:
    status, body = api.call("GET", "/sessions", sub=None)
    assert status == 401 and error_code(body) == "unauthorized"


def test_a_stage_without_sign_in_has_one_person(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas import runtime

    monkeypatch.setenv("CONDUCTOR_REQUIRE_PRINCIPAL", "false")
    runtime.settings.cache_clear()
    state = api.seed(None)
    status, body = api.call("GET", "/sessions", sub=None)
    assert status == 200 and [session["id"] for session in body["sessions"]] == [state.session_id]


# ---- one session -------------------------------------------------------------------------------


def test_show_returns_the_transcript_with_a_tool_call_and_an_interrupted_answer(api: Api) -> None:
    state = api.seed(messages=conversation(), title="Reading the readme")
    status, body = api.call("GET", f"/sessions/{state.session_id.upper()}")
    assert status == 200
    assert body["session"]["id"] == state.session_id and body["session"]["title"] == "Reading the readme"
    assert body["nextCursor"] is None
    transcript = body["transcript"]
    for entry in transcript:
        assert entry["at"].endswith("Z") and len(entry["at"]) == 24
        del entry["at"]
    assert transcript == [
        {"seq": 0, "role": "user", "text": "open the readme"},
        {"seq": 1, "role": "assistant", "text": "Opening it.", "interrupted": False},
        {
            "seq": 1,
            "role": "tool",
            "name": "editor.openFile",
            "arguments": {"path": "README.md"},
            "callId": "c1",
            "outcome": "ok",
            "result": '{"opened":true}',
        },
        {"seq": 3, "role": "assistant", "text": "The readme says the project", "interrupted": True},
        {"seq": 4, "role": "user", "text": "thanks"},
        {"seq": 5, "role": "assistant", "text": "You're welcome.", "interrupted": False},
    ]


def test_the_transcript_pages_through_every_entry_once(api: Api) -> None:
    state = api.seed(messages=conversation())
    _, whole = api.call("GET", f"/sessions/{state.session_id}")
    paged: list[dict[str, object]] = []
    cursor: str | None = None
    while True:
        query = {"limit": "1"} | ({"cursor": cursor} if cursor else {})
        status, body = api.call("GET", f"/sessions/{state.session_id}", query=query)
        assert status == 200 and len(body["transcript"]) <= 1
        paged.extend(body["transcript"])
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert paged == whole["transcript"]


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "201"}, {"cursor": "%%%"}, {"cursor": "eyJzZXEiOi0xfQ"}])
def test_bad_transcript_parameters_are_400(api: Api, query: dict[str, str]) -> None:
    state = api.seed()
    status, body = api.call("GET", f"/sessions/{state.session_id}", query=query)
    assert status == 400 and error_code(body) == BAD_REQUEST


def test_an_unknown_session_is_404(api: Api) -> None:
    status, body = api.call("GET", f"/sessions/{uuid.uuid4()}")
    assert status == 404 and error_code(body) == "not_found"


# ---- routes and failures -----------------------------------------------------------------------


def test_an_unknown_route_is_404_in_our_shape(api: Api) -> None:
    status, body = api.call("GET", "/sessions/x/y/z")
    assert status == 404 and error_code(body) == "not_found"


def test_an_unexpected_failure_is_500_in_our_shape(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas import runtime

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("table gone")

    monkeypatch.setattr(runtime.session_records(), "page", broken)
    status, body = api.call("GET", "/sessions")
    assert status == 500 and error_code(body) == "internal_error"


def test_an_answer_that_fails_its_model_is_500_not_400(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas import runtime

    monkeypatch.setattr(runtime.session_service(), "list", lambda *_: {"sessions": "not a list"})
    status, body = api.call("GET", "/sessions")
    assert status == 500 and error_code(body) == "internal_error"
