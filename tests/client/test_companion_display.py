"""What the companion prints: never a terminal control sequence that came from the network, a file
or a command (titles, the clipboard, clearing the screen), and the conductor's reads of a file for a
change card as one quiet line."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from rich.console import Console

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    AssistantUIPatch,
    DevicesChanged,
    DeviceSeen,
    ErrorPayload,
    ToolCall,
    ToolResult,
    make_event,
)
from voiceide_client.companion.command import run_command
from voiceide_client.companion.device import companion_device
from voiceide_client.companion.display import CompanionDisplay
from voiceide_client.companion.session import Companion
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.rendering.live import LiveTranscriptRenderer
from voiceide_client.rendering.terminal_text import printable, printable_data
from voiceide_client.rendering.transcript import TranscriptRenderer

from .fake_conductor import FakeConductor, async_test

SESSION = "0b5f6f64-8c43-4c0e-9a64-9d0c2f6e2a11"
TITLE = "\x1b]0;pwned title\x07"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J\x1b[H"
EVIL = f"{TITLE}{CLIPBOARD}{CLEAR}\x9b31m\x9d8;;http://x\x9c\x1bPdcs\x1b\\\r\x08\x7f"
"""Escape sequences (7-bit and 8-bit), control characters: none may reach the terminal."""
CONTROLS = ("\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\r", "\x08", "\x7f")
LEAKS = (*CONTROLS, "pwned", "cm0gLXJmIH4", "http://x", "dcs")


def test_printable_removes_sequences_and_controls_and_keeps_newlines_and_tabs() -> None:
    assert printable(f"a{EVIL}b\n\tc") == "ab\n\tc"
    assert printable("\x1b[1;31merror:\x1b[0m café ✓") == "error: café ✓"
    assert printable("unfinished \x1b]0;title") == "unfinished "
    assert printable("plain text") == "plain text"
    card = {"title": f"Login{CLEAR}", "body": f"line 1\n{TITLE}line 2", "n": 3}
    assert printable_data(card) == {"title": "Login", "body": "line 1\nline 2", "n": 3}


def show_everything(display: CompanionDisplay) -> None:
    display.received(make_event(AssistantSpeechPartial(text=f"part{EVIL}")))
    display.received(make_event(AssistantSpeechFinal(text=f"Hello{EVIL} there")))
    display.received(make_event(ToolCall(call_id="c1", name="git.status", arguments=f'{{"x": "{EVIL}"}}')))
    display.sent(make_event(ToolResult(call_id="c1", error=f"fatal: bad {EVIL} path")))
    display.received(make_event(ToolCall(call_id="c2", name="editor.readFile", arguments='{"path": "a"}')))
    display.sent(make_event(ToolResult(call_id="c2", result=f'{{"text": "{EVIL}"}}')))
    display.received(make_event(ErrorPayload(code=f"odd{EVIL}", message=f"went wrong{EVIL}")))
    display.received(make_event(AssistantUIPatch(patch="[]")))
    display.cards([{"type": "text", "title": f"Card{EVIL}", "body": f"body{EVIL}\nsecond"}])
    phone = DeviceSeen(id="iphone-1", name=f"Ana{EVIL}", roles=("voice",), connectedAt="t")
    display.received(make_event(DevicesChanged(devices=(phone,), joined="iphone-1")))
    display.devices([phone], joined="iphone-1", left=f"gone{EVIL}")
    display.cancelled(f"build.run{EVIL}", f"by{EVIL}")
    display.warning(f"patch{EVIL}")
    display.notice(f"notice{EVIL}")
    display.line(f"folder{EVIL}")
    display.state(f"thinking{EVIL}")
    display.client_error(ErrorPayload(code="ws_error", message=f"closed {EVIL}"))


def test_plain_lines_carry_no_control_sequence() -> None:
    out, err = io.StringIO(), io.StringIO()
    show_everything(CompanionDisplay(TranscriptRenderer(out, err=err)))
    shown = out.getvalue() + err.getvalue()
    assert [leak for leak in LEAKS if leak in shown] == []
    for words in ("assistant: Hello there", "[device] joined: Ana", "[card] Card", "← error git.status: fatal: bad"):
        assert words in shown


def test_a_live_terminal_gets_only_its_own_styles() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, markup=False, emoji=False, highlight=False, width=200)
    display = CompanionDisplay(LiveTranscriptRenderer(console))
    show_everything(display)
    display.inner.close()
    shown = out.getvalue()
    assert "Hello there" in shown and "Ana" in shown
    for leak in ("\x1b]", "\x1b[2J", "\x1b[H", "\x1bP", "\x9b", "\x9d", "\x07", "pwned", "cm0gLXJmIH4"):
        assert leak not in shown


async def _output_of(script: str) -> str:
    outcome = await run_command([sys.executable, "-c", script], Path.cwd(), timeout=10)
    return outcome.tail


@async_test
async def test_a_commands_output_loses_titles_and_clipboard_writes() -> None:
    tail = await _output_of("print('\\x1b]0;pwned\\x07building \\x1b]52;c;cm0g\\x07done \\x1b[2Jok')")
    assert tail == "building done ok"


@async_test
async def test_a_change_preview_is_read_as_any_read_and_shown_as_one_quiet_line(tmp_path: Path) -> None:
    workspace, state = tmp_path / "app", tmp_path / "state"
    workspace.mkdir()
    (workspace / "a.swift").write_text("let a = 1\n")
    out = io.StringIO()
    device = companion_device(workspace, display=True, machine="test-machine")
    display = CompanionDisplay(TranscriptRenderer(out, err=io.StringIO()))
    preview = ToolCall(call_id="conductor-preview-7f3a", name="editor.readFile", arguments='{"path": "a.swift"}')
    async with FakeConductor() as fake:
        session = fake.session(SESSION)
        companion = Companion(
            fake.url, SESSION, workspace, device=device, display=display, journal_folder=state,
            backoff=scaled_backoff(0.01),
        )  # fmt: skip
        async with companion:
            await session.send(preview)
            await session.wait_until(lambda: any(r.call_id == preview.call_id for r in session.results()))
            await session.send(preview)  # sent again (a reconnect): the same answer, not a second line
            await session.wait_until(lambda: len([r for r in session.results() if r.call_id == preview.call_id]) == 2)
            await session.send(AssistantSpeechFinal(text="Shall I change a.swift?"))
            await companion.client.wait_for(lambda e: isinstance(e.payload, AssistantSpeechFinal))
    first, again = [r for r in session.results() if r.call_id == "conductor-preview-7f3a"]
    assert first.error is None and json.loads(first.result or "") == {
        "path": "a.swift",
        "text": "let a = 1\n",
        "truncated": False,
    }
    assert again.result == first.result
    assert [e for e in session.errors()] == []
    shown = out.getvalue()
    assert shown.count("preview of a.swift for the change card") == 1
    assert "→ tool editor.readFile" not in shown and "← result" not in shown
    assert "assistant: Shall I change a.swift?" in shown  # the display goes on as usual
    assert list(state.glob("*.json")) == []  # a read: nothing journaled
    assert companion.client.tool_calls[0].call_id == "conductor-preview-7f3a"


@async_test
async def test_what_the_conductor_sends_reaches_the_terminal_without_its_sequences(tmp_path: Path) -> None:
    out = io.StringIO()
    display = CompanionDisplay(TranscriptRenderer(out, err=io.StringIO()))
    device = companion_device(tmp_path, display=True, machine="test-machine")
    async with FakeConductor() as fake:
        session = fake.session(SESSION)
        companion = Companion(fake.url, SESSION, tmp_path, device=device, display=display, backoff=scaled_backoff(0.01))
        async with companion:
            me = DeviceSeen(id=device.id, name=f"Mac{TITLE}", roles=("tools",), connectedAt="t", self=True)
            await session.send(DevicesChanged(devices=(me,), joined=device.id), seq=False)
            await session.send(AssistantSpeechFinal(text=f"Done.{CLIPBOARD}{CLEAR}"))
            result = await session.call("editor.readFile", {"path": f"no{TITLE}such.swift"})
            await companion.client.wait_for(lambda e: isinstance(e.payload, AssistantSpeechFinal))
    assert result.error is not None
    shown = out.getvalue()
    assert "assistant: Done." in shown and "[devices] Mac (tools) — this one" in shown
    assert "← error editor.readFile: no such file: nosuch.swift" in shown
    assert [leak for leak in CONTROLS if leak in shown] == []  # the call's JSON shows them escaped (\\u001b)
    assert "pwned" not in shown.replace("\\u001b]0;pwned title", "")
