"""The voice console in headless Chromium against the whole local stack: the page's own JavaScript
speaks the protocol; speech recognition and synthesis are the test doubles of ``doubles.js``."""

from __future__ import annotations

import json
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

from conductor_local.stack import LocalStack
from tests.console.conftest import Console

pytestmark = pytest.mark.browser

SCREENSHOT_ENV = "VOICEIDE_CONSOLE_SCREENSHOT"


def keys() -> Any:
    from selenium.webdriver.common.keys import Keys

    return Keys


def finals_on_screen(console: Console) -> list[str]:
    return console.js(
        "return [...document.querySelectorAll('#transcript li.assistant:not(.partial)')].map(li => li.textContent)"
    )


def test_a_typed_request_completes_a_heard_turn_with_the_keyboard_alone(console: Console) -> None:
    console.open()
    page = console.driver.switch_to.active_element
    page.send_keys(keys().TAB)  # the skip link is the first stop
    console.driver.switch_to.active_element.send_keys(keys().ENTER)
    assert console.js("return document.activeElement.id") == "say"
    console.driver.switch_to.active_element.send_keys("hello there", keys().ENTER)
    console.idle_after(1)

    assert console.sent("userAudioTranscriptFinal") == [{"text": "hello there"}]
    assert finals_on_screen(console) == ["assistantYou said: hello there"]
    # heard: the speech double played the tts.speak text, and the console answered it as spoken
    assert console.js("return __fake.utterances") == ["You said: hello there"]
    speak = next(call for call in console.received("toolCall") if call["name"] == "tts.speak")
    results = {r["callId"]: r for r in console.sent("toolResult")}
    assert json.loads(results[speak["callId"]]["result"]) == {"spoken": True}
    # the timeline of the turn, in ms from the final transcript
    marks = console.js("return voiceConsole.turns[0].marks")
    assert set(marks) == {"thinking", "partial", "speak", "idle"}
    assert 0 <= marks["thinking"] <= marks["idle"] and marks["speak"] <= marks["idle"]
    shown = console.js("return [...document.querySelectorAll('#timeline [data-ms]')].map(e => e.className)")
    assert shown == ["mark-thinking", "mark-partial", "mark-speak", "mark-idle"]
    live = console.js("return document.getElementById('transcript').getAttribute('aria-live')")
    assert live == "polite"


def test_a_tool_call_is_answered_from_the_demo_project(console: Console) -> None:
    console.open()
    console.js("voiceConsole.say(arguments[0])", 'call editor.readFile {"path": "Parser.swift"}')
    console.idle_after(1)
    call = next(c for c in console.received("toolCall") if c["name"] == "editor.readFile")
    (result,) = [r for r in console.sent("toolResult") if r["callId"] == call["callId"]]
    assert result["error"] is None
    read = json.loads(result["result"])
    assert read["path"] == "Sources/Demo/Parser.swift" and "guard !input.isEmpty" in read["text"]
    assert "I read Sources/Demo/Parser.swift; it has" in finals_on_screen(console)[-1]  # said as a person would

    console.js("voiceConsole.say(arguments[0])", "call tests.run {}")  # the demo's failing test
    console.idle_after(2)
    # a background tool: the turn ends once it started, the conductor's report turn tells the outcome
    console.until(lambda: "testEmptyInput" in finals_on_screen(console)[-1])


def test_speech_recognition_then_a_barge_in_reports_the_heard_text(console: Console) -> None:
    console.open(ms_per_word=60)
    console.driver.find_element("id", "hands-free").click()
    console.wait("__fake.recognition !== null")
    console.js("__fake.hear(['ramble', 'ramble 40'], 'ramble 40')")
    assert console.sent("userAudioTranscriptPartial")[0] == {"text": "ramble"}
    assert console.sent("userAudioTranscriptFinal") == [{"text": "ramble 40"}]
    console.wait("__fake.words.length >= 8")
    console.js("__fake.hear(['wait'])")  # talking over the answer barges in
    (barge_in,) = console.sent("error")
    assert barge_in["code"] == "audio.output.interrupted"
    heard = barge_in["heardText"]
    words_heard = console.js("return __fake.words.join(' ')")
    assert heard and heard.split() == words_heard.split()[: len(heard.split())]
    assert len(heard.split()) >= 8
    console.wait("voiceConsole.state === 'idle'")
    # every speak call not played in full was answered as interrupted, with the same heard text
    interrupted = [
        json.loads(r["result"]) for r in console.sent("toolResult") if '"spoken":false' in (r["result"] or "")
    ]
    assert interrupted and all(r == {"spoken": False, "heardText": heard} for r in interrupted)
    assert console.js("return speechSynthesis.speaking") is False


def test_a_barge_in_mid_answer_ends_the_partial_on_screen_as_interrupted(console: Console) -> None:
    console.open()
    console.js("voiceConsole.say('count 200')")
    console.wait("document.querySelector('#transcript li.assistant.partial') !== null")
    console.driver.switch_to.active_element.send_keys(keys().ESCAPE)
    console.wait("voiceConsole.state === 'idle'")
    console.wait("document.querySelector('#transcript li.assistant.interrupted') !== null")
    finals = console.received("assistantSpeechFinal")
    assert finals == [{"text": "", "interrupted": True}]
    assert console.js("return document.querySelectorAll('#transcript li.partial').length") == 0
    assert "interrupted" in finals_on_screen(console)[-1]


def test_a_reconnect_mid_answer_resumes_with_last_seq(console: Console, stack: LocalStack) -> None:
    console.open(ms_per_word=50)
    console.js("voiceConsole.say('ramble 30')")
    console.wait("__fake.words.length >= 3")  # the answer is being spoken
    assert stack.gateway is not None
    management = boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=stack.callback_url,
        region_name=stack.region,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    for connection_id in list(stack.gateway._open):
        management.delete_connection(ConnectionId=connection_id)
    console.wait("voiceConsole.record.sent.filter(e => e.kind.sessionStart).length === 2")
    console.idle_after(1)
    starts = console.sent("sessionStart")
    assert "lastSeq" not in starts[0] and starts[1]["lastSeq"] >= 1
    assert len(finals_on_screen(console)) == 1 and console.received("error") == []
    speaks = [c["callId"] for c in console.received("toolCall") if c["name"] == "tts.speak"]
    answered = {r["callId"] for r in console.sent("toolResult")}
    assert set(speaks) <= answered


def test_a_card_is_rendered_from_its_ui_patch(console: Console) -> None:
    console.open()
    request = "Change the guard. Use this:\n```swift\nguard let input else { return nil }\n```\nThen run the tests."
    console.js("voiceConsole.say(arguments[0])", request)
    console.idle_after(1)
    console.wait("document.querySelector('#cards .card') !== null")
    title = console.js("return document.querySelector('#cards .card h3').textContent")
    body = console.js("return document.querySelector('#cards .card pre').textContent")
    assert title == "Swift code" and body == "guard let input else { return nil }"
    assert console.js("return voiceConsole.uiModel.cards.length") == 1


def test_a_page_from_another_origin_cannot_open_a_session(console: Console) -> None:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!doctype html><title>another site</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        console.driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
        url = f"{console.stack.ws_url}?sessionId={uuid.uuid4()}"
        outcome = console.driver.execute_async_script(
            """const done = arguments[arguments.length - 1];
            const ws = new WebSocket(arguments[0]);
            ws.onopen = () => done('open');
            ws.onclose = () => done('closed');""",
            url,
        )
    finally:
        server.shutdown()
    assert outcome == "closed"


def test_a_finished_conversation(console: Console) -> None:
    """A conversation as a person has it (and the README's screenshot, when asked for)."""
    console.open(ms_per_word=5)
    console.js("voiceConsole.say(arguments[0])", "Open the parser and tell me what it does.")
    console.idle_after(1)
    console.js("voiceConsole.say(arguments[0])", 'call editor.openFile {"path": "Parser.swift"}')
    console.idle_after(2)
    request = "Here is the fix:\n```swift\nguard !input.isEmpty else { return [] }\n```\nThen run the tests."
    console.js("voiceConsole.say(arguments[0])", request)
    console.idle_after(3)
    console.js("voiceConsole.say(arguments[0])", "call tests.run {}")
    console.idle_after(4)
    console.until(lambda: "testEmptyInput" in finals_on_screen(console)[-1])  # the background run's report
    assert len(finals_on_screen(console)) == 5
    assert console.js("return document.querySelectorAll('#timeline .turn-row').length") == 4
    target = os.environ.get(SCREENSHOT_ENV)
    if target:
        console.js("document.getElementById('log-panel').open = true")
        Path(target).write_bytes(console.driver.get_screenshot_as_png())


def test_the_console_signs_in_where_the_stack_needs_it(driver: Any) -> None:
    with LocalStack("127.0.0.1", 0, quiet=True, auth="cognito") as signed:
        console = Console(driver, signed).open()
        status = console.js("return document.getElementById('connection').textContent")
        assert status.startswith("connected")
        console.js("voiceConsole.say('hello')")
        console.idle_after(1)
        assert finals_on_screen(console) == ["assistantYou said: hello"]
        # the Sessions panel calls the sessions API with the same token (it answers 401 without one)
        console.driver.find_element("id", "sessions-button").click()
        listed = "return [...document.querySelectorAll('#session-list li')].map(li => li.dataset.sessionId)"
        console.until(lambda: console.session_id in console.js(listed))
        assert console.js("return __fake.errors") == []
