"""The voice console against a scripted conductor (``tests/client/fake_conductor.py``), for events
the tests send exactly when they want: another device's ``toolProgress`` shown as a line per call,
updated in place and shown done; ``error`` ``taken_over`` said once, with no reconnecting; a held
change's card that comes after its spoken question; and the conductor's ``conductor-preview-``
read answered like any read. The page is served by the local stack; its WebSocket goes to the
scripted conductor (``?url=``)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from tests.client.fake_conductor import FakeConductor, FakeSession
from tests.console.conftest import WAIT_S, Console
from tests.console.test_console_sessions import no_page_errors

pytestmark = pytest.mark.browser

CARD_TITLE = "Replace line 1 of main.swift"
QUESTION = f"{CARD_TITLE}?"
CARD = {
    "type": "diff",
    "title": CARD_TITLE,
    "file": "Sources/Demo/main.swift",
    "language": "diff",
    "body": "--- Sources/Demo/main.swift\n+++ Sources/Demo/main.swift\n@@ -1,1 +1,1 @@\n-let input\n+let x = 42",
}


class Scripted:
    """A FakeConductor on its own event loop, driven from a sync test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.fake = FakeConductor()
        self.run(self.fake.__aenter__())
        self.seq = 0

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float = WAIT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def session(self, session_id: str) -> FakeSession:
        return self.fake.session(session_id)

    def send(self, session_id: str, kind: str, payload: dict[str, Any], *, numbered: bool = True) -> None:
        """One event, as the conductor frames it (numbered unless ``numbered`` is False)."""
        event: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "kind": {kind: payload},
        }
        if numbered:
            self.seq += 1
            event["seq"] = self.seq
        self.run(self.session(session_id).send_raw(json.dumps(event)))

    def call(self, session_id: str, name: str, arguments: dict[str, Any], call_id: str | None = None) -> str:
        call_id = call_id or f"call-{uuid.uuid4().hex[:8]}"
        self.send(session_id, "toolCall", {"callId": call_id, "name": name, "arguments": json.dumps(arguments)})
        return call_id

    def state(self, session_id: str, state: str) -> None:
        self.call(session_id, "convo.setState", {"state": state})

    def close_connection(self, session_id: str) -> None:
        async def close() -> None:
            connection = self.session(session_id).connection
            if connection is not None:
                await connection.ws.close()

        self.run(close())

    def result(self, session_id: str, call_id: str) -> Any:
        """The console's toolResult for ``call_id`` (waits for it)."""
        session = self.session(session_id)
        self.run(session.wait_until(lambda: any(r.call_id == call_id for r in session.results()), WAIT_S))
        return next(r for r in session.results() if r.call_id == call_id)

    def close(self) -> None:
        try:
            self.run(self.fake.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


@pytest.fixture(scope="module")
def scripted() -> Iterator[Scripted]:
    made = Scripted()
    yield made
    made.close()


def open_on(console: Console, stack: LocalStack, scripted: Scripted, ms_per_word: int = 40) -> str:
    """The console opened on a fresh session whose WebSocket goes to the scripted conductor."""
    session_id = str(uuid.uuid4())
    console.driver.get(f"{stack.console_url}?sessionId={session_id}&url={scripted.fake.url}")
    console.js(f"window.__fake.msPerWord = {ms_per_word}")
    console.wait("window.voiceConsole && voiceConsole.connected")
    console.wait("voiceConsole.record.received.some(e => e.kind.sessionReady)")
    return session_id


def progress_lines(console: Console) -> list[dict[str, Any]]:
    return console.js(
        """return [...document.querySelectorAll('#transcript li.progress')].map(li => ({
            callId: li.dataset.callId,
            name: li.querySelector('.progress-name').textContent,
            text: li.querySelector('.progress-text').textContent,
            value: li.querySelector('progress').hasAttribute('value') ? li.querySelector('progress').value : null,
            end: li.querySelector('.progress-end').textContent,
        }))"""
    )


def progress(call_id: str, fraction: float | None, message: str, name: str | None = "build.run") -> dict[str, Any]:
    payload: dict[str, Any] = {"callId": call_id, "message": message}
    if fraction is not None:
        payload["fraction"] = fraction
    if name is not None:
        payload["name"] = name
    return payload


# ---- another device's progress ------------------------------------------------------------------


def test_another_devices_progress_is_one_line_a_call_updated_in_place(
    console: Console, stack: LocalStack, scripted: Scripted
) -> None:
    session = open_on(console, stack, scripted)
    scripted.send(session, "toolProgress", progress("tu_build", 0.25, "[5/20] Compiling unit5.py"), numbered=False)
    console.until(lambda: len(progress_lines(console)) == 1)
    assert progress_lines(console) == [
        {
            "callId": "tu_build",
            "name": "build.run",
            "text": "25 % · [5/20] Compiling unit5.py",
            "value": 0.25,
            "end": "",
        }
    ]

    scripted.send(session, "toolProgress", progress("tu_build", 0.5, "[10/20] Compiling unit10.py"), numbered=False)
    console.until(lambda: progress_lines(console)[0]["value"] == 0.5)
    (line,) = progress_lines(console)  # the same line, updated
    assert line["text"] == "50 % · [10/20] Compiling unit10.py"

    # another call, without a fraction (the bar shows no value) and without a name (an older conductor)
    scripted.send(session, "toolProgress", progress("tu_tests", None, "Running ParserTests", None), numbered=False)
    console.until(lambda: len(progress_lines(console)) == 2)
    assert progress_lines(console)[1] == {
        "callId": "tu_tests",
        "name": "a tool",
        "text": "Running ParserTests",
        "value": None,
        "end": "",
    }
    assert sorted(console.js("return voiceConsole.progressCalls")) == ["tu_build", "tu_tests"]

    # a turn in which only the tests report: at its end the build's line is shown done, the tests' not
    scripted.state(session, "thinking")
    console.wait("voiceConsole.state === 'thinking'")
    scripted.send(
        session, "toolProgress", progress("tu_tests", 0.4, "Running ParserTests", "tests.run"), numbered=False
    )
    console.until(lambda: progress_lines(console)[1]["value"] == 0.4)
    scripted.state(session, "idle")
    console.wait("voiceConsole.state === 'idle'")
    lines = progress_lines(console)
    assert [(line["callId"], line["end"]) for line in lines] == [("tu_build", " — done"), ("tu_tests", "")]
    assert lines[1]["name"] == "tests.run"  # the name, once known
    assert console.js("return voiceConsole.progressCalls") == ["tu_tests"]

    # the build still runs after all (a background job): its line is live again, still one line
    scripted.send(session, "toolProgress", progress("tu_build", 0.75, "Linking"), numbered=False)
    console.until(lambda: progress_lines(console)[0]["end"] == "")
    assert [line["callId"] for line in progress_lines(console)] == ["tu_build", "tu_tests"]
    assert progress_lines(console)[0]["text"] == "75 % · Linking"

    # progress that names no call is ignored
    scripted.send(session, "toolProgress", {"fraction": 0.5}, numbered=False)
    scripted.send(session, "toolProgress", progress("tu_build", 0.8, "Signing"), numbered=False)
    console.until(lambda: progress_lines(console)[0]["value"] == 0.8)
    assert len(progress_lines(console)) == 2
    no_page_errors(console)


# ---- taken over ---------------------------------------------------------------------------------


def test_a_session_taken_over_says_so_once_and_does_not_reconnect(
    console: Console, stack: LocalStack, scripted: Scripted
) -> None:
    session = open_on(console, stack, scripted)
    handshakes = scripted.fake.handshakes
    scripted.send(
        session,
        "error",
        {"code": "taken_over", "message": "another connection took this session over"},
        numbered=False,
    )
    scripted.close_connection(session)
    console.wait("!voiceConsole.connected")
    console.wait("document.getElementById('connection').textContent === 'taken over by another connection'")

    lines = console.js("return [...document.querySelectorAll('#transcript li')].map(li => li.textContent)")
    assert [line for line in lines if "taken over" in line or "taken_over" in line] == [
        "This session was taken over by another connection. Connect takes it back."
    ]
    time.sleep(1.5)  # longer than the first reconnect delay (1 s): no attempt was made
    assert scripted.fake.handshakes == handshakes
    assert console.js("return document.getElementById('connection').textContent") == (
        "taken over by another connection"
    )

    # Connect takes the session back, on purpose
    console.js("document.getElementById('settings-panel').open = true")
    console.driver.find_element("id", "connect").click()
    console.wait("voiceConsole.connected")
    assert scripted.fake.handshakes == handshakes + 1
    no_page_errors(console)


# ---- a held change whose card comes after the question --------------------------------------


def held_buttons(console: Console) -> list[tuple[int, str]]:
    """(card index, button text) of the held cards' buttons."""
    pairs = console.js(
        """return [...document.querySelectorAll('#cards article')].flatMap((a, i) =>
            [...a.querySelectorAll('.held-actions button')].map(b => [i, b.textContent]))"""
    )
    return [(index, text) for index, text in pairs]


def add_card(scripted: Scripted, session: str, card: dict[str, Any]) -> None:
    scripted.send(
        session, "assistantUIPatch", {"patch": json.dumps([{"op": "add", "path": "/cards/-", "value": card}])}
    )


@pytest.mark.parametrize("card_at", ["after idle", "before idle"])
def test_the_buttons_go_on_a_change_card_that_comes_after_the_question(
    console: Console, stack: LocalStack, scripted: Scripted, card_at: str
) -> None:
    session = open_on(console, stack, scripted)
    add_card(scripted, session, {"type": "code", "title": "Earlier card", "body": "x"})
    scripted.state(session, "thinking")
    scripted.send(session, "assistantSpeechFinal", {"text": QUESTION})
    if card_at == "before idle":
        add_card(scripted, session, CARD)
    scripted.state(session, "idle")
    console.wait("voiceConsole.record.received.filter(e => e.kind.toolCall).length === 2")  # idle is in
    if card_at == "after idle":
        assert held_buttons(console) == []  # no card yet: nothing to answer on
        add_card(scripted, session, CARD)
    console.until(lambda: held_buttons(console) == [(1, "Approve"), (1, "Decline")])

    console.driver.find_element("css selector", "#cards article.held button.approve").click()
    session_events = scripted.session(session)
    scripted.run(
        session_events.wait_until(lambda: any(e.kind_name == "confirmChange" for _, e in session_events.received))
    )
    assert console.js("return voiceConsole.held.sent") == [{"approve": True}]

    # the next question's card gets the buttons; the earlier one is not held any more
    scripted.state(session, "thinking")
    scripted.send(session, "assistantSpeechFinal", {"text": QUESTION})
    scripted.state(session, "idle")
    add_card(scripted, session, dict(CARD, body="-let input\n+let y = 7"))
    console.until(lambda: held_buttons(console) == [(2, "Approve"), (2, "Decline")])
    no_page_errors(console)


def test_a_question_that_is_not_about_the_card_holds_nothing(
    console: Console, stack: LocalStack, scripted: Scripted
) -> None:
    session = open_on(console, stack, scripted)
    scripted.state(session, "thinking")
    scripted.send(session, "assistantSpeechFinal", {"text": "Which file do you mean?"})
    scripted.state(session, "idle")
    add_card(scripted, session, CARD)
    console.wait("voiceConsole.uiModel.cards.length === 1")
    scripted.state(session, "thinking")  # whatever comes next: the state line shows it
    console.wait("voiceConsole.state === 'thinking'")
    assert held_buttons(console) == []


# ---- the conductor's read for a change's card -----------------------------------------------


def test_a_preview_read_is_answered_like_any_read_and_the_question_goes_on(
    console: Console, stack: LocalStack, scripted: Scripted
) -> None:
    session = open_on(console, stack, scripted, ms_per_word=300)
    scripted.state(session, "thinking")
    first = scripted.call(session, "tts.speak", {"text": "I will change main.swift."})
    assert json.loads(scripted.result(session, first).result or "null") == {"spoken": True}
    question = scripted.call(session, "tts.speak", {"text": QUESTION})
    preview = scripted.call(
        session, "editor.readFile", {"path": "Sources/Demo/main.swift"}, call_id="conductor-preview-0123456789abcdef"
    )

    read = scripted.result(session, preview)
    assert read.error is None
    value = json.loads(read.result or "null")
    assert value["path"] == "Sources/Demo/main.swift" and value["truncated"] is False
    assert value["text"].startswith("let input = CommandLine.arguments")
    note = console.js(
        "return [...document.querySelectorAll('#transcript li.note')].map(li => li.textContent)"
        ".find(t => t.startsWith('→ editor.readFile'))"
    )
    assert note.endswith("(for the change's card)")

    # the person talks over the question: what they heard of the answer is all of it so far
    console.wait("__fake.words.includes('Replace')")
    assert console.js("return voiceConsole.bargeIn('the user spoke')") is True
    (interrupted,) = [e for _, e in scripted.session(session).received if e.kind_name == "error"]
    assert interrupted.payload.heard_text.startswith("I will change main.swift. Replace")
    assert json.loads(scripted.result(session, question).result or "null")["spoken"] is False
    no_page_errors(console)
