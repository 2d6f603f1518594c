"""A line too long for one frame is refused before anything is sent, in one line; a connection the
conductor closes on a frame over its limit is reported in words, not as websockets' 1009."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve

from shared.wire.protocol import ErrorCode, SessionStart, ToolResult, UserAudioTranscriptFinal, parse_event
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_USAGE
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient, TranscriptTooLarge

from .fake_conductor import FakeConductor, async_test, standard_turn

FAST = scaled_backoff(0.01)


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


@async_test
async def test_a_180_kb_line_is_refused_in_one_line_and_the_script_goes_on(tmp_path: Path) -> None:
    pasted = "x" * 180_000
    script = tmp_path / "script.txt"
    script.write_text(f"{pasted}\nshort one\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor(standard_turn("Fine.")) as fake:
        argv = ["--url", fake.url, "--script", str(script), "--partials", "1:1", "--timeout", "30"]
        code = await cli.run(argv, stdout=out, stderr=err, backoff=FAST)
        session = next(iter(fake.sessions.values()))
        frames = [frame for connection in fake.connections for frame in connection.frames]

    assert code == EXIT_USAGE
    assert session.transcripts() == ["short one"] and len(fake.connections) == 1
    assert max(len(frame) for frame in frames) < 1000  # not a partial of it either
    lines = err.getvalue().splitlines()
    assert lines[0] == (
        "voiceide-client: not sent: the line has 180,000 characters, more than one 32 KB frame holds "
        "(the conductor takes up to 8,000)"
    )
    printed = out.getvalue() + err.getvalue()
    assert "1009" not in printed and "assistant: Fine." in printed


@async_test
async def test_say_refuses_a_transcript_over_a_frame_and_sends_nothing() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url, max_frame_bytes=4096) as client:
        with pytest.raises(TranscriptTooLarge) as refused:
            await client.say("word " * 1000)
        assert refused.value.size > 4096
        turn = await client.say("word " * 500)  # 2,500 characters fit
    assert turn.completed and client.turns == [turn]
    said = [type(event.payload) for event in client.sent if not isinstance(event.payload, ToolResult)]
    assert said == [SessionStart, UserAudioTranscriptFinal]


@async_test
async def test_a_connection_closed_on_a_too_big_frame_is_said_in_words() -> None:
    async def small(ws: ServerConnection) -> None:
        async for frame in ws:  # websockets closes with 1009 on a message over max_size
            parse_event(frame)

    async with serve(small, "127.0.0.1", 0, max_size=2000) as server:
        port = server.sockets[0].getsockname()[1]
        client = ConductorClient(f"ws://127.0.0.1:{port}/", backoff=FAST, max_attempts=1, ready_timeout=0.1)
        await client.connect()
        with contextlib.suppress(TimeoutError):
            await client.say("word " * 1000, timeout=0.5)
        await client.wait_until(lambda: ErrorCode.WS_ERROR in client.error_codes)
        await client.close()

    (lost,) = [error.payload.message for error in client.errors if error.payload.code == ErrorCode.WS_ERROR]
    assert lost == "connection lost: an event was larger than the conductor takes (1009 message too big)"
