"""The transcript on a terminal (rich ``Live``) and in a pipe (plain lines), as a screen shows it."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import pty
import struct
import sys
import termios
import threading
from pathlib import Path

from rich.console import Console

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ToolCall,
    ToolResult,
    UserAudioTranscriptFinal,
    make_event,
)
from voiceide_client.rendering.choice import transcript_renderer
from voiceide_client.rendering.live import LiveTranscriptRenderer
from voiceide_client.rendering.transcript import TranscriptRenderer

from .fake_conductor import FakeConductor, async_test, standard_turn
from .terminal import Screen

ANSWER = (
    "Here is what the project does: it runs a conductor on AWS that streams the model's answer "
    "to the app word by word, runs the tools the model asks for on the phone, and keeps every "
    "session in DynamoDB so a dropped connection picks up where it left off."
)
WIDTH = 40


def _partials(text: str) -> list[str]:
    words = text.split()
    return [" ".join(words[:count]) for count in range(1, len(words) + 1)]


def _terminal_console(out: io.StringIO) -> Console:
    return Console(
        file=out, force_terminal=True, width=WIDTH, color_system=None, markup=False, emoji=False, highlight=False
    )


def _assistant_rows(lines: list[str]) -> list[int]:
    return [index for index, line in enumerate(lines) if line.startswith("assistant:")]


def test_a_partial_wider_than_the_terminal_leaves_no_copies_behind() -> None:
    out = io.StringIO()
    renderer = LiveTranscriptRenderer(_terminal_console(out))
    renderer.sent(make_event(UserAudioTranscriptFinal(text="what does this project do")))
    renderer.state("thinking")
    for partial in _partials(ANSWER):
        renderer.received(make_event(AssistantSpeechPartial(text=partial)))
    renderer.received(make_event(AssistantSpeechFinal(text=ANSWER)))
    renderer.state("idle")
    renderer.close()

    screen = Screen(WIDTH)
    screen.feed(out.getvalue())
    lines = screen.lines
    assert lines[:2] == ["you: what does this project do", "[state] thinking"]
    assert lines[-1] == "[state] idle"
    assert _assistant_rows(lines) == [2]  # the final, once; no partial left over
    assert " ".join(lines[2:-1]) == f"assistant: {ANSWER}"
    assert all(len(line) <= WIDTH for line in lines)


def test_lines_during_a_partial_print_above_it_and_the_partial_is_replaced_by_its_final() -> None:
    out = io.StringIO()
    renderer = LiveTranscriptRenderer(_terminal_console(out))
    renderer.received(make_event(AssistantSpeechPartial(text="Opening")))
    screen = Screen(WIDTH)
    screen.feed(out.getvalue())
    assert screen.lines == ["assistant: Opening"]  # shown while it grows

    renderer.received(make_event(ToolCall(call_id="1", name="editor.openFile", arguments='{"path":"main"}')))
    renderer.sent(make_event(ToolResult(call_id="1", result='{"ok":true}')))
    renderer.received(make_event(AssistantSpeechPartial(text="Opening main")))
    renderer.received(make_event(AssistantSpeechFinal(text="Opening main now.")))
    renderer.line("🔊 Opening main now.")
    screen = Screen(WIDTH)
    screen.feed(out.getvalue())
    assert screen.lines == [
        '→ tool editor.openFile {"path":"main"}',
        '← result editor.openFile {"ok":true}',
        "assistant: Opening main now.",
        "🔊 Opening main now.",
    ]


def test_a_turn_cut_short_leaves_the_terminal_clean_on_close() -> None:
    out = io.StringIO()
    renderer = LiveTranscriptRenderer(_terminal_console(out))
    renderer.received(make_event(AssistantSpeechPartial(text=ANSWER)))
    renderer.close()
    screen = Screen(WIDTH)
    screen.feed(out.getvalue())
    assert screen.lines == []
    assert out.getvalue().rfind("\x1b[?25h") > out.getvalue().rfind("\x1b[?25l")  # the cursor is shown again


def test_plain_lines_without_a_terminal_one_per_final_and_no_control_characters() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TranscriptRenderer(out, err=err)
    renderer.sent(make_event(UserAudioTranscriptFinal(text="hi")))
    for partial in _partials(ANSWER):
        renderer.received(make_event(AssistantSpeechPartial(text=partial)))
    renderer.received(make_event(AssistantSpeechFinal(text=ANSWER)))
    renderer.notice("conductor is back")
    assert out.getvalue() == f"you: hi\nassistant: {ANSWER}\n"
    assert err.getvalue() == "conductor is back\n"
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_quiet_prints_errors_and_notices_to_stderr_only() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TranscriptRenderer(out, err=err, quiet=True)
    renderer.sent(make_event(UserAudioTranscriptFinal(text="hi")))
    renderer.received(make_event(AssistantSpeechFinal(text="Hello.")))
    renderer.error("[error] rate_limited: slow down")
    renderer.notice("reconnecting")
    assert out.getvalue() == ""
    assert err.getvalue() == "[error] rate_limited: slow down\nreconnecting\n"


class _TerminalStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_display_is_chosen_by_whether_stdout_is_a_terminal() -> None:
    assert isinstance(transcript_renderer(_TerminalStream(), io.StringIO()), LiveTranscriptRenderer)
    assert type(transcript_renderer(io.StringIO(), io.StringIO())) is TranscriptRenderer
    assert type(transcript_renderer(_TerminalStream(), io.StringIO(), quiet=True)) is TranscriptRenderer


def _read_all(fd: int, chunks: list[bytes]) -> None:
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return
        if not data:
            return
        chunks.append(data)


@async_test
async def test_the_cli_in_a_real_terminal_shows_each_answer_once(tmp_path: Path) -> None:
    """``voiceide-client`` on a pseudo-terminal 40 columns wide, as a person runs it."""
    script = tmp_path / "script.txt"
    script.write_text("what does this project do\n", encoding="utf-8")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, WIDTH, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "NO_COLOR")}
    env |= {"TERM": "xterm-256color", "PATH": str(tmp_path / "no-bin")}  # speech printed, not spoken
    chunks: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(master, chunks), daemon=True)
    reader.start()
    try:
        async with FakeConductor(standard_turn(ANSWER)) as fake:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "voiceide_client",
                "--url",
                fake.url,
                "--script",
                str(script),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=slave,
                stderr=slave,
                env=env,
            )
            os.close(slave)
            assert await asyncio.wait_for(proc.wait(), 15) == 0
        await asyncio.to_thread(reader.join, 5)
    finally:
        os.close(master)

    screen = Screen(WIDTH)
    screen.feed(b"".join(chunks).decode("utf-8"))
    lines = screen.lines
    assert lines[0] == "you: what does this project do"
    rows = _assistant_rows(lines)
    assert len(rows) == 1, lines
    spoken = next(index for index in range(rows[0], len(lines)) if lines[index].startswith("🔊"))
    assert " ".join(lines[rows[0] : spoken]) == f"assistant: {ANSWER}"
    assert lines[-1] == "[state] idle"
