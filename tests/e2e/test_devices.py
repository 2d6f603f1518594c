"""One person, three devices on one session, over real WebSockets on the local stack: the phone
talks (voice, display), the desktop companion runs the tools over a git repository (tools), a
browser-like display watches. What the phone asks runs on the companion and is reported on the
phone; the display shows the same finals; a change waits for the phone's yes; a barge-in from the
phone stops the answer for all; the companion drops mid-build and comes back: the build is
reported once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conductor_local.stack import LocalStack
from shared.wire.protocol import AssistantSpeechFinal, DevicesChanged, ErrorCode, ToolCall, ToolResult
from tests.e2e.conftest import (
    TURN_TIMEOUT_S,
    WAIT_S,
    async_test,
    client_for,
    is_partial,
    is_state,
    poll_until,
    session_store,
)
from tests.e2e.test_sign_in import SECOND_USER, handshake_status, sign_in_as
from tests.e2e.test_sign_in import auth_stack as auth_stack  # the signed-in stack, a fixture
from voiceide_client.companion.device import companion_device
from voiceide_client.companion.session import Companion
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

PHONE = {"id": "iphone-ana", "name": "Ana's iPhone", "roles": ["voice", "display"]}
SCREEN = {"id": "browser-ana", "name": "Browser console", "roles": ["display"]}
BUILD_S = 1.5
CHANGE = 'call editor.replaceText {"path": "a.swift", "startLine": 3, "endLine": 3, "text": "let c = 30"}'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    (root / "a.swift").write_text("let a = 1\nlet b = 2\nlet c = 3\nlet d = 4\n")
    script = f"import time; print('Compiling a.swift'); time.sleep({BUILD_S}); print('built ok')"
    (root / ".voiceide.toml").write_text(f'build = ["{sys.executable}", "-c", "{script}"]\n')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def finals(client: ConductorClient, since: int = 0) -> list[str]:
    return [e.payload.text for e in client.events[since:] if isinstance(e.payload, AssistantSpeechFinal)]


def speaks(client: ConductorClient) -> list[ToolCall]:
    return [e.payload for e in client.events if isinstance(e.payload, ToolCall) and e.payload.name == "tts.speak"]


async def ready(client: ConductorClient) -> None:
    await client.wait_for(lambda e: e.kind_name == "sessionReady", WAIT_S)


@async_test
async def test_a_phone_a_companion_and_a_display_share_one_session(stack: LocalStack, repo: Path) -> None:
    session_id = str(uuid.uuid4())
    phone = client_for(stack, session_id, device=PHONE)
    companion = Companion(
        stack.ws_url, session_id, repo, device=companion_device(repo, display=False), backoff=scaled_backoff(0.01)
    )
    screen = client_for(stack, session_id, device=SCREEN, last_seq=0)
    async with phone:
        await ready(phone)
        async with companion:
            await ready(companion.client)
            async with screen:
                await ready(screen)
                ready_devices = screen.session_ready.devices if screen.session_ready else None
                assert ready_devices is not None
                assert {d.id for d in ready_devices} == {PHONE["id"], companion.device.id, SCREEN["id"]}
                assert [d.id for d in ready_devices if d.self_] == [SCREEN["id"]]
                await phone.wait_for(
                    lambda e: isinstance(e.payload, DevicesChanged) and e.payload.joined == SCREEN["id"], WAIT_S
                )

                # The phone asks for a build: it runs on the companion, and is reported on the phone.
                before = (len(phone.events), len(screen.events))
                build = await phone.say("call build.run {}", timeout=TURN_TIMEOUT_S)
                assert build.completed and build.errors == []
                assert build.calls("build.run") == []  # not on the phone
                report = await phone.wait_for(
                    lambda e: isinstance(e.payload, AssistantSpeechFinal) and "built ok" in e.payload.text,
                    BUILD_S + TURN_TIMEOUT_S,
                    since=before[0],
                )
                await screen.wait_for(lambda e: e.payload == report.payload, WAIT_S, since=before[1])
                reported_at = phone.events.index(report)
                await phone.wait_for(lambda e: is_state(e, "idle"), WAIT_S, since=reported_at)  # the report is said
                (ran,) = [call for call in companion.client.tool_calls if call.name == "build.run"]
                assert json.loads(ran.result or "")["status"] == "succeeded"
                assert finals(screen, before[1]) == finals(phone, before[0])
                assert speaks(screen) == [] and speaks(companion.client) == []  # only the phone speaks

                # A change waits for the phone's yes, then runs on the companion.
                asked = await phone.say(CHANGE, timeout=TURN_TIMEOUT_S)
                assert asked.completed
                assert (repo / "a.swift").read_text() == "let a = 1\nlet b = 2\nlet c = 3\nlet d = 4\n"
                said_yes = await phone.say("yes", timeout=TURN_TIMEOUT_S)
                assert said_yes.completed
                assert (repo / "a.swift").read_text() == "let a = 1\nlet b = 2\nlet c = 30\nlet d = 4\n"

                # A barge-in from the phone stops the answer for every device.
                mark = len(screen.events)
                counting = asyncio.create_task(phone.say("count 200", timeout=TURN_TIMEOUT_S))
                await screen.wait_for(lambda e: is_partial(e) and len(e.payload.text.split()) >= 3, WAIT_S, since=mark)
                await phone.barge_in()
                stopped = await counting
                assert stopped.completed and stopped.states[-1] == "idle"
                await screen.wait_for(lambda e: is_state(e, "idle"), WAIT_S, since=mark)
                shown = [e.payload.text for e in screen.events[mark:] if is_partial(e)]
                assert shown and len(shown[-1].split()) < 200

                # The companion drops in the middle of a build and comes back: reported once.
                before, calls_seen = len(phone.events), len(companion.client.events)
                await phone.say("call build.run {}", timeout=TURN_TIMEOUT_S)
                await companion.client.wait_for(
                    lambda e: isinstance(e.payload, ToolCall) and e.payload.name == "build.run",
                    WAIT_S,
                    since=calls_seen,
                )
                await companion.client.drop_connection()
                await phone.wait_for(
                    lambda e: isinstance(e.payload, AssistantSpeechFinal) and "built ok" in e.payload.text,
                    BUILD_S + TURN_TIMEOUT_S,
                    since=before,
                )
                await asyncio.sleep(0.5)
                assert sum("built ok" in text for text in finals(phone, before)) == 1
                builds = [call.call_id for call in companion.client.tool_calls if call.name == "build.run"]
                results = [e.payload.call_id for e in companion.client.sent if isinstance(e.payload, ToolResult)]
                assert len(set(builds)) == 2 and all(results.count(call_id) >= 1 for call_id in builds)

    def all_left() -> bool:
        state = session_store(stack).load(session_id)
        return state is not None and state.devices == [] and state.connection_id is None

    await poll_until(all_left)


@async_test
async def test_a_fifth_device_is_refused(stack: LocalStack) -> None:
    session_id = str(uuid.uuid4())
    clients = [
        client_for(stack, session_id, device={"id": f"device-{n}", "roles": ["display"] if n else ["voice", "display"]})
        for n in range(5)
    ]
    for client in clients[:4]:
        await client.connect()
        await ready(client)
    fifth = clients[4]
    await fifth.connect()
    refused = await fifth.wait_for(lambda e: e.kind_name == "error", WAIT_S)
    assert refused.payload.code == ErrorCode.TOO_MANY_DEVICES
    for client in clients:
        await client.close()


@async_test
async def test_under_sign_in_a_second_persons_device_is_refused_and_the_first_persons_join(
    auth_stack: LocalStack,
) -> None:
    ana, other = sign_in_as(auth_stack), sign_in_as(auth_stack, *SECOND_USER)
    session_id = str(uuid.uuid4())
    phone = client_for(auth_stack, session_id, device=PHONE, handshake_headers=ana.headers)
    screen = client_for(auth_stack, session_id, device=SCREEN, handshake_headers=ana.headers)
    async with phone:
        await ready(phone)
        async with screen:
            await ready(screen)  # the same person's second device joins
            assert screen.session_ready is not None and screen.session_ready.devices is not None
            assert {d.id for d in screen.session_ready.devices} == {PHONE["id"], SCREEN["id"]}
            # another person's device, for the same session: refused at the handshake, as any foreign session
            assert await handshake_status(auth_stack.session_url(session_id), dict(await other.headers())) == 403
            turn = await phone.say("still mine", timeout=TURN_TIMEOUT_S)
            assert turn.completed and turn.final_text == "You said: still mine"
            await screen.wait_for(
                lambda e: isinstance(e.payload, AssistantSpeechFinal) and e.payload.text == "You said: still mine",
                WAIT_S,
            )
