"""What the client shows of the session's other devices (who joined, the progress of the calls they
run), a change card that comes after its question, and text from the network without escapes."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantUIPatch,
    DevicesChanged,
    DeviceSeen,
    ToolCall,
    ToolProgress,
    make_event,
)
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK
from voiceide_client.rendering.live import LiveTranscriptRenderer

from .fake_conductor import FakeConductor, FakeSession, async_test, speak

MAC = DeviceSeen(id="desk-1", name="MacBook — ~/src/app", roles=("display", "tools"), connectedAt="t")
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m\r"


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


def _me(session: FakeSession) -> DeviceSeen:
    start = session.connection.session_start if session.connection is not None else None
    assert start is not None and start.device is not None
    return DeviceSeen(id=start.device.id, name=start.device.name, roles=start.device.roles, connectedAt="t")


async def _a_companion_builds(session: FakeSession, text: str) -> None:
    await session.send(DevicesChanged(devices=(_me(session), MAC), joined=MAC.id), seq=False)
    await session.call_nowait("convo.setState", {"state": "thinking"})
    for fraction, message in [(0.25, "Compiling 41 of 120 files"), (0.25, "Compiling 41 of 120 files"), (0.6, "")]:
        progress = ToolProgress(callId="tooluse_b1", name="build.run", fraction=fraction, message=message)
        await session.send(progress, seq=False)
    await session.send(ToolProgress(callId="tooluse_b1", name="build.run", message=f"Linking{ESCAPES}"), seq=False)
    await session.send(AssistantSpeechFinal(text=f"Built.{ESCAPES} Done."))
    await session.call("tts.speak", {"text": "Built. Done."})
    await session.send(DevicesChanged(devices=(_me(session),), left=MAC.id), seq=False)
    await session.call_nowait("convo.setState", {"state": "idle"})


@async_test
async def test_other_devices_and_their_progress_are_one_line_each_and_escapes_never_print() -> None:
    out = io.StringIO()
    async with FakeConductor(_a_companion_builds) as fake:
        argv = ["--url", fake.url, "--roles", "voice,display"]
        code = await cli.run(argv, stdin=io.StringIO("build it\n"), stdout=out, stderr=io.StringIO())

    assert code == EXIT_OK
    lines = out.getvalue().splitlines()
    assert lines == [
        "you: build it",
        "[device] joined: MacBook — ~/src/app (display, tools)",
        "[state] thinking",
        "[build.run on MacBook — ~/src/app] 25 % Compiling 41 of 120 files",  # the same one again: no line
        "[build.run on MacBook — ~/src/app] 60 %",
        "[build.run on MacBook — ~/src/app] Linking",
        "assistant: Built. Done.",
        "🔊 Built. Done.",
        "[device] left: MacBook — ~/src/app",
        "[state] idle",
    ]
    assert not any(character in out.getvalue() for character in "\x1b\x07\x9b\r")


def test_the_live_display_prints_no_escape_from_the_network() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None, markup=False, emoji=False)
    renderer = LiveTranscriptRenderer(console)
    renderer.received(make_event(AssistantSpeechFinal(text=f"Hi{ESCAPES} there")))
    renderer.cards([{"type": "code", "title": f"T{ESCAPES}", "file": f"a{ESCAPES}.swift", "body": f"x{ESCAPES}"}])
    renderer.close()
    assert "owned" not in out.getvalue() and "\x07" not in out.getvalue() and "\x9b" not in out.getvalue()
    assert "\x1b]" not in out.getvalue() and "\x1b[2J" not in out.getvalue()
    assert "Hi there" in out.getvalue()


CHANGE_CARD = {"type": "diff", "title": "Replace line 1 of main.swift", "file": "main.swift", "body": "-old\n+new"}


async def _question_then_preview_then_card(session: FakeSession, text: str) -> None:
    """The held change of a single device: the question at once, then the conductor's read of the
    file, then the card with the real lines."""
    await session.call_nowait("convo.setState", {"state": "thinking"})
    if text == "yes":  # taken as the answer whenever it comes; the card may still be on its way
        await session.wait_until(lambda: any(isinstance(event.payload, AssistantUIPatch) for event in session.sent))
        await speak(session, "Done.")
        await session.call_nowait("convo.setState", {"state": "idle"})
        return
    await speak(session, "Replace line 1 of main.swift?")
    await session.call_nowait("convo.setState", {"state": "idle"})
    call_id = "conductor-preview-1"
    session.pending[call_id] = future = asyncio.get_running_loop().create_future()
    await session.send(ToolCall(callId=call_id, name="editor.readFile", arguments='{"path": "main.swift"}'))
    read = await future
    assert json.loads(read.result or "")["text"] == "old\n"
    await session.send(AssistantUIPatch(patch=json.dumps([{"op": "add", "path": "/cards/-", "value": CHANGE_CARD}])))


@async_test
async def test_a_change_card_after_its_question_is_shown_and_the_conductors_read_is_not(tmp_path: Path) -> None:
    (tmp_path / "main.swift").write_text("old\n", encoding="utf-8")
    out = io.StringIO()
    async with FakeConductor(_question_then_preview_then_card) as fake:
        argv = ["--url", fake.url, "--workspace", str(tmp_path)]
        stdin = io.StringIO("change line 1\nyes\n")
        code = await cli.run(argv, stdin=stdin, stdout=out, stderr=io.StringIO())
        session = next(iter(fake.sessions.values()))
        await fake.wait_until(lambda: "conductor-preview-1" not in session.pending)

    assert code == EXIT_OK
    printed = out.getvalue()
    assert "[card] Replace line 1 of main.swift\n    -old\n    +new\n" in printed
    assert "editor.readFile" not in printed and '"text"' not in printed  # the card shows the read
    assert printed.splitlines()[-2:] == ["🔊 Done.", "[state] idle"]
