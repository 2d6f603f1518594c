"""The voice console as a newcomer first meets it: a browser without speech voices (headless
Chromium, many Linux desktops), the first load of a new session, a wrong ``?url=``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from shared.core.conductor import speak_playback
from shared.wire.protocol import ToolResult
from tests.console.conftest import Console
from tests.console.test_console_sessions import api, notes

pytestmark = pytest.mark.browser


def without_voices(console: Console) -> None:
    """The speech double as a browser without voices: getVoices() is empty and every utterance
    fails before a word is played, as headless Chromium's does."""
    console.js("__fake.noVoices = true")


def test_a_page_without_voices_shows_answers_as_not_played_and_keeps_them_whole(
    console: Console, stack: LocalStack
) -> None:
    console.driver.get(f"{stack.console_url}?sessionId={console.session_id}")
    without_voices(console)
    console.wait("window.voiceConsole && window.voiceConsole.connected")
    console.js("voiceConsole.say(arguments[0])", "hello without a voice")
    console.idle_after(1)
    console.js("voiceConsole.say(arguments[0])", "and once more")
    console.idle_after(2)

    speaks = [call["callId"] for call in console.received("toolCall") if call["name"] == "tts.speak"]
    results = {r["callId"]: json.loads(r["result"]) for r in console.sent("toolResult")}
    assert [results[call] for call in speaks] == [{"spoken": False, "heardText": "", "reason": "no_voice"}] * 2
    shown = console.js("return document.getElementById('no-voice').hidden")
    assert shown is False
    assert "no speech voice" in console.js("return document.getElementById('no-voice').textContent")

    status, read = api(stack, "GET", f"/{console.session_id}")
    assert status == 200
    answers = [entry for entry in read["transcript"] if entry["role"] == "assistant"]
    assert [(a["text"], a.get("interrupted", False)) for a in answers] == [
        ("You said: hello without a voice", False),
        ("You said: and once more", False),
    ]

    console.open()  # the same session again: what was said reads as said, not as interrupted
    console.wait("document.querySelectorAll('#transcript li.earlier').length >= 4")
    earlier = console.js("return [...document.querySelectorAll('#transcript li.earlier')].map(li => li.textContent)")
    assert "assistantYou said: hello without a voice" in earlier
    assert not any("interrupted" in text for text in earlier)


def test_a_page_with_voices_still_plays_and_hides_the_note(console: Console) -> None:
    console.open()
    console.js("voiceConsole.say(arguments[0])", "hello with a voice")
    console.idle_after(1)
    speak = next(call for call in console.received("toolCall") if call["name"] == "tts.speak")
    (result,) = [r for r in console.sent("toolResult") if r["callId"] == speak["callId"]]
    assert json.loads(result["result"]) == {"spoken": True}
    assert console.js("return document.getElementById('no-voice').hidden") is True


def test_speak_playback_takes_not_played_as_shown_and_a_cut_as_heard() -> None:
    def result(value: dict[str, Any]) -> ToolResult:
        return ToolResult(call_id="c1", result=json.dumps(value), error=None)

    assert speak_playback(result({"spoken": False, "heardText": "", "reason": "no_voice"})) is None
    assert speak_playback(result({"spoken": False, "heardText": "", "reason": "playback_failed"})) is None
    assert speak_playback(result({"spoken": False, "heardText": "You said"})) == "You said"
    assert speak_playback(result({"spoken": True})) is None


def requested_paths(console: Console) -> list[str]:
    return console.js(
        "return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname)"
        ".concat(performance.getEntriesByType('navigation').map(e => new URL(e.name).pathname))"
    )


def test_the_first_load_of_a_new_session_asks_for_nothing_that_is_not_there(
    console: Console, stack: LocalStack
) -> None:
    # Storage is cleared on a page of the console's origin that runs none of its code: a console
    # page left open here could still write its session id (a session erased by an earlier test
    # makes it start a new one) after the clear.
    console.driver.get(f"{stack.console_url.rstrip('/')}/console.css")
    console.js("localStorage.clear()")
    console.driver.get_log("browser")  # what was logged before (read: dropped)
    console.driver.get(f"{stack.console_url}")
    console.wait("window.voiceConsole && window.voiceConsole.connected")
    session_id = console.js("return voiceConsole.sessionId")
    paths = requested_paths(console)
    assert f"/sessions/{session_id}" not in paths
    assert "/favicon.ico" not in paths
    assert console.js("return document.querySelector('link[rel=icon]') !== null")
    logs = console.driver.get_log("browser")
    assert not [entry for entry in logs if "404" in entry.get("message", "")], logs


def test_a_wrong_url_is_named_in_what_the_page_says(console: Console, stack: LocalStack) -> None:
    wrong = "ws://127.0.0.1:9/"
    console.driver.get(f"{stack.console_url}?url={wrong}&sessionId={uuid.uuid4()}")
    console.wait("document.getElementById('connection').textContent.includes('retrying')")
    status = console.js("return document.getElementById('connection').textContent")
    assert wrong in status and "lost" not in status, status
    assert any(wrong in text for text in notes(console)), notes(console)
