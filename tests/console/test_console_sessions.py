"""The voice console's Sessions panel in headless Chromium against the local stack's sessions API
(``/sessions`` on the console's own host and port): sessions made by the console itself over the
WebSocket are listed with their titles, one is resumed with its earlier conversation shown,
renamed, ended and erased; a reload shows what was said before it; failures are notes, never
uncaught errors. The stack is this module's own, so the sessions listed are the ones made here."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from tests.console.conftest import WAIT_S, Console

pytestmark = pytest.mark.browser


def api(stack: LocalStack, method: str, path: str = "", body: Any = None) -> tuple[int, Any]:
    """One request to the stack's sessions API: (status, JSON answer or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        stack.sessions_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, json.loads(text) if text else None


def titles_made(stack: LocalStack, *session_ids: str) -> dict[str, str]:
    """The sessions' titles, once each has one (made shortly after a session's first answer)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status, page = api(stack, "GET", "?limit=100")
        assert status == 200
        titles = {s["id"]: s["title"] for s in page["sessions"] if s["id"] in session_ids and s["title"]}
        if len(titles) == len(session_ids):
            return titles
        assert time.monotonic() < deadline, f"no titles yet: {page}"
        time.sleep(0.1)


def rows(console: Console) -> list[dict[str, Any]]:
    return console.js(
        """return [...document.querySelectorAll('#session-list li.session-row')].map(li => ({
            id: li.dataset.sessionId,
            name: (li.querySelector('.session-name') || {}).textContent,
            meta: li.querySelector('.session-meta').textContent,
            time: li.querySelector('time').getAttribute('datetime'),
            current: li.classList.contains('current'),
            status: li.dataset.status,
        }))"""
    )


def row_button(console: Console, session_id: str, cls: str) -> Any:
    return console.driver.find_element("css selector", f'#session-list li[data-session-id="{session_id}"] .{cls}')


def open_panel(console: Console, *session_ids: str) -> list[dict[str, Any]]:
    """Open the Sessions panel (it loads the first page) and wait until it lists ``session_ids``."""
    if console.js("return document.getElementById('sessions-panel').hidden"):
        console.driver.find_element("id", "sessions-button").click()
    else:
        console.driver.find_element("id", "sessions-refresh").click()
    console.wait("document.getElementById('sessions-status').textContent !== 'Loading…'")
    console.until(lambda: {r["id"] for r in rows(console)} >= set(session_ids))
    return rows(console)


def earlier_on_screen(console: Console) -> list[tuple[str, str]]:
    return [
        (cls, text)
        for cls, text in console.js(
            "return [...document.querySelectorAll('#transcript li.earlier')].map(li => [li.className, li.textContent])"
        )
    ]


def notes(console: Console) -> list[str]:
    return console.js(
        "return [...document.querySelectorAll('#transcript li.note, #transcript li.error')].map(li => li.textContent)"
    )


def no_page_errors(console: Console) -> None:
    assert console.js("return __fake.errors") == []


def say(console: Console, text: str, turns: int) -> None:
    console.js("voiceConsole.say(arguments[0])", text)
    console.idle_after(turns)


def test_the_panel_lists_resumes_renames_and_erases_sessions(console: Console, stack: LocalStack) -> None:
    # the older session: an answer, an app tool's call, an answer a barge-in cut
    console.open(ms_per_word=20)
    older = console.session_id
    say(console, "hello from the older session", 1)
    say(console, 'call editor.readFile {"path": "Parser.swift"}', 2)
    before = console.js("return __fake.words.length")
    console.js("voiceConsole.say('ramble 40')")
    console.wait(f"__fake.words.length >= {before + 3}")  # the answer is being heard
    console.js("voiceConsole.bargeIn('the test stops it')")
    console.wait("voiceConsole.state === 'idle'")
    heard = console.sent("error")[-1]["heardText"]
    # the newer one, made by New session
    console.js("document.getElementById('new-session').click()")  # in the closed settings panel
    console.wait(f"voiceConsole.sessionId !== '{older}' && voiceConsole.connected")
    newer = console.js("return voiceConsole.sessionId")
    say(console, "hello from the newer session", 1)
    titles = titles_made(stack, older, newer)
    assert titles == {older: "Hello from the older session", newer: "Hello from the newer session"}

    listed = [r for r in open_panel(console, older, newer) if r["id"] in (older, newer)]
    assert [r["id"] for r in listed] == [newer, older]  # newest activity first
    assert [r["name"] for r in listed] == [titles[newer], titles[older]]
    assert [r["current"] for r in listed] == [True, False]
    assert listed[1]["meta"].startswith("3 turns · ")
    by_api = {s["id"]: s for s in api(stack, "GET", "?limit=100")[1]["sessions"]}
    assert listed[1]["time"] == by_api[older]["lastActiveAt"]

    # picking the older one resumes it: its earlier conversation, then the live one below it
    row_button(console, older, "resume").click()
    console.wait(f"voiceConsole.sessionId === '{older}' && voiceConsole.connected")
    console.wait("voiceConsole.record.received.filter(e => e.kind.sessionReady).length >= 3")
    start = console.sent("sessionStart")[-1]
    assert start["sessionId"] == older and "lastSeq" not in start  # nothing replayed over what is shown
    assert console.received("sessionReady")[-1]["resumed"] is True
    assert console.js("return document.getElementById('sessions-panel').hidden") is True
    earlier = earlier_on_screen(console)
    assert [text for _, text in earlier[:3]] == [
        f"Earlier in this session “{titles[older]}”:",
        "youhello from the older session",
        "assistantYou said: hello from the older session",
    ]
    assert earlier[3][1] == 'youcall editor.readFile {"path": "Parser.swift"}'
    assert earlier[4] == ("note tool earlier", '→ editor.readFile {"path":"Parser.swift"}')
    assert "assistant" in earlier[5][0] and "I read " in earlier[5][1] and "Parser.swift" in earlier[5][1]
    assert earlier[6][1] == "youramble 40"
    assert "interrupted" in earlier[7][0] and earlier[7][1] == f"assistant{heard} — interrupted"
    assert earlier[-1][1] == "— now —"
    assert not any("is not shown" in text for text in notes(console))
    title = console.js("return document.getElementById('session-title').textContent")
    assert title == f"Session: {titles[older]}"
    say(console, "and now something new", 1)
    last = console.js("return [...document.querySelectorAll('#transcript li.assistant')].pop()")
    assert "earlier" not in last.get_attribute("class")
    assert last.text.endswith("You said: and now something new")

    # rename, inline
    assert [r["current"] for r in open_panel(console, older, newer) if r["id"] in (older, newer)] == [True, False]
    row_button(console, newer, "rename").click()
    field = console.driver.find_element("css selector", f'li[data-session-id="{newer}"] .rename-input')
    assert field.get_attribute("value") == titles[newer]
    field.clear()
    field.send_keys("Renamed by the test\n")
    console.until(lambda: next(r["name"] for r in rows(console) if r["id"] == newer) == "Renamed by the test")
    assert api(stack, "GET", f"/{newer}")[1]["session"]["title"] == "Renamed by the test"

    # erase, after a confirm()
    console.js("window.__asked = []; window.confirm = (text) => { __asked.push(text); return true; }")
    row_button(console, newer, "erase").click()
    console.until(lambda: newer not in {r["id"] for r in rows(console)})
    assert console.js("return __asked") == ["Erase “Renamed by the test”? Everything said in it is deleted, for good."]
    assert api(stack, "GET", f"/{newer}")[0] == 404
    assert console.js("return voiceConsole.sessionId") == older  # erasing another session leaves this one be

    # erasing the current session starts a new one
    row_button(console, older, "erase").click()
    console.wait(f"voiceConsole.sessionId !== '{older}' && voiceConsole.connected")
    assert older not in {r["id"] for r in rows(console)}
    assert api(stack, "GET", f"/{older}")[0] == 404
    assert earlier_on_screen(console) == []
    assert console.js("return document.getElementById('session-title').hidden") is True
    assert console.sent("sessionStart")[-1]["sessionId"] == console.js("return voiceConsole.sessionId")
    no_page_errors(console)


def test_a_reload_shows_what_was_said_before_it_and_end_leaves_the_session(console: Console, stack: LocalStack) -> None:
    console.open(ms_per_word=5)
    say(console, "keep the reload", 1)
    titles_made(stack, console.session_id)
    console.open(ms_per_word=5)  # the same session id, a new page
    console.wait("document.querySelectorAll('#transcript li.earlier').length >= 4")
    assert [text for _, text in earlier_on_screen(console)][1:3] == [
        "youkeep the reload",
        "assistantYou said: keep the reload",
    ]
    assert "lastSeq" not in console.sent("sessionStart")[0]
    console.wait("document.getElementById('session-title').textContent === 'Session: Keep the reload'")

    # ending the current session: it is listed as ended, and the console goes on in a new one
    open_panel(console, console.session_id)
    row_button(console, console.session_id, "end").click()
    console.wait(f"voiceConsole.sessionId !== '{console.session_id}' && voiceConsole.connected")
    ended = next(r for r in rows(console) if r["id"] == console.session_id)
    assert ended["status"] == "ended" and not ended["current"]
    assert row_button(console, console.session_id, "end").get_attribute("disabled") is not None
    assert api(stack, "GET", f"/{console.session_id}")[1]["session"]["status"] == "ended"
    no_page_errors(console)


def test_failures_are_notes(console: Console, stack: LocalStack) -> None:
    console.open()
    say(console, "a session to list", 1)
    open_panel(console, console.session_id)

    # 404: the session was erased elsewhere, then renamed here
    gone = console.session_id
    console.js("window.confirm = () => true")
    assert api(stack, "DELETE", f"/{gone}")[0] == 204
    console.wait(f"voiceConsole.sessionId !== '{gone}' && voiceConsole.connected")  # told: session_erased
    assert "The session was erased: this is a new one." in notes(console)
    row_button(console, gone, "rename").click()
    console.driver.find_element("css selector", f'li[data-session-id="{gone}"] .rename-input').send_keys("x\n")
    console.until(lambda: any("no such session (404)" in text for text in notes(console)))

    # 401: sign in again
    console.js(
        """window.__realFetch = window.fetch;
        window.fetch = async () => new Response('{"message":"Unauthorized"}', {status: 401})"""
    )
    console.driver.find_element("id", "sessions-refresh").click()
    console.until(lambda: any("Sign in again" in text for text in notes(console)))
    assert "401" in console.js("return document.getElementById('sessions-status').textContent")
    assert console.js("return document.getElementById('settings-panel').open") is True

    # the network
    console.js("window.fetch = async () => { throw new TypeError('Failed to fetch'); }")
    console.driver.find_element("id", "sessions-refresh").click()
    console.until(lambda: any("cannot be reached (Failed to fetch)" in text for text in notes(console)))
    console.js("window.fetch = window.__realFetch")
    no_page_errors(console)


def test_a_stage_elsewhere_needs_the_sessions_parameter(console: Console, stack: LocalStack) -> None:
    elsewhere = "ws://127.0.0.1:9/"  # a conductor on another host: its sessions API is not this page's
    console.driver.get(f"{stack.console_url}?url={elsewhere}&sessionId={uuid.uuid4()}")
    console.wait("window.voiceConsole !== undefined")
    console.driver.find_element("id", "sessions-button").click()
    console.wait("document.getElementById('sessions-status').textContent.includes('not configured')")
    assert "?sessions=https://" in console.js("return document.getElementById('sessions-status').textContent")

    console.driver.get(f"{stack.console_url}?url={elsewhere}&sessions={stack.sessions_url}&sessionId={uuid.uuid4()}")
    console.wait("window.voiceConsole !== undefined")
    listed = [s["id"] for s in api(stack, "GET", "?limit=20")[1]["sessions"]]
    assert [r["id"] for r in open_panel(console, *listed)] == listed
    no_page_errors(console)
