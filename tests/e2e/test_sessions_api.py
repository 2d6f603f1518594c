"""The sessions API end to end: sessions made over real WebSockets, read, renamed, ended and erased
over real HTTP on the local gateway's port (``/sessions``), through the client stub's own
``SessionsApi`` and ``voiceide-client sessions``; the table is scanned to prove what an erase leaves.

Stacks: the package's (no sign-in: every session is ``local``'s, shared with the other e2e tests,
so these tests look for their own sessions only); a paced one for an erase in the middle of a
streaming turn; and one with sign-in (``--auth cognito``) and three users, where a person sees
exactly their own sessions. A stack points the handlers at itself through the process's
environment, so only one of them may be in use at a time: the tests of the package's stack come
first, the paced stack lives for its one test, and the sign-in stack's tests come last.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import os
import signal
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from websockets.asyncio.client import connect

from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.cognito.user_pool import add_user
from conductor_local.stack import LocalStack
from shared.wire.protocol import ErrorCode, SessionReady, SessionStart, UserAudioTranscriptFinal
from tests.client.word_speaker import WordSpeaker
from tests.e2e.conftest import (
    HANDSHAKE_WAIT_S,
    STACK_ENV,
    TURN_TIMEOUT_S,
    WAIT_S,
    RawApp,
    async_test,
    client_for,
    is_partial,
    is_state,
    poll_until,
    stored_history,
)
from voiceide_client.command_line import cli
from voiceide_client.connection.link import Link
from voiceide_client.connection.sessions_api import SessionsApi, SessionsApiError
from voiceide_client.connection.sign_in import CognitoSignIn
from voiceide_client.tools.router import ToolRouter

pytestmark = pytest.mark.e2e

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
ADA = ("ada", "Second-user-1")
PAGER = ("pager", "Third-user-1")
PAGED_SESSIONS = 60
PACE = ModelPace(first_token_s=0.2, tokens_per_delta=3, tokens_per_s=40.0)
"""A slow model: ``ramble 50`` (50 deltas of 3 tokens) streams for about 4 s."""


@pytest.fixture
def paced_stack() -> Iterator[LocalStack]:
    with LocalStack(port=0, quiet=True, env=STACK_ENV, model_pace=PACE) as local:
        yield local


@pytest.fixture(scope="module")
def auth_stack() -> Iterator[LocalStack]:
    with LocalStack(port=0, quiet=True, env=STACK_ENV, auth="cognito") as local:
        assert local.user_pool is not None
        for username, password in (ADA, PAGER):
            add_user(local.cognito_client(), local.user_pool.user_pool_id, username, password)
        yield local


# ---- helpers -----------------------------------------------------------------------------------


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A blocking HTTP call in a worker thread: the clients keep handling their frames meanwhile."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def api_of(stack: LocalStack, sign_in: CognitoSignIn | None = None) -> SessionsApi:
    return SessionsApi(stack.sessions_url, None if sign_in is None else sign_in.id_token)


def sign_in_as(stack: LocalStack, username: str | None = None, password: str | None = None) -> CognitoSignIn:
    pool = stack.user_pool
    assert pool is not None
    return CognitoSignIn(
        pool.client_id, username or pool.username, password or pool.password, endpoint_url=pool.endpoint
    )


def http_call(
    stack: LocalStack, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    """A raw request to the gateway's port: status, headers (lower-cased) and the JSON body (or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=WAIT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers={**sent, **(headers or {})})
        response = conn.getresponse()
        raw = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(raw) if raw else None
    finally:
        conn.close()


def status_of(call: Callable[[], Any]) -> int:
    """The HTTP status a ``SessionsApi`` call came to (200 when it succeeded)."""
    try:
        call()
    except SessionsApiError as error:
        return error.status
    return 200


def readable(item: dict[str, Any]) -> dict[str, Any]:
    """An item with its compressed state (``z``: shared/adapters/state_codec.py) as the JSON it holds."""
    if "z" not in item:
        return item
    return {**item, "z": {"S": zlib.decompress(item["z"]["B"]).decode("utf-8")}}


def items_of(stack: LocalStack, session_id: str) -> list[dict[str, Any]]:
    """Every item of the conductor's table that mentions the session anywhere (a full scan)."""
    dynamodb = stack.dynamodb_client()
    found: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": stack.table_name, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        found += [readable(item) for item in page["Items"] if session_id in json.dumps(item, default=repr)]
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def listed(api: SessionsApi, session_id: str) -> dict[str, Any] | None:
    return next((session for session in api.list_all(limit=100) if session["id"] == session_id), None)


async def until(condition: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    """The first truthy value of a blocking ``condition``, polled off the loop (bounded)."""
    found: list[T] = []

    def check() -> bool:
        value = condition()
        if value:
            found.append(value)
        return bool(value)

    await poll_until(check, timeout, interval=0.05)
    return found[0]


# ---- listing, showing, renaming ------------------------------------------------------------------


@async_test
async def test_sessions_made_over_the_websocket_are_listed_with_a_title(stack: LocalStack) -> None:
    api = api_of(stack)
    async with client_for(stack) as first, client_for(stack) as second:
        await first.say("open the readme please", timeout=TURN_TIMEOUT_S)
        await second.say("run the unit tests", timeout=TURN_TIMEOUT_S)
        open_first = await off_loop(listed, api, first.session_id)
    # titles are made after the first complete turn, off its path: they show up a moment later
    named = await until(lambda: (s := listed(api, first.session_id)) and s["title"] and s["status"] == "idle" and s)
    other = await until(lambda: (s := listed(api, second.session_id)) and s["title"] and s)

    assert open_first is not None and open_first["status"] == "active"
    assert named["title"].split()[0].lower() == "open" and len(named["title"]) <= 60
    assert named["turns"] == 1 and named["origin"] == "voice"
    assert named["lastUtterance"] == "open the readme please"
    assert named["createdAt"].endswith("Z") and named["lastActiveAt"] >= named["createdAt"]
    assert other["title"].split()[0].lower() == "run"
    # newest activity first
    ids = [session["id"] for session in await off_loop(lambda: list(api.list_all(limit=100)))]
    assert ids.index(second.session_id) < ids.index(first.session_id)


@async_test
async def test_show_returns_the_transcript_with_a_tool_call_and_a_barge_ins_heard_text(stack: LocalStack) -> None:
    async def build(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"status": "succeeded", "scheme": arguments["scheme"]}

    speaker = WordSpeaker()
    tools = ToolRouter(speaker, {"project.search": build})
    async with client_for(stack, tools=tools) as client:
        speaker.allow(1000)
        built = await client.say('call project.search {"scheme": "App"}', timeout=TURN_TIMEOUT_S)
        speaker.allowed = speaker.words + 3  # the next answer: three words heard, then the barge-in
        saying = asyncio.create_task(client.say("Build the app. Then run the tests.", timeout=TURN_TIMEOUT_S))
        await speaker.wait_words(speaker.allowed)
        await client.barge_in()
        interrupted = await saying
    assert built.completed and interrupted.completed

    session, transcript = await off_loop(api_of(stack).transcript, client.session_id, limit=2)
    assert session["id"] == client.session_id and session["turns"] == 2
    roles = [entry["role"] for entry in transcript]
    assert roles == ["user", "tool", "assistant", "user", "assistant"], transcript
    assert [entry["seq"] for entry in transcript] == sorted(entry["seq"] for entry in transcript)
    tool = transcript[1]
    assert tool["name"] == "project.search" and tool["arguments"] == {"scheme": "App"}
    assert tool["outcome"] == "ok" and json.loads(tool["result"]) == {"status": "succeeded", "scheme": "App"}
    assert tool["callId"]
    assert transcript[2]["text"].startswith("project.search returned ")
    assert transcript[2]["interrupted"] is False
    assert transcript[3]["text"] == "Build the app. Then run the tests."
    cut = transcript[4]
    assert cut["interrupted"] is True and cut["text"] == "You said: Build"
    assert all(entry["at"] is None or entry["at"].endswith("Z") for entry in transcript)


@async_test
async def test_rename_and_what_the_api_refuses(stack: LocalStack) -> None:
    api = api_of(stack)
    async with client_for(stack) as client:
        await client.say("fix the login test", timeout=TURN_TIMEOUT_S)
    await until(lambda: api.show(client.session_id)["session"]["title"])

    renamed = await off_loop(api.rename, client.session_id, "  Login test, take two  ")
    assert renamed["title"] == "Login test, take two" and renamed["id"] == client.session_id
    shown = (await off_loop(api.show, client.session_id))["session"]
    assert shown["title"] == "Login test, take two"
    # the id in any case
    assert (await off_loop(api.show, client.session_id.upper()))["session"]["id"] == client.session_id

    unknown = str(uuid.uuid4())
    for call in (
        lambda: api.show(unknown),
        lambda: api.rename(unknown, "x"),
        lambda: api.end(unknown),
        lambda: api.erase(unknown),
    ):
        assert await off_loop(status_of, call) == 404
    assert await off_loop(status_of, lambda: api.rename(client.session_id, "x" * 61)) == 400
    assert await off_loop(status_of, lambda: api.rename(client.session_id, "   ")) == 400
    assert await off_loop(status_of, lambda: api.show("not-a-uuid")) == 400
    assert await off_loop(status_of, lambda: api.list(limit=101)) == 400
    assert await off_loop(status_of, lambda: api.list(cursor="made-up")) == 400
    status, _, body = await off_loop(http_call, stack, "PATCH", f"/sessions/{client.session_id}", {"name": "x"})
    assert status == 400 and body["error"]["code"] == "bad_request"
    status, _, body = await off_loop(http_call, stack, "PUT", f"/sessions/{client.session_id}", {"title": "x"})
    assert (status, body) == (404, {"message": "Not Found"})  # no such route: API Gateway's own answer
    assert (await off_loop(api.show, client.session_id))["session"]["title"] == "Login test, take two"


@async_test
async def test_the_cli_lists_shows_and_renames(stack: LocalStack) -> None:
    async with client_for(stack) as client:
        await client.say("tidy up the imports", timeout=TURN_TIMEOUT_S)
    api = api_of(stack)
    await until(lambda: api.show(client.session_id)["session"]["status"] == "idle")  # its $disconnect ran

    async def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = await cli.run(["sessions", *argv, "--url", stack.ws_url], stdin=io.StringIO(), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    assert await run("rename", client.session_id, "Imports") == (0, f"renamed {client.session_id}: Imports\n", "")
    code, out, _ = await run("list", "--all")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith(client.session_id))
    assert row.split()[1:3] == ["idle", "1"] and row.endswith("Imports")
    code, out, _ = await run("show", client.session_id)
    assert code == 0 and out.splitlines()[2:] == [
        "you: tidy up the imports",
        "assistant: You said: tidy up the imports",
    ]
    code, _, err = await run("show", str(uuid.uuid4()))
    assert code == 6 and "no such session" in err


@async_test
async def test_the_banner_of_voiceide_conductor_local_names_the_sessions_api() -> None:
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "conductor_local", "local", "--port", "0", "--quiet"),
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        stdin=asyncio.subprocess.DEVNULL,
    )
    assert server.stdout is not None
    try:
        async with asyncio.timeout(20):
            line = ""
            while not line.startswith("  sessions API: "):
                line = (await server.stdout.readline()).decode()
                assert line, "the conductor exited before printing the sessions API"
        url = line.removeprefix("  sessions API: ").split()[0]
        answer = await off_loop(SessionsApi(url).list)
    finally:
        server.send_signal(signal.SIGINT)
        await asyncio.wait_for(server.wait(), 15)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/sessions")
    assert answer == {"sessions": [], "nextCursor": None}


# ---- ending --------------------------------------------------------------------------------------


@async_test
async def test_end_closes_the_open_connection_and_the_client_does_not_reconnect(stack: LocalStack) -> None:
    api = api_of(stack)
    progress: list[str] = []
    async with client_for(stack, on_progress=progress.append) as client:
        await client.say("hello there", timeout=TURN_TIMEOUT_S)
        ended = await off_loop(api.end, client.session_id)
        await client.wait_until(lambda: client.link is Link.CLOSED, WAIT_S)
        await asyncio.sleep(0.3)  # room for a reconnect that must not happen (the backoff is 10 ms)
        assert client.closed_by_server == ErrorCode.SESSION_ENDED
        assert client.error_codes == []  # no ws_error: the close was expected
        assert client.connections == 1 and client.reconnect_attempts == 0
        assert any("not reconnecting" in line for line in progress)

    assert ended["status"] == "ended" and ended["id"] == client.session_id
    (notice,) = [e.payload for e in client.events if e.kind_name == "error"]
    assert notice.code == ErrorCode.SESSION_ENDED and client.events[-1].payload is notice
    shown = await until(lambda: (s := api.show(client.session_id)["session"])["status"] == "ended" and s)
    assert shown["turns"] == 1
    assert [
        s["status"]
        for s in await off_loop(lambda: list(api.list_all(status="ended", limit=100)))
        if s["id"] == client.session_id
    ] == ["ended"]

    # a later connection with the same id resumes the session
    async with client_for(stack, client.session_id) as again:
        assert again.session_ready is not None and again.session_ready.resumed is True
        turn = await again.say("and again", timeout=TURN_TIMEOUT_S)
    assert turn.completed and turn.final_text == "You said: and again"
    session = await until(lambda: (s := api.show(client.session_id)["session"])["turns"] == 2 and s)
    assert session["status"] != "ended"


@async_test
async def test_end_tells_a_raw_connection_then_closes_it_with_1000(stack: LocalStack) -> None:
    session_id = str(uuid.uuid4())
    async with connect(stack.session_url(session_id), open_timeout=HANDSHAKE_WAIT_S) as ws:
        app = RawApp(ws)
        await app.send(SessionStart(session_id=session_id))
        await app.read_until(lambda e: isinstance(e.payload, SessionReady))
        await off_loop(api_of(stack).end, session_id)
        notice = await app.read_until(lambda e: e.kind_name == "error")
        async with asyncio.timeout(WAIT_S):
            await ws.wait_closed()
    assert notice.payload.code == ErrorCode.SESSION_ENDED and notice.seq is None
    assert ws.close_code == 1000


# ---- erasing ---------------------------------------------------------------------------------------


@async_test
async def test_erase_leaves_no_item_and_a_reconnect_starts_an_empty_session(stack: LocalStack) -> None:
    api = api_of(stack)
    async with client_for(stack) as client:
        await client.say("note the launch codes", timeout=TURN_TIMEOUT_S)
        await client.say("and the other secret", timeout=TURN_TIMEOUT_S)
        assert await off_loop(items_of, stack, client.session_id)  # it was all there
        await off_loop(api.erase, client.session_id)
        await client.wait_until(lambda: client.link is Link.CLOSED, WAIT_S)
        await asyncio.sleep(0.3)  # its $disconnect runs now: it must not write the session back
    assert client.closed_by_server == ErrorCode.SESSION_ERASED and client.connections == 1

    assert await off_loop(items_of, stack, client.session_id) == []
    assert await off_loop(status_of, lambda: api.show(client.session_id)) == 404
    assert await off_loop(listed, api, client.session_id) is None
    assert await off_loop(status_of, lambda: api.erase(client.session_id)) == 404  # again: gone

    async with client_for(stack, client.session_id) as again:
        assert again.session_ready is not None and again.session_ready.resumed is False
        assert again.session_ready.title is None
        turn = await again.say("hello again", timeout=TURN_TIMEOUT_S)
    assert turn.completed and turn.final_text == "You said: hello again"
    history = stored_history(stack, client.session_id)
    assert [message["role"] for message in history] == ["user", "assistant"]
    assert "launch codes" not in json.dumps(await off_loop(items_of, stack, client.session_id))
    session = await until(lambda: (s := api.show(client.session_id)["session"])["turns"] == 1 and s)
    assert session["lastUtterance"] == "hello again"


@async_test
async def test_erase_in_the_middle_of_a_turn_stops_it_and_nothing_is_written_after(paced_stack: LocalStack) -> None:
    stack = paced_stack
    session_id = str(uuid.uuid4())
    started_at = time.monotonic()
    async with connect(stack.session_url(session_id), open_timeout=HANDSHAKE_WAIT_S) as ws:
        app = RawApp(ws)
        await app.send(SessionStart(session_id=session_id))
        await app.read_until(lambda e: isinstance(e.payload, SessionReady))
        mark = stack.lambda_server.started
        await app.send(UserAudioTranscriptFinal(text="ramble 50"))
        await app.read_until(lambda e: is_partial(e) and len(e.payload.text.split()) >= 3)
        assert await off_loop(items_of, stack, session_id)
        await off_loop(api_of(stack).erase, session_id)
        notice = await app.read_until(lambda e: e.kind_name == "error")
        async with asyncio.timeout(WAIT_S):
            await ws.wait_closed()
    # it landed in the middle of the turn: the answer had begun and had not ended
    assert not any(e.kind_name == "assistantSpeechFinal" or is_state(e, "idle") for e in app.events)
    assert notice.payload.code == ErrorCode.SESSION_ERASED and ws.close_code == 1000
    assert await off_loop(items_of, stack, session_id) == []

    # the turn runner is stopped or ends on its own; either way it must write nothing afterwards
    assert await off_loop(stack.lambda_server.wait_idle, 15.0, since=mark)
    await asyncio.sleep(max(0.0, started_at + 5.0 - time.monotonic()))  # past where the stream would end
    assert await off_loop(items_of, stack, session_id) == []
    assert stack.lambda_server.failures == []


# ---- sign-in: each person sees their own sessions ---------------------------------------------------


@async_test
async def test_under_sign_in_each_person_sees_only_their_own_sessions(auth_stack: LocalStack) -> None:
    dev, ada = sign_in_as(auth_stack), sign_in_as(auth_stack, *ADA)
    async with client_for(auth_stack, handshake_headers=dev.headers) as mine:
        await mine.say("the first user's request", timeout=TURN_TIMEOUT_S)
    async with client_for(auth_stack, handshake_headers=ada.headers) as theirs:
        await theirs.say("the second user's request", timeout=TURN_TIMEOUT_S)
    dev_api, ada_api = api_of(auth_stack, dev), api_of(auth_stack, ada)

    dev_ids = [s["id"] for s in await off_loop(lambda: list(dev_api.list_all(limit=100)))]
    ada_ids = [s["id"] for s in await off_loop(lambda: list(ada_api.list_all(limit=100)))]
    assert mine.session_id in dev_ids and theirs.session_id not in dev_ids
    assert ada_ids == [theirs.session_id]

    # another person's session answers 404 on every route, exactly as one that does not exist
    other = theirs.session_id
    for call in (
        lambda: dev_api.show(other),
        lambda: dev_api.rename(other, "mine now"),
        lambda: dev_api.end(other),
        lambda: dev_api.erase(other),
    ):
        assert await off_loop(status_of, call) == 404
    status, _, body = await off_loop(
        http_call, auth_stack, "GET", f"/sessions/{other}", headers={"Authorization": f"Bearer {dev.id_token()}"}
    )
    assert (status, body["error"]["code"]) == (404, "not_found")
    untouched = (await off_loop(ada_api.show, other))["session"]
    assert untouched["status"] == "idle" and untouched["title"] != "mine now"
    assert await off_loop(items_of, auth_stack, other)

    # no token, or a bad one: API Gateway's JWT authorizer answers 401 before the Lambda runs
    token = dev.id_token()
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": f"Bearer {token[:-4]}AAAA"}):
        for method, path in (("GET", "/sessions"), ("GET", f"/sessions/{other}"), ("DELETE", f"/sessions/{other}")):
            status, answer_headers, body = await off_loop(http_call, auth_stack, method, path, headers=headers)
            assert (status, body) == (401, {"message": "Unauthorized"}), (method, path, headers)
            assert answer_headers["www-authenticate"].startswith("Bearer")
    assert await off_loop(items_of, auth_stack, other)


@async_test
async def test_under_sign_in_the_cli_sends_the_token(auth_stack: LocalStack) -> None:
    pool = auth_stack.user_pool
    assert pool is not None
    ada = sign_in_as(auth_stack, *ADA)
    async with client_for(auth_stack, handshake_headers=ada.headers) as client:
        await client.say("a request of ada's", timeout=TURN_TIMEOUT_S)
    sign_in_options = ["--client-id", pool.client_id, "--cognito-endpoint", pool.endpoint]

    async def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        command = ["sessions", *argv, "--url", auth_stack.ws_url]
        code = await cli.run(command, stdin=io.StringIO(), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    code, out, err = await run("list", "--username", ADA[0], "--password", ADA[1], *sign_in_options)
    assert code == 0, err
    assert client.session_id in out
    code, _, err = await run("list")
    assert code == 4 and "not signed in" in err
    code, _, err = await run(
        "show", client.session_id, "--username", pool.username, "--password", pool.password, *sign_in_options
    )
    assert code == 6 and "no such session" in err

    # --resume: ada's newest session is number 1; the pick and then the request come from stdin
    out, err = io.StringIO(), io.StringIO()
    argv = ["--url", auth_stack.ws_url, "--resume", "--username", ADA[0], "--password", ADA[1], *sign_in_options]
    code = await cli.run(argv, stdin=io.StringIO("1\nand now the tests\n"), stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert f"resuming {client.session_id}" in out.getvalue()
    assert "assistant: You said: and now the tests" in out.getvalue()
    resumed = await off_loop(api_of(auth_stack, ada).show, client.session_id)
    assert resumed["session"]["turns"] == 2
    assert [entry.get("text") for entry in resumed["transcript"]][-2:] == [
        "and now the tests",
        "You said: and now the tests",
    ]


# ---- paging --------------------------------------------------------------------------------------


@async_test
async def test_sixty_sessions_page_in_order_with_the_cursor(auth_stack: LocalStack) -> None:
    sign_in = sign_in_as(auth_stack, *PAGER)
    created: list[str] = []
    # one connection each, one after the other: a known order; each brings a conversation from chat,
    # so it is listed before any turn (an empty session is not)
    handoff = {"summary": "paging through sessions", "recentTurns": []}
    for _ in range(PAGED_SESSIONS):
        async with client_for(auth_stack, handshake_headers=sign_in.headers, handoff=handoff) as client:
            created.append(client.session_id)

    api = api_of(auth_stack, sign_in)
    # the last one's $disconnect has run: every session is idle
    await until(lambda: api.list(limit=1)["sessions"][0]["status"] == "idle")
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        page = await off_loop(api.list, limit=7, cursor=cursor)
        pages.append(page["sessions"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    paged = [session["id"] for page in pages for session in page]

    assert [len(page) for page in pages] == [7] * 8 + [4]
    assert paged == created[::-1]  # newest activity first, each exactly once
    times = [session["lastActiveAt"] for page in pages for session in page]
    assert times == sorted(times, reverse=True)
    assert all(session["status"] == "idle" and session["turns"] == 0 for page in pages for session in page)
    # the same order in one page, and a status filter
    assert [s["id"] for s in (await off_loop(api.list, limit=100))["sessions"]] == created[::-1]
    assert (await off_loop(api.list, status="ended"))["sessions"] == []
