"""The person's project in the voice console (docs/protocol.md, "The person's project" and "Names
heard right"), in headless Chromium against the local stack, with a second device on the session
over a real WebSocket (the companion's client, roles ``tools``): the Project panel shows what that
device sees (the latest replacing the one before, gone when the device leaves); its names give the
console's recognizer a vocabulary, counted on the page; and the names the person's words may have
meant are shown under those words, which stay as said. A recognizer that takes phrases is given
them, and one that refuses them listens again without them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from shared.wire.workspace import WorkspaceContext, WorkspaceNames
from tests.console.conftest import Console
from tests.console.loop_thread import LoopThread
from tests.console.test_console_sessions import no_page_errors
from voiceide_client.companion.session import CompanionClient
from voiceide_client.connection.link import scaled_backoff

pytestmark = pytest.mark.browser

DESK = {"id": "desk", "name": "Desk", "roles": ["tools"]}
SAID = "what does get user buy id do"
DIAGNOSTICS = [
    {"path": "src/users.ts", "line": 41, "severity": "error", "message": "x is not defined"},
    {"path": "src/users.ts", "line": 52, "severity": "warning", "message": "unused import"},
    {"path": "src/orders.ts", "line": 7, "severity": "info", "message": "could be const"},
    {"path": "src/orders.ts", "line": 9, "severity": "hint", "message": "rename"},
]
CONTEXT = {
    "workspace": "shop",
    "openFile": {"path": "src/users.ts", "language": "typescript", "cursorLine": 40},
    "selection": {"path": "src/users.ts", "startLine": 40, "endLine": 44, "text": "const user = users.get(id)"},
    "branch": "main",
    "changedFiles": ["src/users.ts", "src/orders.ts"],
    "diagnostics": DIAGNOSTICS,
    "runningTasks": ["build"],
}
NAMES = [
    {"path": "src/users.ts", "names": ["getUserById", "UserRepository", "parseJSON"]},
    {"path": "src/orders.ts", "names": ["placeOrder", "OrderQueue"]},
]


class Desk(LoopThread):
    """The companion's client on the console's session, on its own event loop."""

    def __init__(self, stack: LocalStack, session_id: str) -> None:
        super().__init__()
        self.client = CompanionClient(
            stack.ws_url, session_id=session_id, capabilities=(), backoff=scaled_backoff(0.01), device=DESK
        )

    def send(self, payload: WorkspaceContext | WorkspaceNames) -> None:
        assert self.run(self.client.send_workspace(payload))


@pytest.fixture
def desk_on(stack: LocalStack) -> Iterator[Any]:
    """Connects a Desk to a session when called; every one made is closed at the end."""
    made: list[Desk] = []

    def connect(console: Console) -> Desk:
        desk = Desk(stack, console.session_id)
        made.append(desk)
        desk.run(desk.client.connect())
        console.wait("voiceConsole.devices.some(d => d.id === 'desk')")
        return desk

    yield connect
    for desk in made:
        desk.close()


def send_names(desk: Desk) -> None:
    desk.send(WorkspaceNames.model_validate({"set": "s1", "part": 0, "parts": 2, "files": NAMES[:1]}))
    desk.send(WorkspaceNames.model_validate({"set": "s1", "part": 1, "parts": 2, "files": NAMES[1:]}))


def panel(console: Console) -> dict[str, Any]:
    return console.js(
        """const panel = document.getElementById('project-panel');
        return {
            hidden: panel.hidden,
            visible: panel.offsetParent !== null,
            entries: [...panel.querySelectorAll('li.project-entry')].map(li => ({
                device: li.dataset.device,
                head: li.querySelector('.project-head').textContent,
                open: (li.querySelector('.project-open') || {}).textContent || null,
                changed: li.querySelector('.project-changed').textContent,
                diagnostics: [...li.querySelectorAll('.project-diagnostics li')].map(d => d.textContent),
                tasks: (li.querySelector('.project-tasks') || {}).textContent || null,
            })),
        }"""
    )


def test_the_panel_shows_what_the_desk_sees_and_the_names_go_under_the_words(
    console: Console, stack: LocalStack, desk_on: Any
) -> None:
    console.open()
    assert panel(console)["hidden"] is True  # no device has sent what it sees
    assert console.js("return document.getElementById('vocabulary').hidden") is True
    desk = desk_on(console)

    desk.send(WorkspaceContext.model_validate(CONTEXT))
    console.wait("voiceConsole.projects.length === 1")
    shown = panel(console)
    assert shown["visible"] is True
    (entry,) = shown["entries"]
    assert entry["device"] == "Desk"
    assert entry["head"] == "Desk · shop · main"
    assert entry["open"] == "open: src/users.ts:40 (typescript) · selected lines 40\u201344"
    assert entry["changed"] == "2 changed files"
    assert entry["diagnostics"] == [
        "error src/users.ts:41: x is not defined",
        "warning src/users.ts:52: unused import",
        "info src/orders.ts:7: could be const",
        "and 1 more",
    ]
    assert entry["tasks"] == "running: build"

    desk.send(WorkspaceContext.model_validate({**CONTEXT, "branch": "fix-users", "runningTasks": []}))
    console.wait("voiceConsole.projects[0].branch === 'fix-users'")
    (entry,) = panel(console)["entries"]  # replaced, not added
    assert entry["head"] == "Desk · shop · fix-users" and entry["tasks"] is None

    send_names(desk)
    console.wait("voiceConsole.vocabulary.includes('get user by id')")
    count = console.js("return Number(document.getElementById('vocabulary-count').textContent)")
    assert count == len(console.js("return voiceConsole.vocabulary")) == 3  # the first part's names
    assert console.js("return document.getElementById('vocabulary').hidden") is False

    console.js("voiceConsole.say(arguments[0])", SAID)
    console.wait("voiceConsole.namesHeard.length >= 1")
    console.idle_after(1)
    lines = console.js(
        """return [...document.querySelectorAll('#transcript li')].map(li => ({
            cls: li.className, body: (li.querySelector('.body') || {}).textContent || null, text: li.textContent,
        }))"""
    )
    said_at = next(i for i, line in enumerate(lines) if line["cls"] == "you")
    assert lines[said_at]["body"] == SAID  # the words as said, never rewritten
    names = lines[said_at + 1]
    assert names["cls"] == "names-heard"  # right under the words
    (match,) = [m for m in console.js("return voiceConsole.namesHeard[0].matches") if m["name"] == "getUserById"]
    assert match["path"] == "src/users.ts" and "buy" in match["heard"]
    assert f"heard '{match['heard']}' → getUserById (src/users.ts)" in names["text"]
    assert console.js("return voiceConsole.namesHeard[0].under") == SAID
    assert [line["cls"] for line in lines].count("names-heard") == 1  # once, however many requests

    desk.close()  # the device leaves: what it saw goes with it
    console.wait("voiceConsole.projects.length === 0")
    assert panel(console)["hidden"] is True
    no_page_errors(console)


def test_a_recognizer_that_takes_phrases_is_given_the_names_and_one_that_refuses_listens_without(
    console: Console, desk_on: Any
) -> None:
    console.open()
    send_names(desk_on(console))
    console.wait("voiceConsole.vocabulary.length > 0")
    console.js(
        """window.SpeechRecognitionPhrase = class {
            constructor(phrase, boost) { this.phrase = phrase; this.boost = boost; }
        };
        SpeechRecognition.prototype.phrases = [];"""
    )
    console.js("document.getElementById('hands-free').click()")
    console.wait("window.__fake.recognition !== null")
    given = console.js("return __fake.recognition.phrases.map(p => p.phrase)")
    assert given == console.js("return voiceConsole.vocabulary") and "get user by id" in given
    assert console.js("return voiceConsole.vocabularyGiven") == "phrases"

    console.js(
        """const rec = __fake.recognition;
        window.__refused = rec;
        rec.onerror({error: 'phrases-not-supported'});
        rec.stop();"""
    )
    console.wait("window.__fake.recognition !== null && window.__fake.recognition !== window.__refused")
    assert console.js("return __fake.recognition.phrases.length") == 0  # started again, without them
    assert console.js("return voiceConsole.vocabularyGiven") == "none"
    assert console.js("return [...document.querySelectorAll('#transcript .error')].length") == 0  # no error shown
    console.js("document.getElementById('hands-free').click()")
    no_page_errors(console)
