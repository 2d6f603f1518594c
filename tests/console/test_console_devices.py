"""The voice console as one device of a session (docs/protocol.md, "Several devices"), in headless
Chromium against the local stack: its ``sessionStart.device`` (a stable id kept in localStorage, a
name, its roles), joining a session the client stub started from the Sessions panel (to watch:
display only; to talk: voice and display), the conversation so far caught up from ``lastSeq`` 0 and
shown but never spoken or run again, a watching browser that never sends a transcript or a barge-in,
the device list and who runs a tool, and a held change's Approve / Decline (``confirmChange``)."""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from tests.console.conftest import WAIT_S, Console
from tests.console.loop_thread import LoopThread
from tests.console.test_console_sessions import no_page_errors, open_panel
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

pytestmark = pytest.mark.browser

CHANGE = (
    'call editor.replaceText {"path": "Sources/Demo/main.swift", "startLine": 1, "endLine": 1, "text": "let x = 42"}'
)
CHANGE_TITLE = "Replace line 1 of main.swift"
PHONE = {"id": "iphone-test", "name": "Test iPhone", "roles": ["voice", "display", "tools"]}


class Phone(LoopThread):
    """The client stub (the iOS app's stand-in) on its own event loop, driven from a sync test."""

    def __init__(self, stack: LocalStack, **kwargs: Any) -> None:
        super().__init__()
        kwargs.setdefault("capabilities", ())
        kwargs.setdefault("backoff", scaled_backoff(0.01))
        kwargs.setdefault("device", PHONE)
        self.client = ConductorClient(stack.ws_url, session_id=str(uuid.uuid4()), **kwargs)

    def say(self, text: str, timeout: float = 10.0) -> Any:
        return self.run(self.client.say(text, timeout=timeout), timeout + 5)


@pytest.fixture
def phone(stack: LocalStack) -> Iterator[Phone]:
    made = Phone(stack)
    made.run(made.client.connect())
    yield made
    made.close()


def phone_device(phone: Phone) -> tuple[str, list[str]]:
    """The stub's device id and roles as its sessionStart says (none: the one device ``app``)."""
    starts = [e.payload for e in phone.client.sent if e.kind_name == "sessionStart"]
    device = starts[-1].device if starts else None
    if device is None:
        return "app", ["voice", "display", "tools"]
    return device.id, list(device.roles)


def finals_shown(console: Console) -> list[str]:
    return console.js("return [...document.querySelectorAll('#transcript li.assistant .body')].map(b => b.textContent)")


def device_rows(console: Console) -> list[dict[str, Any]]:
    return console.js(
        """return [...document.querySelectorAll('#devices li.device')].map(li => ({
            id: li.dataset.deviceId,
            name: li.querySelector('.device-name').textContent,
            roles: li.querySelector('.device-roles').textContent,
            self: li.querySelector('.device-self') !== null,
            running: li.classList.contains('running'),
        }))"""
    )


def click_row_button(console: Console, session_id: str, cls: str) -> None:
    """Click a button of a session's row, found and clicked in one step in the page (the list may
    be drawn again meanwhile, as its usage arrives)."""
    console.js(
        "document.querySelector(`#session-list li[data-session-id='${arguments[0]}'] .${arguments[1]}`).click()",
        session_id,
        cls,
    )


def join(console: Console, session_id: str, how: str) -> dict[str, Any]:
    """Join ``session_id`` from the Sessions panel (``how``: watch or talk); its sessionStart."""
    starts = len(console.sent("sessionStart"))
    open_panel(console, session_id)
    click_row_button(console, session_id, f"join-{how}")
    console.wait(f"voiceConsole.sessionId === '{session_id}' && voiceConsole.connected")
    console.wait(f"voiceConsole.record.sent.filter(e => e.kind.sessionStart).length > {starts}")
    console.wait("voiceConsole.record.received.some(e => e.kind.sessionReady)")
    ready_count = console.js("return voiceConsole.record.received.filter(e => e.kind.sessionReady).length")
    assert ready_count >= 1
    return console.sent("sessionStart")[-1]


def sent_after(console: Console, index: int) -> list[str]:
    """The kinds the page sent from its ``index``-th event on."""
    return console.js("return voiceConsole.record.sent.slice(arguments[0]).map(e => Object.keys(e.kind)[0])", index)


def held_card_buttons(console: Console) -> list[str]:
    return console.js("return [...document.querySelectorAll('#cards article.held button')].map(b => b.textContent)")


# ---- what works with any conductor --------------------------------------------------------------


def test_the_device_id_is_made_once_and_sent_with_every_session_start(console: Console, stack: LocalStack) -> None:
    console.open()
    (start,) = console.sent("sessionStart")
    device = start["device"]
    assert re.fullmatch(r"browser-[0-9a-f]{16}", device["id"])
    assert device["name"] == "Browser console — Chrome"
    assert device["roles"] == ["voice", "display", "tools"]  # its own session: it talks and runs the demo tools
    assert console.js("return localStorage.getItem('voiceide.deviceId')") == device["id"]
    assert console.js("return document.getElementById('device-id').textContent") == device["id"]
    # alone on its session: the list is this browser
    assert device_rows(console) == [
        {"id": device["id"], "name": device["name"], "roles": "voice · display · tools", "self": True, "running": False}
    ]
    assert console.js("return document.getElementById('devices-help').textContent") == (
        "Only this browser is on this session."
    )

    console.open()  # a reload: the same device
    assert console.sent("sessionStart")[0]["device"]["id"] == device["id"]
    console.js("document.getElementById('new-session').click()")  # another session: still the same device
    console.wait("voiceConsole.record.sent.filter(e => e.kind.sessionStart).length === 2")
    assert console.sent("sessionStart")[1]["device"]["id"] == device["id"]

    # a name of the person's choosing, sent from the next connection on
    console.js("document.getElementById('settings-panel').open = true")
    field = console.driver.find_element("id", "device-name")
    field.clear()
    field.send_keys("Ana's laptop")
    console.driver.find_element("id", "connect").click()
    console.wait("voiceConsole.record.sent.filter(e => e.kind.sessionStart).length === 3")
    assert console.sent("sessionStart")[2]["device"] == {
        "id": device["id"],
        "name": "Ana's laptop",
        "roles": ["voice", "display", "tools"],
    }
    console.js("localStorage.removeItem('voiceide.deviceName')")
    no_page_errors(console)


def test_joining_to_watch_catches_up_and_never_talks(console: Console, stack: LocalStack, phone: Phone) -> None:
    first = phone.say("hello from the phone")
    second = phone.say("what is on the screen")
    assert first.completed and second.completed
    session = phone.client.session_id

    console.open()
    own_id = console.sent("sessionStart")[0]["device"]["id"]
    before = len(console.js("return voiceConsole.record.sent"))
    start = join(console, session, "watch")
    assert start["sessionId"] == session and start["lastSeq"] == 0
    assert start["device"] == {"id": own_id, "name": "Browser console — Chrome", "roles": ["display"]}
    console.until(
        lambda: finals_shown(console) == ["You said: hello from the phone", "You said: what is on the screen"]
    )
    assert console.js("return voiceConsole.mode") == "watch"

    # the past is shown, not spoken, and none of its calls is run or answered again
    assert console.js("return __fake.utterances") == []
    assert sent_after(console, before) == ["sessionStart"]
    # watching: the talking controls are off, and nothing the person does here is sent
    assert console.js("return document.getElementById('device-mode').hidden") is False
    assert console.js("return document.getElementById('device-mode').textContent").startswith("Watching:")
    for control in ("say", "send", "talk", "hands-free", "barge-in"):
        assert console.js(f"return document.getElementById('{control}').disabled") is True, control
    console.js("voiceConsole.say('this must not be sent')")
    assert console.js("return voiceConsole.bargeIn('a watching browser does not interrupt')") is False
    console.js("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    assert sent_after(console, before) == ["sessionStart"]
    assert "Watching: this browser sends nothing." in console.js(
        "return [...document.querySelectorAll('#transcript li.note')].pop().textContent"
    )

    # the console opened again (its kept session) joins it again the same way
    console.driver.get(stack.console_url)
    console.wait("window.voiceConsole && voiceConsole.connected")
    console.wait("voiceConsole.record.received.some(e => e.kind.sessionReady)")
    (again,) = console.sent("sessionStart")
    assert again["sessionId"] == session and again["lastSeq"] == 0 and again["device"]["roles"] == ["display"]
    console.until(
        lambda: finals_shown(console) == ["You said: hello from the phone", "You said: what is on the screen"]
    )
    assert sent_after(console, 0) == ["sessionStart"]
    assert console.js("return __fake.utterances") == []

    # Resume makes it this browser's own again: it talks and runs tools
    open_panel(console, session)
    click_row_button(console, session, "resume")
    console.wait("voiceConsole.record.sent.filter(e => e.kind.sessionStart).length === 2")
    assert console.sent("sessionStart")[1]["device"]["roles"] == ["voice", "display", "tools"]
    assert console.js("return document.getElementById('say').disabled") is False
    assert console.js("return document.getElementById('device-mode').hidden") is True

    # joined from the address
    console.driver.get(f"{stack.console_url}?sessionId={session}&join=watch")
    console.wait("window.voiceConsole && voiceConsole.connected")
    (linked,) = console.sent("sessionStart")
    assert linked["lastSeq"] == 0 and linked["device"]["roles"] == ["display"]
    no_page_errors(console)


def test_joining_to_talk_speaks_but_runs_no_tools(console: Console, stack: LocalStack, phone: Phone) -> None:
    assert phone.say("hello from the phone").completed
    session = phone.client.session_id
    console.open(ms_per_word=5)
    start = join(console, session, "talk")
    assert start["lastSeq"] == 0 and start["device"]["roles"] == ["voice", "display"]
    console.until(lambda: finals_shown(console) == ["You said: hello from the phone"])
    assert console.js("return __fake.utterances") == []  # the caught-up answer is not said again
    assert console.js("return document.getElementById('say').disabled") is False

    console.js("voiceConsole.say('hello from the browser')")
    console.idle_after(1)
    assert finals_shown(console)[-1] == "You said: hello from the browser"
    assert console.js("return __fake.utterances") == ["You said: hello from the browser"]  # it speaks

    console.js("""voiceConsole.say('call editor.readFile {"path": "README.md"}')""")
    console.idle_after(2)
    assert len(finals_shown(console)) == 3
    ran = console.js(
        """return voiceConsole.record.sent.filter(e => e.kind.toolResult && e.kind.toolResult.result !== null
             && e.kind.toolResult.result.includes('"path"'))"""
    )
    assert ran == []  # the demo project never answered: this browser joined without tools
    assert console.js("return voiceConsole.runningCalls") == []
    no_page_errors(console)


def test_who_runs_a_tool_follows_the_devices_and_the_routing_rule(console: Console) -> None:
    """The inference from the devices listed and the state (a toolCall reaches only its device)."""
    console.open()
    me = console.sent("sessionStart")[0]["device"]
    check = """
        const done = arguments[arguments.length - 1];
        import('/console/devices.js').then((d) => {
          const me = {...arguments[0], connectedAt: '2026-11-27T09:00:00.000Z', self: true};
          const at = (s) => `2026-11-27T09:00:0${s}.000Z`;
          const mac = {id: 'mac-7f3a', name: 'MacBook', roles: ['display', 'tools'], connectedAt: at(1)};
          const pc = {id: 'pc-1', name: 'Desktop', roles: ['tools'], connectedAt: at(2)};
          const phone = {id: 'iphone', name: 'iPhone', roles: ['voice', 'display', 'tools'], connectedAt: at(3)};
          const text = () => document.getElementById('running-on').textContent;
          const running = () => [...document.querySelectorAll('#devices li.running')].map(li => li.dataset.deviceId);
          const seen = [];
          d.onChanged({devices: [me, mac], joined: 'mac-7f3a'});
          d.onState('executing');
          seen.push([text(), running()]);
          d.onChanged({devices: [me, mac, pc], joined: 'pc-1'});
          seen.push([text(), running()]);
          d.onChanged({devices: [me, mac, pc, phone], joined: 'iphone'});
          seen.push([text(), running()]);
          d.toolStarted('call-1', 'editor.readFile');
          seen.push([text(), running()]);
          d.toolEnded('call-1');
          d.onState('idle');
          seen.push([text(), running(), document.getElementById('running-on').hidden]);
          d.onChanged({devices: [me], left: 'mac-7f3a'});
          seen.push([document.getElementById('devices-help').textContent]);
          done(seen);
        }, (error) => done(String(error)));
    """
    seen = console.driver.execute_async_script(check, me)
    assert seen == [
        ["tools running on MacBook", ["mac-7f3a"]],  # the only other device with tools
        ["tools running on Desktop", ["pc-1"]],  # none of them speaks: the one that joined last
        ["tools running on one of MacBook, Desktop, iPhone", []],  # the phone may have spoken last
        ["tools running on this browser (editor.readFile)", [me["id"]]],  # its own toolCall: known
        ["", [], True],
        ["Only this browser is on this session."],
    ]
    notes = console.js("return [...document.querySelectorAll('#transcript li.note')].map(li => li.textContent)")
    assert "MacBook joined this session." in notes and "MacBook left this session." in notes


def tap(console: Console, button: str) -> dict[str, Any]:
    """Click a held card's button; what the cards show right after (in the same task)."""
    return console.js(
        """document.querySelector('#cards article.held button.' + arguments[0]).click();
        const answer = document.querySelector('#cards .held-answer');
        return {buttons: [...document.querySelectorAll('#cards article.held button')].map(b => b.textContent),
                answer: answer && answer.textContent};""",
        button,
    )


def replaced(console: Console) -> list[str]:
    """The results of the demo project's editor.replaceText this page sent."""
    return [r["result"] for r in console.sent("toolResult") if "replaced" in (r.get("result") or "")]


def test_a_held_change_gets_approve_and_decline(console: Console) -> None:
    console.open(ms_per_word=5)
    console.js("voiceConsole.say(arguments[0])", CHANGE)
    console.idle_after(1)
    assert "Replace line 1 of main.swift?" in finals_shown(console)
    title = console.js("return document.querySelector('#cards article.held h3').textContent")
    assert title.startswith(CHANGE_TITLE)
    assert held_card_buttons(console) == ["Approve", "Decline"]
    assert replaced(console) == []  # held: not run before the answer

    # the page at once (before any answer of the conductor can change it): the buttons give way
    assert tap(console, "approve") == {"buttons": [], "answer": "Approved: the change is being made."}
    assert console.sent("confirmChange") == [{"approve": True}]

    # the same change asked again (a new request ends any question still open): Decline this time
    console.js("voiceConsole.say(arguments[0])", CHANGE)
    console.until(lambda: held_card_buttons(console) == ["Approve", "Decline"])
    assert len(console.js("return document.querySelectorAll('#cards article.held')")) == 1  # only the new card
    assert tap(console, "decline") == {"buttons": [], "answer": "Declined."}
    assert console.sent("confirmChange") == [{"approve": True}, {"approve": False}]
    no_page_errors(console)


# ---- with the conductor's several devices -------------------------------------------------------


def test_a_watching_console_sees_the_phones_conversation_and_both_devices(
    console: Console, stack: LocalStack, phone: Phone
) -> None:
    assert phone.say("hello from the phone").completed
    assert phone.say("what is on the screen").completed
    session = phone.client.session_id
    console.open()
    me = console.sent("sessionStart")[0]["device"]["id"]
    join(console, session, "watch")
    console.until(
        lambda: finals_shown(console) == ["You said: hello from the phone", "You said: what is on the screen"]
    )

    # both devices: the stub, as its sessionStart said, and this browser
    other, roles = phone_device(phone)
    # the join's sessionReady follows the events it caught up: wait for it, not just for the finals
    ready = console.until(lambda: next((r for r in console.received("sessionReady") if r.get("devices")), None))
    assert {d["id"] for d in ready["devices"]} == {other, me}
    console.until(lambda: len(device_rows(console)) == 2)
    rows = {row["id"]: row for row in device_rows(console)}
    assert rows[other]["roles"] == " · ".join(roles) and not rows[other]["self"]
    assert rows[other]["name"] == PHONE["name"]
    assert rows[me]["roles"] == "display" and rows[me]["self"]
    assert console.js("return document.getElementById('devices-help').textContent") == "2 devices on this session."

    # the phone talks on: the answer shows here, live, and is spoken only on the phone
    before = len(console.js("return voiceConsole.record.sent"))
    assert phone.say("hello again").completed
    console.until(lambda: finals_shown(console)[-1:] == ["You said: hello again"])
    assert console.js("return __fake.utterances") == []
    assert not {"userAudioTranscriptFinal", "userAudioTranscriptPartial", "error"} & set(sent_after(console, before))

    # the phone leaves: this browser is alone again
    phone.run(phone.client.close())
    console.until(lambda: [row["id"] for row in device_rows(console)] == [me])
    no_page_errors(console)


def test_a_watching_console_approves_the_phones_change(console: Console, stack: LocalStack) -> None:
    edits: list[dict[str, Any]] = []

    async def replace_text(arguments: dict[str, Any]) -> dict[str, Any]:
        edits.append(arguments)
        return {"replaced": True}

    phone = Phone(stack, tools={"editor.replaceText": replace_text})
    try:
        phone.run(phone.client.connect())
        assert phone.say("hello from the phone").completed
        console.open()
        join(console, phone.client.session_id, "watch")
        console.until(lambda: finals_shown(console) == ["You said: hello from the phone"])

        asked = phone.say(CHANGE)
        assert asked.completed and edits == []  # held: asked aloud on the phone, shown here
        console.until(lambda: held_card_buttons(console) == ["Approve", "Decline"])
        console.driver.find_element("css selector", "#cards article.held button.approve").click()
        assert console.sent("confirmChange") == [{"approve": True}]
        phone.run(phone.client.wait_until(lambda: len(edits) == 1, timeout=WAIT_S))
        assert edits[0]["text"] == "let x = 42"  # made on the phone, the device that runs the tool
        # the model's answer about the phone's result shows here ("Editor replace text: …", or
        # "editor.replaceText returned …" word for word)
        console.until(lambda: any(re.search(r"replace ?text", text, re.IGNORECASE) for text in finals_shown(console)))
        assert held_card_buttons(console) == []
        assert len(edits) == 1  # run once, on the phone only
        assert "userAudioTranscriptFinal" not in sent_after(console, 0)
    finally:
        phone.close()
    no_page_errors(console)


def progress_text(console: Console) -> str | None:
    """The text of the first progress line (None: none shown)."""
    return console.js(
        "const li = document.querySelector('#transcript li.progress');"
        "return li && li.querySelector('.progress-text').textContent"
    )


def test_a_watching_console_shows_the_phones_build_progress(console: Console, stack: LocalStack) -> None:
    """The phone runs the build and says how far it got; the conductor forwards that here, with
    the tool's name, as one line updated in place."""
    finish = threading.Event()

    async def build(arguments: dict[str, Any]) -> dict[str, Any]:
        await asyncio.get_running_loop().run_in_executor(None, finish.wait, WAIT_S * 2)
        return {"status": "succeeded"}

    phone = Phone(stack, tools={"build.run": build})
    try:
        phone.run(phone.client.connect())
        assert phone.say("hello from the phone").completed
        console.open()
        join(console, phone.client.session_id, "watch")
        console.until(lambda: finals_shown(console) == ["You said: hello from the phone"])

        assert phone.say('call build.run {"scheme": "App"}').completed  # a background tool: the turn ends
        (call,) = [c for c in phone.client.tool_calls if c.name == "build.run"]
        for fraction, words in ((0.25, "[5/20] Compiling unit5.py"), (0.5, "[10/20] Compiling unit10.py")):
            phone.run(phone.client.send_progress(call.call_id, fraction, words))
            shown = f"{round(fraction * 100)} % · {words}"
            console.until(lambda shown=shown: progress_text(console) == shown)
        lines = console.js(
            "return [...document.querySelectorAll('#transcript li.progress')]"
            ".map(li => [li.dataset.callId, li.querySelector('.progress-name').textContent])"
        )
        assert lines == [[call.call_id, "build.run"]]  # one line, named by the conductor
        assert console.js("return voiceConsole.progressCalls") == [call.call_id]
    finally:
        finish.set()
        phone.close()
    no_page_errors(console)
