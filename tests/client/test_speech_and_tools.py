"""The speakers (espeak-ng through a stand-in executable), the ToolRouter and the renderer."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ToolCall,
    ToolResult,
    make_event,
)
from voiceide_client.rendering.transcript import TranscriptRenderer
from voiceide_client.tools.router import ToolError, ToolRouter
from voiceide_client.voice.speaker import EspeakSpeaker, HeldSpeaker, PrintSpeaker, SilentSpeaker, make_speaker

from .fake_conductor import async_test

# Records its arguments; with -w writes the named file, otherwise says "playing" through the
# FIFO beside it and "plays" until killed.
FAKE_ESPEAK = """#!/bin/sh
here="$(dirname "$0")"
printf '%s\\n' "$@" >> "$here/calls.txt"
if [ "$1" = "-w" ]; then printf 'RIFF' > "$2"; exit 0; fi
echo playing > "$here/playing"
exec tail -f /dev/null
"""


@pytest.fixture
def fake_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable = bin_dir / "espeak-ng"
    executable.write_text(FAKE_ESPEAK)
    executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
    os.mkfifo(bin_dir / "playing")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@async_test
async def test_make_speaker_uses_espeak_to_write_wav_files(fake_espeak: Path, tmp_path: Path) -> None:
    speaker = make_speaker(speak_to=tmp_path / "speech")
    assert isinstance(speaker, EspeakSpeaker)
    assert await speaker.speak("Hello there") is True
    assert await speaker.speak("-not an option") is True
    wavs = sorted((tmp_path / "speech").glob("*.wav"))
    assert [p.name for p in wavs] == ["utterance-0001.wav", "utterance-0002.wav"]
    assert wavs[0].read_bytes() == b"RIFF"
    calls = (fake_espeak / "calls.txt").read_text().splitlines()
    assert calls == ["-w", str(wavs[0]), "--", "Hello there", "-w", str(wavs[1]), "--", "-not an option"]


@async_test
async def test_stopping_espeak_kills_playback(fake_espeak: Path) -> None:
    speaker = make_speaker()
    playing = asyncio.create_task(speaker.speak("a very long sentence"))
    reading = asyncio.get_running_loop().run_in_executor(None, (fake_espeak / "playing").read_text)
    assert await asyncio.wait_for(reading, 5) == "playing\n"
    speaker.stop()
    assert await asyncio.wait_for(playing, 5) is False
    assert speaker.interrupted == ["a very long sentence"] and not speaker.is_playing


@async_test
async def test_espeak_failure_becomes_a_tool_error(tmp_path: Path) -> None:
    router = ToolRouter(EspeakSpeaker(executable=str(tmp_path / "missing-espeak")))
    result = await router.execute(ToolCall(call_id="1", name="tts.speak", arguments='{"text":"hi"}'))
    assert result.result is None and (result.error or "").startswith("tts failed:")


def test_without_espeak_speech_is_printed_or_silent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    out = io.StringIO()
    speaker = make_speaker(out=out)
    assert isinstance(speaker, PrintSpeaker)
    assert asyncio.run(speaker.speak("Hello")) is True
    assert out.getvalue() == "🔊 Hello\n"
    assert isinstance(make_speaker(quiet=True), SilentSpeaker)


@async_test
async def test_router_registry_errors_and_state() -> None:
    states: list[str] = []
    router = ToolRouter()
    router.add_state_listener(states.append)

    async def refuse(arguments: dict[str, Any]) -> None:
        raise ToolError("file is read-only")

    async def crash(arguments: dict[str, Any]) -> None:
        raise KeyError("path")

    async def unserializable(arguments: dict[str, Any]) -> object:
        return object()

    for name, handler in {"a.refuse": refuse, "a.crash": crash, "a.weird": unserializable}.items():
        router.register(name, handler)

    async def run(name: str, arguments: str = "{}") -> ToolResult:
        return await router.execute(ToolCall(call_id="c", name=name, arguments=arguments))

    assert (await run("a.refuse")).error == "file is read-only"
    assert (await run("a.crash")).error == "KeyError: 'path'"
    assert "not JSON-serializable" in ((await run("a.weird")).error or "")
    assert (await run("convo.setState", '{"state":"listening"}')).result == '{"ok":true}'
    assert (await run("convo.setState", "{}")).error == "convo.setState needs a string 'state'"
    assert (await run("tts.speak", '{"text":5}')).error == "tts.speak needs a string 'text'"
    assert router.state == "listening" and states == ["listening"]
    router.unregister("a.refuse")
    assert (await run("a.refuse")).error == "unknown tool: a.refuse"


@async_test
async def test_interrupt_answers_the_speech_in_progress_with_the_words_heard() -> None:
    speaker = HeldSpeaker()
    router = ToolRouter(speaker)
    speaking = asyncio.create_task(
        router.execute(ToolCall(call_id="s", name="tts.speak", arguments=json.dumps({"text": "a  long story."})))
    )
    await asyncio.wait_for(speaker.started.wait(), 5)
    speaker.say_words(2)
    router.interrupt()
    result = await speaking
    assert result.error is None and json.loads(result.result or "") == {"spoken": False, "heardText": "a  long"}


def test_renderer_without_a_terminal_prints_finals_only() -> None:
    out = io.StringIO()
    renderer = TranscriptRenderer(out)
    assert renderer.live is False
    renderer.received(make_event(AssistantSpeechPartial(text="Hel")))
    renderer.received(make_event(AssistantSpeechFinal(text="Hello.")))
    renderer.received(make_event(ToolCall(call_id="9", name="tts.speak", arguments='{"text":"Hello."}')))
    renderer.sent(make_event(ToolResult(call_id="9", error="interrupted")))
    assert out.getvalue() == "assistant: Hello.\n← error tts.speak: interrupted\n"
